package fakenode

import (
	"strings"
)

// stmtKind is what a statement does, as far as the fake node cares.
type stmtKind int

const (
	kindOther stmtKind = iota // answered Void
	kindSelect
	kindInsert
	kindUpdate
	kindDelete
	kindUse
)

// stmt is the little the node understands of a CQL text. The parser is a
// tokenizer plus a few patterns, enough for the statements tests write; it
// never fails, it only understands less.
type stmt struct {
	kind     stmtKind
	table    string   // keyspace-qualified when known, lower case
	keyspace string   // for USE
	cols     []string // selected columns; nil means *
	// binds names, for each bind marker in order, the column it is
	// compared with or assigned to; "[ttl]", "[timestamp]" and "[limit]"
	// for those clauses, "" when unknown.
	binds []string
}

// tokenize splits q into identifiers (with dots, quoted names unquoted),
// string literals (kept quoted), numbers and one-character punctuation.
func tokenize(q string) []string {
	var toks []string
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '\'':
			j := i + 1
			for j < len(q) && (q[j] != '\'' || (j+1 < len(q) && q[j+1] == '\'')) {
				if q[j] == '\'' {
					j++
				}
				j++
			}
			j = min(j+1, len(q))
			toks = append(toks, q[i:j])
			i = j
		case isIdent(c) || c == '"':
			j := i
			var b strings.Builder
			for j < len(q) && (isIdent(q[j]) || q[j] == '"' || q[j] == '.') {
				if q[j] == '"' {
					k := strings.IndexByte(q[j+1:], '"')
					if k < 0 {
						b.WriteString(q[j+1:])
						j = len(q)
						break
					}
					b.WriteString(q[j+1 : j+1+k])
					j += k + 2
					continue
				}
				b.WriteByte(lower(q[j]))
				j++
			}
			toks = append(toks, b.String())
			i = j
		default:
			toks = append(toks, q[i:i+1])
			i++
		}
	}
	return toks
}

func isIdent(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// qualify prefixes an unqualified table name with keyspace ks.
func qualify(name, ks string) string {
	if strings.Contains(name, ".") || ks == "" {
		return name
	}
	return strings.ToLower(ks) + "." + name
}

// parseStmt understands q run in keyspace ks.
func parseStmt(q, ks string) stmt {
	toks := tokenize(q)
	var s stmt
	if len(toks) == 0 {
		return s
	}
	at := func(i int) string {
		if i < len(toks) {
			return toks[i]
		}
		return ""
	}
	switch toks[0] {
	case "use":
		s.kind = kindUse
		// The keyspace keeps its case only when quoted; tokenize already
		// lowered unquoted names.
		s.keyspace = at(1)
		return s
	case "select":
		s.kind = kindSelect
		i := 1
		for ; i < len(toks) && toks[i] != "from"; i++ {
			switch t := toks[i]; t {
			case "*", ",", "distinct", "json":
			default:
				if at(i+1) == "(" { // a function call: not a plain column
					s.cols = append(s.cols, t+"(...)")
					for i < len(toks) && toks[i] != ")" {
						i++
					}
					continue
				}
				s.cols = append(s.cols, t)
			}
		}
		s.table = qualify(at(i+1), ks)
	case "insert":
		s.kind = kindInsert
		s.table = qualify(at(2), ks)
		var cols []string
		i := 3
		if at(i) == "(" {
			for i++; i < len(toks) && toks[i] != ")"; i++ {
				if toks[i] != "," {
					cols = append(cols, toks[i])
				}
			}
		}
		// VALUES (?, ?, ...) follow the column list in order.
		for k := 0; i < len(toks); i++ {
			if toks[i] == "?" {
				if k < len(cols) {
					s.binds = append(s.binds, cols[k])
					k++
					continue
				}
				s.binds = append(s.binds, clauseBind(toks, i))
			} else if toks[i] == "using" {
				bindsAfter(&s, toks, i)
				break
			}
		}
		return s
	case "update":
		s.kind = kindUpdate
		s.table = qualify(at(1), ks)
	case "delete":
		s.kind = kindDelete
		for i := 1; i < len(toks); i++ {
			if toks[i] == "from" {
				s.table = qualify(at(i+1), ks)
				break
			}
		}
	case "begin", "apply":
		return s
	default:
		return s
	}
	bindsAfter(&s, toks, 0)
	return s
}

// bindsAfter names the bind markers of toks from i on after the column
// they are compared with or assigned to.
func bindsAfter(s *stmt, toks []string, i int) int {
	for ; i < len(toks); i++ {
		if toks[i] == "?" {
			s.binds = append(s.binds, clauseBind(toks, i))
		}
	}
	return i
}

// clauseBind names the marker at toks[i] by looking back past operators to
// the column (`k = ?`, `k IN ?`, `v >= ?`) or clause keyword (`TTL ?`).
func clauseBind(toks []string, i int) string {
	for j := i - 1; j >= 0; j-- {
		switch t := toks[j]; t {
		case "=", "<", ">", "!", "in", "contains", "key", "(", ",", "+", "-", "?":
			continue
		case "ttl":
			return "[ttl]"
		case "timestamp":
			return "[timestamp]"
		case "limit":
			return "[limit]"
		default:
			if isIdent(t[0]) && !isKeyword(t) {
				return t
			}
			return ""
		}
	}
	return ""
}

func isKeyword(t string) bool {
	switch t {
	case "where", "and", "set", "if", "values", "using", "from", "select", "update", "delete", "insert", "into":
		return true
	}
	return false
}
