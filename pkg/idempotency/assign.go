package idempotency

// SET clauses: what an assignment does to its column (overwrite, counter
// or list arithmetic, collection additions and removals), and the small
// lexical checks the verdicts rest on.

import "strings"

// assignment checks one item of an UPDATE's SET list.
func (p *parser) assignment(toks []token, s *stmtInfo) bool {
	col, ok := p.name(toks[0])
	if !ok || len(toks) < 3 {
		return false
	}
	op := toks[1]
	if op.kind != tkPunct {
		return false
	}
	switch p.text(op) {
	case "=":
		return p.setExpr(toks[0], col, toks[2:], s)
	case "+=", "-=":
		rhs := toks[2:]
		p.checkFuncs(rhs, s)
		p.addend(p.q[op.start], rhs, toks[0], s)
		return true
	case ".":
		// col.field = term: a UDT field overwrite.
		if _, ok := p.name(toks[2]); !ok || !p.punct(toks, 3, "=") || len(toks) < 5 {
			return false
		}
		p.checkFuncs(toks[4:], s)
		return true
	case "[":
		end := p.matching(toks, 1)
		if end < 0 || !p.punct(toks, end, "=") || end+1 >= len(toks) {
			return false
		}
		key, val := toks[2:end-1], toks[end+1:]
		if len(key) == 0 {
			return false
		}
		p.checkFuncs(key, s)
		p.checkFuncs(val, s)
		if p.isMapKey(key) {
			return true
		}
		// A list element set by position: idempotent unless it deletes,
		// which null does (and a bind variable may be bound to null).
		if (len(val) == 1 && p.kw(val, 0, "NULL")) || p.hasMarker(val) {
			s.fail(ReasonListIndex, p.text(toks[0]))
		}
		return true
	}
	return false
}

// setExpr checks col = rhs. Without a reference to a column on the right
// it is an overwrite. With one it is col = col +/- term (append, discard,
// counter) or col = term + col (prepend).
func (p *parser) setExpr(colTok token, col string, rhs []token, s *stmtInfo) bool {
	p.checkFuncs(rhs, s)
	ref := -1
	depth := 0
	for i, t := range rhs {
		if t.kind == tkPunct {
			depth += bracketDelta(p.q[t.start])
			continue
		}
		if depth != 0 || !p.isColumnRef(rhs, i) {
			continue
		}
		if ref >= 0 {
			s.fail(ReasonUnparsable, p.text(t)) // two columns: not a CQL form
			return true
		}
		ref = i
	}
	switch {
	case ref < 0:
		p.overwrites(rhs, s)
		return true
	case ref == 0 && len(rhs) >= 3 && rhs[1].kind == tkPunct && (p.text(rhs[1]) == "+" || p.text(rhs[1]) == "-"):
		p.sameColumn(rhs[0], col, s)
		p.addend(p.q[rhs[1].start], rhs[2:], colTok, s)
	case ref == 0 && len(rhs) == 2 && rhs[1].kind == tkNumber && p.q[rhs[1].start] == '-':
		// c = c -1: Cassandra lexes -1 as one integer; a counter decrement.
		p.sameColumn(rhs[0], col, s)
		s.fail(ReasonCounter, p.text(colTok))
	case ref == len(rhs)-1 && ref >= 2 && p.punct(rhs, ref-1, "+"):
		s.fail(ReasonListPrepend, p.text(colTok))
	default:
		s.fail(ReasonUnparsable, p.text(rhs[ref]))
	}
	return true
}

// sameColumn checks that x = y + ... names the assigned column on the
// right; Cassandra refuses anything else, and so does the classifier.
func (p *parser) sameColumn(t token, col string, s *stmtInfo) {
	if n, _ := p.name(t); n != col {
		s.fail(ReasonUnparsable, p.text(t))
	}
}

// addend classifies col = col <op> term (op '+' or '-') by term: a list
// literal appends (not idempotent) or discards (idempotent); a set or map
// literal adds or removes (idempotent); an integer is a counter; a bind
// variable is decided by its type. Anything else is not idempotent.
func (p *parser) addend(op byte, term []token, colTok token, s *stmtInfo) {
	col := p.text(colTok)
	if len(term) == 0 {
		s.fail(ReasonUnparsable, col)
		return
	}
	// A type hint, (set<int>) ?, is stripped; its type is not trusted.
	if p.punct(term, 0, "(") {
		if end := p.matching(term, 0); end > 0 && end < len(term) {
			term = term[end:]
		}
	}
	first := term[0]
	whole := len(term) == 1 || (first.kind == tkPunct && p.matching(term, 0) == len(term))
	switch {
	case !whole:
	case p.punct(term, 0, "["):
		if op == '+' {
			s.fail(ReasonListAppend, col)
		}
		return
	case p.punct(term, 0, "{"):
		return // set or map addition or removal
	case first.kind == tkNumber && isInteger(p.text(first)):
		s.fail(ReasonCounter, col)
		return
	case first.kind == tkMarker:
		if p.types == nil {
			s.fail(ReasonUnknownType, col)
			return
		}
		switch p.types[first.marker] {
		case typeSet, typeMap:
			return
		case typeList:
			if op == '+' {
				s.fail(ReasonListAppend, col)
			}
			return
		case typeCounter, typeBigint:
			s.fail(ReasonCounter, col)
			return
		}
		s.fail(ReasonUnknownType, col)
		return
	}
	s.fail(ReasonUnparsable, col)
}

// Type option ids of the native protocol (section 4.2.5.2) that decide a
// verdict; the same values as pkg/frame's Type constants.
const (
	typeBigint  uint16 = 0x0002
	typeCounter uint16 = 0x0005
	typeInt     uint16 = 0x0009
	typeList    uint16 = 0x0020
	typeMap     uint16 = 0x0021
	typeSet     uint16 = 0x0022
)

// isMapKey tells whether key, the k of x[k], cannot be a list position, so
// that x is a map (or a set).
func (p *parser) isMapKey(key []token) bool {
	if len(key) != 1 {
		return false
	}
	t := key[0]
	switch t.kind {
	case tkString, tkUUID, tkHex, tkQIdent:
		return true
	case tkNumber:
		return !isInteger(p.text(t))
	case tkIdent:
		// true, false: a boolean key. null or a column: not a position
		// either, but not worth telling apart.
		return p.kw(key, 0, "TRUE") || p.kw(key, 0, "FALSE")
	case tkMarker:
		if p.types == nil {
			return false
		}
		// A list position is bound as an int; any other type is a map key.
		return p.types[t.marker] != typeInt
	}
	return false
}

// isColumnRef tells whether toks[i] names a column: an identifier that is
// neither a function name, a keyspace qualifying one, nor a constant.
func (p *parser) isColumnRef(toks []token, i int) bool {
	t := toks[i]
	if t.kind != tkIdent && t.kind != tkQIdent {
		return false
	}
	if p.punct(toks, i+1, "(") || p.punct(toks, i+1, ".") {
		return false
	}
	if t.kind == tkQIdent {
		return true
	}
	s := p.text(t)
	for _, c := range [...]string{"TRUE", "FALSE", "NULL", "NAN", "INFINITY"} {
		if strings.EqualFold(s, c) {
			return false
		}
	}
	return !isISODuration(s)
}

// checkFuncs records a call of a non-deterministic or unknown function in
// toks.
func (p *parser) checkFuncs(toks []token, s *stmtInfo) {
	for i := 0; i+1 < len(toks); i++ {
		t := toks[i]
		if (t.kind != tkIdent && t.kind != tkQIdent) || !p.punct(toks, i+1, "(") {
			continue
		}
		name := p.text(t)
		quoted := t.kind == tkQIdent
		if !quoted && isStructural(name) {
			continue
		}
		if quoted {
			name, _ = p.name(t)
		}
		ks := ""
		if i >= 2 && p.punct(toks, i-1, ".") {
			ks, _ = p.name(toks[i-2])
		}
		if r := funcDeterminism(ks, name, quoted); r != ReasonNone {
			s.fail(r, p.text(t))
		}
	}
}

func (p *parser) hasMarker(toks []token) bool {
	for _, t := range toks {
		if t.kind == tkMarker {
			return true
		}
	}
	return false
}

// isInteger tells whether a number token is an integer: digits and an
// optional leading '-'.
func isInteger(s string) bool {
	s = strings.TrimPrefix(s, "-")
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}

// isISODuration tells whether an identifier is an ISO 8601 duration
// constant such as P1Y2M or PT5H (Cassandra lexes them as identifiers).
func isISODuration(s string) bool {
	if len(s) < 2 || s[0]|0x20 != 'p' {
		return false
	}
	digits := false
	for i := 1; i < len(s); i++ {
		c := s[i] | 0x20
		switch {
		case isDigit(s[i]):
			digits = true
		case c == 't' && !digits:
		case strings.IndexByte("ymwdhs", c) >= 0 && digits:
			digits = false
		default:
			return false
		}
	}
	return !digits
}
