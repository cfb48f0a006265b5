package fakenode

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/cqlgate/cqlgate/pkg/frame"
)

// conn is one client connection. Its reader goroutine (serve) reads,
// decides and answers; only delayed answers are written from timer
// goroutines, so the writer is behind wmu.
type conn struct {
	n    *Node
	nc   net.Conn
	idx  int
	rd   *frame.Reader
	done chan struct{}
	once sync.Once

	// Reader goroutine only.
	keyspace string
	scratch  []byte

	// stall, when not nil, holds this connection's reader until closed
	// (by Node.Resume). Guarded by n.mu.
	stall chan struct{}

	wmu sync.Mutex
	w   *frame.Writer
	seg bool // segment framing is on

	tmu     sync.Mutex
	pending map[*time.Timer]struct{}
	timers  sync.WaitGroup // delayed answers scheduled and not yet run or stopped
}

func newConn(n *Node, nc net.Conn, idx int) *conn {
	return &conn{
		n:       n,
		nc:      nc,
		idx:     idx,
		rd:      frame.NewReader(nc, n.cfg.MaxFrame),
		w:       frame.NewWriter(nc),
		done:    make(chan struct{}),
		pending: map[*time.Timer]struct{}{},
	}
}

// kill closes the connection once, with an RST when rst is set. It takes
// no lock, so it may run under n.mu.
func (c *conn) kill(rst bool) {
	c.once.Do(func() {
		if rst {
			reset(c.nc)
		} else {
			c.nc.Close()
		}
		close(c.done)
	})
}

// serve reads and answers frames until the connection fails or is
// closed; like Cassandra it flushes when its input runs dry.
func (c *conn) serve() {
	defer c.n.wg.Done()
	defer c.finish()
	for {
		b, err := c.rd.ReadFrame()
		if err != nil {
			c.readError(err)
			return
		}
		ok := c.handle(b)
		b.Release()
		if !ok {
			return
		}
		if c.rd.Buffered() == 0 && !c.flush() {
			return
		}
	}
}

// finish closes the connection and waits for its delayed answers.
func (c *conn) finish() {
	c.kill(false)
	c.tmu.Lock()
	for t := range c.pending {
		if t.Stop() {
			c.timers.Done()
		}
	}
	clear(c.pending)
	c.tmu.Unlock()
	c.timers.Wait()
	c.n.removeConn(c)
}

// readError answers what can be answered of a bad frame before closing.
func (c *conn) readError(err error) {
	var uv *frame.UnsupportedVersionError
	var tl *frame.FrameTooLargeError
	switch {
	case errors.As(err, &uv):
		c.write(frame.AppendError(nil, c.n.cfg.MaxVersion, uv.Header.Stream, frame.ErrCodeProtocol,
			fmt.Sprintf("Invalid or unsupported protocol version (%d); highest supported version is %d",
				uv.Header.Version, c.n.cfg.MaxVersion)))
	case errors.As(err, &tl):
		c.write(frame.AppendError(nil, tl.Header.Version, tl.Header.Stream, frame.ErrCodeProtocol,
			fmt.Sprintf("Request is too big: length %d exceeds maximum allowed length %d", tl.Header.Length, tl.Max)))
	default:
		return
	}
	c.flush()
}

func (c *conn) write(f []byte) bool {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.w.WriteFrame(f) == nil
}

func (c *conn) flush() bool {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.w.Flush() == nil
}

// handle deals with one request frame; false means the connection is done.
func (c *conn) handle(b *frame.Buf) bool {
	n := c.n
	h := frame.ParseHeader(b.B)
	body := frame.Body(b.B)
	if h.Version > n.cfg.MaxVersion {
		c.write(frame.AppendError(nil, n.cfg.MaxVersion, h.Stream, frame.ErrCodeProtocol,
			fmt.Sprintf("Invalid or unsupported protocol version (%d); highest supported version is %d",
				h.Version, n.cfg.MaxVersion)))
		c.flush()
		return false
	}

	// The hot path (no hook, no stall, a QUERY answered before) takes no
	// lock shared between connections: the benchmarks measure the
	// proxy's CPU, not this node's, and a contended mutex costs futex
	// calls.
	n.stats.requests[h.Opcode].add(c.idx)
	var hook func(Request) Action
	var seq int
	if hp := n.hook.Load(); hp != nil {
		hook = *hp
		seq = int(n.seq.Add(1))
	}
	held := n.holding.Load()
	if hook == nil && !held && h.Opcode == frame.OpQuery {
		if q, err := frame.QueryString(body); err == nil {
			if a, ok := n.cachedQuery(h.Version, q, c.idx); ok {
				c.scratch = frame.AppendFrame(c.scratch[:0], h.Version, true, 0, h.Stream, frame.OpResult, a)
				return c.deliver(Answer, c.scratch, false)
			}
		}
	}
	if held && !c.waitResumed() {
		return false
	}

	var act Action
	if hook != nil {
		act = hook(c.request(h, body, seq))
	}
	if act.Fault == Stall {
		c.n.mu.Lock()
		if c.stall == nil {
			c.stall = make(chan struct{})
			c.n.holding.Store(true)
		}
		c.n.mu.Unlock()
		if !c.waitResumed() {
			return false
		}
		act = Action{}
	}
	if act.Fault == Reset && act.Delay <= 0 {
		c.kill(true)
		return false
	}

	c.scratch = c.scratch[:0]
	startup := h.Opcode == frame.OpStartup
	if act.Fault != Reset && (act.Error == nil || act.Executed) {
		c.scratch = c.respond(c.scratch, h, body)
	}
	if act.Error != nil {
		c.scratch = frame.AppendErrorBody(c.scratch[:0], h.Version, h.Stream, act.Error.Code, act.Error.Message, act.Error.Extra)
		startup = false
	}

	if startup {
		// Segment framing starts right after the answer, so nothing
		// may be read before it is written: a delay is waited for here.
		if act.Delay > 0 && !c.wait(act.Delay) {
			return false
		}
		return c.deliver(act.Fault, c.scratch, h.Version >= frame.V5 && (frame.Opcode(c.scratch) == frame.OpReady || frame.Opcode(c.scratch) == frame.OpAuthenticate))
	}
	if act.Delay > 0 {
		c.later(act.Delay, act.Fault, append([]byte(nil), c.scratch...))
		return true
	}
	return c.deliver(act.Fault, c.scratch, false)
}

// waitResumed holds the reader while the node or this connection is
// stalled; false means the connection was closed meanwhile.
func (c *conn) waitResumed() bool {
	for {
		c.n.mu.Lock()
		var ch chan struct{}
		if c.n.stalled {
			ch = c.n.resume
		} else if c.stall != nil {
			ch = c.stall
		}
		c.n.mu.Unlock()
		if ch == nil {
			return true
		}
		select {
		case <-ch:
		case <-c.done:
			return false
		}
	}
}

// wait waits d on a timer; false if the connection closed first.
func (c *conn) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.done:
		return false
	}
}

// later runs deliver for f after d on a timer that finish stops or waits
// for, so no goroutine outlives the connection.
func (c *conn) later(d time.Duration, fault Fault, f []byte) {
	c.tmu.Lock()
	defer c.tmu.Unlock()
	select {
	case <-c.done:
		return
	default:
	}
	c.timers.Add(1)
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		defer c.timers.Done()
		c.tmu.Lock()
		delete(c.pending, t)
		c.tmu.Unlock()
		if c.deliver(fault, f, false) {
			c.flush()
		}
	})
	c.pending[t] = struct{}{}
}

// deliver sends the answer f according to fault; segments switches to v5
// framing after it. false means the connection is done.
func (c *conn) deliver(fault Fault, f []byte, segments bool) bool {
	switch fault {
	case NoAnswer:
		return true
	case Reset, ResetAfterExecute:
		c.kill(true)
		return false
	case HalfAnswer:
		c.halfAnswer(f)
		return false
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.w.WriteFrame(f) != nil {
		return false
	}
	if segments {
		if c.w.Flush() != nil {
			return false
		}
		c.w.EnableSegments(frame.CompressionNone)
		c.rd.EnableSegments(frame.CompressionNone) // only ever on the reader goroutine
		c.seg = true
	}
	return true
}

// halfAnswer writes what is buffered, then the first half of f's wire
// bytes, then closes with a FIN (an RST would let the kernel drop the
// half frame unsent).
func (c *conn) halfAnswer(f []byte) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.w.Flush() != nil {
		return
	}
	var wire bytes.Buffer
	w := frame.NewWriter(&wire)
	if c.seg {
		w.EnableSegments(frame.CompressionNone)
	}
	if w.WriteFrame(f) == nil && w.Flush() == nil {
		_, _ = c.nc.Write(wire.Bytes()[:wire.Len()/2])
	}
	c.kill(false)
}

// request describes a frame for the hook.
func (c *conn) request(h frame.Header, body []byte, seq int) Request {
	r := Request{Conn: c.idx, Seq: seq, Version: h.Version, Opcode: h.Opcode, Stream: h.Stream, Keyspace: c.keyspace}
	switch h.Opcode {
	case frame.OpQuery, frame.OpPrepare:
		q, _ := frame.QueryString(body)
		r.Query = string(q)
		if h.Opcode == frame.OpPrepare {
			if ks, _ := frame.PrepareKeyspace(h.Version, body); ks != "" {
				r.Keyspace = ks
			}
		}
	case frame.OpExecute:
		id, _ := frame.ExecuteID(body)
		r.PreparedID = append([]byte(nil), id...)
		c.n.mu.Lock()
		if p := c.n.prepared[string(id)]; p != nil {
			r.Query = p.query
		}
		c.n.mu.Unlock()
	}
	return r
}
