// Package backend holds the proxy's connections to Cassandra: one Conn
// multiplexes up to 32,768 requests over one TCP connection by stream id, a
// Pool keeps connections to every node for one protocol version and keyspace,
// and a Cluster discovers the nodes and hands out pools.
//
// It knows nothing of clients, of the limiter or of what a request means:
// it must not decide whether a request may be sent again (the Handler
// does, from OnFailure's sent flag) nor block a Handler's caller.
package backend

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cqlgate/cqlgate/pkg/frame"
	"github.com/cqlgate/cqlgate/pkg/netio"
)

// MaxStreams is the number of stream ids a v3+ connection offers (0..32767).
const MaxStreams = 1 << 15

// DefaultWriteTimeout is DialConfig.WriteTimeout when left zero: a node that
// has read nothing of a write for this long is not coming back in time for
// any request on the connection.
const DefaultWriteTimeout = 10 * time.Second

var (
	// ErrConnClosed is returned by Send once the connection is closing.
	ErrConnClosed = errors.New("backend: connection closed")
	// ErrNoStreams is returned by Send when all stream ids are in use.
	ErrNoStreams = errors.New("backend: no free stream id")
)

// Handler receives the outcome of one request sent on a Conn. Exactly one of
// OnResponse and OnFailure is called, exactly once, on one of the
// connection's goroutines; OnTimeout may come before it. None may block.
type Handler interface {
	// OnTimeout reports that the request outlived its deadline. The stream
	// stays reserved (an orphan) and the request frame may still be in use
	// until OnResponse or OnFailure follows, when the stream is freed. It is
	// called with the connection locked, which orders it before that final
	// call: it must not call the Conn.
	OnTimeout(c *Conn)
	// OnResponse hands over the response frame; the handler owns resp and
	// must Release it.
	OnResponse(c *Conn, resp *frame.Buf)
	// OnFailure reports that the connection died before a response arrived.
	// sent is false only when the request provably never left the proxy, so
	// it is safe to send it elsewhere whatever it does.
	OnFailure(c *Conn, err error, sent bool)
}

// Waker is work a Handler defers with Conn.Defer.
type Waker interface{ Wake() }

// ServerError is an ERROR response Cassandra gave during a connection's
// handshake (STARTUP, USE, REGISTER).
type ServerError struct {
	Code    int32
	Message string
	// Body is the raw ERROR body, so it can be relayed to a client as is.
	Body []byte
}

func (e *ServerError) Error() string {
	return fmt.Sprintf("cassandra error 0x%04x: %s", e.Code, e.Message)
}

// DialConfig says how to open a Conn.
type DialConfig struct {
	Addr    string // host:port actually dialled
	Version byte   // native protocol version; 5 switches to segment framing after STARTUP
	// Keyspace, when set, is made current with USE right after STARTUP.
	Keyspace string
	// Events, when set, are REGISTERed; EVENT frames then go to OnEvent.
	Events  []string
	OnEvent func(*frame.Buf)
	// Timeout bounds the dial and the whole handshake.
	Timeout time.Duration
	// MaxFrame is the largest response body accepted.
	MaxFrame int
	// RequestTimeout, when positive, is the deadline of every request sent
	// on the connection, enforced by ExpireRequests.
	RequestTimeout time.Duration
	// WriteTimeout bounds each write to the socket once the connection is
	// started (0: DefaultWriteTimeout; negative: none). A node that stops
	// reading (its receive window full) would otherwise block the writer
	// for good, and with it every sender flushing to the connection; on
	// timeout the connection fails instead. A write gets between half and
	// all of it: the deadline is moved only when half of it is used up.
	WriteTimeout time.Duration
	// TLS, when set, wraps the connection in TLS. An empty ServerName is
	// replaced by the host of Addr (see tlsconfig.ForAddr).
	TLS *tls.Config
	// Credentials log in when the node answers STARTUP with AUTHENTICATE;
	// without them Dial then fails with ErrAuthRequired.
	Credentials *Credentials
	// RequireAuth makes Dial fail with ErrAuthNotRequired when the node
	// answers STARTUP with READY: a login check must not pass on a node
	// that checks nothing.
	RequireAuth bool
	// Instance, when set, is sent in STARTUP as InstanceOption.
	Instance string
}

// Conn is one connection to one Cassandra node. Send may be called from any
// goroutine. The connection has two goroutines of its own, the read loop
// and the flusher (Kick); writes are combined by a netio.Outbox: whichever
// sender finds the connection idle writes everything queued, so a lone
// request costs no goroutine hand-off and a burst goes out in one syscall.
type Conn struct {
	nc      net.Conn
	addr    string
	version byte
	in      *frame.StampedReader
	rw      io.ReadWriter // under in: the socket's reads, with their arrival stamps
	r       *frame.Reader
	onEvent func(*frame.Buf)

	mu sync.Mutex
	// out holds the frames waiting to be written, under mu; the goroutine
	// writing them owns w.
	out     netio.Outbox
	w       *frame.Writer
	free    []int16 // free stream ids, used as a stack
	pending [MaxStreams]slot
	closed  bool
	err     error

	timeout time.Duration
	orphans int // timed-out streams still reserved; guarded by mu
	// timed links the slots of requests that have a deadline and have not
	// timed out yet (through slot.prev/next; -1 ends it), so that expiry
	// looks at what is in flight, not at every stream id. minDeadline is
	// at most the earliest deadline among them (it may be stale-early
	// after completions), so most passes look at nothing. Guarded by mu.
	timed       int16
	minDeadline int64

	writeTimeout time.Duration
	// writeDeadline (unix nanos) is the write deadline set on the socket;
	// only the goroutine writing out's batch touches it.
	writeDeadline int64

	inflight atomic.Int32
	// dead is set by fail, before the socket is closed: from then on the
	// connection takes no request, and pools must not pick it. Unlike
	// closed it is read without the lock, on every pick.
	dead     atomic.Bool
	lastRead atomic.Int64 // unix nanos of the last frame read
	// heartbeatPending is set while an OPTIONS heartbeat awaits its answer.
	heartbeatPending atomic.Bool
	done             chan struct{}
	// OnClose, if set before Start, is called once after every pending
	// request has been failed.
	onClose func(*Conn, error)
	// deferred is what handlers asked to run once the read loop has no
	// more input buffered; only the read loop touches it.
	deferred []Waker
	// written is the answered request's slot.written, for WrittenAt (read
	// loop only).
	written int64
	// kick wakes the flusher goroutine (see Kick).
	kick chan struct{}
}

type slot struct {
	h        Handler
	deadline int64 // unix nanos after which the request times out; 0 = none
	written  int64 // unix nanos when the writer took the frame; 0 = not yet
	sent     bool
	orphan   bool // timed out: OnTimeout was called, the answer is still awaited
	timed    bool // linked in Conn.timed
	// prev and next link the slot in Conn.timed.
	prev, next int16
}

// Dial connects to cfg.Addr and performs the handshake synchronously. The
// returned Conn is not reading yet: call Start.
func Dial(ctx context.Context, cfg DialConfig) (*Conn, error) {
	if cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", cfg.Addr, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	if nc, err = startTLS(ctx, nc, cfg); err != nil {
		return nil, err
	}
	// The handshake reads and writes under the socket's deadline only: a
	// cancelled ctx moves it to now, so that a login given up on (another
	// node answered a role's first login first, the client went away)
	// ends at once rather than at the timeout.
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
	rw := netio.Wrap(nc)
	// The limiter's latency samples end when an answer arrived, not when
	// this proxy got round to reading it (netio/arrival.go).
	netio.ArrivalStamps(rw)
	in := frame.NewStampedReader(rw)
	c := &Conn{
		nc:           nc,
		addr:         cfg.Addr,
		version:      cfg.Version,
		in:           in,
		rw:           rw,
		r:            frame.NewReader(in, cfg.MaxFrame),
		w:            frame.NewWriter(rw),
		onEvent:      cfg.OnEvent,
		timeout:      cfg.RequestTimeout,
		done:         make(chan struct{}),
		writeTimeout: cfg.WriteTimeout,
		kick:         make(chan struct{}, 1),
	}
	c.out.Init(&c.mu, c.w, c.outHooks())
	c.timed, c.minDeadline = -1, math.MaxInt64
	c.free = make([]int16, 0, MaxStreams)
	for i := MaxStreams - 1; i >= 0; i-- {
		c.free = append(c.free, int16(i))
	}
	err = c.handshake(cfg)
	if !stop() && err == nil {
		err = fmt.Errorf("startup with %s: %w", cfg.Addr, context.Cause(ctx))
	}
	if err != nil {
		nc.Close()
		var se *ServerError
		if ctx.Err() != nil && !errors.As(err, &se) {
			err = fmt.Errorf("%w (%w)", err, context.Cause(ctx))
		}
		return nil, err
	}
	_ = nc.SetDeadline(time.Time{})
	if c.writeTimeout == 0 {
		c.writeTimeout = DefaultWriteTimeout
	}
	c.lastRead.Store(time.Now().UnixNano())
	return c, nil
}

// handshake runs STARTUP, USE and REGISTER one after another on stream 0,
// before the read loop exists.
func (c *Conn) handshake(cfg DialConfig) error {
	opts := map[string]string{
		"CQL_VERSION": "3.0.0",
		"DRIVER_NAME": driverName,
		// Without it Cassandra 4.0+ protects itself from a connection over
		// native_transport_max_request_data_in_flight (or 4.1's rate limit)
		// by no longer reading it; on a connection shared by many clients
		// that freezes them all. With it, the server answers OVERLOADED on
		// the offending stream and keeps reading, and the proxy retries
		// elsewhere. The server compares the value with "1"; older versions
		// ignore keys they do not know.
		"THROW_ON_OVERLOAD": "1",
	}
	if cfg.Instance != "" {
		// Cassandra keeps options it does not know among the
		// connection's client_options (system_views.clients).
		opts[InstanceOption] = cfg.Instance
	}
	startup := frame.AppendStartup(nil, c.version, 0, opts)
	resp, err := c.roundTrip(startup)
	if err != nil {
		return fmt.Errorf("startup with %s: %w", c.addr, err)
	}
	// v5 framing starts right after READY or AUTHENTICATE (spec v5 2.3.1),
	// so the whole login exchange is in segments.
	if c.version >= frame.V5 {
		c.r.EnableSegments(frame.CompressionNone)
		c.w.EnableSegments(frame.CompressionNone)
	}
	switch frame.Opcode(resp) {
	case frame.OpReady:
		if cfg.RequireAuth {
			return fmt.Errorf("startup with %s: %w", c.addr, ErrAuthNotRequired)
		}
	case frame.OpAuthenticate:
		if err := c.authenticate(cfg.Credentials, frame.Body(resp)); err != nil {
			return err
		}
	default:
		return fmt.Errorf("startup with %s: unexpected %s", c.addr, frame.OpcodeName(frame.Opcode(resp)))
	}
	if cfg.Keyspace != "" {
		q := frame.AppendQuery(nil, c.version, 0, "USE "+QuoteIdent(cfg.Keyspace), 0x0001, 0)
		if _, err := c.roundTrip(q); err != nil {
			return fmt.Errorf("use keyspace %q on %s: %w", cfg.Keyspace, c.addr, err)
		}
	}
	if len(cfg.Events) > 0 {
		if _, err := c.roundTrip(frame.AppendRegister(nil, c.version, 0, cfg.Events)); err != nil {
			return fmt.Errorf("register for events on %s: %w", c.addr, err)
		}
	}
	return nil
}

// roundTrip writes one frame and reads frames until its answer; it turns an
// ERROR answer into a *ServerError.
func (c *Conn) roundTrip(req []byte) ([]byte, error) {
	if err := c.w.WriteFrame(req); err != nil {
		return nil, err
	}
	if err := c.w.Flush(); err != nil {
		return nil, err
	}
	for {
		b, err := c.r.ReadFrame()
		if err != nil {
			return nil, err
		}
		f := append([]byte(nil), b.B...)
		b.Release()
		if frame.Stream(f) != frame.Stream(req) {
			continue // an event racing the handshake
		}
		if frame.Opcode(f) == frame.OpError {
			code, msg, _ := frame.ErrorCode(frame.Body(f))
			return nil, &ServerError{Code: code, Message: msg, Body: frame.Body(f)}
		}
		return f, nil
	}
}

// Start launches the read loop. onClose, if not nil, is called once when the
// connection has died and every pending request has been failed.
func (c *Conn) Start(onClose func(*Conn, error)) {
	c.onClose = onClose
	go c.readLoop()
	go c.flushLoop()
}

// Kick asks the connection's flusher goroutine to write what is queued.
// Callers that are not in a read burst of their own (a request admitted
// from a queue, say) use it instead of Flush: requests queued by many such
// callers at once then share one syscall.
func (c *Conn) Kick() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Wake is Kick, for Defer: a request queued on c by a handler of another
// connection's answer is written once that connection's read loop has
// handed out its burst of answers, with the rest of what the burst queued.
func (c *Conn) Wake() { c.Kick() }

func (c *Conn) flushLoop() {
	for {
		select {
		case <-c.kick:
			c.Flush()
		case <-c.done:
			return
		}
	}
}

// Addr returns the address this connection dialled.
func (c *Conn) Addr() string { return c.addr }

// Version returns the connection's protocol version.
func (c *Conn) Version() byte { return c.version }

// InFlight returns the number of requests awaiting a response.
func (c *Conn) InFlight() int { return int(c.inflight.Load()) }

// Dead reports whether the connection has failed or been closed. It turns
// true before the pending requests are failed, so a pool never hands out a
// connection whose in-flight count is dropping because it died.
func (c *Conn) Dead() bool { return c.dead.Load() }

// Send queues f like Queue and flushes the connection.
func (c *Conn) Send(f []byte, h Handler) error {
	if err := c.Queue(f, h); err != nil {
		return err
	}
	c.Flush()
	return nil
}

// Queue assigns a free stream id to the request frame f (rewriting its
// header in place), registers h for the answer and queues f; it is written
// by the next Flush, on this or any other goroutine. f must stay untouched
// until h is called. On error nothing was queued and h is never called.
func (c *Conn) Queue(f []byte, h Handler) error {
	var deadline int64
	if c.timeout > 0 {
		deadline = time.Now().Add(c.timeout).UnixNano()
	}
	return c.QueueBy(f, h, deadline)
}

// QueueBy is Queue with the request's own deadline (unix nanoseconds; 0
// means none), for requests whose time started before they were queued:
// time spent waiting for a permit counts against the same deadline.
func (c *Conn) QueueBy(f []byte, h Handler, deadline int64) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrConnClosed
	}
	n := len(c.free)
	if n == 0 {
		c.mu.Unlock()
		return ErrNoStreams
	}
	id := c.free[n-1]
	c.free = c.free[:n-1]
	c.pending[id] = slot{h: h, deadline: deadline}
	if deadline != 0 {
		c.link(id)
	}
	frame.SetStream(f, id)
	c.out.PushLocked(netio.Out{F: f})
	// Counted under the lock: another goroutine may flush f, and its
	// answer be counted off, as soon as the lock is released.
	c.inflight.Add(1)
	c.mu.Unlock()
	return nil
}

// Flush writes the queued frames. If another goroutine is writing already,
// it returns at once: that writer picks up what was queued. So a burst of
// requests from many clients costs one syscall, and a lone request costs no
// goroutine hand-off. A failed write (or one stalled past half the write
// timeout) fails the connection.
func (c *Conn) Flush() {
	err := c.out.Flush()
	if err == nil {
		return
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		err = fmt.Errorf("write to %s stalled for over %s (the node is not reading): %w", c.addr, c.writeTimeout/2, err)
	} else {
		err = fmt.Errorf("write to %s: %w", c.addr, err)
	}
	c.fail(err)
}

// outHooks are what the connection does around its Outbox's writes.
func (c *Conn) outHooks() netio.Hooks {
	return netio.Hooks{Taken: c.taken, BeforeWrite: c.armWriteDeadline}
}

// taken marks the frames of a batch about to be written as sent: from now
// on a failure may have reached the node. It runs with c.mu held. One clock
// read per batch stamps when they went to the socket (WrittenAt), whatever
// they waited for the writer before.
func (c *Conn) taken(batch []netio.Out) {
	now := time.Now().UnixNano()
	for _, f := range batch {
		s := &c.pending[frame.Stream(f.F)]
		s.sent, s.written = true, now
	}
}

// armWriteDeadline makes sure the coming write has at least half of
// writeTimeout to complete. It is called by the writer only. Moving the
// deadline on every flush would cost a clock read and a timer update per
// flush; moving it only when half of it has passed costs the clock read.
func (c *Conn) armWriteDeadline() {
	if c.writeTimeout <= 0 {
		return
	}
	now := time.Now().UnixNano()
	if c.writeDeadline-now >= int64(c.writeTimeout/2) {
		return
	}
	c.writeDeadline = now + int64(c.writeTimeout)
	// An error here means the socket is closed: the write will say so.
	_ = c.nc.SetWriteDeadline(time.Unix(0, c.writeDeadline))
}

// Close closes the connection; pending requests fail with ErrConnClosed.
func (c *Conn) Close() { c.fail(ErrConnClosed) }

// fail marks the connection closed and closes the socket, which ends the
// read loop; the read loop then fails the pending requests.
func (c *Conn) fail(err error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	c.dead.Store(true)
	c.err = err
	// Frames still queued stay unsent: failPending reports them so.
	c.out.CloseLocked()
	c.mu.Unlock()
	close(c.done)
	c.nc.Close()
}

// Err returns why the connection closed, or nil while it is open.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *Conn) readLoop() {
	var last time.Time
	for {
		b, err := c.r.ReadFrame()
		if err != nil {
			var tooLarge *frame.FrameTooLargeError
			if errors.As(err, &tooLarge) && tooLarge.Header.Stream >= 0 {
				// The body was skipped, the connection is in sync: only
				// this request fails.
				c.complete(tooLarge.Header.Stream, nil, err)
				continue
			}
			c.fail(fmt.Errorf("read from %s: %w", c.addr, err))
			break
		}
		if at := c.in.At(); !at.Equal(last) {
			c.lastRead.Store(at.UnixNano())
			last = at
		}
		stream := frame.Stream(b.B)
		if stream < 0 {
			if c.onEvent != nil && frame.Opcode(b.B) == frame.OpEvent {
				c.onEvent(b)
			} else {
				b.Release()
			}
			continue
		}
		c.complete(stream, b, nil)
		if c.r.Buffered() == 0 {
			c.runDeferred()
		}
	}
	c.runDeferred()
	c.failPending()
}

// ReadAt returns when the socket read that completed the answer being
// handled returned: the time its bytes arrived, with no clock read per
// answer. It may only be called from OnResponse.
func (c *Conn) ReadAt() time.Time { return c.in.At() }

// ArrivedAt returns when the bytes of that read arrived, as the kernel
// stamped them: ReadAt less the time they waited for this proxy to read
// them, which grows when the proxy is short of CPU and is none of the
// node's latency. Without a stamp (not Linux, TLS, the first answers after
// the socket asked for stamps) it is ReadAt. Only from OnResponse.
func (c *Conn) ArrivedAt() time.Time {
	at := c.in.At()
	if k, ok := netio.Arrived(c.rw); ok {
		// The stamp is wall-clock time: the wait is measured against
		// at's wall clock and taken off at, which keeps its monotonic
		// reading. A wait out of range is a clock step: ignored.
		if wait := at.Sub(k); wait > 0 && wait < time.Second {
			return at.Add(-wait)
		}
	}
	return at
}

// WrittenAt returns when the writer took the request being answered off the
// connection's queue to write it to the socket: unlike the time it was
// queued, it leaves out the wait for the writer, which grows with the
// proxy's own load rather than Cassandra's. It may only be called from
// OnResponse.
func (c *Conn) WrittenAt() time.Time { return time.Unix(0, c.written) }

// Defer asks the read loop to call w.Wake once it has handled every answer
// already read from the socket, before it blocks for more. It may only be
// called from OnResponse. A handler that hands answers to another goroutine
// uses it to wake that goroutine once per burst instead of once per answer.
func (c *Conn) Defer(w Waker) {
	// A burst often asks for the same wake-up many times in a row.
	if k := len(c.deferred); k > 0 && c.deferred[k-1] == w {
		return
	}
	c.deferred = append(c.deferred, w)
}

func (c *Conn) runDeferred() {
	for i, w := range c.deferred {
		w.Wake()
		c.deferred[i] = nil
	}
	c.deferred = c.deferred[:0]
}

// complete frees stream and hands the response (or err) to its handler. A
// response for a stream nobody waits on is dropped.
func (c *Conn) complete(stream int16, b *frame.Buf, err error) {
	c.mu.Lock()
	s := c.pending[stream]
	if s.h == nil {
		c.mu.Unlock()
		if b != nil {
			b.Release()
		}
		return
	}
	if s.timed {
		c.unlink(stream)
	}
	c.pending[stream] = slot{}
	c.free = append(c.free, stream)
	if s.orphan {
		c.orphans--
	}
	c.inflight.Add(-1)
	c.mu.Unlock()
	if err != nil {
		s.h.OnFailure(c, err, true)
		return
	}
	c.written = s.written
	s.h.OnResponse(c, b)
}

// failPending runs once the socket is closed: it waits until no sender is
// writing (so no frame is being read by a writer any more), then fails every
// pending request. Requests that never reached the writer are reported as
// unsent, so callers may safely send them elsewhere.
func (c *Conn) failPending() {
	c.mu.Lock()
	c.out.WaitIdleLocked()
	err := c.err
	var failed []slot
	for i := range c.pending {
		if c.pending[i].h != nil {
			failed = append(failed, c.pending[i])
		}
		c.pending[i] = slot{}
	}
	c.orphans = 0
	c.timed, c.minDeadline = -1, math.MaxInt64
	// Counted off under the lock, like every other change to the pending
	// set; no request can be queued any more.
	c.inflight.Add(-int32(len(failed)))
	c.mu.Unlock()
	for _, s := range failed {
		s.h.OnFailure(c, err, s.sent)
	}
	if c.onClose != nil {
		c.onClose(c, err)
	}
}

// QuoteIdent quotes a CQL identifier so it is taken verbatim.
func QuoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}
