package frame

import (
	"fmt"
)

// BATCH types (spec section 4.1.7).
const (
	BatchLogged   byte = 0
	BatchUnlogged byte = 1
	BatchCounter  byte = 2
)

// Kinds of BATCH children.
const (
	BatchChildQuery    byte = 0 // a query string
	BatchChildPrepared byte = 1 // a prepared statement id
)

// Batch is a decoded BATCH body: its type, its children (walk them with
// Children) and the parameters that follow them. It aliases the body.
type Batch struct {
	Type  byte
	Count int // number of children
	// Params holds the consistency, flags, serial consistency, default
	// timestamp, keyspace (v5) and now-in-seconds (v5) of the batch.
	Params QueryParams

	children []byte
}

// BatchChild is one statement of a batch. Query and ID alias the body.
type BatchChild struct {
	Kind  byte   // BatchChildQuery or BatchChildPrepared
	Query []byte // the query string, for BatchChildQuery
	ID    []byte // the prepared statement id, for BatchChildPrepared
	// ValueCount is the number of bound values.
	ValueCount int

	values []byte
}

// Values returns, in dst[k], the raw bytes of the child's value at position
// indexes[k], with ExecuteValues' rules for null and unset values: with the
// PreparedMeta of a prepared child's ID, the partition-key values.
func (c *BatchChild) Values(indexes []uint16, dst [][]byte) ([][]byte, error) {
	return pickValues(c.values, c.ValueCount, indexes, dst)
}

// ParseBatch decodes a BATCH body of the given protocol version, checking
// every child. It does not allocate unless it fails.
//
// Children carry no value names, whatever the flags say: the names flag is
// unusable in batches (CASSANDRA-10246), and Cassandra itself reads child
// values as a plain list.
func ParseBatch(version byte, body []byte) (Batch, error) {
	version &^= ResponseBit
	typ, n, rest, err := batchChildren(body)
	if err != nil {
		return Batch{}, err
	}
	off := len(body) - len(rest)
	p, err := parseParams(version, body, off)
	if err != nil {
		return Batch{}, fmt.Errorf("BATCH parameters: %w", err)
	}
	return Batch{Type: typ, Count: n, Params: p, children: body[3:off:off]}, nil
}

// batchChildren checks the children of a BATCH body and returns its type,
// their count and the rest of the body after them.
func batchChildren(body []byte) (typ byte, n int, rest []byte, err error) {
	if len(body) < 3 {
		return 0, 0, body, short("BATCH type and count")
	}
	typ = body[0]
	count, rest, _ := readShort(body[1:])
	for i := range int(count) {
		if _, rest, err = nextBatchChild(rest); err != nil {
			return 0, 0, body, fmt.Errorf("BATCH child %d of %d: %w", i+1, count, err)
		}
	}
	return typ, int(count), rest, nil
}

// nextBatchChild decodes the child at the start of b.
func nextBatchChild(b []byte) (BatchChild, []byte, error) {
	var c BatchChild
	if len(b) < 1 {
		return c, b, short("kind")
	}
	c.Kind = b[0]
	rest := b[1:]
	var ok bool
	switch c.Kind {
	case BatchChildQuery:
		if c.Query, rest, ok = readLongBytes(rest); !ok {
			return c, b, short("query string")
		}
	case BatchChildPrepared:
		if c.ID, rest, ok = readShortBytes(rest); !ok {
			return c, b, short("statement id")
		}
	default:
		return c, b, fmt.Errorf("frame: kind %d: %w", c.Kind, ErrMalformedBody)
	}
	n, rest, ok := readShort(rest)
	if !ok {
		return c, b, short("value count")
	}
	start := rest
	rest, err := skipValues(rest, int(n), false)
	if err != nil {
		return c, b, err
	}
	c.ValueCount = int(n)
	c.values = start[: len(start)-len(rest) : len(start)-len(rest)]
	return c, rest, nil
}

// Children returns an iterator over the children of b, in order:
//
//	it := b.Children()
//	for c, ok := it.Next(); ok; c, ok = it.Next() { ... }
func (b *Batch) Children() BatchIter { return BatchIter{rest: b.children, left: b.Count} }

// BatchIter walks the children of a Batch. ParseBatch checked them, so the
// walk cannot fail.
type BatchIter struct {
	rest []byte
	left int
}

// Next returns the next child, or false after the last.
func (it *BatchIter) Next() (BatchChild, bool) {
	if it.left <= 0 {
		return BatchChild{}, false
	}
	c, rest, err := nextBatchChild(it.rest)
	if err != nil {
		// Unreachable for a Batch from ParseBatch; stop rather than loop.
		it.left = 0
		return BatchChild{}, false
	}
	it.rest, it.left = rest, it.left-1
	return c, true
}
