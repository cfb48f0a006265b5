package frame

import (
	"fmt"
)

// Decoders read the few fields routing needs from a message body. They check
// every length against the body, never panic, and report a body that ends
// early with an error wrapping ErrShortBody, and a body of another kind than
// expected (wrong ERROR code or RESULT kind) with one wrapping ErrWrongKind.
// Returned byte slices alias body (with capped capacity); strings are copies.
//
// The body they take is the message itself: for a frame whose flags announce
// a tracing id, warnings or a custom payload, get it with MessageBody.

func short(what string) error { return fmt.Errorf("frame: %s: %w", what, ErrShortBody) }

// MessageBody returns the message part of the frame f's body: the body
// without the tracing id (responses with FlagTracing), warnings (responses
// with FlagWarning) and custom payload (FlagCustomPayload) that precede it, in
// that order (spec section 2.4.1.2, and Cassandra's Message.Decoder, which
// also ignores the version when reading them). It aliases f.
func MessageBody(f []byte) ([]byte, error) {
	if len(f) < HeaderLen {
		return nil, short("frame header")
	}
	// Nearly every frame has none of the three: skip the header's parse.
	if f[1]&(FlagTracing|FlagWarning|FlagCustomPayload) == 0 {
		return f[HeaderLen:], nil
	}
	h := ParseHeader(f)
	b := f[HeaderLen:]
	var ok bool
	if h.Response && h.Flags&FlagTracing != 0 {
		if len(b) < 16 {
			return nil, short("tracing id")
		}
		b = b[16:]
	}
	if h.Response && h.Flags&FlagWarning != 0 {
		if b, ok = skipStringList(b); !ok {
			return nil, short("warnings")
		}
	}
	if h.Flags&FlagCustomPayload != 0 {
		if b, ok = skipBytesMap(b); !ok {
			return nil, short("custom payload")
		}
	}
	return b, nil
}

// ReadStringMap decodes a [string map] at the start of body (STARTUP).
func ReadStringMap(body []byte) (map[string]string, error) {
	n, rest, ok := readShort(body)
	if !ok {
		return nil, short("string map count")
	}
	// Each entry takes at least 4 bytes: size the map by what the body can
	// hold, not by the count it claims.
	m := make(map[string]string, min(int(n), len(rest)/4))
	for i := range int(n) {
		var k, v []byte
		if k, rest, ok = readShortBytes(rest); !ok {
			return nil, short(fmt.Sprintf("string map key %d of %d", i+1, n))
		}
		if v, rest, ok = readShortBytes(rest); !ok {
			return nil, short(fmt.Sprintf("string map value of %q", k))
		}
		m[string(k)] = string(v)
	}
	return m, nil
}

// ReadStringList decodes a [string list] at the start of body (REGISTER).
func ReadStringList(body []byte) ([]string, error) {
	l, _, ok := readStringList(body)
	if !ok {
		return nil, short("string list")
	}
	return l, nil
}

// ReadStringMultimap decodes a [string multimap] at the start of body (SUPPORTED).
func ReadStringMultimap(body []byte) (map[string][]string, error) {
	n, rest, ok := readShort(body)
	if !ok {
		return nil, short("string multimap count")
	}
	m := make(map[string][]string, min(int(n), len(rest)/4))
	for i := range int(n) {
		var k []byte
		var v []string
		if k, rest, ok = readShortBytes(rest); !ok {
			return nil, short(fmt.Sprintf("string multimap key %d of %d", i+1, n))
		}
		if v, rest, ok = readStringList(rest); !ok {
			return nil, short(fmt.Sprintf("string multimap values of %q", k))
		}
		m[string(k)] = v
	}
	return m, nil
}

// QueryString returns the [long string] query at the start of a QUERY or
// PREPARE body.
func QueryString(body []byte) ([]byte, error) {
	q, _, ok := readLongBytes(body)
	if !ok {
		return nil, short("query string")
	}
	return q, nil
}

// PrepareKeyspace returns the keyspace of a v5 PREPARE body if its flags
// carry one, else "". Before v5 PREPARE has no flags and it returns "".
func PrepareKeyspace(version byte, body []byte) (string, error) {
	if version&^ResponseBit < V5 {
		return "", nil
	}
	_, rest, ok := readLongBytes(body)
	if !ok {
		return "", short("PREPARE query string")
	}
	flags, rest, ok := readInt(rest)
	if !ok {
		return "", short("PREPARE flags")
	}
	if flags&prepareFlagKeyspace == 0 {
		return "", nil
	}
	ks, _, ok := readShortBytes(rest)
	if !ok {
		return "", short("PREPARE keyspace")
	}
	return string(ks), nil
}

// ExecuteID returns the prepared id ([short bytes]) at the start of an
// EXECUTE body.
func ExecuteID(body []byte) ([]byte, error) {
	id, _, ok := readShortBytes(body)
	if !ok {
		return nil, short("EXECUTE statement id")
	}
	return id, nil
}

// ExecuteResultMetadataID returns the result metadata id of a v5 EXECUTE
// body (<id><result_metadata_id>...): the shape of the rows the client
// expects, as Cassandra's PREPARED answer gave it.
func ExecuteResultMetadataID(body []byte) ([]byte, error) {
	_, rest, ok := readShortBytes(body)
	if !ok {
		return nil, short("EXECUTE statement id")
	}
	id, _, ok := readShortBytes(rest)
	if !ok {
		return nil, short("EXECUTE result metadata id")
	}
	return id, nil
}

// ErrorCode returns the code and message of an ERROR body.
func ErrorCode(body []byte) (code int32, msg string, err error) {
	code, rest, ok := readInt(body)
	if !ok {
		return 0, "", short("ERROR code")
	}
	m, _, ok := readShortBytes(rest)
	if !ok {
		return code, "", short("ERROR message")
	}
	return code, string(m), nil
}

// UnpreparedID returns the statement id of an UNPREPARED (0x2500) ERROR body.
func UnpreparedID(body []byte) ([]byte, error) {
	code, rest, ok := readInt(body)
	if !ok {
		return nil, short("ERROR code")
	}
	if code != ErrCodeUnprepared {
		return nil, fmt.Errorf("frame: ERROR code 0x%04x is not UNPREPARED: %w", code, ErrWrongKind)
	}
	if _, rest, ok = readShortBytes(rest); !ok {
		return nil, short("UNPREPARED message")
	}
	id, _, ok := readShortBytes(rest)
	if !ok {
		return nil, short("UNPREPARED statement id")
	}
	return id, nil
}

// ResultKind returns the kind of a RESULT body.
func ResultKind(body []byte) (int32, error) {
	k, _, ok := readInt(body)
	if !ok {
		return 0, short("RESULT kind")
	}
	return k, nil
}

// resultOfKind returns the rest of a RESULT body after checking its kind.
func resultOfKind(body []byte, want int32, name string) ([]byte, error) {
	k, rest, ok := readInt(body)
	if !ok {
		return nil, short("RESULT kind")
	}
	if k != want {
		return nil, fmt.Errorf("frame: RESULT kind 0x%04x is not %s: %w", k, name, ErrWrongKind)
	}
	return rest, nil
}

// PreparedID returns the statement id of a RESULT Prepared body.
func PreparedID(body []byte) ([]byte, error) {
	rest, err := resultOfKind(body, ResultPrepared, "Prepared")
	if err != nil {
		return nil, err
	}
	id, _, ok := readShortBytes(rest)
	if !ok {
		return nil, short("RESULT Prepared statement id")
	}
	return id, nil
}

// SetKeyspaceName returns the keyspace of a RESULT Set_keyspace body.
func SetKeyspaceName(body []byte) (string, error) {
	rest, err := resultOfKind(body, ResultSetKeyspace, "Set_keyspace")
	if err != nil {
		return "", err
	}
	ks, _, ok := readShortBytes(rest)
	if !ok {
		return "", short("RESULT Set_keyspace keyspace")
	}
	return string(ks), nil
}

// EventType returns the event type ("SCHEMA_CHANGE", ...) of an EVENT body.
func EventType(body []byte) (string, error) {
	t, _, ok := readShortBytes(body)
	if !ok {
		return "", short("EVENT type")
	}
	return string(t), nil
}

// CustomPayloadValue returns the value of key in the custom payload of the
// request or response frame f (FlagCustomPayload), and whether it is there.
// It aliases f.
func CustomPayloadValue(f []byte, key string) ([]byte, bool) {
	if len(f) < HeaderLen {
		return nil, false
	}
	h := ParseHeader(f)
	if h.Flags&FlagCustomPayload == 0 {
		return nil, false
	}
	b := f[HeaderLen:]
	var ok bool
	if h.Response && h.Flags&FlagTracing != 0 {
		if len(b) < 16 {
			return nil, false
		}
		b = b[16:]
	}
	if h.Response && h.Flags&FlagWarning != 0 {
		if b, ok = skipStringList(b); !ok {
			return nil, false
		}
	}
	n, rest, ok := readShort(b)
	if !ok {
		return nil, false
	}
	for range n {
		var k []byte
		if k, rest, ok = readShortBytes(rest); !ok {
			return nil, false
		}
		var l int32
		if l, rest, ok = readInt(rest); !ok {
			return nil, false
		}
		var v []byte
		if l > 0 {
			if int64(len(rest)) < int64(l) {
				return nil, false
			}
			v, rest = rest[:l:l], rest[l:]
		}
		if string(k) == key {
			return v, true
		}
	}
	return nil, false
}
