package frame

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Request is a request frame read once, when it arrives: where its parts
// are, and the few fields the proxy decides on. Routing, idempotency,
// hedging, timestamping and statement statistics all read it instead of
// parsing the frame again, the way pgproto3 decodes a message once.
//
// It holds offsets into the frame rather than slices: it carries no
// pointers (nothing for the garbage collector in a pooled request) and it
// stays true of the same bytes in another buffer. Its accessors take the
// frame it was parsed from; WithTimestamp keeps it true of the frame it
// builds.
type Request struct {
	Header
	// Consistency and QueryFlags (widened to 32 bits before v5) of a QUERY,
	// EXECUTE or BATCH whose parameters parsed (HasParams).
	Consistency uint16
	QueryFlags  uint32
	// BatchType and BatchCount of a BATCH whose children parsed.
	BatchType  byte
	BatchCount int

	body     int32 // offset of the message, past the custom payload
	text     span  // QUERY, PREPARE: the query string
	id       span  // EXECUTE: the statement id; BATCH: its first child's, when prepared
	resultID span  // v5 EXECUTE: the result metadata id
	keyspace span  // v5: the keyspace parameter of a QUERY, EXECUTE, BATCH or PREPARE
	values   span  // the bound values, after their count, of a QUERY or EXECUTE, or of a BATCH's first child
	nvalues  int32
	children span  // BATCH: the children
	flags    int32 // offset of <flags>; 0 when the parameters did not parse
	tsAt     int32 // offset where <timestamp> is or would go
}

// span is where a field lies in a frame; the zero span is "absent".
type span struct{ off, end int32 }

func (s span) in(f []byte) []byte {
	if s.end == 0 {
		return nil
	}
	return f[s.off:s.end:s.end]
}

func spanOf(off, n int) span { return span{int32(off), int32(off + n)} }

// ParseRequest reads the request frame f (header and body) in one pass. It
// fails only when the frame cannot be a request at all: a short header or
// custom payload, or a QUERY or PREPARE without its query string. A
// statement id or parameters that do not parse leave the matching fields
// absent instead (HasParams false, ID nil): such a request is forwarded as
// it is, and Cassandra answers it as it would a direct client. When it
// fails, only the Header is of use. It does not allocate unless it fails.
func ParseRequest(f []byte) (Request, error) {
	if len(f) < HeaderLen {
		return Request{}, short("frame header")
	}
	r := Request{Header: ParseHeader(f)}
	msg, err := MessageBody(f)
	if err != nil {
		return r, err
	}
	base := len(f) - len(msg)
	r.body = int32(base)
	switch r.Opcode {
	case OpQuery:
		q, rest, ok := readLongBytes(msg)
		if !ok {
			return r, short("QUERY query string")
		}
		r.text = spanOf(base+4, len(q))
		r.params(f, base, len(msg)-len(rest))
	case OpPrepare:
		q, rest, ok := readLongBytes(msg)
		if !ok {
			return r, short("PREPARE query string")
		}
		r.text = spanOf(base+4, len(q))
		if r.Version >= V5 {
			if flags, rest, ok := readInt(rest); ok && flags&prepareFlagKeyspace != 0 {
				if ks, _, ok := readShortBytes(rest); ok {
					r.keyspace = spanOf(len(f)-len(rest)+2, len(ks))
				}
			}
		}
	case OpExecute:
		id, rest, ok := readShortBytes(msg)
		if !ok {
			return r, nil
		}
		r.id = spanOf(base+2, len(id))
		if r.Version >= V5 {
			var rid []byte
			if rid, rest, ok = readShortBytes(rest); !ok {
				return r, nil
			}
			r.resultID = spanOf(len(f)-len(rest)-len(rid), len(rid))
		}
		r.params(f, base, len(msg)-len(rest))
	case OpBatch:
		r.batch(f, base, msg)
	}
	return r, nil
}

// params records the query parameters that start off bytes into the
// message at base, if they parse.
func (r *Request) params(f []byte, base, off int) {
	p, err := parseParams(r.Version, f[base:], off)
	if err != nil {
		return
	}
	r.Consistency, r.QueryFlags = p.Consistency, p.Flags
	r.flags = int32(base + p.flagsOffset)
	r.tsAt = int32(base + p.tsOffset)
	if p.Keyspace != nil {
		r.keyspace = spanOf(base+p.keyspaceOffset, len(p.Keyspace))
	}
	if r.Opcode != OpBatch {
		r.values = spanOf(base+p.valuesOffset, len(p.values))
		r.nvalues = int32(p.ValueCount)
	}
}

// batch records a BATCH's type, children and parameters, and its first
// child's statement id and values when that child is a prepared statement
// (routing sends a batch where its first statement's partition lives).
func (r *Request) batch(f []byte, base int, msg []byte) {
	typ, n, rest, err := batchChildren(msg)
	if err != nil {
		return
	}
	end := len(msg) - len(rest)
	r.BatchType, r.BatchCount = typ, n
	r.children = spanOf(base+3, end-3)
	if n > 0 {
		if c, _, err := nextBatchChild(msg[3:end]); err == nil && c.Kind == BatchChildPrepared {
			// kind [byte], id [short bytes], count [short], values
			r.id = spanOf(base+3+1+2, len(c.ID))
			r.values = spanOf(base+3+1+2+len(c.ID)+2, len(c.values))
			r.nvalues = int32(c.ValueCount)
		}
	}
	r.params(f, base, end)
}

// Body returns the message: the frame's body past its custom payload.
func (r *Request) Body(f []byte) []byte { return f[r.body:] }

// Text returns the query string of a QUERY or PREPARE.
func (r *Request) Text(f []byte) []byte { return r.text.in(f) }

// ID returns the statement id of an EXECUTE, or of a BATCH's first child
// when it is a prepared statement; nil otherwise.
func (r *Request) ID(f []byte) []byte { return r.id.in(f) }

// ResultMetadataID returns a v5 EXECUTE's result metadata id (nil before
// v5): the shape of the rows the client expects.
func (r *Request) ResultMetadataID(f []byte) []byte { return r.resultID.in(f) }

// Keyspace returns the keyspace a v5 request names for itself (nil if none).
func (r *Request) Keyspace(f []byte) []byte { return r.keyspace.in(f) }

// HasParams reports whether the request's query parameters parsed: only
// then are Consistency, QueryFlags, Values and WithTimestamp of use.
func (r *Request) HasParams() bool { return r.flags != 0 }

// HasTimestamp reports whether the request carries a default timestamp.
func (r *Request) HasTimestamp() bool { return r.QueryFlags&QueryFlagDefaultTimestamp != 0 }

// Values returns, in dst[k], the raw bytes of the bound value at position
// indexes[k] of an EXECUTE, or of a BATCH's first prepared child, with
// ExecuteValues' rules for null, unset and named values.
func (r *Request) Values(f []byte, indexes []uint16, dst [][]byte) ([][]byte, error) {
	if !r.HasParams() || (r.Opcode == OpBatch && r.id.end == 0) {
		return dst[:0], fmt.Errorf("frame: %s has no values to route by: %w", OpcodeName(r.Opcode), ErrWrongKind)
	}
	if r.Opcode != OpBatch && r.QueryFlags&QueryFlagNamesForValues != 0 && r.nvalues > 0 {
		return dst[:0], fmt.Errorf("frame: %s values: %w", OpcodeName(r.Opcode), ErrNamedValues)
	}
	return pickValues(r.values.in(f), int(r.nvalues), indexes, dst)
}

// Children returns an iterator over a BATCH's children (empty for other
// requests, or a BATCH whose children did not parse).
func (r *Request) Children(f []byte) BatchIter {
	return BatchIter{rest: r.children.in(f), left: r.BatchCount}
}

// ClearSkipMetadata clears the skip-metadata flag of a QUERY or EXECUTE in
// f itself, so that the rows come back with their column names.
func (r *Request) ClearSkipMetadata(f []byte) {
	if !r.HasParams() || r.Opcode == OpBatch {
		return
	}
	r.QueryFlags &^= QueryFlagSkipMetadata
	if r.Version >= V5 {
		binary.BigEndian.PutUint32(f[r.flags:], r.QueryFlags)
	} else {
		f[r.flags] = byte(r.QueryFlags)
	}
}

// WithTimestamp appends to dst the frame f with the default timestamp ts
// (microseconds) added to its QUERY, EXECUTE or BATCH message, as
// AppendWithTimestamp does, fixing the header's length; r then describes
// the appended frame, out[len(dst):]. If f has a timestamp already, added is false and
// dst is returned unchanged. It fails when the parameters did not parse.
func (r *Request) WithTimestamp(dst, f []byte, ts int64) (out []byte, added bool, err error) {
	if !r.HasParams() {
		return dst, false, fmt.Errorf("frame: %s parameters did not parse: %w", OpcodeName(r.Opcode), ErrMalformedBody)
	}
	if ts == math.MinInt64 {
		return dst, false, fmt.Errorf("frame: default timestamp -2^63: %w", ErrMalformedBody)
	}
	if r.HasTimestamp() {
		return dst, false, nil
	}
	start := len(dst)
	dst = insertTimestamp(dst, f, r.Version, r.QueryFlags, int(r.flags), int(r.tsAt), ts)
	binary.BigEndian.PutUint32(dst[start+5:start+9], uint32(len(dst)-start-HeaderLen))
	r.QueryFlags |= QueryFlagDefaultTimestamp
	r.Length += 8
	// Only the keyspace lies past the timestamp.
	if r.keyspace.off >= r.tsAt {
		r.keyspace.off += 8
		r.keyspace.end += 8
	}
	return dst, true, nil
}
