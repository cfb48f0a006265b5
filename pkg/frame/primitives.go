package frame

import (
	"encoding/binary"
	"maps"
	"slices"
	"unicode/utf8"
)

// Encoding and decoding of the protocol's notations (spec section 3) that the
// messages in this package use. Readers take the remaining body and return
// the value, the rest of the body and whether the value was there in full.

// maxShortLen is the largest length a [short] can carry: the limit of a
// [string], [short bytes] and every count in lists and maps.
const maxShortLen = 1<<16 - 1

func appendShort(b []byte, v uint16) []byte { return binary.BigEndian.AppendUint16(b, v) }

func appendInt(b []byte, v int32) []byte { return binary.BigEndian.AppendUint32(b, uint32(v)) }

// appendString appends a [string]. A longer s is cut to the 65535 bytes a
// [string] can hold, at a UTF-8 character boundary, rather than producing a
// frame the peer cannot parse: error messages may embed arbitrary text.
func appendString(b []byte, s string) []byte {
	if len(s) > maxShortLen {
		n := maxShortLen
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n]
	}
	b = appendShort(b, uint16(len(s)))
	return append(b, s...)
}

func appendLongString(b []byte, s string) []byte {
	b = appendInt(b, int32(len(s)))
	return append(b, s...)
}

// appendStringList appends a [string list]; at most 65535 items are sent.
func appendStringList(b []byte, l []string) []byte {
	l = l[:min(len(l), maxShortLen)]
	b = appendShort(b, uint16(len(l)))
	for _, s := range l {
		b = appendString(b, s)
	}
	return b
}

// appendStringMap appends a [string map] with its keys sorted, so that the
// same map always encodes to the same bytes.
func appendStringMap(b []byte, m map[string]string) []byte {
	keys := slices.Sorted(maps.Keys(m))
	keys = keys[:min(len(keys), maxShortLen)]
	b = appendShort(b, uint16(len(keys)))
	for _, k := range keys {
		b = appendString(b, k)
		b = appendString(b, m[k])
	}
	return b
}

// appendStringMultimap appends a [string multimap] with its keys sorted.
func appendStringMultimap(b []byte, m map[string][]string) []byte {
	keys := slices.Sorted(maps.Keys(m))
	keys = keys[:min(len(keys), maxShortLen)]
	b = appendShort(b, uint16(len(keys)))
	for _, k := range keys {
		b = appendString(b, k)
		b = appendStringList(b, m[k])
	}
	return b
}

func readShort(b []byte) (uint16, []byte, bool) {
	if len(b) < 2 {
		return 0, b, false
	}
	return binary.BigEndian.Uint16(b), b[2:], true
}

func readInt(b []byte) (int32, []byte, bool) {
	if len(b) < 4 {
		return 0, b, false
	}
	return int32(binary.BigEndian.Uint32(b)), b[4:], true
}

// readShortBytes reads a [string] or [short bytes]: a [short] length and that
// many bytes. The result aliases b with its capacity capped, so that an
// append by the caller cannot overwrite what follows in the body.
func readShortBytes(b []byte) ([]byte, []byte, bool) {
	n, rest, ok := readShort(b)
	if !ok || len(rest) < int(n) {
		return nil, b, false
	}
	return rest[:n:n], rest[n:], true
}

// readLongBytes reads a [long string]: an [int] length and that many bytes.
// A negative length is reported as missing.
func readLongBytes(b []byte) ([]byte, []byte, bool) {
	n, rest, ok := readInt(b)
	if !ok || n < 0 || int64(len(rest)) < int64(n) {
		return nil, b, false
	}
	return rest[:n:n], rest[n:], true
}

// readStringList reads a [string list]. The slice is sized by what the body
// can hold, not by the count it claims, so a bogus count cannot make it
// allocate more than the body.
func readStringList(b []byte) ([]string, []byte, bool) {
	n, rest, ok := readShort(b)
	if !ok {
		return nil, b, false
	}
	l := make([]string, 0, min(int(n), len(rest)/2))
	for range n {
		var s []byte
		if s, rest, ok = readShortBytes(rest); !ok {
			return nil, b, false
		}
		l = append(l, string(s))
	}
	return l, rest, true
}

// skipStringList skips a [string list] without copying its strings.
func skipStringList(b []byte) ([]byte, bool) {
	n, rest, ok := readShort(b)
	if !ok {
		return b, false
	}
	for range n {
		if _, rest, ok = readShortBytes(rest); !ok {
			return b, false
		}
	}
	return rest, true
}

// skipBytesMap skips a [bytes map] (a custom payload).
func skipBytesMap(b []byte) ([]byte, bool) {
	n, rest, ok := readShort(b)
	if !ok {
		return b, false
	}
	for range n {
		if _, rest, ok = readShortBytes(rest); !ok {
			return b, false
		}
		var l int32
		if l, rest, ok = readInt(rest); !ok {
			return b, false
		}
		if l > 0 {
			if int64(len(rest)) < int64(l) {
				return b, false
			}
			rest = rest[l:]
		}
	}
	return rest, true
}
