package limiter

import (
	"testing"
	"time"
)

// Overhead of admission on the hot path. The target is <= 100 ns and 0
// allocations for an uncontended Acquire+Release; failsafe_bench_test.go
// (go test -tags failsafe) measures failsafe-go's adaptivelimiter on the
// same path, and BenchmarkChanSemaphore is the naive channel version.

type benchWaiter struct {
	p  Permit
	ok bool
}

func (w *benchWaiter) Admitted(p Permit, _ time.Time) { w.p, w.ok = p, true }
func (w *benchWaiter) Rejected(Reason)                { w.ok = false }

func benchLimiter(b *testing.B, cfg Config, nodes int) *Limiter {
	l, err := New(cfg, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(l.Close)
	ids := make([]NodeID, nodes)
	for i := range ids {
		ids[i] = NodeID(i)
	}
	l.SetNodes(ids)
	return l
}

func BenchmarkAcquireRelease(b *testing.B) {
	for _, bc := range []struct {
		name string
		cfg  Config
	}{
		{"fixed", Config{}},
		{"adaptive", Config{Adaptive: true}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			l := benchLimiter(b, bc.cfg, 3)
			w := &benchWaiter{}
			b.ReportAllocs()
			for b.Loop() {
				l.Acquire(w, 1, 0, nil, time.Time{})
				w.p.Release(Success, time.Millisecond)
			}
		})
	}
}

func BenchmarkTryAcquireRelease(b *testing.B) {
	l := benchLimiter(b, Config{}, 3)
	b.ReportAllocs()
	for b.Loop() {
		p, _ := l.TryAcquire(nil)
		p.Release(Success, time.Millisecond)
	}
}

// Contended: every goroutine admits and releases as fast as it can, far
// below the limits, so this measures the cost of sharing the Limiter.
func BenchmarkAcquireReleaseParallel(b *testing.B) {
	l := benchLimiter(b, Config{NodeLimit: 1 << 20}, 3)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		w := &benchWaiter{}
		for pb.Next() {
			l.Acquire(w, 1, 0, nil, time.Time{})
			w.p.Release(Success, time.Millisecond)
		}
	})
}

// The queue path: the limit is full, every Acquire queues, and every
// Release admits the oldest waiter (enqueue + dequeue + handover).
func BenchmarkQueuePath(b *testing.B) {
	const limit = 64
	l := benchLimiter(b, Config{NodeLimit: limit, QueueLength: 1 << 20, MaxWait: time.Hour}, 1)
	ws := make([]benchWaiter, 2*limit)
	for i := range limit {
		l.Acquire(&ws[i], uint64(i%8), 0, nil, time.Time{})
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		// ws[i] holds a permit; ws[i+limit] queues and gets it.
		next := (i + limit) % len(ws)
		l.Acquire(&ws[next], uint64(i%8), 0, nil, time.Time{})
		ws[i].p.Release(Success, time.Millisecond)
		i = (i + 1) % len(ws)
	}
}

// The queue path behind a standing queue of 10,000 requests from 1,000
// flows: each release admits the next request in round-robin order, and
// the released request queues again at the tail.
func BenchmarkQueuePathDeep(b *testing.B) {
	const limit, depth, flows = 64, 10000, 1000
	l := benchLimiter(b, Config{NodeLimit: limit, QueueLength: 1 << 20, MaxWait: time.Hour, QueueTarget: -1}, 1)
	held := &heldRing{buf: make([]*ringWaiter, limit+1)}
	ws := make([]ringWaiter, limit+depth)
	for i := range ws {
		ws[i] = ringWaiter{held: held, flow: uint64(i % flows)}
		l.Acquire(&ws[i], ws[i].flow, 0, nil, time.Time{})
	}
	b.ReportAllocs()
	for b.Loop() {
		w := held.pop()
		w.p.Release(Success, time.Millisecond) // admits the next one, which joins held
		l.Acquire(w, w.flow, 0, nil, time.Time{})
	}
	b.StopTimer()
	if s := l.Stats(); s.DoubleReleases != 0 || s.Queued != depth {
		b.Fatalf("double releases %d, queued %d; the benchmark lost track of its permits", s.DoubleReleases, s.Queued)
	}
}

// ringWaiter puts itself in a FIFO of permit holders when admitted.
type ringWaiter struct {
	held *heldRing
	flow uint64
	p    Permit
}

func (w *ringWaiter) Admitted(p Permit, _ time.Time) { w.p = p; w.held.push(w) }
func (w *ringWaiter) Rejected(r Reason) {
	if r.Kind != Shutdown { // Close at cleanup
		panic("rejected: " + r.String())
	}
}

type heldRing struct {
	buf        []*ringWaiter
	head, tail int
}

func (r *heldRing) push(w *ringWaiter) {
	r.buf[r.tail] = w
	r.tail = (r.tail + 1) % len(r.buf)
}

func (r *heldRing) pop() *ringWaiter {
	w := r.buf[r.head]
	r.head = (r.head + 1) % len(r.buf)
	return w
}

// BenchmarkChanSemaphore is the naive version: a buffered channel as a
// counting semaphore, no per-node limits, no queue, no adaptation.
func BenchmarkChanSemaphore(b *testing.B) {
	sem := make(chan struct{}, 256)
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sem <- struct{}{}
			<-sem
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				sem <- struct{}{}
				<-sem
			}
		})
	})
}

// TestHotPathAllocatesNothing keeps the 0-allocation promise in plain
// go test runs.
func TestHotPathAllocatesNothing(t *testing.T) {
	for _, cfg := range []Config{{}, {Adaptive: true}} {
		l, err := New(cfg, newFakeClock(), nil)
		if err != nil {
			t.Fatal(err)
		}
		l.SetNodes([]NodeID{0, 1, 2})
		w := &benchWaiter{}
		// Warm up the permit slab.
		l.Acquire(w, 1, 0, nil, time.Time{})
		w.p.Release(Success, time.Millisecond)
		if n := testing.AllocsPerRun(1000, func() {
			l.Acquire(w, 1, 0, nil, time.Time{})
			w.p.Release(Success, time.Millisecond)
		}); n != 0 {
			t.Errorf("Acquire+Release (adaptive %v) allocates %.1f times; want 0", cfg.Adaptive, n)
		}
		l.Close()
	}
}

// BenchmarkShed is the cost of turning an arrival away while the queue
// stands: the answer the proxy gives at 10x its capacity, so it must stay
// far below the cost of a request Cassandra serves.
func BenchmarkShed(b *testing.B) {
	l := benchLimiter(b, Config{NodeLimit: 1, MaxWait: time.Second, QueueTarget: 10 * time.Millisecond}, 1)
	hold := &benchWaiter{}
	l.Acquire(hold, 1, 0, nil, time.Time{})
	queued := make([]benchWaiter, 100)
	for i := range queued {
		l.Acquire(&queued[i], 1, 0, nil, time.Time{})
	}
	l.mu.Lock()
	l.rate = 1e-6 // 1000 admissions a second: 100 queued wait 100ms
	l.mu.Unlock()
	w := &benchWaiter{}
	b.ReportAllocs()
	for b.Loop() {
		l.mu.Lock()
		l.q.lastDrop = l.now() // keep the queue standing without the sweeper
		l.mu.Unlock()
		l.Acquire(w, 1, 0, nil, time.Time{})
		if w.ok {
			b.Fatal("admitted while the queue stands")
		}
	}
	if l.Stats().Rejected[Shed] == 0 {
		b.Fatal("nothing shed")
	}
}
