package idempotency

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// ErrOverride is wrapped by the errors ParseOverrides returns. Its text
// names the setting's family (--speculative-idempotent), as it did before
// this package was split from pkg/speculative.
var ErrOverride = errors.New("speculative: invalid idempotency override")

// Overrides are configured rules that force the verdict of matching
// statements, for what inference cannot know (a user-defined function that
// is deterministic, a table an application wants never hedged). The zero
// value has no rules. It is immutable, so safe for concurrent use.
//
// A rule is written VERDICT:TARGET, where VERDICT is "idempotent" or
// "not-idempotent" and TARGET is one of
//
//	ks.table   statements on that table (CQL identifiers: unquoted ones are
//	           case-insensitive, "Quoted" ones exact)
//	table      statements on a table of that name in any keyspace
//	ks.*       statements on any table of the keyspace
//	glob:PAT   statements whose normalized text matches PAT as a whole,
//	           where * matches any run of characters (and nothing else is
//	           special: ? is CQL's bind marker)
//	re:REGEXP  statements whose normalized text contains a match of the Go
//	           regular expression REGEXP (anchor it with ^ and $ as needed)
//
// for example "idempotent:metrics.samples", "not-idempotent:glob:UPDATE
// ks.stats SET *", "not-idempotent:re:^UPDATE .* SET hits".
//
// The normalized text is the statement with comments removed and each run
// of whitespace (or comments) between tokens replaced by one space, none
// at either end, and trailing semicolons dropped; tokens keep their case,
// and patterns match case-insensitively. A table rule matches the
// statement's keyspace as named in it, or else the keyspace it runs in.
//
// The first rule that matches decides. Rules apply only to SELECT, INSERT,
// UPDATE, DELETE and BATCH statements: USE, schema and auth statements are
// never hedged. In a BATCH, a pattern rule that matches the whole batch
// decides; otherwise each statement in it is matched on its own (table and
// pattern rules) and the batch is idempotent if all of them are and it is
// not a COUNTER batch.
type Overrides struct {
	rules    []rule
	patterns bool // some rule needs the normalized text
}

type rule struct {
	spec       string // as configured, for Verdict.Detail
	idempotent bool
	ks, table  string         // table rule: table "" means any table of ks; ks "" any keyspace
	re         *regexp.Regexp // pattern rule
}

// ParseOverrides parses override rules (see Overrides), typically a
// configuration value. Blank entries are skipped. The error names the
// first bad rule and wraps ErrOverride.
func ParseOverrides(specs []string) (Overrides, error) {
	var o Overrides
	for n, spec := range specs {
		spec = strings.TrimSpace(spec)
		if spec == "" {
			continue
		}
		r, err := parseRule(spec)
		if err != nil {
			return Overrides{}, fmt.Errorf("%w %d %q: %s", ErrOverride, n+1, spec, err)
		}
		o.rules = append(o.rules, r)
		o.patterns = o.patterns || r.re != nil
	}
	return o, nil
}

func parseRule(spec string) (rule, error) {
	verdict, target, ok := strings.Cut(spec, ":")
	if !ok {
		return rule{}, errors.New(`want VERDICT:TARGET, such as "idempotent:ks.table"`)
	}
	r := rule{spec: spec}
	switch strings.ToLower(strings.TrimSpace(verdict)) {
	case "idempotent":
		r.idempotent = true
	case "not-idempotent":
	default:
		return rule{}, fmt.Errorf("verdict %q is neither idempotent nor not-idempotent", verdict)
	}
	target = strings.TrimSpace(target)
	var err error
	switch {
	case target == "":
		return rule{}, errors.New("empty target")
	case strings.HasPrefix(target, "re:"):
		pat := target[len("re:"):]
		if pat == "" {
			return rule{}, errors.New("empty regular expression")
		}
		if r.re, err = regexp.Compile("(?i)" + pat); err != nil {
			return rule{}, fmt.Errorf("regular expression: %w", err)
		}
	case strings.HasPrefix(target, "glob:"):
		pat := target[len("glob:"):]
		if pat == "" {
			return rule{}, errors.New("empty glob")
		}
		parts := strings.Split(pat, "*")
		for i := range parts {
			parts[i] = regexp.QuoteMeta(parts[i])
		}
		r.re = regexp.MustCompile("(?is)^" + strings.Join(parts, ".*") + "$") // quoted: always compiles
	default:
		if r.ks, r.table, err = parseTableTarget(target); err != nil {
			return rule{}, err
		}
	}
	return r, nil
}

// parseTableTarget reads ks.table, table or ks.* with the CQL lexer, so
// that quoting works as in statements.
func parseTableTarget(target string) (ks, table string, err error) {
	bad := fmt.Errorf("target %q is not ks.table, table, ks.*, glob:PATTERN or re:REGEXP", target)
	toks, lerr := lex(target, nil)
	if lerr != nil {
		return "", "", bad
	}
	p := parser{q: target}
	switch {
	case len(toks) == 1:
		if table, ok := p.name(toks[0]); ok {
			return "", table, nil
		}
	case len(toks) == 3 && p.punct(toks, 1, "."):
		ks, ok := p.name(toks[0])
		if !ok {
			return "", "", bad
		}
		if p.punct(toks, 2, "*") {
			return ks, "", nil
		}
		if table, ok := p.name(toks[2]); ok {
			return ks, table, nil
		}
	}
	return "", "", bad
}

// Len returns the number of rules.
func (o *Overrides) Len() int { return len(o.rules) }

func (o *Overrides) has() bool { return o != nil && len(o.rules) > 0 }

// match returns the verdict of the first rule matching st, whose tokens
// are toks (in q). A whole BATCH is matched by pattern rules only.
func (o *Overrides) match(st *Statement, q string, toks []token) (Verdict, bool) {
	norm := ""
	if o.patterns {
		norm = normalize(q, toks)
	}
	for i := range o.rules {
		r := &o.rules[i]
		var hit bool
		if r.re != nil {
			hit = r.re.MatchString(norm)
		} else {
			hit = st.Kind != KindBatch && st.Table != "" &&
				(r.ks == "" || r.ks == st.Keyspace) &&
				(r.table == "" || r.table == st.Table)
		}
		if hit {
			return Verdict{Idempotent: r.idempotent, Reason: ReasonOverride, Detail: r.spec}, true
		}
	}
	return Verdict{}, false
}

// normalize returns the text of toks as Overrides describes it.
func normalize(q string, toks []token) string {
	for len(toks) > 0 {
		t := toks[len(toks)-1]
		if t.kind != tkPunct || q[t.start] != ';' {
			break
		}
		toks = toks[:len(toks)-1]
	}
	var b strings.Builder
	b.Grow(len(q))
	for i, t := range toks {
		if i > 0 && t.spaced {
			b.WriteByte(' ')
		}
		b.WriteString(q[t.start:t.end])
	}
	return b.String()
}
