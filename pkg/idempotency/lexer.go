package idempotency

import (
	"strings"
	"unicode/utf8"
)

// This file is a small CQL lexer, after Cassandra 5.0's Lexer.g. It only
// has to be right about token boundaries (so that a keyword inside a string,
// a comment or a quoted identifier is never mistaken for one) and about bind
// markers (so that the n-th marker lines up with the n-th bind type of the
// PREPARED metadata). Everything else about a token is left to the parser,
// which reads the token's text from the query.

type tokKind uint8

const (
	tkIdent  tokKind = iota + 1 // unquoted identifier or keyword
	tkQIdent                    // "quoted identifier"
	tkString                    // 'string' or $$string$$
	tkNumber                    // integer, float, duration (1h30m), with an optional leading '-'
	tkHex                       // 0xCAFE
	tkUUID                      // 123e4567-e89b-12d3-a456-426614174000
	tkMarker                    // ? or :name
	tkPunct                     // ( ) [ ] { } , ; . = + - * / % < > <= >= != += -= :
)

// token is one lexeme: its kind and its bytes query[start:end].
type token struct {
	start, end int32
	kind       tokKind
	// spaced is set when whitespace or a comment preceded the token; the
	// normalized text (for override patterns) keeps one space there.
	spaced bool
	// marker is the bind marker's ordinal (0-based, in text order, which is
	// the order of the PREPARED metadata's variables); -1 otherwise.
	marker int32
}

// lexError says why a query could not be split into tokens. The values are
// constant strings so that lexing allocates nothing but the token slice.
type lexError string

func (e lexError) Error() string { return string(e) }

const (
	errUnterminatedString      lexError = "unterminated string literal"
	errUnterminatedQuoted      lexError = "unterminated quoted identifier"
	errUnterminatedDollar      lexError = "unterminated $$ string"
	errUnterminatedComment     lexError = "unterminated /* comment"
	errUnterminatedLineComment lexError = "-- or // comment without a line end"
	errBadChar                 lexError = "character not allowed in CQL"
	errTooDeep                 lexError = "brackets nested too deep"
	errTooLong                 lexError = "statement too long"
)

// maxDepth bounds bracket nesting the lexer tracks to place named markers.
// Real statements nest a few levels; deeper ones are refused (and so never
// classified idempotent).
const maxDepth = 64

// maxQueryLen bounds what is lexed: offsets are int32, and a statement of
// this size is not something to hedge anyway.
const maxQueryLen = 1 << 30

// lex splits q into tokens, appending to dst. It never panics.
func lex(q string, dst []token) ([]token, error) {
	if len(q) > maxQueryLen {
		return dst, errTooLong
	}
	var (
		stack   [maxDepth]byte // open brackets: ( [ {
		depth   int
		markers int32
		spaced  bool
	)
	i := 0
	for i < len(q) {
		c := q[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			spaced = true
			i++
			continue
		case c == '-' && i+1 < len(q) && q[i+1] == '-', c == '/' && i+1 < len(q) && q[i+1] == '/':
			// -- and // comments run to the end of the line, which must
			// be there: Cassandra refuses one that ends the text.
			j := strings.IndexAny(q[i:], "\n\r")
			if j < 0 {
				return dst, errUnterminatedLineComment
			}
			i += j + 1
			spaced = true
			continue
		case c == '/' && i+1 < len(q) && q[i+1] == '*':
			// /* comments */ do not nest in CQL.
			j := strings.Index(q[i+2:], "*/")
			if j < 0 {
				return dst, errUnterminatedComment
			}
			i += 2 + j + 2
			spaced = true
			continue
		}

		t := token{start: int32(i), kind: tkPunct, spaced: spaced, marker: -1}
		spaced = false
		switch {
		case c == '\'':
			end, ok := scanQuoted(q, i, '\'')
			if !ok {
				return dst, errUnterminatedString
			}
			t.kind, i = tkString, end
		case c == '"':
			end, ok := scanQuoted(q, i, '"')
			if !ok {
				return dst, errUnterminatedQuoted
			}
			t.kind, i = tkQIdent, end
		case c == '$' && i+1 < len(q) && q[i+1] == '$':
			j := strings.Index(q[i+2:], "$$")
			if j < 0 {
				return dst, errUnterminatedDollar
			}
			t.kind, i = tkString, i+2+j+2
		case isHex(c) && isUUIDAt(q, i):
			t.kind, i = tkUUID, i+36
		case c == '0' && i+1 < len(q) && (q[i+1] == 'x' || q[i+1] == 'X'):
			j := i + 2
			for j < len(q) && isHex(q[j]) {
				j++
			}
			t.kind, i = tkHex, j
		case isDigit(c), c == '-' && i+1 < len(q) && isDigit(q[i+1]):
			// Cassandra lexes '-' before a digit as part of the number, so
			// "c = c -1" is the counter decrement c, -1.
			t.kind, i = tkNumber, scanNumber(q, i)
		case isLetter(c):
			j := i + 1
			for j < len(q) && (isLetter(q[j]) || isDigit(q[j]) || q[j] == '_') {
				j++
			}
			t.kind, i = tkIdent, j
		case c == '?':
			t.kind, t.marker = tkMarker, markers
			markers++
			i++
		case c == ':' && isMarkerColon(q, i, dst, stack[:depth]):
			// :name is a named marker; the name is an identifier or a
			// quoted one.
			j := i + 1
			if q[j] == '"' {
				end, ok := scanQuoted(q, j, '"')
				if !ok {
					return dst, errUnterminatedQuoted
				}
				j = end
			} else {
				for j < len(q) && (isLetter(q[j]) || isDigit(q[j]) || q[j] == '_') {
					j++
				}
			}
			t.kind, t.marker = tkMarker, markers
			markers++
			i = j
		default:
			n := punctLen(q, i)
			if n == 0 {
				return dst, errBadChar
			}
			switch c {
			case '(', '[', '{':
				if depth == maxDepth {
					return dst, errTooDeep
				}
				stack[depth] = c
				depth++
			case ')', ']', '}':
				if depth > 0 {
					depth--
				}
			}
			i += n
		}
		t.end = int32(i)
		dst = append(dst, t)
	}
	return dst, nil
}

// scanQuoted returns the end of the quoted token opening at q[i] with quote
// character qc, where a doubled quote is an escaped one.
func scanQuoted(q string, i int, qc byte) (int, bool) {
	for j := i + 1; j < len(q); j++ {
		if q[j] != qc {
			continue
		}
		if j+1 < len(q) && q[j+1] == qc {
			j++
			continue
		}
		return j + 1, true
	}
	return 0, false
}

// scanNumber returns the end of the number starting at q[i]: digits,
// decimal point, exponent (with its sign), and the unit letters of a
// duration (1h30m, 12mo, 3µs). The token is opaque to the parser except for
// whether it is an integer.
func scanNumber(q string, i int) int {
	j := i
	if q[j] == '-' {
		j++
	}
	for j < len(q) {
		c := q[j]
		switch {
		case isDigit(c) || isLetter(c) || c == '_':
			j++
		case c == '.' && j+1 < len(q) && isDigit(q[j+1]):
			j++
		case (c == '+' || c == '-') && (q[j-1] == 'e' || q[j-1] == 'E') && j+1 < len(q) && isDigit(q[j+1]):
			j++
		case c >= utf8.RuneSelf:
			// µs and μs are duration units.
			r, n := utf8.DecodeRuneInString(q[j:])
			if r != 'µ' && r != 'μ' {
				return j
			}
			j += n
		default:
			return j
		}
	}
	return j
}

// isMarkerColon tells whether the ':' at q[i] starts a named bind marker.
// Outside braces a colon is always one. Inside a map or UDT literal it also
// separates keys from values, so there it starts a marker only where a term
// starts ({:k : :v}), that is after '{', ',' or another ':'.
func isMarkerColon(q string, i int, dst []token, open []byte) bool {
	if i+1 >= len(q) || !(isLetter(q[i+1]) || q[i+1] == '"') {
		return false
	}
	if len(open) == 0 || open[len(open)-1] != '{' {
		return true
	}
	if len(dst) == 0 {
		return true
	}
	p := dst[len(dst)-1]
	if p.kind != tkPunct {
		return false
	}
	switch q[p.start] {
	case '{', ',', ':':
		return true
	}
	return false
}

// punctLen returns the length of the operator or punctuation at q[i], or 0
// for a character CQL does not have.
func punctLen(q string, i int) int {
	c := q[i]
	next := byte(0)
	if i+1 < len(q) {
		next = q[i+1]
	}
	switch c {
	case '<', '>', '!':
		if next == '=' {
			return 2
		}
		if c == '!' {
			return 0
		}
		return 1
	case '+', '-':
		if next == '=' {
			return 2
		}
		return 1
	case '(', ')', '[', ']', '{', '}', ',', ';', '.', '=', '*', '/', '%', ':':
		return 1
	}
	return 0
}

// isUUIDAt tells whether a UUID literal (8-4-4-4-12 hex digits) starts at
// q[i] and is not the prefix of a longer word.
func isUUIDAt(q string, i int) bool {
	if len(q)-i < 36 {
		return false
	}
	for k := 0; k < 36; k++ {
		c := q[i+k]
		switch k {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !isHex(c) {
				return false
			}
		}
	}
	if i+36 < len(q) {
		c := q[i+36]
		if isLetter(c) || isDigit(c) || c == '_' {
			return false
		}
	}
	return true
}

func isDigit(c byte) bool  { return c >= '0' && c <= '9' }
func isLetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }
func isHex(c byte) bool    { return isDigit(c) || (c|0x20 >= 'a' && c|0x20 <= 'f') }
