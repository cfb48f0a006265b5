package backend

// A minimal CQL node for this package's tests: protocol v4 only, one
// goroutine per connection, and a per-test hook deciding the fate of every
// request other than STARTUP and OPTIONS. internal/fakenode will replace it.

import (
	"context"
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/cqlgate/cqlgate/pkg/frame"
)

// fakeAction is what the fake node does with a request.
type fakeAction int

const (
	fakeVoid  fakeAction = iota // answer RESULT Void now
	fakeHold                    // answer nothing; the test may call Answer later
	fakeClose                   // close the connection
	fakeStop                    // stop reading the connection (its buffers fill)
)

// fakeReq is one request the fake node read.
type fakeReq struct {
	conn  *fakeConn
	Frame []byte // a copy of the whole frame
}

func (r *fakeReq) Opcode() byte  { return frame.Opcode(r.Frame) }
func (r *fakeReq) Stream() int16 { return frame.Stream(r.Frame) }

// Query returns the CQL text of a QUERY request ("" for others).
func (r *fakeReq) Query() string {
	b := frame.Body(r.Frame)
	if r.Opcode() != frame.OpQuery || len(b) < 4 {
		return ""
	}
	n := int(binary.BigEndian.Uint32(b))
	if n < 0 || 4+n > len(b) {
		return ""
	}
	return string(b[4 : 4+n])
}

// Answer sends a response with opcode and body on the request's stream;
// it may be called from any goroutine.
func (r *fakeReq) Answer(opcode byte, body []byte) {
	r.conn.write(frame.AppendFrame(nil, frame.V4, true, 0, r.Stream(), opcode, body))
}

// AnswerVoid sends RESULT Void.
func (r *fakeReq) AnswerVoid() { r.Answer(frame.OpResult, voidBody) }

var voidBody = []byte{0, 0, 0, 1}

// fakeNode listens on 127.0.0.1 and answers the handshake.
type fakeNode struct {
	t    testing.TB
	ln   net.Listener
	hook func(*fakeReq) fakeAction

	mu       sync.Mutex
	conns    []*fakeConn
	startups []map[string]string
	accepted chan *fakeConn // every accepted connection, if the test reads it
	wg       sync.WaitGroup
	closed   chan struct{}
}

type fakeConn struct {
	node *fakeNode
	nc   net.Conn
	wmu  sync.Mutex
}

// newFakeNode starts a fake node; hook may be nil (every request gets
// RESULT Void). It is closed when the test ends.
func newFakeNode(t testing.TB, hook func(*fakeReq) fakeAction) *fakeNode {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	if hook == nil {
		hook = func(*fakeReq) fakeAction { return fakeVoid }
	}
	n := &fakeNode{t: t, ln: ln, hook: hook, closed: make(chan struct{}), accepted: make(chan *fakeConn, 64)}
	n.wg.Add(1)
	go n.acceptLoop()
	t.Cleanup(n.Close)
	return n
}

func (n *fakeNode) Addr() string { return n.ln.Addr().String() }

// Startups returns the STARTUP options of every connection so far.
func (n *fakeNode) Startups() []map[string]string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]map[string]string(nil), n.startups...)
}

// Close closes the listener and every connection and waits for the fake's
// goroutines.
func (n *fakeNode) Close() {
	n.mu.Lock()
	select {
	case <-n.closed:
		n.mu.Unlock()
		return
	default:
	}
	close(n.closed)
	conns := n.conns
	n.mu.Unlock()
	n.ln.Close()
	for _, c := range conns {
		c.nc.Close()
	}
	n.wg.Wait()
}

func (n *fakeNode) acceptLoop() {
	defer n.wg.Done()
	for {
		nc, err := n.ln.Accept()
		if err != nil {
			return
		}
		c := &fakeConn{node: n, nc: nc}
		n.mu.Lock()
		select {
		case <-n.closed:
			n.mu.Unlock()
			nc.Close()
			return
		default:
		}
		n.conns = append(n.conns, c)
		n.wg.Add(1)
		n.mu.Unlock()
		select {
		case n.accepted <- c:
		default:
		}
		go c.serve()
	}
}

func (c *fakeConn) write(f []byte) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, _ = c.nc.Write(f)
}

// Close closes the connection from the node's side.
func (c *fakeConn) Close() { c.nc.Close() }

func (c *fakeConn) serve() {
	defer c.node.wg.Done()
	defer c.nc.Close()
	r := frame.NewReader(c.nc, 0)
	for {
		b, err := r.ReadFrame()
		if err != nil {
			return
		}
		f := append([]byte(nil), b.B...)
		b.Release()
		stream := frame.Stream(f)
		switch frame.Opcode(f) {
		case frame.OpStartup:
			opts, _ := frame.ReadStringMap(frame.Body(f))
			c.node.mu.Lock()
			c.node.startups = append(c.node.startups, opts)
			c.node.mu.Unlock()
			c.write(frame.AppendReady(nil, frame.V4, stream))
			continue
		case frame.OpOptions:
			c.write(frame.AppendSupported(nil, frame.V4, stream, map[string][]string{"CQL_VERSION": {"3.4.5"}}))
			continue
		}
		req := &fakeReq{conn: c, Frame: f}
		switch c.node.hook(req) {
		case fakeVoid:
			req.AnswerVoid()
		case fakeHold:
		case fakeClose:
			return
		case fakeStop:
			<-c.node.closed
			return
		}
	}
}

// dialFake opens a started Conn to n; it is closed when the test ends.
func dialFake(t testing.TB, n *fakeNode, cfg DialConfig, onClose func(*Conn, error)) *Conn {
	t.Helper()
	cfg.Addr = n.Addr()
	cfg.Version = frame.V4
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	c, err := Dial(context.Background(), cfg)
	if err != nil {
		t.Fatalf("dial fake node: %v", err)
	}
	c.Start(onClose)
	t.Cleanup(func() {
		c.Close()
		<-c.done
	})
	return c
}

// queryFrame returns a v4 QUERY frame (stream 0, rewritten by Queue).
func queryFrame(cql string) []byte {
	return frame.AppendQuery(nil, frame.V4, 0, cql, 0x0001, 0)
}

// recorder is a Handler that reports every call on channels.
type recorder struct {
	timeouts  chan struct{}
	responses chan *frame.Buf
	failures  chan recFailure
}

type recFailure struct {
	err  error
	sent bool
}

func newRecorder(n int) *recorder {
	return &recorder{
		timeouts:  make(chan struct{}, n),
		responses: make(chan *frame.Buf, n),
		failures:  make(chan recFailure, n),
	}
}

func (r *recorder) OnTimeout(*Conn)                    { r.timeouts <- struct{}{} }
func (r *recorder) OnResponse(_ *Conn, b *frame.Buf)   { r.responses <- b }
func (r *recorder) OnFailure(_ *Conn, e error, s bool) { r.failures <- recFailure{e, s} }

// guard is how long a test waits for something that should happen at once:
// a failure guard, never a synchronization.
const guard = 10 * time.Second

func waitFor[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(guard):
		t.Fatalf("no %s within %s", what, guard)
		panic("unreachable")
	}
}
