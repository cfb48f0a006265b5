package frame

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Query parameter flags (spec section 4.1.4). Before v5 they travel in one
// byte, so the last two exist only in v5.
const (
	QueryFlagValues            uint32 = 0x0001
	QueryFlagSkipMetadata      uint32 = 0x0002
	QueryFlagPageSize          uint32 = 0x0004
	QueryFlagPagingState       uint32 = 0x0008
	QueryFlagSerialConsistency uint32 = 0x0010
	QueryFlagDefaultTimestamp  uint32 = 0x0020
	QueryFlagNamesForValues    uint32 = 0x0040
	QueryFlagKeyspace          uint32 = 0x0080
	QueryFlagNowInSeconds      uint32 = 0x0100
)

// Errors of the query-parameter, PREPARED and BATCH decoders, next to
// ErrShortBody and ErrWrongKind.
var (
	// ErrMalformedBody means a field holds a value the protocol forbids
	// (a [value] length below -2, a BATCH child kind other than 0 or 1, a
	// timestamp of -2^63, a type nested too deep, a partition-key index past
	// the bind variables). Cassandra would answer such a request with a
	// PROTOCOL_ERROR.
	ErrMalformedBody = errors.New("frame: malformed body")
	// ErrUnsetValue means a value asked for is "not set" ([value] length -2),
	// so it cannot be part of a routing key.
	ErrUnsetValue = errors.New("frame: value is unset")
	// ErrNamedValues means the values are preceded by names
	// (QueryFlagNamesForValues), so their position is not their index.
	ErrNamedValues = errors.New("frame: values are named, not positional")
)

// QueryParams locates the <query_parameters> of a QUERY or EXECUTE body, or
// the parameters that end a BATCH body (<consistency><flags> and the
// optional fields; Cassandra reads both with one codec). Fields whose flag is
// not set are zero. Byte slices alias the body, with capped capacity. The
// zero value is not useful: get one from ParseQueryParams or ParseBatch.
type QueryParams struct {
	Consistency uint16
	// Flags are the QueryFlag bits, widened to 32 bits before v5.
	Flags uint32
	// ValueCount is the number of bound values (0 without QueryFlagValues).
	ValueCount int
	// PageSize is the requested page size (QueryFlagPageSize).
	PageSize int32
	// PagingState is the paging state (QueryFlagPagingState); nil if the
	// flag is unset or the state is null.
	PagingState []byte
	// SerialConsistency is the serial consistency (QueryFlagSerialConsistency).
	SerialConsistency uint16
	// Timestamp is the default timestamp in microseconds
	// (QueryFlagDefaultTimestamp).
	Timestamp int64
	// Keyspace is the keyspace the request runs in (v5, QueryFlagKeyspace).
	Keyspace []byte
	// NowInSeconds is the "now" the request runs at (v5, QueryFlagNowInSeconds).
	NowInSeconds int32

	version        byte
	values         []byte // the values after their [short] count
	valuesOffset   int    // offset of values in the body
	flagsOffset    int    // offset of <flags> in the body
	tsOffset       int    // offset in the body where <timestamp> is or would go
	keyspaceOffset int    // offset of Keyspace in the body
}

// HasTimestamp reports whether the request carries a default timestamp.
func (p *QueryParams) HasTimestamp() bool { return p.Flags&QueryFlagDefaultTimestamp != 0 }

// NamedValues reports whether each value is preceded by its bind marker's name.
func (p *QueryParams) NamedValues() bool { return p.Flags&QueryFlagNamesForValues != 0 }

// Values returns, in dst[k], the raw bytes of the value at position
// indexes[k] (0-based), as ExecuteValues does.
func (p *QueryParams) Values(indexes []uint16, dst [][]byte) ([][]byte, error) {
	if p.NamedValues() && p.ValueCount > 0 {
		return dst[:0], fmt.Errorf("frame: picking values by position: %w", ErrNamedValues)
	}
	return pickValues(p.values, p.ValueCount, indexes, dst)
}

// ParseQueryParams decodes the query parameters of a QUERY, EXECUTE or BATCH
// body (opcode OpQuery, OpExecute or OpBatch) of the given protocol version.
// Other opcodes get an error wrapping ErrWrongKind. It does not allocate
// unless it fails.
func ParseQueryParams(version, opcode byte, body []byte) (QueryParams, error) {
	version &^= ResponseBit
	off, err := paramsOffset(version, opcode, body)
	if err != nil {
		return QueryParams{}, err
	}
	return parseParams(version, body, off)
}

// Consistency returns the consistency level of a QUERY, EXECUTE or BATCH
// body. It reads no further than the consistency (for a BATCH, it walks
// the children to find it).
func Consistency(version, opcode byte, body []byte) (uint16, error) {
	off, err := paramsOffset(version&^ResponseBit, opcode, body)
	if err != nil {
		return 0, err
	}
	cl, _, ok := readShort(body[off:])
	if !ok {
		return 0, short(OpcodeName(opcode) + " consistency")
	}
	return cl, nil
}

// ExecuteValues returns the raw bytes of the bound values of an EXECUTE body
// at the positions given by indexes (typically PreparedMeta.PKIndexes, in
// partition-key order): dst[k] holds the value at position indexes[k]. The
// results alias body; dst is reused, so with cap(dst) >= len(indexes) it does
// not allocate unless it fails. A null value comes back as nil (Cassandra
// rejects a null partition key, so such a request can go anywhere); an unset
// one is an error wrapping ErrUnsetValue, named values one wrapping
// ErrNamedValues, and an index past the values one wrapping
// ErrMalformedBody. It reads no further than the last value asked for:
// ParseQueryParams checks a whole body.
func ExecuteValues(version byte, body []byte, indexes []uint16, dst [][]byte) ([][]byte, error) {
	version &^= ResponseBit
	off, err := paramsOffset(version, OpExecute, body)
	if err != nil {
		return dst[:0], err
	}
	flags, b, err := readConsistencyAndFlagsInto(version, body[off:], nil)
	if err != nil {
		return dst[:0], err
	}
	if flags&QueryFlagValues == 0 {
		if len(indexes) == 0 {
			return dst[:0], nil
		}
		return dst[:0], fmt.Errorf("frame: EXECUTE has no values but value %d is needed: %w", indexes[0], ErrMalformedBody)
	}
	n, b, ok := readShort(b)
	if !ok {
		return dst[:0], short("EXECUTE value count")
	}
	if flags&QueryFlagNamesForValues != 0 && n > 0 {
		return dst[:0], fmt.Errorf("frame: EXECUTE values: %w", ErrNamedValues)
	}
	return pickValues(b, int(n), indexes, dst)
}

// paramsOffset returns the offset of <consistency> in a QUERY, EXECUTE or
// BATCH body.
func paramsOffset(version, opcode byte, body []byte) (int, error) {
	var rest []byte
	var ok bool
	switch opcode {
	case OpQuery:
		if _, rest, ok = readLongBytes(body); !ok {
			return 0, short("QUERY query string")
		}
	case OpExecute:
		if _, rest, ok = readShortBytes(body); !ok {
			return 0, short("EXECUTE statement id")
		}
		if version >= V5 {
			if _, rest, ok = readShortBytes(rest); !ok {
				return 0, short("EXECUTE result metadata id")
			}
		}
	case OpBatch:
		var err error
		if _, _, rest, err = batchChildren(body); err != nil {
			return 0, err
		}
	default:
		return 0, fmt.Errorf("frame: %s has no query parameters: %w", OpcodeName(opcode), ErrWrongKind)
	}
	return len(body) - len(rest), nil
}

// peekFlags reads <flags> at the start of b: an [int] from v5 on, a [byte]
// before, returning its width.
func peekFlags(version byte, b []byte) (uint32, int) {
	if version >= V5 {
		if len(b) < 4 {
			return 0, -1
		}
		return binary.BigEndian.Uint32(b), 4
	}
	if len(b) < 1 {
		return 0, -1
	}
	return uint32(b[0]), 1
}

// readConsistencyAndFlagsInto reads <consistency><flags>, storing them in p
// if it is not nil.
func readConsistencyAndFlagsInto(version byte, b []byte, p *QueryParams) (uint32, []byte, error) {
	cl, b, ok := readShort(b)
	if !ok {
		return 0, b, short("consistency")
	}
	flags, w := peekFlags(version, b)
	if w < 0 {
		return 0, b, short("query flags")
	}
	if p != nil {
		p.Consistency, p.Flags = cl, flags
	}
	return flags, b[w:], nil
}

// parseParams decodes the parameters that start at off in body, in the order
// of Cassandra's QueryOptions codec.
func parseParams(version byte, body []byte, off int) (QueryParams, error) {
	p := QueryParams{version: version, flagsOffset: off + 2}
	flags, b, err := readConsistencyAndFlagsInto(version, body[off:], &p)
	if err != nil {
		return QueryParams{}, err
	}
	var ok bool
	if flags&QueryFlagValues != 0 {
		var n uint16
		if n, b, ok = readShort(b); !ok {
			return QueryParams{}, short("value count")
		}
		start := b
		if b, err = skipValues(b, int(n), flags&QueryFlagNamesForValues != 0); err != nil {
			return QueryParams{}, err
		}
		p.ValueCount = int(n)
		p.values = start[: len(start)-len(b) : len(start)-len(b)]
		p.valuesOffset = len(body) - len(start)
	}
	if flags&QueryFlagPageSize != 0 {
		if p.PageSize, b, ok = readInt(b); !ok {
			return QueryParams{}, short("page size")
		}
	}
	if flags&QueryFlagPagingState != 0 {
		if p.PagingState, _, b, err = readValue(b); err != nil {
			return QueryParams{}, fmt.Errorf("paging state: %w", err)
		}
	}
	if flags&QueryFlagSerialConsistency != 0 {
		if p.SerialConsistency, b, ok = readShort(b); !ok {
			return QueryParams{}, short("serial consistency")
		}
	}
	p.tsOffset = len(body) - len(b)
	if flags&QueryFlagDefaultTimestamp != 0 {
		if len(b) < 8 {
			return QueryParams{}, short("default timestamp")
		}
		p.Timestamp = int64(binary.BigEndian.Uint64(b))
		b = b[8:]
		if p.Timestamp == math.MinInt64 {
			return QueryParams{}, fmt.Errorf("frame: default timestamp -2^63: %w", ErrMalformedBody)
		}
	}
	if flags&QueryFlagKeyspace != 0 {
		if p.Keyspace, b, ok = readShortBytes(b); !ok {
			return QueryParams{}, short("keyspace")
		}
		p.keyspaceOffset = len(body) - len(b) - len(p.Keyspace)
	}
	if flags&QueryFlagNowInSeconds != 0 {
		if p.NowInSeconds, _, ok = readInt(b); !ok {
			return QueryParams{}, short("now in seconds")
		}
	}
	return p, nil
}

// readValue reads a [value]: an [int] length n and n bytes if n >= 0; -1 is
// null (nil) and -2 "not set" (nil, with the length telling them apart).
func readValue(b []byte) ([]byte, int32, []byte, error) {
	n, rest, ok := readInt(b)
	if !ok {
		return nil, 0, b, short("value length")
	}
	if n < 0 {
		if n < -2 {
			return nil, n, b, fmt.Errorf("frame: value length %d: %w", n, ErrMalformedBody)
		}
		return nil, n, rest, nil
	}
	if int64(len(rest)) < int64(n) {
		return nil, n, b, short("value")
	}
	return rest[:n:n], n, rest[n:], nil
}

// skipValues skips n [value]s, each preceded by a [string] name if named.
func skipValues(b []byte, n int, named bool) ([]byte, error) {
	var ok bool
	var err error
	for range n {
		if named {
			if _, b, ok = readShortBytes(b); !ok {
				return b, short("value name")
			}
		}
		if _, _, b, err = readValue(b); err != nil {
			return b, err
		}
	}
	return b, nil
}

// pickValues walks the n positional values in b and stores the one at
// position indexes[k] in dst[k].
func pickValues(b []byte, n int, indexes []uint16, dst [][]byte) ([][]byte, error) {
	dst = dst[:0]
	last := -1
	for _, ix := range indexes {
		dst = append(dst, nil)
		last = max(last, int(ix))
	}
	if last >= n {
		return dst[:0], fmt.Errorf("frame: value %d asked for, %d present: %w", last, n, ErrMalformedBody)
	}
	for i := 0; i <= last; i++ {
		v, l, rest, err := readValue(b)
		if err != nil {
			return dst[:0], err
		}
		b = rest
		for k, ix := range indexes {
			if int(ix) != i {
				continue
			}
			if l == -2 {
				return dst[:0], fmt.Errorf("frame: value %d: %w", i, ErrUnsetValue)
			}
			dst[k] = v
		}
	}
	return dst, nil
}

// AppendWithTimestamp appends to dst the QUERY, EXECUTE or BATCH body with
// the default timestamp ts (microseconds) added: the QueryFlagDefaultTimestamp
// flag set and the [long] inserted where the protocol wants it (after the
// serial consistency, before the v5 keyspace). If the body already has a
// default timestamp it is appended unchanged and added is false; a timestamp
// in the query text (USING TIMESTAMP) still overrides either, as it does in
// Cassandra. The body is validated as ParseQueryParams does; on error dst is
// returned unchanged. ts must not be -2^63, which the protocol forbids.
//
// The caller owns the frame header: the body grows by 8 bytes, so a frame's
// length must be updated (AppendFrameWithTimestamp does that).
func AppendWithTimestamp(dst []byte, version, opcode byte, body []byte, ts int64) (out []byte, added bool, err error) {
	if ts == math.MinInt64 {
		return dst, false, fmt.Errorf("frame: default timestamp -2^63: %w", ErrMalformedBody)
	}
	p, err := ParseQueryParams(version, opcode, body)
	if err != nil {
		return dst, false, err
	}
	if p.HasTimestamp() {
		return append(dst, body...), false, nil
	}
	return insertTimestamp(dst, body, p.version, p.Flags, p.flagsOffset, p.tsOffset, ts), true, nil
}

// insertTimestamp appends b to dst with QueryFlagDefaultTimestamp added to
// the flags at b[flagsAt:] and the timestamp ts inserted at b[tsAt:].
func insertTimestamp(dst, b []byte, version byte, flags uint32, flagsAt, tsAt int, ts int64) []byte {
	dst = append(dst, b[:flagsAt]...)
	flags |= QueryFlagDefaultTimestamp
	if version >= V5 {
		dst = binary.BigEndian.AppendUint32(dst, flags)
		dst = append(dst, b[flagsAt+4:tsAt]...)
	} else {
		dst = append(dst, byte(flags))
		dst = append(dst, b[flagsAt+1:tsAt]...)
	}
	dst = binary.BigEndian.AppendUint64(dst, uint64(ts))
	return append(dst, b[tsAt:]...)
}

// AppendFrameWithTimestamp is AppendWithTimestamp for the whole request
// frame f (header and body): it appends f to dst with the default timestamp
// ts added to its QUERY, EXECUTE or BATCH message, keeping the custom payload
// that may precede the message and fixing the header's length. added is
// false if the message had a timestamp already (f is appended unchanged).
func AppendFrameWithTimestamp(dst, f []byte, ts int64) (out []byte, added bool, err error) {
	msg, err := MessageBody(f)
	if err != nil {
		return dst, false, err
	}
	h := ParseHeader(f)
	start := len(dst)
	prefix := len(f) - len(msg) // header and custom payload
	dst = append(dst, f[:prefix]...)
	dst, added, err = AppendWithTimestamp(dst, h.Version, h.Opcode, msg, ts)
	if err != nil {
		return dst[:start], false, err
	}
	binary.BigEndian.PutUint32(dst[start+5:start+9], uint32(len(dst)-start-HeaderLen))
	return dst, added, nil
}
