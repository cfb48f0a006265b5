package netio

import (
	"bytes"
	"errors"
	"sync"
	"testing"

	"github.com/cqlgate/cqlgate/pkg/frame"
)

// gateWriter blocks its first Write until released, so that a test can
// queue frames while a batch is being written.
type gateWriter struct {
	mu      sync.Mutex
	writes  [][]byte
	entered chan struct{}
	release chan struct{}
	err     error
}

func (g *gateWriter) Write(b []byte) (int, error) {
	if g.entered != nil {
		close(g.entered)
		g.entered = nil
		<-g.release
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.writes = append(g.writes, append([]byte(nil), b...))
	if g.err != nil {
		return 0, g.err
	}
	return len(b), nil
}

func testFrame(stream int16, body string) []byte {
	return frame.AppendError(nil, frame.V4, stream, frame.ErrCodeServer, body)
}

// Frames pushed while a batch is being written go out together in the
// next write of the same Flush, and a second Flush meanwhile returns at
// once without writing.
func TestOutboxBatchesWhatIsQueuedDuringAWrite(t *testing.T) {
	g := &gateWriter{entered: make(chan struct{}), release: make(chan struct{})}
	var mu sync.Mutex
	var o Outbox
	var written int
	o.Init(&mu, frame.NewWriter(g), Hooks{Written: func(n int) { written += n }})
	push := func(f []byte) bool {
		mu.Lock()
		defer mu.Unlock()
		return o.PushLocked(Out{F: f})
	}
	a, b, c := testFrame(1, "a"), testFrame(2, "b"), testFrame(3, "c")
	if !push(a) {
		t.Fatal("first push into an empty outbox did not report first")
	}
	done := make(chan error)
	entered := g.entered
	go func() { done <- o.Flush() }()
	<-entered
	if !push(b) || push(c) {
		t.Fatal("pushes during a write: want first for b only")
	}
	if err := o.Flush(); err != nil {
		t.Fatalf("concurrent Flush: %v", err)
	}
	close(g.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := [][]byte{a, append(append([]byte(nil), b...), c...)}
	if len(g.writes) != len(want) {
		t.Fatalf("%d writes, want %d", len(g.writes), len(want))
	}
	for i := range want {
		if !bytes.Equal(g.writes[i], want[i]) {
			t.Errorf("write %d = %x, want %x", i, g.writes[i], want[i])
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if q := o.QueuedLocked(); q != 0 {
		t.Errorf("%d bytes still counted as queued", q)
	}
	if written != len(a)+len(b)+len(c) {
		t.Errorf("Written hook saw %d bytes", written)
	}
}

// Taken sees each batch with the lock held before it is written; a write
// error is returned, and the Outbox stays failed.
func TestOutboxTakenAndErrors(t *testing.T) {
	g := &gateWriter{err: errors.New("broken pipe")}
	var mu sync.Mutex
	var o Outbox
	var taken int
	o.Init(&mu, frame.NewWriter(g), Hooks{Taken: func(batch []Out) {
		if mu.TryLock() {
			t.Error("Taken called without the lock")
			mu.Unlock()
		}
		taken += len(batch)
	}})
	mu.Lock()
	o.PushLocked(Out{F: testFrame(1, "a")})
	mu.Unlock()
	if err := o.Flush(); err == nil {
		t.Fatal("Flush hid the write error")
	}
	if taken != 1 {
		t.Errorf("Taken saw %d frames", taken)
	}
	mu.Lock()
	o.PushLocked(Out{F: testFrame(2, "b")})
	mu.Unlock()
	if err := o.Flush(); err == nil {
		t.Fatal("a failed Outbox wrote again")
	}
}

// CloseLocked hands back what was not written, and later pushes are
// dropped with their buffers released.
func TestOutboxClose(t *testing.T) {
	var mu sync.Mutex
	var o Outbox
	o.Init(&mu, frame.NewWriter(&gateWriter{}), Hooks{})
	mu.Lock()
	f := testFrame(1, "a")
	o.PushLocked(Out{F: f})
	q := o.CloseLocked()
	if len(q) != 1 || !bytes.Equal(q[0].F, f) || o.QueuedLocked() != 0 {
		t.Fatalf("CloseLocked returned %d frames, %d bytes still queued", len(q), o.QueuedLocked())
	}
	b := frame.GetBuf(len(f))
	copy(b.B, f)
	if o.PushLocked(Out{F: b.B, Buf: b}) {
		t.Error("a push after close reported first")
	}
	o.WaitIdleLocked()
	mu.Unlock()
	if err := o.Flush(); err != nil {
		t.Fatal(err)
	}
}
