package backend

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cqlgate/cqlgate/pkg/frame"
)

// signalConn tells when the first write to the socket has begun, and holds
// it until proceed is closed: the test queues behind it meanwhile, however
// slowly it is scheduled.
type signalConn struct {
	net.Conn
	once    sync.Once
	started chan struct{}
	proceed chan struct{}
}

func (s *signalConn) Write(b []byte) (int, error) {
	s.once.Do(func() {
		close(s.started)
		<-s.proceed
	})
	return s.Conn.Write(b)
}

// A node that stops reading must not wedge the senders flushing to it: the
// write gives up at the write deadline, the connection fails, the requests
// handed to the socket fail as sent and those still queued as unsent.
func TestFlushToStalledNodeTimesOut(t *testing.T) {
	n := newFakeNode(t, func(*fakeReq) fakeAction { return fakeStop })
	c, err := Dial(context.Background(), DialConfig{
		Addr: n.Addr(), Version: frame.V4, Timeout: guard,
		WriteTimeout: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	// A small send buffer, so the kernel's buffers fill sooner.
	if tc, ok := c.nc.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(64 << 10)
	}
	sc := &signalConn{Conn: c.nc, started: make(chan struct{}), proceed: make(chan struct{})}
	c.w = frame.NewWriter(sc)
	c.out.Init(&c.mu, c.w, c.outHooks())
	var proceedOnce sync.Once
	letProceed := func() { proceedOnce.Do(func() { close(sc.proceed) }) }
	t.Cleanup(letProceed) // registered after Close's cleanup: runs first
	c.Start(nil)
	t.Cleanup(func() {
		c.Close()
		<-c.done
	})

	// 40 MiB: far more than loopback buffers hold while the peer does not
	// read (its receive window does not grow then).
	const frames = 40
	big := queryFrame(strings.Repeat("x", 1<<20))
	sentRec := newRecorder(frames)
	for i := 0; i < frames; i++ {
		if err := c.Queue(append([]byte(nil), big...), sentRec); err != nil {
			t.Fatal(err)
		}
	}
	flushed := make(chan struct{})
	go func() {
		c.Flush()
		close(flushed)
	}()
	waitFor(t, sc.started, "write to the socket")
	// Queued while the writer is busy: never handed to the socket.
	unsentRec := newRecorder(1)
	if err := c.Queue(queryFrame("SELECT 1"), unsentRec); err != nil {
		t.Fatal(err)
	}
	c.Flush() // returns at once: the writer above picks it up
	letProceed()

	select {
	case <-flushed:
	case <-time.After(guard):
		t.Fatalf("Flush still blocked after %s on a node that stopped reading", guard)
	}
	for i := 0; i < frames; i++ {
		f := waitFor(t, sentRec.failures, "OnFailure of a request handed to the socket")
		if !f.sent {
			t.Errorf("request handed to the socket reported unsent")
		}
		if !errors.Is(f.err, os.ErrDeadlineExceeded) {
			t.Errorf("failure %v, want a write deadline error", f.err)
		}
	}
	if f := waitFor(t, unsentRec.failures, "OnFailure of the queued request"); f.sent {
		t.Errorf("request queued behind the stalled write reported sent")
	}
	if !c.Dead() {
		t.Errorf("connection not dead after a write timeout")
	}
}

// writtenRecorder notes WrittenAt and ReadAt in OnResponse, where they may
// be called.
type writtenRecorder struct {
	*recorder
	written, read chan time.Time
}

func (r *writtenRecorder) OnResponse(c *Conn, b *frame.Buf) {
	r.written <- c.WrittenAt()
	r.read <- c.ReadAt()
	r.recorder.OnResponse(c, b)
}

// WrittenAt tells when the writer took the request, not when it was queued:
// the adaptive limit's latency sample must leave out the proxy's own wait
// for its writer.
func TestWrittenAtLeavesOutTheWaitForTheWriter(t *testing.T) {
	n := newFakeNode(t, nil)
	c := dialFake(t, n, DialConfig{}, nil)
	rec := &writtenRecorder{recorder: newRecorder(1), written: make(chan time.Time, 1), read: make(chan time.Time, 1)}
	queued := time.Now()
	if err := c.Queue(queryFrame("SELECT 1"), rec); err != nil {
		t.Fatal(err)
	}
	const wait = 50 * time.Millisecond
	time.Sleep(wait) // the writer is late: the proxy is busy
	flushed := time.Now()
	c.Flush()
	written := waitFor(t, rec.written, "WrittenAt in OnResponse")
	read := waitFor(t, rec.read, "ReadAt in OnResponse")
	waitFor(t, rec.responses, "the answer").Release()
	if written.Before(flushed) || written.Sub(queued) < wait {
		t.Errorf("written %s after queueing, flushed %s after; want at least the flush", written.Sub(queued), flushed.Sub(queued))
	}
	if read.Before(written) {
		t.Errorf("read %s before written", written.Sub(read))
	}
}
