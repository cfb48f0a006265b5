package proxy_test

import (
	"net"
	"runtime/debug"
	"testing"
	"time"

	"github.com/cqlgate/cqlgate/internal/fakenode"
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
		cfg.NodeLimit = 1
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
