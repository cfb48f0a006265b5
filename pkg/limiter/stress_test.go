package limiter

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// stressWaiter is one request of the stress test. It checks it is answered
// once and, when admitted, that its node and the cluster are within their
// limits, then ends the request by one of the paths a proxy has.
type stressWaiter struct {
	st    *stress
	calls atomic.Int32
	path  int
	done  func() // called once the request is over
}

type stress struct {
	t         *testing.T
	l         *Limiter
	nodeLimit int64
	global    int64
	inflight  []atomic.Int64 // per node, as seen by the requests
	total     atomic.Int64
	wg        sync.WaitGroup
	released  atomic.Int64
	admitted  atomic.Int64
	rejected  atomic.Int64
	async     chan func()
	failed    atomic.Bool
	moves     atomic.Int64
}

func (w *stressWaiter) Admitted(p Permit, _ time.Time) {
	st := w.st
	if w.calls.Add(1) != 1 {
		st.fail("waiter answered twice")
	}
	st.admitted.Add(1)
	if n := st.inflight[p.Node()].Add(1); n > st.nodeLimit {
		st.fail("node over its limit")
	}
	if n := st.total.Add(1); st.global > 0 && n > st.global {
		st.fail("cluster over the global limit")
	}
	release := func(o Outcome, d time.Duration) {
		st.inflight[p.Node()].Add(-1)
		st.total.Add(-1)
		p.Release(o, d)
		st.released.Add(1)
		w.done()
		st.wg.Done()
	}
	switch w.path {
	case 0: // the client went away while it waited: drop at once, from the callback
		release(Dropped, 0)
	default: // answered later, on another goroutine, with any outcome
		o := Outcome(w.path % int(numOutcomes))
		st.async <- func() {
			if w.path%4 == 1 { // sent again to another node first
				p = st.move(p, NodeID((int(p.Node())+1)%len(st.inflight)))
			}
			release(o, time.Duration(w.path)*time.Microsecond)
		}
	}
}

// move moves p to node to, keeping the requests' own counts: the old node
// loses the request before the Limiter does and the new one gains it
// after, so the counts never run ahead of the Limiter's.
func (st *stress) move(p Permit, to NodeID) Permit {
	from := p.Node()
	st.inflight[from].Add(-1)
	moved, ok := p.Move(to)
	if !ok {
		st.inflight[from].Add(1)
		return p
	}
	st.moves.Add(1)
	if n := st.inflight[to].Add(1); n > st.nodeLimit {
		st.fail("node over its limit after a move")
	}
	return moved
}

func (w *stressWaiter) Rejected(Reason) {
	if w.calls.Add(1) != 1 {
		w.st.fail("waiter answered twice")
	}
	w.st.rejected.Add(1)
	w.done()
	w.st.wg.Done()
}

func (st *stress) fail(msg string) {
	if !st.failed.Swap(true) {
		st.t.Error(msg)
	}
}

// Many goroutines acquire, release on every path, cancel flows, change the
// topology and reload the config while the limits are checked from both
// sides: by the requests themselves and, with DebugPermits, on every
// admission inside the Limiter. At the end every request got exactly one
// answer and every permit came back exactly once.
func TestInFlightNeverExceedsLimitUnderConcurrency(t *testing.T) {
	for _, adaptive := range []bool{false, true} {
		name := "fixed"
		if adaptive {
			name = "adaptive"
		}
		t.Run(name, func(t *testing.T) { stressTest(t, adaptive) })
	}
}

func stressTest(t *testing.T, adaptive bool) {
	const (
		nodes      = 4
		nodeLimit  = 8
		global     = 24
		goroutines = 16
		perG       = 3000
	)
	cfg := Config{NodeLimit: nodeLimit, GlobalLimit: global, QueueLength: 200, MaxWait: 2 * time.Millisecond,
		TickInterval: time.Millisecond, DebugPermits: true, ClassWeights: []int{2, 1},
		Adaptive: adaptive, MinLimit: 2, MaxLimit: nodeLimit, Window: time.Millisecond, MinSamples: 5}
	l, err := New(cfg, nil, nil) // real clock: the Limiter's own goroutine expires waits
	if err != nil {
		t.Fatal(err)
	}
	all := []NodeID{0, 1, 2, 3}
	l.SetNodes(all)
	st := &stress{t: t, l: l, nodeLimit: nodeLimit, global: global, inflight: make([]atomic.Int64, nodes), async: make(chan func(), 1024)}

	var workers sync.WaitGroup
	for range 8 {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for f := range st.async {
				if rand.IntN(8) == 0 {
					time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
				} else {
					runtime.Gosched()
				}
				f()
			}
		}()
	}
	stop := make(chan struct{})
	var chaos sync.WaitGroup
	chaos.Add(1)
	go func() { // topology changes, reloads and cancellations
		defer chaos.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			switch i % 4 {
			case 0:
				l.SetNodes(all[:1+i%nodes])
			case 1:
				l.SetNodes(all)
			case 2:
				c := cfg
				c.QueueLength = 50 + i%300
				c.MaxWait = time.Duration(1+i%3) * time.Millisecond
				if err := l.Reconfigure(c); err != nil {
					t.Error(err)
				}
			case 3:
				l.CancelFlow(uint64(i % 32))
			}
			time.Sleep(200 * time.Microsecond)
		}
	}()

	var gs sync.WaitGroup
	for g := range goroutines {
		gs.Add(1)
		go func() {
			defer gs.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			outstanding := make(chan struct{}, 8) // a closed-loop client
			done := func() { <-outstanding }
			for i := range perG {
				var cands []NodeID
				if i%3 == 0 {
					cands = all[rng.IntN(nodes):][:1]
				}
				if i%7 == 0 {
					if p, ok := l.TryAcquire(cands); ok { // a hedge
						outstanding <- struct{}{}
						st.wg.Add(1)
						(&stressWaiter{st: st, path: 1 + rng.IntN(11), done: done}).Admitted(p, time.Now())
					}
				}
				var deadline time.Time
				if i%5 == 0 {
					deadline = time.Now().Add(time.Millisecond)
				}
				outstanding <- struct{}{}
				st.wg.Add(1)
				l.Acquire(&stressWaiter{st: st, path: rng.IntN(12), done: done}, uint64(g*2+i%2), i%3, cands, deadline)
			}
		}()
	}
	gs.Wait()
	close(stop)
	chaos.Wait()
	l.Close() // rejects whatever is still queued
	st.wg.Wait()
	close(st.async)
	workers.Wait()

	s := l.Stats()
	if s.InFlight != 0 || s.Queued != 0 {
		t.Fatalf("after everything ended: %d in flight, %d queued; want 0 and 0", s.InFlight, s.Queued)
	}
	for _, n := range s.Nodes {
		if n.InFlight != 0 {
			t.Fatalf("node %d has %d in flight at the end", n.ID, n.InFlight)
		}
	}
	if s.DoubleReleases != 0 {
		t.Fatalf("%d double releases", s.DoubleReleases)
	}
	if got := st.released.Load(); got != int64(s.Admitted) {
		t.Fatalf("%d permits released, %d granted; want equal", got, s.Admitted)
	}
	var rejected uint64
	for _, n := range s.Rejected {
		rejected += n
	}
	if total := int64(s.Admitted) + int64(rejected); total != st.admitted.Load()+st.rejected.Load() || st.rejected.Load() != int64(rejected) {
		t.Fatalf("limiter counted %d admitted and %d rejected, waiters %d and %d", s.Admitted, rejected, st.admitted.Load(), st.rejected.Load())
	}
	if st.moves.Load() == 0 {
		t.Errorf("no permit was moved")
	}
	t.Logf("admitted %d, rejected %v, moved %d", s.Admitted, s.Rejected, st.moves.Load())
}

// Each way a request can end gives its permit back exactly once: capacity
// is whole again afterwards, and a second Release would panic
// (DebugPermits).
func TestEveryPathReturnsThePermitOnce(t *testing.T) {
	const limit = 2
	paths := map[string]func(t *testing.T, l *Limiter){
		"result": func(t *testing.T, l *Limiter) {
			p, _ := l.TryAcquire(nil)
			p.Release(Success, time.Millisecond)
		},
		"error overloaded": func(t *testing.T, l *Limiter) {
			p, _ := l.TryAcquire(nil)
			p.Release(Overloaded, time.Millisecond)
		},
		"error other": func(t *testing.T, l *Limiter) {
			p, _ := l.TryAcquire(nil)
			p.Release(Failure, time.Millisecond)
		},
		"server timeout": func(t *testing.T, l *Limiter) {
			p, _ := l.TryAcquire(nil)
			p.Release(Timeout, 2*time.Second)
		},
		"connection died": func(t *testing.T, l *Limiter) {
			p, _ := l.TryAcquire(nil)
			p.Release(Failure, 0)
		},
		"client gone while admitted": func(t *testing.T, l *Limiter) {
			r := &rec{t: t, then: func(r *rec) { r.permit.Release(Dropped, 0) }}
			l.Acquire(r, 1, 0, nil, time.Time{})
		},
		"client gone while queued": func(t *testing.T, l *Limiter) {
			a, _ := l.TryAcquire(nil)
			b, _ := l.TryAcquire(nil)
			r := &rec{t: t}
			l.Acquire(r, 9, 0, nil, time.Time{})
			l.CancelFlow(9)
			if r.reason.Kind != Cancelled {
				t.Fatalf("queued request of a closed connection: %+v; want Cancelled", r.reason)
			}
			a.Release(Success, 0)
			b.Release(Success, 0)
		},
		"queue timeout": func(t *testing.T, l *Limiter) {
			a, _ := l.TryAcquire(nil)
			b, _ := l.TryAcquire(nil)
			r := &rec{t: t}
			l.Acquire(r, 9, 0, nil, time.Time{})
			l.clock.(*fakeClock).Advance(2 * DefaultMaxWait)
			l.Sweep()
			if r.reason.Kind != QueueTimeout {
				t.Fatalf("%+v; want QueueTimeout", r.reason)
			}
			a.Release(Success, 0)
			b.Release(Success, 0)
		},
		"admitted from the queue": func(t *testing.T, l *Limiter) {
			a, _ := l.TryAcquire(nil)
			b, _ := l.TryAcquire(nil)
			r := &rec{t: t}
			l.Acquire(r, 9, 0, nil, time.Time{})
			a.Release(Success, 0)
			r.permit.Release(Success, 0)
			b.Release(Success, 0)
		},
	}
	for name, path := range paths {
		t.Run(name, func(t *testing.T) {
			l, _ := newTestLimiter(t, Config{NodeLimit: limit}, 1)
			path(t, l)
			checkWhole(t, l, limit)
		})
	}
	t.Run("close with permits out and requests queued", func(t *testing.T) {
		l, _ := newTestLimiter(t, Config{NodeLimit: limit}, 1)
		a, _ := l.TryAcquire(nil)
		b, _ := l.TryAcquire(nil)
		r := &rec{t: t}
		l.Acquire(r, 9, 0, nil, time.Time{})
		l.Close()
		if r.reason.Kind != Shutdown {
			t.Fatalf("%+v; want Shutdown", r.reason)
		}
		a.Release(Success, 0)
		b.Release(Dropped, 0)
		if s := l.Stats(); s.InFlight != 0 || s.Queued != 0 {
			t.Fatalf("after Close and the releases: %d in flight, %d queued", s.InFlight, s.Queued)
		}
	})
}

// checkWhole asserts nothing is out and the full limit can be taken again.
func checkWhole(t *testing.T, l *Limiter, limit int) {
	t.Helper()
	if s := l.Stats(); s.InFlight != 0 || s.Queued != 0 || s.DoubleReleases != 0 {
		t.Fatalf("in flight %d, queued %d, double releases %d; want all 0", s.InFlight, s.Queued, s.DoubleReleases)
	}
	var ps []Permit
	for range limit {
		p, ok := l.TryAcquire(nil)
		if !ok {
			t.Fatalf("only %d of %d permits available afterwards", len(ps), limit)
		}
		ps = append(ps, p)
	}
	for _, p := range ps {
		p.Release(Success, 0)
	}
}
