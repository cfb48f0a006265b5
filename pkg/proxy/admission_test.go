package proxy_test

import (
	"bytes"
	"net"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/datastax/go-cassandra-native-protocol/datatype"

	"github.com/cqlgate/cqlgate/internal/fakenode"
	"github.com/cqlgate/cqlgate/internal/promtest"
	"github.com/cqlgate/cqlgate/internal/proxytest"
	"github.com/cqlgate/cqlgate/pkg/config"
	"github.com/cqlgate/cqlgate/pkg/frame"
)

// When no node takes requests any more, every queued request is admitted
// and fails at once. Each failure releases its permit, which admits the
// next one: done inside the releasing call, that was a recursion as deep as
// the queue, on whichever goroutine released first (a backend read loop).
// With the stack capped at 256 KiB, the old code crashes the test binary.
func TestQueuedRequestsFailWithoutRecursion(t *testing.T) {
	const queued = 3000
	node := fakenode.Start(t, fakenode.Config{})
	node.SetHook(func(r fakenode.Request) fakenode.Action {
		if r.Query == "SELECT hold" {
			return fakenode.Action{Fault: fakenode.NoAnswer}
		}
		return fakenode.Action{}
	})
	p := proxytest.Start(t, []string{node.Addr()}, func(cfg *config.Config) {
		cfg.LimitMode, cfg.NodeLimit = "fixed", 1
		cfg.QueueLength = queued + 10
		// Once the node is reported down, what is still queued waits for
		// it this long, then gets OVERLOADED.
		cfg.QueueMaxWait = 2 * time.Second
		cfg.QueueTarget = 2 * time.Second
		cfg.RequestTimeout = 5 * time.Second
		cfg.SpeculativeMaxExecutions = 0
	})

	nc, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(15 * time.Second))
	rd, w := frame.NewReader(nc, 1<<20), frame.NewWriter(nc)
	send := func(stream int16, q string) {
		t.Helper()
		if err := w.WriteFrame(frame.AppendQuery(nil, frame.V4, stream, q, 0x0001, 0)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.WriteFrame(frame.AppendStartup(nil, frame.V4, 0, map[string]string{"CQL_VERSION": "3.0.0"})); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if b, err := rd.ReadFrame(); err != nil || frame.Opcode(b.B) != frame.OpReady {
		t.Fatalf("STARTUP: %v", err)
	}
	// One request holds the node's only slot; the rest queue behind it.
	send(1, "SELECT hold")
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() bool { return node.Requests(frame.OpQuery) >= 1 }, "the held request at the node")
	for i := range queued {
		send(int16(2+i), "SELECT queued")
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // let the proxy read and queue them; the test holds without it too

	defer debug.SetMaxStack(debug.SetMaxStack(256 << 10))
	node.RejectConnections(true)
	node.DropConnections()

	answered := map[int16]bool{}
	for len(answered) < queued+1 {
		b, err := rd.ReadFrame()
		if err != nil {
			t.Fatalf("after %d answers: %v", len(answered), err)
		}
		s := frame.Stream(b.B)
		if answered[s] {
			t.Fatalf("stream %d answered twice", s)
		}
		answered[s] = true
		b.Release()
	}
}

// waitUntil polls cond (a failure guard of 10 s, not a synchronization).
func waitUntil(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// Clients that send requests with large answers and do not read them fill
// the proxy's memory one client at a time, each under its own
// --client-write-buffer-bytes. --max-buffered-bytes bounds them together:
// past it new requests get OVERLOADED, and they are served again once the
// answers are written or dropped.
func TestBufferedBytesBudget(t *testing.T) {
	big := bytes.Repeat([]byte{'x'}, 1<<20)
	node := fakenode.Start(t, fakenode.Config{})
	node.SetTable("ks.big", []fakenode.Column{fakenode.Key("k", datatype.Int), fakenode.Col("v", datatype.Varchar)},
		[][]byte{fakenode.Int(1), big})
	node.SetTable("ks.small", []fakenode.Column{fakenode.Key("k", datatype.Int), fakenode.Col("v", datatype.Varchar)},
		[][]byte{fakenode.Int(1), fakenode.Text("v")})
	p := proxytest.Start(t, []string{node.Addr()}, func(cfg *config.Config) {
		cfg.MaxBufferedBytes = 16 << 20
		cfg.ClientWriteBufferBytes = 64 << 20
	})

	// A client that asks for 64 answers of 1 MiB and reads none.
	greedy := dialClient(t, p.Addr)
	for i := range 64 {
		greedy.send(int16(i+1), "SELECT * FROM ks.big")
	}
	greedy.flush()
	waitUntil(t, func() bool {
		return promtest.Value(t, p.Reg, "cqlgate_buffered_bytes") >= 16<<20
	}, "the greedy client's answers to fill the budget")

	other := dialClient(t, p.Addr)
	other.send(1, "SELECT * FROM ks.small")
	other.flush()
	code, msg := other.errorOn(1)
	if code != frame.ErrCodeOverloaded || !strings.Contains(msg, "--max-buffered-bytes") {
		t.Fatalf("a new request with the budget spent: code 0x%04x %q; want OVERLOADED naming --max-buffered-bytes", code, msg)
	}

	greedy.nc.Close()
	waitUntil(t, func() bool {
		return promtest.Value(t, p.Reg, "cqlgate_buffered_bytes") < 1<<20
	}, "the budget to drain once the greedy client is gone")
	other.send(2, "SELECT * FROM ks.small")
	other.flush()
	if code, msg := other.errorOn(2); code != -1 {
		t.Fatalf("after the greedy client left: code 0x%04x %q; want rows", code, msg)
	}
}

// rawClient is a v4 client speaking raw frames.
type rawClient struct {
	t  *testing.T
	nc net.Conn
	rd *frame.Reader
	w  *frame.Writer
}

func dialClient(t *testing.T, addr string) *rawClient {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(30 * time.Second))
	c := &rawClient{t: t, nc: nc, rd: frame.NewReader(nc, 1<<24), w: frame.NewWriter(nc)}
	if err := c.w.WriteFrame(frame.AppendStartup(nil, frame.V4, 0, map[string]string{"CQL_VERSION": "3.0.0"})); err != nil {
		t.Fatal(err)
	}
	c.flush()
	if code, msg := c.errorOn(0); code != -1 {
		t.Fatalf("STARTUP: 0x%04x %s", code, msg)
	}
	return c
}

func (c *rawClient) send(stream int16, q string) {
	if err := c.w.WriteFrame(frame.AppendQuery(nil, frame.V4, stream, q, 0x0001, 0)); err != nil {
		c.t.Fatal(err)
	}
}

func (c *rawClient) flush() {
	if err := c.w.Flush(); err != nil {
		c.t.Fatal(err)
	}
}

// errorOn reads until the answer on stream and returns its error code and
// message, or -1 for an answer that is not an ERROR.
func (c *rawClient) errorOn(stream int16) (int32, string) {
	c.t.Helper()
	for {
		b, err := c.rd.ReadFrame()
		if err != nil {
			c.t.Fatalf("reading the answer on stream %d: %v", stream, err)
		}
		s, op := frame.Stream(b.B), frame.Opcode(b.B)
		var code int32 = -1
		var msg string
		if op == frame.OpError {
			code, msg, _ = frame.ErrorCode(frame.Body(b.B))
		}
		b.Release()
		if s == stream {
			return code, msg
		}
	}
}
