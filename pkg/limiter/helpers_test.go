package limiter

import (
	"container/heap"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// fakeClock is a Clock that moves only when told.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// rec is a Waiter that records its one answer (and complains about more).
type rec struct {
	t      testing.TB
	id     int
	calls  int
	ok     bool
	permit Permit
	reason Reason
	order  *[]int // admissions are appended here, when set
	then   func(*rec)
}

func (r *rec) Admitted(p Permit, _ time.Time) {
	r.calls++
	if r.calls > 1 {
		r.t.Errorf("waiter %d answered %d times", r.id, r.calls)
	}
	r.ok, r.permit = true, p
	if r.order != nil {
		*r.order = append(*r.order, r.id)
	}
	if r.then != nil {
		r.then(r)
	}
}

func (r *rec) Rejected(reason Reason) {
	r.calls++
	if r.calls > 1 {
		r.t.Errorf("waiter %d answered %d times", r.id, r.calls)
	}
	r.reason = reason
	if r.then != nil {
		r.then(r)
	}
}

func (r *rec) pending() bool { return r.calls == 0 }

// newTestLimiter returns a Limiter on a fake clock with nodes 0..nodes-1
// and permit misuse panicking.
func newTestLimiter(t testing.TB, cfg Config, nodes int) (*Limiter, *fakeClock) {
	t.Helper()
	clk := newFakeClock()
	cfg.DebugPermits = true
	l, err := New(cfg, clk, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	ids := make([]NodeID, nodes)
	for i := range ids {
		ids[i] = NodeID(i)
	}
	if err := l.SetNodes(ids); err != nil {
		t.Fatal(err)
	}
	return l, clk
}

// sim is a discrete-event simulation driving a Limiter on a fake clock:
// events run in time order on one goroutine, and Sweep runs every tick, as
// the Limiter's goroutine would.
type sim struct {
	clk    *fakeClock
	base   time.Time
	now    time.Duration
	events eventHeap
	seq    int
	rng    *rand.Rand
}

type event struct {
	at  time.Duration
	seq int
	fn  func()
}

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	return h[i].at < h[j].at || h[i].at == h[j].at && h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

func newSim(clk *fakeClock, seed uint64) *sim {
	return &sim{clk: clk, base: clk.Now(), rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

func (s *sim) after(d time.Duration, fn func()) {
	s.seq++
	heap.Push(&s.events, event{at: s.now + d, seq: s.seq, fn: fn})
}

// every runs fn every period until the simulation stops.
func (s *sim) every(period time.Duration, fn func()) {
	var tick func()
	tick = func() {
		fn()
		s.after(period, tick)
	}
	s.after(period, tick)
}

// run runs the events due until the simulated time until.
func (s *sim) run(until time.Duration) {
	for s.events.Len() > 0 && s.events[0].at <= until {
		e := heap.Pop(&s.events).(event)
		s.now = e.at
		s.clk.Set(s.base.Add(s.now))
		e.fn()
	}
	s.now = until
	s.clk.Set(s.base.Add(s.now))
}

// backend is a simulated Cassandra node: capacity servers, each serving
// one request at a time, first come first served, with exponential service
// times. Up to capacity requests in flight the latency is the service time;
// past it requests queue and latency climbs linearly with the excess.
type backend struct {
	s        *sim
	capacity int
	service  time.Duration // mean of the exponential part
	// fixed is added to every service time: a node whose fastest answer
	// still takes a while (a read that touches disk, a remote network).
	fixed   time.Duration
	busy    int
	waiting []func() // requests queued inside the node
	// overloadAbove, when > 0, answers OVERLOADED at once to a request that
	// finds this many requests already in the node.
	overloadAbove int
	// contention, when > 0, stretches a request's service time by
	// 1+contention*(requests in the node when it starts): a node whose
	// cores the application shares, where more concurrency still serves
	// more but every request gets slower, with no queue at all.
	contention float64
	completed  uint64 // the node's own count of answers (NodeRead)
}

// send serves one request and calls done with its outcome and latency.
func (b *backend) send(done func(Outcome, time.Duration)) {
	start := b.s.now
	if b.overloadAbove > 0 && b.busy+len(b.waiting) >= b.overloadAbove {
		b.s.after(50*time.Microsecond, func() { done(Overloaded, 50*time.Microsecond) })
		return
	}
	serve := func() {
		b.busy++
		d := b.fixed + time.Duration(b.s.rng.ExpFloat64()*float64(b.service))
		d = time.Duration(float64(d) * (1 + b.contention*float64(b.busy)))
		b.s.after(d, func() {
			b.busy--
			b.completed++
			b.startWaiting()
			done(Success, b.s.now-start)
		})
	}
	if b.busy < b.capacity {
		serve()
	} else {
		b.waiting = append(b.waiting, serve)
	}
}

func (b *backend) startWaiting() {
	for b.busy < b.capacity && len(b.waiting) > 0 {
		next := b.waiting[0]
		b.waiting = b.waiting[1:]
		next()
	}
}

func (b *backend) setCapacity(c int) {
	b.capacity = c
	b.startWaiting()
}
