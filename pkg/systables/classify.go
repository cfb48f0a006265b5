package systables

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"strings"
)

// Table identifies a system table the proxy must answer for.
type Table int

// The system tables Classify recognises.
const (
	// TableNone is any query that is not a SELECT from one of the tables below.
	TableNone Table = iota
	// TableLocal is system.local.
	TableLocal
	// TablePeers is system.peers.
	TablePeers
	// TablePeersV2 is system.peers_v2 (Cassandra 4.0+).
	TablePeersV2
)

// String returns the qualified table name, or "none".
func (t Table) String() string {
	switch t {
	case TableLocal:
		return "system.local"
	case TablePeers:
		return "system.peers"
	case TablePeersV2:
		return "system.peers_v2"
	default:
		return "none"
	}
}

// systemKeyspace is the keyspace holding the tables Classify recognises.
const systemKeyspace = "system"

// Classify reports whether a CQL QUERY string selects from system.local,
// system.peers or system.peers_v2, and from which.
//
// keyspace is the keyspace the query runs in when it does not name one: the
// connection's current keyspace as set by USE (see ParseUse), or, in protocol
// v5, the keyspace carried by the QUERY's own With_keyspace option, which
// takes precedence. So `SELECT * FROM local` counts when keyspace == "system".
//
// Keywords are case-insensitive; whitespace, newlines and comments (-- ...,
// // ..., /* ... */) may appear between any two tokens; identifiers may be
// quoted ("system"."local"), in which case they are case-sensitive, as in
// Cassandra. String literals and quoted identifiers in the selection cannot
// fool it: the table is the one following the first FROM keyword.
//
// Classify runs on every QUERY, so it is cheap when the query cannot match: it
// does not allocate, and it returns after a few nanoseconds per 8 bytes of
// query unless the query starts with SELECT and contains "local" or "peers" in
// any case.
func Classify(query []byte, keyspace string) Table {
	i := 0
	for i < len(query) && isSpace(query[i]) {
		i++
	}
	if i < len(query) && (query[i] == '-' || query[i] == '/') {
		i = skipSpace(query, i)
	}
	if len(query)-i < 6 || !hasFoldPrefix(query[i:], "select") {
		return TableNone
	}
	i += 6
	if i < len(query) && isWord(query[i]) {
		return TableNone // e.g. "selection"
	}
	if !mayMention(query[i:]) {
		return TableNone
	}
	return classifySlow(query, i, keyspace)
}

// classifySlow tokenises query from i (just after SELECT) to find the table
// named after the first FROM keyword.
func classifySlow(q []byte, i int, keyspace string) Table {
	for {
		i = skipSpace(q, i)
		if i >= len(q) {
			return TableNone
		}
		kind, start, end, next := scanToken(q, i)
		if kind == tokInvalid {
			return TableNone
		}
		i = next
		if kind == tokWord && end-start == 4 && hasFoldPrefix(q[start:end], "from") {
			break
		}
	}
	first, firstQuoted, i, ok := readIdent(q, i)
	if !ok {
		return TableNone
	}
	i = skipSpace(q, i)
	var table []byte
	var tableQuoted bool
	if i < len(q) && q[i] == '.' {
		if !identIs(first, firstQuoted, systemKeyspace) {
			return TableNone
		}
		table, tableQuoted, _, ok = readIdent(q, i+1)
		if !ok {
			return TableNone
		}
	} else {
		if keyspace != systemKeyspace {
			return TableNone
		}
		table, tableQuoted = first, firstQuoted
	}
	switch {
	case identIs(table, tableQuoted, "local"):
		return TableLocal
	case identIs(table, tableQuoted, "peers"):
		return TablePeers
	case identIs(table, tableQuoted, "peers_v2"):
		return TablePeersV2
	}
	return TableNone
}

// ParseUse recognises `USE ks` and `USE "Ks"`, optionally followed by a ';',
// with whitespace and comments allowed anywhere between tokens, and returns
// the keyspace name as Cassandra stores it: unquoted names lowercased, quoted
// names verbatim with "" unescaped to ". Anything else, including an empty
// quoted name or extra tokens after the name, yields ok == false.
//
// Tracking USE statements lets Classify resolve unqualified table names. A
// proxy can also take the keyspace from the SET_KEYSPACE result Cassandra
// returns, which is authoritative when the USE fails.
func ParseUse(query []byte) (keyspace string, ok bool) {
	i := skipSpace(query, 0)
	if len(query)-i < 3 || !hasFoldPrefix(query[i:], "use") {
		return "", false
	}
	i += 3
	if i < len(query) && isWord(query[i]) {
		return "", false // e.g. "users"
	}
	raw, quoted, i, ok := readIdent(query, i)
	if !ok || len(raw) == 0 {
		return "", false
	}
	if !quoted && !isLetter(raw[0]) {
		return "", false // CQL identifiers start with a letter
	}
	i = skipSpace(query, i)
	if i < len(query) && query[i] == ';' {
		i = skipSpace(query, i+1)
	}
	if i != len(query) {
		return "", false
	}
	if quoted {
		if bytes.IndexByte(raw, '"') >= 0 {
			raw = bytes.ReplaceAll(raw, []byte(`""`), []byte(`"`))
		}
		return string(raw), true
	}
	return strings.ToLower(string(raw)), true
}

// Token kinds of the small CQL lexer.
const (
	tokInvalid = iota // unterminated quoted identifier, string or $$ string
	tokWord           // [A-Za-z0-9_]+: keywords, identifiers, numbers
	tokQuoted         // "quoted identifier"
	tokString         // 'string' or $$string$$
	tokPunct          // any other single byte
)

// scanToken reads the token starting at q[i], which must not be a space or
// a comment. For quoted identifiers start:end is the content between the
// quotes (still escaped); next is the index after the token.
func scanToken(q []byte, i int) (kind, start, end, next int) {
	c := q[i]
	switch {
	case isWord(c):
		j := i + 1
		for j < len(q) && isWord(q[j]) {
			j++
		}
		return tokWord, i, j, j
	case c == '"' || c == '\'':
		j := i + 1
		for {
			k := bytes.IndexByte(q[j:], c)
			if k < 0 {
				return tokInvalid, i, len(q), len(q)
			}
			j += k + 1
			if j < len(q) && q[j] == c { // doubled quote: escaped
				j++
				continue
			}
			if c == '"' {
				return tokQuoted, i + 1, j - 1, j
			}
			return tokString, i, j, j
		}
	case c == '$' && i+1 < len(q) && q[i+1] == '$':
		k := bytes.Index(q[i+2:], []byte("$$"))
		if k < 0 {
			return tokInvalid, i, len(q), len(q)
		}
		j := i + 2 + k + 2
		return tokString, i, j, j
	default:
		return tokPunct, i, i + 1, i + 1
	}
}

// readIdent skips spaces and comments from i and reads one identifier,
// unquoted (a word) or quoted. For a quoted identifier raw is the content
// between the quotes, with "" still escaped.
func readIdent(q []byte, i int) (raw []byte, quoted bool, next int, ok bool) {
	i = skipSpace(q, i)
	if i >= len(q) {
		return nil, false, i, false
	}
	kind, start, end, next := scanToken(q, i)
	switch kind {
	case tokWord:
		return q[start:end], false, next, true
	case tokQuoted:
		return q[start:end], true, next, true
	}
	return nil, false, next, false
}

// identIs reports whether the identifier raw names the lower-case name want:
// case-insensitively when unquoted, exactly when quoted.
func identIs(raw []byte, quoted bool, want string) bool {
	if quoted {
		return string(raw) == want
	}
	return len(raw) == len(want) && hasFoldPrefix(raw, want)
}

// skipSpace returns the index of the first byte at or after i that is neither
// whitespace nor part of a comment. Comments follow Cassandra's lexer: -- and
// // run to the end of the line, /* */ do not nest; an unterminated /* runs to
// the end of the query.
func skipSpace(q []byte, i int) int {
	for i < len(q) {
		c := q[i]
		if isSpace(c) {
			i++
			continue
		}
		if i+1 >= len(q) {
			return i
		}
		d := q[i+1]
		switch {
		case (c == '-' && d == '-') || (c == '/' && d == '/'):
			i += 2
			for i < len(q) && q[i] != '\n' && q[i] != '\r' {
				i++
			}
		case c == '/' && d == '*':
			k := bytes.Index(q[i+2:], []byte("*/"))
			if k < 0 {
				return len(q)
			}
			i += 2 + k + 2
		default:
			return i
		}
	}
	return i
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

func isLetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

func isWord(c byte) bool {
	return isLetter(c) || c >= '0' && c <= '9' || c == '_'
}

// hasFoldPrefix reports whether s starts with lower, an ASCII lower-case
// word, ignoring ASCII case in s.
func hasFoldPrefix(s []byte, lower string) bool {
	if len(s) < len(lower) {
		return false
	}
	for i := 0; i < len(lower); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// mayMention reports whether s contains "local" or "peers" in any ASCII case.
// Every query naming one of the system tables does (quoted names are
// case-sensitive and the tables' names are lower case), so it is a sound
// pre-filter. It looks, eight bytes at a time, for the pairs "lo" and "pe",
// which are rare in application queries, and checks only where they occur.
func mayMention(s []byte) bool {
	const (
		ones  = 0x0101010101010101
		lower = 0x2020202020202020 // |0x20 folds A-Z onto a-z; no other byte lands on a letter
	)
	i := 0
	// Windows of 8 bytes overlapping by one, so that every pair of adjacent
	// bytes lies within one window.
	for ; i+8 <= len(s); i += 7 {
		x := binary.LittleEndian.Uint64(s[i:]) | lower
		m := zeroBytes(x^('l'*ones))&(zeroBytes(x^('o'*ones))>>8) |
			zeroBytes(x^('p'*ones))&(zeroBytes(x^('e'*ones))>>8)
		for m != 0 {
			if mentionAt(s, i+bits.TrailingZeros64(m)/8) {
				return true
			}
			m &= m - 1
		}
	}
	for ; i < len(s); i++ {
		if mentionAt(s, i) {
			return true
		}
	}
	return false
}

// zeroBytes returns a mask with the high bit of every zero byte of v set, and
// no other bit.
func zeroBytes(v uint64) uint64 {
	const lows = 0x7f7f7f7f7f7f7f7f
	return ^((v&lows + lows) | v | lows)
}

func mentionAt(s []byte, i int) bool {
	switch s[i] | 0x20 {
	case 'l':
		return hasFoldPrefix(s[i:], "local")
	case 'p':
		return hasFoldPrefix(s[i:], "peers")
	}
	return false
}
