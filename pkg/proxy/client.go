package proxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/cqlgate/cqlgate/pkg/auth"
	"github.com/cqlgate/cqlgate/pkg/backend"
	"github.com/cqlgate/cqlgate/pkg/frame"
	"github.com/cqlgate/cqlgate/pkg/netio"
)

// client is one driver connection. Its own goroutine reads and handles
// requests (serve); a second one writes responses (writeLoop), so a client
// that reads slowly never stalls the backend read loops that hand it
// responses.
type client struct {
	p   *Proxy
	ep  *endpoint
	nc  net.Conn
	log *zap.Logger
	in  *frame.StampedReader // under r: when each burst of requests arrived
	r   *frame.Reader

	flow    uint64 // the limiter's flow id
	version byte   // set by STARTUP, then fixed
	// handshakeDeadline is when the handshake must be done by
	// (--handshake-timeout); evicted is set when the connection was closed
	// in its handshake to make room for a newer one.
	handshakeDeadline time.Time
	evicted           atomic.Bool

	who identity // the login role and what it runs as (roles.go)

	// keyspace and pool change when USE succeeds (on a backend goroutine)
	// and are read by serve.
	keyspace     atomic.Pointer[string]
	pool         atomic.Pointer[backend.Pool]
	schemaEvents atomic.Bool
	inflight     atomic.Int64
	// dirty lists backend connections with requests queued by readLoop
	// and not yet flushed; only readLoop touches it, and lastQuery.
	dirty     []*backend.Conn
	lastQuery queryMemo

	mu sync.Mutex
	// out holds the answers waiting to be written, under mu; the goroutine
	// writing them (the writer, or the read loop in flushOwn) owns w.
	out    netio.Outbox
	closed bool
	wake   chan struct{}
	done   chan struct{}
	w      *frame.Writer
}

func newClient(p *Proxy, ep *endpoint, nc net.Conn) *client {
	rw := netio.Wrap(nc)
	in := frame.NewStampedReader(rw)
	c := &client{
		p:    p,
		ep:   ep,
		nc:   nc,
		log:  p.log.With(zap.String("client", nc.RemoteAddr().String())),
		in:   in,
		r:    frame.NewReader(in, p.cfg.MaxFrameBytes),
		w:    frame.NewWriter(rw),
		wake: make(chan struct{}, 1),
		done: make(chan struct{}),
		flow: p.flows.Add(1),
	}
	c.out.Init(&c.mu, c.w, netio.Hooks{Written: func(n int) { p.buffered.Add(-int64(n)) }})
	empty := ""
	c.keyspace.Store(&empty)
	return c
}

// serve runs the connection: the handshake, then the request loop, until
// the client goes away or sends something that leaves the byte stream out
// of sync. A panic is contained to this one connection.
func (c *client) serve() {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("panic serving client; connection closed", zap.Any("panic", r), zap.Stack("stack"))
			c.close(fmt.Errorf("panic: %v", r))
		}
	}()
	err := c.handshake()
	c.p.handshakeEnded(c)
	if err != nil {
		if isTimeout(err) && !c.evicted.Load() {
			c.p.metrics.connsRejected.WithLabelValues(rejectHandshakeTimeout).Inc()
			c.log.Debug("client handshake timed out", zap.Duration("handshake_timeout", c.p.cfg.HandshakeTimeout))
		}
		c.close(err)
		return
	}
	go c.writeLoop()
	c.readLoop()
}

// handshake runs the TLS handshake of a TLS listener, then answers OPTIONS
// and STARTUP (both unframed and written synchronously, before the writer
// goroutine exists) until a STARTUP succeeds, and switches the connection to
// its negotiated version, compression and, for v5, segment framing. With
// client authentication STARTUP is answered with AUTHENTICATE, after which
// the framing switches just the same (spec v5 2.3.1), and the handshake ends
// once an AUTH_RESPONSE carries credentials Cassandra accepts.
func (c *client) handshake() error {
	// The whole handshake, TLS and login included, has one deadline: a
	// socket that sends nothing, or one byte at a time, is closed then.
	c.handshakeDeadline = time.Now().Add(c.p.cfg.HandshakeTimeout)
	if err := c.nc.SetDeadline(c.handshakeDeadline); err != nil {
		return fmt.Errorf("handshake deadline: %w", err)
	}
	if err := c.startTLS(); err != nil {
		return err
	}
	// authVersion is the version of the STARTUP answered with AUTHENTICATE,
	// while the client's credentials are awaited; 0 before.
	var authVersion byte
	for {
		b, err := c.r.ReadFrame()
		if err != nil {
			if c.answerReadError(err) {
				if ferr := c.w.Flush(); ferr != nil {
					return ferr
				}
				continue
			}
			c.w.Flush()
			return err
		}
		h := frame.ParseHeader(b.B)
		body := frame.Body(b.B)
		if h.Version > c.p.maxVersion() {
			c.writeUnsupportedVersion(h.Version, h.Stream)
			b.Release()
			c.w.Flush()
			return fmt.Errorf("client asked for protocol version %d", h.Version)
		}
		var out []byte
		done := false
		switch {
		case h.Opcode == frame.OpOptions:
			out = frame.AppendSupported(nil, h.Version, h.Stream, c.p.supported())
		case authVersion != 0 && h.Version != authVersion:
			out = frame.AppendError(nil, authVersion, h.Stream, frame.ErrCodeProtocol,
				fmt.Sprintf("Invalid message version. Got %d but previous messages on this connection had version %d", h.Version, authVersion))
		case authVersion != 0 && h.Opcode == frame.OpAuthResponse:
			if out, done = c.login(authVersion, h.Stream, body); done {
				c.version = authVersion
				c.p.handshakeEnded(c) // before AUTH_SUCCESS is written, as for READY
			}
		case authVersion != 0:
			out = frame.AppendError(nil, authVersion, h.Stream, frame.ErrCodeProtocol,
				fmt.Sprintf("Unexpected message %s, expecting SASL_RESPONSE", frame.OpcodeName(h.Opcode)))
		case h.Opcode == frame.OpStartup:
			comp, msg := c.negotiate(h.Version, body)
			if msg != "" {
				out = frame.AppendError(nil, h.Version, h.Stream, frame.ErrCodeProtocol, msg)
				break
			}
			if _, err := c.p.cluster.Pool(c.p.ctx, h.Version, ""); err != nil {
				c.log.Warn("no backend pool for client", zap.Uint8("protocol_version", h.Version), zap.Error(err))
				out = frame.AppendError(nil, h.Version, h.Stream, frame.ErrCodeServer, "cqlgate: no Cassandra node available")
				break
			}
			if c.p.auth == nil {
				c.version = h.Version
				out, done = frame.AppendReady(nil, h.Version, h.Stream), true
				// Served from before READY is written: a client that opens
				// its next connection on READY must not find this one still
				// pending, evictable, with the limit not counting it.
				c.p.handshakeEnded(c)
			} else {
				authVersion = h.Version
				out = auth.AppendAuthenticate(nil, h.Version, h.Stream, auth.PasswordAuthenticator)
			}
			if err := c.w.WriteFrame(out); err != nil {
				b.Release()
				return err
			}
			if h.Version >= frame.V5 {
				c.r.EnableSegments(comp)
				c.w.EnableSegments(comp)
			} else {
				c.r.SetCompression(comp)
				c.w.SetCompression(comp)
			}
			out = nil
		default:
			out = frame.AppendError(nil, h.Version, h.Stream, frame.ErrCodeProtocol,
				fmt.Sprintf("Unexpected message %s, expecting STARTUP or OPTIONS", frame.OpcodeName(h.Opcode)))
		}
		b.Release()
		if out != nil {
			if err := c.w.WriteFrame(out); err != nil {
				return err
			}
		}
		if err := c.w.Flush(); err != nil {
			return err
		}
		if done {
			pool, err := c.poolFor(c.p.ctx, c.version, "")
			if err != nil {
				return err
			}
			c.setPool(pool)
			if err := c.nc.SetDeadline(time.Time{}); err != nil {
				return fmt.Errorf("clear handshake deadline: %w", err)
			}
			return nil
		}
	}
}

// negotiate checks STARTUP options the way Cassandra does and returns the
// compression to use, or the message of a PROTOCOL_ERROR.
func (c *client) negotiate(version byte, body []byte) (frame.Compression, string) {
	opts, err := frame.ReadStringMap(body)
	if err != nil {
		return 0, "Invalid STARTUP message: " + err.Error()
	}
	if _, ok := opts["CQL_VERSION"]; !ok {
		return 0, "Missing value CQL_VERSION in STARTUP message"
	}
	name := opts["COMPRESSION"]
	comp, err := frame.ParseCompression(name)
	if err != nil {
		return 0, "Unknown compression algorithm: " + name
	}
	if comp == frame.CompressionSnappy && version >= frame.V5 {
		return 0, "Snappy compression is not supported in protocol v5; use lz4"
	}
	return comp, ""
}

// writeUnsupportedVersion, during the handshake only (it writes directly),
// answers a frame of a version we do not speak the way Cassandra does, so
// that drivers downgrade: a PROTOCOL_ERROR naming the
// versions supported, in our highest version for newer clients, and in the
// client's own (8-byte header) format for v1/v2 clients.
func (c *client) writeUnsupportedVersion(v byte, stream int16) {
	var names []string
	for x := frame.MinVersion; x <= c.p.maxVersion(); x++ {
		names = append(names, fmt.Sprintf("%d/v%d", x, x))
	}
	msg := fmt.Sprintf("Invalid or unsupported protocol version (%d); supported versions are (%s)", v, strings.Join(names, ", "))
	if v < frame.MinVersion {
		// v1/v2 header: version, flags, 1-byte stream, opcode, length.
		body := frame.AppendError(nil, frame.V4, 0, frame.ErrCodeProtocol, msg)[frame.HeaderLen:]
		out := []byte{v | frame.ResponseBit, 0, byte(stream), frame.OpError, 0, 0, 0, 0}
		l := len(body)
		out[4], out[5], out[6], out[7] = byte(l>>24), byte(l>>16), byte(l>>8), byte(l)
		// Not a frame the Writer can check: keep the order by hand.
		if c.w.Flush() == nil {
			c.nc.Write(append(out, body...))
		}
		return
	}
	c.w.WriteFrame(frame.AppendError(nil, c.p.maxVersion(), stream, frame.ErrCodeProtocol, msg))
}

// answerReadError answers a read error that leaves the stream in sync with
// an ERROR on the offending stream and reports true; otherwise false.
func (c *client) answerReadError(err error) bool {
	v := c.version
	var tooLarge *frame.FrameTooLargeError
	var bad *frame.BadFrameError
	var unsup *frame.UnsupportedVersionError
	switch {
	case errors.As(err, &tooLarge):
		if v == 0 {
			v = tooLarge.Header.Version
		}
		c.p.metrics.proxyError(frame.ErrCodeProtocol)
		c.emit(frame.AppendError(nil, v, tooLarge.Header.Stream, frame.ErrCodeProtocol, tooLarge.Error()))
		return true
	case errors.As(err, &bad):
		if v == 0 {
			v = bad.Header.Version
		}
		c.p.metrics.proxyError(frame.ErrCodeProtocol)
		c.emit(frame.AppendError(nil, v, bad.Header.Stream, frame.ErrCodeProtocol, bad.Error()))
		return true
	case errors.As(err, &unsup):
		c.p.metrics.proxyError(frame.ErrCodeProtocol)
		if v == 0 {
			// Negotiation: answer so the driver downgrades, then close;
			// it reconnects with the lower version.
			c.writeUnsupportedVersion(unsup.Header.Version, unsup.Header.Stream)
			return false
		}
		if !unsup.InSync {
			return false
		}
		c.emit(frame.AppendError(nil, v, unsup.Header.Stream, frame.ErrCodeProtocol,
			fmt.Sprintf("Invalid message version. Got %d but previous messages on this connection had version %d", unsup.Header.Version, v)))
		return true
	}
	return false
}

// emit queues a frame built by the proxy itself: during the handshake it
// goes straight to the writer (flushed by the handshake loop), afterwards
// through the writer goroutine's queue.
func (c *client) emit(f []byte) {
	if c.version == 0 {
		c.w.WriteFrame(f)
		return
	}
	b := frame.GetBuf(len(f))
	copy(b.B, f)
	c.send(b)
}

// send queues a response frame for the client and wakes its writer; the
// client owns b from now on. It never blocks.
func (c *client) send(b *frame.Buf) {
	if c.enqueue(b) {
		c.Wake()
	}
}

// sendFrom is send for answers handed over by a backend read loop: the
// writer is woken when that loop has drained its input, so a burst of
// answers for this client goes out in one write.
func (c *client) sendFrom(conn *backend.Conn, b *frame.Buf) {
	if c.enqueue(b) {
		conn.Defer(c)
	}
}

// enqueue queues b and reports whether the queue was empty (the writer may
// be asleep and needs a Wake).
//
// A client that does not read its answers is disconnected once they exceed
// --client-write-buffer-bytes: it must not hold memory without bound, and
// waiting for it would stall the backend read loop handing it answers, and
// with it every other client's answers on that connection.
func (c *client) enqueue(b *frame.Buf) bool {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		b.Release()
		return false
	}
	if queued := c.out.QueuedLocked(); queued+len(b.B) > int(c.p.clientWriteLimit.Load()) && queued > 0 {
		limit := c.p.clientWriteLimit.Load()
		c.mu.Unlock()
		b.Release()
		c.p.metrics.slowClients.Inc()
		c.log.Warn("client does not read its answers; disconnecting it", zap.Int64("client_write_buffer_bytes", limit))
		c.close(fmt.Errorf("client write buffer over %d bytes", limit))
		return false
	}
	c.p.buffered.Add(int64(len(b.B)))
	first := c.out.PushLocked(netio.Out{F: b.B, Buf: b})
	c.mu.Unlock()
	return first
}

// Wake wakes the writer goroutine.
func (c *client) Wake() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// writeLoop writes queued frames, coalescing everything queued since the
// last flush into one write.
func (c *client) writeLoop() {
	for {
		select {
		case <-c.wake:
		case <-c.done:
			return
		}
		if err := c.writeQueued(); err != nil {
			c.close(fmt.Errorf("write to client: %w", err))
			return
		}
	}
}

// flushOwn writes the answers queued for this client from its own read
// loop, at the end of a read burst, unless the writer is at it already.
// Under overload the read loop turns requests away as fast as it reads
// them and its socket never runs dry, so it would hold the CPU (with one P)
// until preempted while the writer, woken long before, waits with the
// OVERLOADED answers: they would reach the client milliseconds late. A
// client that does not read only stalls its own read loop here, until its
// write buffer limit closes it.
func (c *client) flushOwn() {
	if err := c.writeQueued(); err != nil {
		c.close(fmt.Errorf("write to client: %w", err))
	}
}

// writeQueued writes what is queued, unless another goroutine is writing
// (it will write this too), until the queue stays empty.
func (c *client) writeQueued() error { return c.out.Flush() }

// closeFlushed closes the connection once the answers queued for the
// client are written, or at deadline if the client does not read them: a
// request stops counting as in flight when its answer is queued, and
// close would drop what the writer has not sent yet.
func (c *client) closeFlushed(err error, deadline time.Time) {
	_ = c.nc.SetWriteDeadline(deadline)
	if werr := c.out.FlushAll(); werr != nil {
		err = fmt.Errorf("write to client: %w", werr)
	}
	c.close(err)
}

// close ends the connection once; queued responses are dropped. Requests
// still at Cassandra keep their backend streams until answered, and their
// answers are then dropped.
func (c *client) close(err error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	q := c.out.CloseLocked()
	pool := c.pool.Load()
	c.mu.Unlock()
	for _, f := range q {
		c.p.buffered.Add(-int64(len(f.F)))
		f.Buf.Release()
	}
	if pool != nil {
		pool.Release()
	}
	c.releaseRole()
	close(c.done)
	c.nc.Close()
	// Requests still waiting for a permit will never be answered. Rule
	// queues first: a request the limiter cancels frees a rule permit,
	// which must not go to this client.
	c.p.rules.CancelFlow(c.flow)
	c.p.limiter.CancelFlow(c.flow)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		c.log.Debug("client connection closed", zap.Error(err))
	}
}

// setPool makes p the pool the client's requests go to, holding it (see
// backend.Pool.Hold) until the client switches again or closes. A client
// already closed keeps none: close released what it held.
func (c *client) setPool(p *backend.Pool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	p.Hold()
	if old := c.pool.Swap(p); old != nil {
		old.Release()
	}
}

// sendError answers stream with an ERROR the proxy generated itself,
// encoded straight into a pooled buffer: under overload this runs for most
// requests.
func (c *client) sendError(stream int16, code int32, msg string) {
	b := frame.GetBuf(frame.HeaderLen + 4 + 2 + len(msg))
	b.B = frame.AppendError(b.B[:0], c.version, stream, code, msg)
	c.send(b)
}
