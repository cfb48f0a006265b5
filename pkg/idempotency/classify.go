package idempotency

import "strings"

// Classifier decides the idempotency of CQL statements, applying its
// override rules. It is safe for concurrent use; the zero value (and nil)
// classifies without overrides.
type Classifier struct {
	overrides Overrides
}

// NewClassifier returns a Classifier that applies o.
func NewClassifier(o Overrides) *Classifier { return &Classifier{overrides: o} }

// Classify classifies one statement without overrides. See
// Classifier.Classify.
func Classify(query, keyspace string, bindTypes []uint16) Statement {
	return (*Classifier)(nil).Classify(query, keyspace, bindTypes)
}

// Classify classifies one CQL statement, as sent in a QUERY or PREPARE
// (or a BATCH's query child).
//
// keyspace is the keyspace the statement runs in when it names none (the
// connection's USE, or the keyspace of a v5 PREPARE); it may be empty.
// bindTypes are the type option ids (frame.PreparedMeta.VarTypes; 0x0020
// list, 0x0005 counter, ...) of the bind variables, in order, when known:
// they decide statements such as "x = x + ?" (a set or map addition is
// idempotent; a list append or counter increment is not). Pass nil when
// they are not known (a QUERY); such statements are then not idempotent.
// Types whose count does not match the statement's markers are ignored.
//
// Classify never panics, whatever the input. It allocates the token slice
// and little else: it is meant to run once per PREPARE (the caller caches
// the Statement by prepared id), not per request.
func (c *Classifier) Classify(query, keyspace string, bindTypes []uint16) Statement {
	var buf [64]token
	toks, err := lex(query, buf[:0])
	if err != nil {
		return Statement{Verdict: notIdempotent(ReasonUnparsable, err.Error())}
	}
	markers := 0
	for i := range toks {
		if toks[i].kind == tkMarker {
			markers++
		}
	}
	if len(bindTypes) != markers {
		bindTypes = nil
	}
	p := parser{q: query, types: bindTypes, defaultKS: keyspace}
	if c != nil {
		p.rules = &c.overrides
	}
	st := p.statement(toks)
	st.Markers = markers
	if p.rules.has() && st.Kind.isDML() {
		if v, ok := p.rules.match(&st, query, toks); ok {
			st.Verdict = v
		}
	}
	return st
}

// parser walks the tokens of one statement. Its methods take and return
// token indexes into the slice they are given, so that BATCH children are
// parsed by the same code on a sub-slice.
type parser struct {
	q         string
	types     []uint16 // bind types by marker ordinal; nil when unknown
	defaultKS string
	rules     *Overrides // nil for none
}

// text returns the source text of t.
func (p *parser) text(t token) string { return p.q[t.start:t.end] }

// kw tells whether toks[i] is the unquoted keyword kw (given in upper case).
func (p *parser) kw(toks []token, i int, kw string) bool {
	return i < len(toks) && toks[i].kind == tkIdent && strings.EqualFold(p.text(toks[i]), kw)
}

// punct tells whether toks[i] is the punctuation s.
func (p *parser) punct(toks []token, i int, s string) bool {
	return i < len(toks) && toks[i].kind == tkPunct && p.text(toks[i]) == s
}

// statement classifies a whole statement: one statement and any number of
// trailing semicolons.
func (p *parser) statement(toks []token) Statement {
	if len(toks) == 0 {
		return Statement{Verdict: notIdempotent(ReasonEmpty, "")}
	}
	first := toks[0]
	head := p.text(first)
	if first.kind != tkIdent {
		return Statement{Verdict: notIdempotent(ReasonUnparsable, head)}
	}
	if strings.EqualFold(head, "BEGIN") {
		return p.batch(toks)
	}
	// Everything but a BATCH ends at its first semicolon; Cassandra refuses
	// two statements in one request, and so does the classifier.
	end := len(toks)
	for i, t := range toks {
		if t.kind == tkPunct && p.text(t) == ";" {
			end = i
			break
		}
	}
	for _, t := range toks[end:] {
		if !(t.kind == tkPunct && p.text(t) == ";") {
			return Statement{Verdict: notIdempotent(ReasonUnparsable, p.text(t))}
		}
	}
	toks = toks[:end]
	switch {
	case strings.EqualFold(head, "SELECT"):
		return p.selectStmt(toks)
	case strings.EqualFold(head, "INSERT"), strings.EqualFold(head, "UPDATE"), strings.EqualFold(head, "DELETE"):
		return p.dml(toks)
	case strings.EqualFold(head, "USE"):
		st := Statement{Verdict: notIdempotent(ReasonUse, head)}
		if len(toks) == 2 {
			st.Keyspace, _ = p.name(toks[1])
		}
		return st
	}
	return Statement{Verdict: p.otherVerdict(toks)}
}

// otherVerdict names the reason a statement that is neither a read nor a
// write is not idempotent.
func (p *parser) otherVerdict(toks []token) Verdict {
	head := p.text(toks[0])
	switch strings.ToUpper(head) {
	case "GRANT", "REVOKE", "LIST", "ADD":
		return notIdempotent(ReasonAuth, head)
	case "CREATE", "ALTER", "DROP":
		if len(toks) > 1 && toks[1].kind == tkIdent {
			switch strings.ToUpper(p.text(toks[1])) {
			case "ROLE", "USER", "IDENTITY":
				return notIdempotent(ReasonAuth, head)
			}
		}
		return notIdempotent(ReasonSchema, head)
	case "TRUNCATE":
		return notIdempotent(ReasonSchema, head)
	}
	return notIdempotent(ReasonUnknownStatement, head)
}

// name returns the identifier t names: unquoted ones lower-cased (CQL folds
// them), quoted ones unquoted with "" unescaped.
func (p *parser) name(t token) (string, bool) {
	s := p.text(t)
	switch t.kind {
	case tkIdent:
		return asciiLower(s), true
	case tkQIdent:
		s = s[1 : len(s)-1]
		if strings.Contains(s, `""`) {
			s = strings.ReplaceAll(s, `""`, `"`)
		}
		return s, true
	}
	return "", false
}

// tableName reads [keyspace.]table at toks[i], returning the index after it.
func (p *parser) tableName(toks []token, i int) (ks, table string, next int, ok bool) {
	if i >= len(toks) {
		return "", "", i, false
	}
	table, ok = p.name(toks[i])
	if !ok {
		return "", "", i, false
	}
	if p.punct(toks, i+1, ".") {
		if i+2 >= len(toks) {
			return "", "", i, false
		}
		ks = table
		if table, ok = p.name(toks[i+2]); !ok {
			return "", "", i, false
		}
		return ks, table, i + 3, true
	}
	return p.defaultKS, table, i + 1, true
}

// selectStmt: a read is idempotent, whatever it calls; only its table is of
// interest. The FROM is the first one outside brackets (a column named
// "from" must be quoted).
func (p *parser) selectStmt(toks []token) Statement {
	st := Statement{Kind: KindSelect, Verdict: idempotent}
	depth := 0
	for i := 1; i < len(toks); i++ {
		switch {
		case toks[i].kind == tkPunct:
			depth += bracketDelta(p.q[toks[i].start])
		case depth == 0 && p.kw(toks, i, "FROM"):
			if ks, table, _, ok := p.tableName(toks, i+1); ok {
				st.Keyspace, st.Table = ks, table
			}
			return st
		}
	}
	return st
}

func bracketDelta(c byte) int {
	switch c {
	case '(', '[', '{':
		return 1
	case ')', ']', '}':
		return -1
	}
	return 0
}

// matching returns the index after the bracket that closes the one opening
// at toks[i], or -1 when it is not closed (the lexer has checked nothing
// about balance).
func (p *parser) matching(toks []token, i int) int {
	depth := 0
	for j := i; j < len(toks); j++ {
		if toks[j].kind != tkPunct {
			continue
		}
		depth += bracketDelta(p.q[toks[j].start])
		if depth == 0 {
			return j + 1
		}
		if depth < 0 {
			return -1
		}
	}
	return -1
}

// regionEnd returns the index of the first token from i, outside brackets,
// that is a ',' (when comma) or one of the keywords stops; len(toks) if
// none. It returns -1 when brackets do not balance.
func (p *parser) regionEnd(toks []token, i int, comma bool, stops ...string) int {
	depth := 0
	for j := i; j < len(toks); j++ {
		t := toks[j]
		if t.kind == tkPunct {
			c := p.q[t.start]
			if depth == 0 && comma && c == ',' {
				return j
			}
			depth += bracketDelta(c)
			if depth < 0 {
				return -1
			}
			continue
		}
		if depth == 0 && t.kind == tkIdent {
			for _, s := range stops {
				if strings.EqualFold(p.text(t), s) {
					return j
				}
			}
		}
	}
	if depth != 0 {
		return -1
	}
	return len(toks)
}
