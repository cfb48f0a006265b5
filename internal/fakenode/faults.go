package fakenode

import (
	"encoding/binary"
	"sync/atomic"
	"time"

	"github.com/cqlgate/cqlgate/pkg/frame"
)

// Request is what a hook sees of one request read by the node.
type Request struct {
	Conn int // index of the connection on this node, 0 for the first accepted
	// Seq numbers, from 1, the requests the node read while a hook was
	// installed, all connections and opcodes (only then, so that the
	// hook-less hot path shares no counter between connections).
	Seq     int
	Version byte  // protocol version of the frame
	Opcode  byte  // frame.OpQuery, frame.OpExecute, ...
	Stream  int16 // stream id
	// Query is the text of a QUERY or PREPARE, and of an EXECUTE whose id
	// the node knows.
	Query string
	// PreparedID is the id of an EXECUTE.
	PreparedID []byte
	// Keyspace is the connection's keyspace (after USE), or the v5 PREPARE
	// keyspace.
	Keyspace string
}

// Fault is what happens to a request instead of a normal answer.
type Fault int

const (
	// Answer answers normally (after Action.Delay, with Action.Error if set).
	Answer Fault = iota
	// NoAnswer executes the request and never answers it; the stream
	// stays busy on the peer's side.
	NoAnswer
	// Reset resets the connection without executing the request, as if
	// it died before the request was read.
	Reset
	// ResetAfterExecute executes the request, then resets the connection
	// without answering: the peer cannot know the write was applied.
	ResetAfterExecute
	// HalfAnswer executes the request, writes the first half of its
	// answer and resets the connection.
	HalfAnswer
	// Stall executes nothing, answers nothing and stops reading this
	// connection (other connections go on) until Node.Resume. The request
	// is then handled as if it arrived at that moment, without the hook.
	Stall
)

// Action is a hook's verdict on a request. The zero Action answers normally
// at once.
type Action struct {
	// Delay postpones the answer (or the fault) by a timer; other
	// requests on the connection are still read and answered meanwhile,
	// so answers can come back out of order, as from Cassandra.
	Delay time.Duration
	Fault Fault
	// Error, when set, is the answer instead of the normal one.
	Error *Error
	// Executed counts a request answered with Error as executed anyway
	// (a WRITE_TIMEOUT after the write was applied on some replicas).
	// Without it an ERROR answer means "not executed".
	Executed bool
}

// Error is an ERROR answer: a code, a message and the code-specific fields
// already encoded.
type Error struct {
	Code    int32
	Message string
	Extra   []byte
}

// Overloaded is OVERLOADED (0x1001).
func Overloaded() *Error {
	return &Error{Code: frame.ErrCodeOverloaded, Message: "Server is in overloaded state. Cannot accept more requests at this point"}
}

// IsBootstrapping is IS_BOOTSTRAPPING (0x1002).
func IsBootstrapping() *Error {
	return &Error{Code: frame.ErrCodeIsBootstrapping, Message: "Cannot read from a bootstrapping node"}
}

// ServerError is SERVER_ERROR (0x0000) with msg.
func ServerError(msg string) *Error { return &Error{Code: frame.ErrCodeServer, Message: msg} }

// Invalid is INVALID (0x2200) with msg.
func Invalid(msg string) *Error { return &Error{Code: frame.ErrCodeInvalid, Message: msg} }

// Unprepared is UNPREPARED (0x2500) carrying id.
func Unprepared(id []byte) *Error {
	return &Error{Code: frame.ErrCodeUnprepared, Message: "Prepared query with ID " + hexID(id) + " not found",
		Extra: appendShortBytes(nil, id)}
}

// Unavailable is UNAVAILABLE (0x1000): <cl><required><alive>.
func Unavailable(consistency uint16, required, alive int32) *Error {
	e := &Error{Code: frame.ErrCodeUnavailable, Message: "Cannot achieve consistency level"}
	e.Extra = binary.BigEndian.AppendUint16(e.Extra, consistency)
	e.Extra = binary.BigEndian.AppendUint32(e.Extra, uint32(required))
	e.Extra = binary.BigEndian.AppendUint32(e.Extra, uint32(alive))
	return e
}

// ReadTimeout is READ_TIMEOUT (0x1200): <cl><received><blockfor><data_present>.
func ReadTimeout(consistency uint16, received, blockFor int32, dataPresent bool) *Error {
	e := &Error{Code: frame.ErrCodeReadTimeout, Message: "Operation timed out - received only some responses."}
	e.Extra = binary.BigEndian.AppendUint16(e.Extra, consistency)
	e.Extra = binary.BigEndian.AppendUint32(e.Extra, uint32(received))
	e.Extra = binary.BigEndian.AppendUint32(e.Extra, uint32(blockFor))
	var dp byte
	if dataPresent {
		dp = 1
	}
	e.Extra = append(e.Extra, dp)
	return e
}

// WriteTimeout is WRITE_TIMEOUT (0x1100): <cl><received><blockfor><writeType>
// and, for writeType "CAS" (v5 only, where the field exists), <contentions>.
// The contentions field is written whenever writeType is CAS, so use it
// with v5 connections only.
func WriteTimeout(consistency uint16, received, blockFor int32, writeType string) *Error {
	e := &Error{Code: frame.ErrCodeWriteTimeout, Message: "Operation timed out - received only some responses."}
	e.Extra = binary.BigEndian.AppendUint16(e.Extra, consistency)
	e.Extra = binary.BigEndian.AppendUint32(e.Extra, uint32(received))
	e.Extra = binary.BigEndian.AppendUint32(e.Extra, uint32(blockFor))
	e.Extra = binary.BigEndian.AppendUint16(e.Extra, uint16(len(writeType)))
	e.Extra = append(e.Extra, writeType...)
	if writeType == "CAS" {
		e.Extra = binary.BigEndian.AppendUint16(e.Extra, 0)
	}
	return e
}

func appendShortBytes(b, v []byte) []byte {
	v = v[:min(len(v), 0xffff)]
	b = binary.BigEndian.AppendUint16(b, uint16(len(v)))
	return append(b, v...)
}

func hexID(id []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2+2*len(id))
	out = append(out, "0x"...)
	for _, c := range id {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}

// stats are the node's counters, guarded by Node.mu. The maps hold
// pointers so that a hot-path increment for a known key looks the key up
// without converting it to a string (no allocation).
//
// The counters are atomic so that the hot path can count through a
// pointer it cached, without the lock.
type stats struct {
	requests  [256]counter
	execID    map[string]*counter
	execQuery map[string]*counter
	rejected  int
}

func newStats() stats {
	return stats{execID: map[string]*counter{}, execQuery: map[string]*counter{}}
}

// counter is an atomic counter split in cache-line sized shards, one per
// connection modulo shards: one shared atomic bouncing between the cores
// that serve two connections costs the benchmarks measurable CPU.
type counter struct {
	shards [4]struct {
		v atomic.Int64
		_ [56]byte
	}
}

func (c *counter) add(shard int) { c.shards[shard&3].v.Add(1) }

func (c *counter) load() int {
	var sum int64
	for i := range c.shards {
		sum += c.shards[i].v.Load()
	}
	return int(sum)
}

// counterOf returns k's counter in m (Node.mu held), creating it.
func counterOf[K string | []byte](m map[string]*counter, k K) *counter {
	p, ok := m[string(k)]
	if !ok {
		p = new(counter)
		m[string(k)] = p
	}
	return p
}

// Requests returns how many frames with opcode op the node has read.
func (n *Node) Requests(op byte) int {
	return n.stats.requests[op].load()
}

// Executions returns how many times the prepared statement id was executed
// (EXECUTE, or as a BATCH child).
func (n *Node) Executions(id []byte) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if p := n.stats.execID[string(id)]; p != nil {
		return p.load()
	}
	return 0
}

// QueryExecutions returns how many times the query text was executed, as
// a QUERY, a BATCH child, or through any prepared statement of that text.
func (n *Node) QueryExecutions(query string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if p := n.stats.execQuery[query]; p != nil {
		return p.load()
	}
	return 0
}

// Accepted returns how many connections the node accepted (rejected ones
// not included).
func (n *Node) Accepted() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.nconns
}

// Rejected returns how many connections RejectConnections reset.
func (n *Node) Rejected() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stats.rejected
}
