package idempotency

import "strings"

// Normalize is the statement-statistics side of the lexer: it folds the
// QUERY strings a careless application builds by concatenation
// ("... WHERE id = 42", "... WHERE id = 43") into one text, so that they
// count as one statement. It shares the lexer so that a literal inside a
// string, a comment or a quoted identifier is never taken for syntax.

// maxNormalizedDepth bounds the nesting of collapsed brackets tracked.
const maxNormalizedDepth = 64

// keywords are the CQL words written upper-case in a normalized text; every
// other unquoted identifier is lower-cased, as Cassandra folds it.
var keywords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range []string{
		"ADD", "ALLOW", "ALTER", "AND", "APPLY", "AS", "ASC", "BATCH", "BEGIN", "BY",
		"CAST", "CLUSTERING", "CONTAINS", "COUNTER", "CREATE", "DELETE", "DESC",
		"DISTINCT", "DROP", "EXISTS", "FILTERING", "FROM", "GROUP", "IF", "IN", "INDEX",
		"INSERT", "INTO", "IS", "JSON", "KEY", "KEYSPACE", "LIKE", "LIMIT", "LOGGED",
		"NOT", "NULL", "OR", "ORDER", "PARTITION", "PER", "PRIMARY", "SELECT", "SET",
		"TABLE", "TIMESTAMP", "TOKEN", "TRUNCATE", "TTL", "TYPE", "UNLOGGED", "UPDATE",
		"USE", "USING", "VALUES", "WHERE", "WITH", "WRITETIME", "MAXWRITETIME",
	} {
		m[w] = true
	}
	return m
}()

// Normalize appends to dst the normalized text of the CQL statement q:
// every literal (string, number, hex blob, UUID, true, false) and bind
// marker (? or :name) becomes ?, the parenthesised list after IN becomes
// (...), collection literals ([...], {...}) become [?] and {?}, keywords
// are upper-cased and other unquoted identifiers lower-cased, comments and
// a trailing semicolon are dropped, and tokens are separated by single
// spaces (none inside a.b, f(x), before a comma or a closing bracket). Two
// statements that differ only in their literals, their spacing or the case
// of their keywords normalize to the same text.
//
// A text the lexer cannot split (an unterminated string, say) is appended
// as it is, with the lexer's error; the caller may still use it as its own
// fingerprint. Normalize allocates nothing beyond dst and a token slice.
func Normalize(dst []byte, q string) ([]byte, error) {
	toks, err := lex(q, nil)
	if err != nil {
		return append(dst, q...), err
	}
	for len(toks) > 0 && toks[len(toks)-1].kind == tkPunct && q[toks[len(toks)-1].start] == ';' {
		toks = toks[:len(toks)-1]
	}
	var prev byte // last byte written that matters for spacing ('(' , '.', 'w' word)
	emit := func(s string, glueLeft bool) {
		if len(dst) > 0 && !glueLeft && prev != '(' && prev != '[' && prev != '{' && prev != '.' && prev != 0 {
			dst = append(dst, ' ')
		}
		dst = append(dst, s...)
		prev = s[len(s)-1]
	}
	prevKind := tokKind(0)
	prevKeyword := false
	afterInto := false // the identifier just written follows INTO: a table

	// In a BATCH a run of one statement repeated (an application inserting
	// N rows) is written once and followed by "...", so that batches of 2,
	// 3 or 300 such statements are one text. Each statement of the batch,
	// from its verb on, is a segment of dst; segment ends at the next verb
	// or APPLY, where it is compared with the last one kept. Semicolons
	// between statements are optional in CQL: every kept statement is
	// followed by " ;" whether the query had one or not.
	batch := len(toks) > 0 && toks[0].kind == tkIdent && equalFold(q[toks[0].start:toks[0].end], "begin")
	segStart, lastStart, lastEnd := -1, -1, -1
	repeated := false
	closeSegment := func() {
		if segStart < 0 {
			return
		}
		if lastStart >= 0 && string(dst[segStart:]) == string(dst[lastStart:lastEnd]) {
			dst = dst[:segStart]
			if !repeated {
				dst = append(dst, " ..."...)
				repeated = true
			}
		} else {
			lastStart, lastEnd, repeated = segStart, len(dst), false
			dst = append(dst, " ;"...)
		}
		prev = ';'
		segStart = -1
	}

	for i := 0; i < len(toks); i++ {
		t := toks[i]
		text := q[t.start:t.end]
		switch t.kind {
		case tkString, tkNumber, tkHex, tkUUID, tkMarker:
			emit("?", false)
		case tkQIdent:
			emit(text, false)
		case tkIdent:
			if literalWord(text) {
				emit("?", false)
				break
			}
			up := upper(text)
			if keywords[up] {
				if batch && (up == "INSERT" || up == "UPDATE" || up == "DELETE" || up == "APPLY") {
					closeSegment()
					if up != "APPLY" {
						segStart = len(dst)
					}
				}
				emit(up, false)
				afterInto = up == "INTO"
				prevKeyword = true
				prevKind = t.kind
				if up == "IN" && i+1 < len(toks) {
					switch next := toks[i+1]; {
					case next.kind == tkPunct && q[next.start] == '(':
						emit("(...)", false)
						i = closing(q, toks, i+1)
					case next.kind == tkMarker:
						// IN ? binds the whole list: the same statement as
						// IN (1, 2, 3).
						emit("(...)", false)
						i++
					}
				}
				continue
			}
			emit(lower(text), false)
			prevKind = t.kind
			if afterInto || isIntoTable(q, toks, i) {
				prevKeyword = true // INSERT INTO t (a, b): a table, not a function
			} else {
				prevKeyword = false
			}
			afterInto = false
			continue
		default: // punctuation
			c := q[t.start]
			switch c {
			case ';':
				if batch {
					continue // closeSegment writes them
				}
				emit(text, false)
			case '-':
				// -Infinity, -NaN and -P1D are single literals in
				// Cassandra's lexer.
				if i+1 < len(toks) && toks[i+1].kind == tkIdent && toks[i+1].start == t.end && literalWord(q[toks[i+1].start:toks[i+1].end]) {
					emit("?", false)
					i++
					break
				}
				emit(text, false)
			case ',', ')', ']', '}', '.':
				emit(text, true)
			case '(':
				// f(x) and count(*) stay glued; VALUES (, IN ( keep a space.
				emit(text, prevKind == tkIdent && !prevKeyword)
			case '[', '{':
				end := closing(q, toks, i)
				emit(text+"?"+string(closer(c)), prevKind == tkIdent && !prevKeyword && c == '[')
				i = end
			default:
				emit(text, false)
			}
		}
		prevKeyword = false
		afterInto = false
		prevKind = t.kind
	}
	return dst, nil
}

// literalWord tells whether an unquoted word is a literal: a boolean, NaN,
// Infinity (reserved words in CQL, never names) or an ISO 8601 duration.
func literalWord(s string) bool {
	return equalFold(s, "true") || equalFold(s, "false") || equalFold(s, "nan") || equalFold(s, "infinity") || isDurationLiteral(s)
}

// isDurationLiteral tells whether s is a duration in ISO 8601's format
// with designators (P1Y2M3DT4H5M6S, PT1H30M) or in weeks (P2W). Stricter
// than isISODuration, which the classifier uses: upper-case designators in
// their order, each after digits, so that a column named pt or p1d is left
// a name.
func isDurationLiteral(s string) bool {
	if len(s) < 3 || s[0] != 'P' {
		return false
	}
	i, units, inTime := 1, "YMD", false
	if j := skipDigits(s, 1); j > 1 && j == len(s)-1 && s[j] == 'W' {
		return true
	}
	for i < len(s) {
		if s[i] == 'T' && !inTime {
			if i == len(s)-1 {
				return false
			}
			i, units, inTime = i+1, "HMS", true
			continue
		}
		j := skipDigits(s, i)
		if j == i || j == len(s) {
			return false
		}
		k := strings.IndexByte(units, s[j])
		if k < 0 {
			return false
		}
		units, i = units[k+1:], j+1
	}
	return true
}

func skipDigits(s string, i int) int {
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return i
}

// isIntoTable tells whether toks[i] is the table of INTO ks.table.
func isIntoTable(q string, toks []token, i int) bool {
	return i >= 3 && toks[i-1].kind == tkPunct && q[toks[i-1].start] == '.' && toks[i-3].kind == tkIdent && equalFold(q[toks[i-3].start:toks[i-3].end], "into")
}

// closing returns the index of the token closing the bracket opened at
// toks[i], or the last token if it is never closed.
func closing(q string, toks []token, i int) int {
	depth := 0
	for j := i; j < len(toks); j++ {
		if toks[j].kind != tkPunct {
			continue
		}
		switch q[toks[j].start] {
		case '(', '[', '{':
			depth++
			if depth > maxNormalizedDepth {
				return len(toks) - 1
			}
		case ')', ']', '}':
			depth--
			if depth == 0 {
				return j
			}
		}
	}
	return len(toks) - 1
}

func closer(c byte) byte {
	switch c {
	case '[':
		return ']'
	case '{':
		return '}'
	}
	return ')'
}

func equalFold(s, word string) bool {
	if len(s) != len(word) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i]|0x20 != word[i]|0x20 {
			return false
		}
	}
	return true
}

// upper and lower change ASCII letters only (unquoted identifiers are
// ASCII) and return s itself when nothing changes.
func upper(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'a' && c <= 'z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if b[j] >= 'a' && b[j] <= 'z' {
					b[j] -= 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

func lower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if b[j] >= 'A' && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}
