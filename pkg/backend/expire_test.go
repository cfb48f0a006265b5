package backend

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cqlgate/cqlgate/pkg/frame"
)

type nopHandler struct{}

func (nopHandler) OnTimeout(*Conn)                  {}
func (nopHandler) OnResponse(_ *Conn, b *frame.Buf) { b.Release() }
func (nopHandler) OnFailure(*Conn, error, bool)     {}

var errBench = errors.New("bench")

// BenchmarkExpireRequests measures one upkeep pass over a connection with
// requests in flight, none of them due: "idle" is the common pass, "walk"
// a pass that has to look at every request (an earlier deadline was
// pending since the last pass, and has completed).
func BenchmarkExpireRequests(b *testing.B) {
	for _, inflight := range []int{10, 10000} {
		for _, mode := range []string{"idle", "walk"} {
			b.Run(fmt.Sprintf("inflight=%d/%s", inflight, mode), func(b *testing.B) {
				n := newFakeNode(b, nil)
				c := dialFake(b, n, DialConfig{}, nil)
				now := time.Now()
				far := now.Add(time.Hour).UnixNano()
				for i := 0; i < inflight; i++ {
					if err := c.QueueBy(queryFrame("SELECT 1"), nopHandler{}, far); err != nil {
						b.Fatal(err)
					}
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if mode == "walk" {
						// What QueueBy registers, without queueing the
						// frame for a write that never comes.
						c.mu.Lock()
						id := c.free[len(c.free)-1]
						c.free = c.free[:len(c.free)-1]
						c.pending[id] = slot{h: nopHandler{}, deadline: now.UnixNano() - 1}
						c.link(id)
						c.inflight.Add(1)
						c.mu.Unlock()
						c.complete(id, nil, errBench)
					}
					if o := c.ExpireRequests(now); o != 0 {
						b.Fatalf("%d orphans", o)
					}
				}
			})
		}
	}
}

// Expiry times out exactly the requests past their deadline, including one
// queued after a pass with an earlier deadline than any seen by it; a late
// answer frees the orphaned stream.
func TestExpireRequests(t *testing.T) {
	reqs := make(chan *fakeReq, 4)
	n := newFakeNode(t, func(r *fakeReq) fakeAction {
		reqs <- r
		return fakeHold
	})
	c := dialFake(t, n, DialConfig{}, nil)
	base := time.Now().Add(time.Hour).UnixNano()
	at := func(d int64) time.Time { return time.Unix(0, base+d) }
	send := func(deadline int64) (*recorder, *fakeReq) {
		rec := newRecorder(2)
		if err := c.QueueBy(queryFrame("SELECT 1"), rec, base+deadline); err != nil {
			t.Fatal(err)
		}
		c.Flush()
		return rec, waitFor(t, reqs, "request at the node")
	}
	noTimeout := func(rec *recorder, name string) {
		t.Helper()
		select {
		case <-rec.timeouts:
			t.Errorf("request %s timed out before its deadline", name)
		default:
		}
	}
	a, ra := send(100)
	b, rb := send(200)
	if o := c.ExpireRequests(at(0)); o != 0 {
		t.Errorf("orphans before any deadline = %d, want 0", o)
	}
	noTimeout(a, "a")
	if o := c.ExpireRequests(at(150)); o != 1 {
		t.Errorf("orphans after a's deadline = %d, want 1", o)
	}
	waitFor(t, a.timeouts, "OnTimeout of a")
	noTimeout(b, "b")
	// Queued after the pass, with a deadline before b's.
	cr, _ := send(120)
	if o := c.ExpireRequests(at(130)); o != 2 {
		t.Errorf("orphans after c's deadline = %d, want 2", o)
	}
	waitFor(t, cr.timeouts, "OnTimeout of c")
	noTimeout(b, "b")

	ra.AnswerVoid() // late: a's stream is freed now
	waitFor(t, a.responses, "late answer to a").Release()
	if o := c.ExpireRequests(at(130)); o != 1 {
		t.Errorf("orphans after a's late answer = %d, want 1", o)
	}
	if got := c.InFlight(); got != 2 {
		t.Errorf("InFlight = %d, want 2 (b and c)", got)
	}
	rb.AnswerVoid()
	waitFor(t, b.responses, "answer to b").Release()
	noTimeout(b, "b")
	c.Close()
	if f := waitFor(t, cr.failures, "OnFailure of the orphan c"); !f.sent || !errors.Is(f.err, ErrConnClosed) {
		t.Errorf("orphan c failed with %v, sent %v; want ErrConnClosed, sent", f.err, f.sent)
	}
}
