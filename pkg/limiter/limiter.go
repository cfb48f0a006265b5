// Package limiter bounds the requests the proxy has in flight to Cassandra,
// per node and for the whole cluster, and holds the excess in a bounded,
// fair queue, so that clients see latency rather than errors until the
// queue is genuinely full.
//
// Admission is asynchronous: Acquire never blocks, and answers through a
// Waiter either at once (a permit was free, or the queue is full) or later,
// from whichever goroutine frees a permit or expires the wait. There is no
// goroutine per waiting request; one goroutine owned by the Limiter expires
// waits (see New). An admitted request holds a Permit, a small value, and
// releases it exactly once with the request's Outcome, which drives the
// adaptive limit.
//
// The queue is FIFO per flow (a client connection), round robin across
// flows and weighted across priority classes; a CoDel policy turns away the
// requests of a standing queue (see Config.QueueTarget).
//
// All methods of Limiter and Permit are safe for concurrent use.
package limiter

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// NodeID is the index the proxy assigns to a Cassandra node: small dense
// integers from 0, below MaxNodes.
type NodeID int

// MaxNodes bounds NodeID values.
const MaxNodes = 1 << 16

// Clock tells the time. Tests inject a fake one.
type Clock interface {
	Now() time.Time
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// Waiter receives the answer to an Acquire: exactly one call of Admitted or
// Rejected. The call comes from Acquire itself, or later from whatever
// goroutine freed a permit (a Release, usually on a backend connection's
// read loop), expired the wait (the Limiter's ticker), reloaded the config
// or closed the Limiter. No Limiter lock is held during the call, so it may
// call back into the Limiter (Release a permit it cannot use, Acquire
// again) but it must not block, and must not call Sweep. Admitted's now is
// when the Limiter admitted the request, by its clock, so that a caller
// sending the request at once need not read the clock again; it is the zero
// Time when the Limiter did not read its clock (Acquire, admitted at once).
type Waiter interface {
	Admitted(p Permit, now time.Time)
	Rejected(Reason)
}

// A ViaWaiter is a Waiter that can leave part of its work to the goroutine
// whose Permit.ReleaseVia admitted it: that goroutine goes on working
// before it blocks, so a request it admits can have its write batched with
// the next ones instead of waking a writer of its own (one wake-up per
// request is most of what queueing costs a busy proxy). A ViaWaiter
// admitted any other way gets Admitted.
type ViaWaiter interface {
	Waiter
	AdmittedVia(p Permit, now time.Time, via any)
}

// Limiter admits requests to Cassandra nodes. Create it with New; the zero
// value is not usable. It is safe for concurrent use.
type Limiter struct {
	clock Clock
	epoch time.Time

	reg       prometheus.Registerer
	collector *collector
	// nodeName, when set, gives the node label of the metrics (else the id).
	nodeName  atomic.Pointer[func(NodeID) string]
	queueWait prometheus.Histogram

	// The concurrency argument is a single mutex: every admission, release
	// and queue change takes it, for tens of nanoseconds, and no callback or
	// metric update runs under it (metrics are read at scrape time). A
	// released permit goes to a queued request before the lock is dropped,
	// so new arrivals cannot barge ahead of the queue.
	mu          sync.Mutex
	cfg         Config
	closed      bool
	nodes       []node   // by NodeID
	active      []NodeID // nodes that may be admitted to, ascending
	rr          uint32   // rotates the start of node scans, so ties spread
	inflight    int
	globalLimit int // 0 = none
	slots       []uint32
	freeSlots   []uint32
	q           queue

	admitted uint64
	rejected [numKinds]uint64

	// rate is the admissions per ns, smoothed over about rateTau, as of
	// rateAt when admitted was rateAdmitted: with every permit busy it is
	// the rate at which the queue drains.
	rate         float64
	rateAt       int64
	rateAdmitted uint64

	limitChanges   uint64
	doubleReleases uint64

	sweepMu  sync.Mutex // serializes Sweep; guards sweepBuf
	sweepBuf []action
	sweptAt  int64 // the last Sweep's time, under mu (idle.go)

	cpuPressure float64 // the last CPUPressure (-1: unknown), under mu

	stop chan struct{}
	done chan struct{}
}

type node struct {
	active   bool
	inflight int32
	limit    int32 // slots: the exact limit rounded up
	changes  uint64
	ad       adaptive
	fl       fleet

	// exact is the limit as the law set it. When it is not a whole number
	// (the fleet law), frac is its fractional part and the last slot is
	// paced: see pace.
	exact  float64
	frac   float64
	paceAt int64 // the last slot is free from then on
	// late is how long after paceAt a request waiting for the last slot
	// got it (the queue is served on releases and ticks): the next rest
	// is that much shorter, so that the slot is held frac of the time.
	late int64
	rng  *rand.Rand // restDraw's generator (nil: not seeded)
	// blocked: a request found no room on the node since the fleet law's
	// window began (the limit bound, as opposed to an idle client).
	blocked bool
	// unreadable: the node cannot report its counts, and the fleet law
	// holds it at NodeLimit (unreadable.go).
	unreadable bool
	// idleNs is how long the node had nothing of this sidecar in flight
	// while nothing was queued, all time, as Sweep samples it: the fleet
	// law judges the node's rate over the rest (idle.go).
	idleNs int64
}

// New returns a Limiter with no nodes: call SetNodes before traffic, until
// then every request queues.
//
// clock nil means the real clock, and then New starts the one goroutine
// that calls Sweep every Config.TickInterval until Close. With an injected
// clock no goroutine is started and the caller drives time by calling Sweep.
//
// reg nil means no metrics. Otherwise the cqlgate_limiter_* metrics are
// registered on reg (see metrics.go) and unregistered by Close; New fails if
// they are already registered.
func New(cfg Config, clock Clock, reg prometheus.Registerer) (*Limiter, error) {
	c, err := cfg.normalized()
	if err != nil {
		return nil, err
	}
	realTime := clock == nil
	if realTime {
		clock = realClock{}
	}
	l := &Limiter{clock: clock, epoch: clock.Now(), cfg: c, globalLimit: c.GlobalLimit, reg: reg, cpuPressure: -1}
	l.q.init(c.ClassWeights, int64(c.TickInterval), int64(c.MaxWait), 0)
	l.queueWait = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "cqlgate_limiter_queue_wait_seconds",
		Help:    "Time requests admitted from the queue waited for their permit.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14), // 0.5ms .. 4s
	})
	if reg != nil {
		l.collector = newCollector(l)
		if err := reg.Register(l.collector); err != nil {
			return nil, fmt.Errorf("limiter: registering metrics: %w", err)
		}
		if err := reg.Register(l.queueWait); err != nil {
			reg.Unregister(l.collector)
			return nil, fmt.Errorf("limiter: registering metrics: %w", err)
		}
	}
	if realTime {
		l.stop, l.done = make(chan struct{}), make(chan struct{})
		t := sweeper{l: l, ticker: time.NewTicker(c.TickInterval)}
		go t.run()
	}
	return l, nil
}

// sweeper is the Limiter's only goroutine (a named type so stacks read well).
type sweeper struct {
	l      *Limiter
	ticker *time.Ticker
}

func (s sweeper) run() {
	defer close(s.l.done)
	defer s.ticker.Stop()
	for {
		select {
		case <-s.l.stop:
			return
		case <-s.ticker.C:
			s.l.Sweep()
		}
	}
}

// now returns the time since the epoch in ns.
func (l *Limiter) now() int64 { return int64(l.clock.Now().Sub(l.epoch)) }

// SetNodes sets the nodes requests may be admitted to. A node that leaves
// keeps its permits (they are released as usual) and rejects nobody; it
// just stops being chosen, and requests that can only go to it wait in the
// queue. A node that joins (or comes back) starts at NodeLimit, or at
// MinLimit in slow start when adaptive. It returns an error, and changes
// nothing, if an id is negative or not below MaxNodes. Duplicates are
// ignored.
func (l *Limiter) SetNodes(ids []NodeID) error {
	for _, id := range ids {
		if id < 0 || id >= MaxNodes {
			return fmt.Errorf("limiter: node id %d out of range [0, %d)", id, MaxNodes)
		}
	}
	active := slices.Clone(ids)
	slices.Sort(active)
	active = slices.Compact(active)

	l.mu.Lock()
	now := l.now()
	if len(active) > 0 && int(active[len(active)-1]) >= len(l.nodes) {
		l.nodes = append(l.nodes, make([]node, int(active[len(active)-1])+1-len(l.nodes))...)
	}
	for _, id := range l.active {
		l.nodes[id].active = false
	}
	for _, id := range active {
		n := &l.nodes[id]
		n.active = true
		if !slices.Contains(l.active, id) {
			l.startNodeLocked(n, now)
		}
	}
	l.active = active
	l.drainLocked(now, nil)
	return nil
}

// startNodeLocked gives a joining node its initial limit.
func (l *Limiter) startNodeLocked(n *node, now int64) {
	switch {
	case l.cfg.Adaptive && l.cfg.Law == LawFleet:
		n.fl.reset(&l.cfg, now)
		n.limit = l.limitSlots(n, l.fleetLimit(n))
	case l.cfg.Adaptive:
		n.ad.reset(&l.cfg, now, n.inflight)
		n.limit = l.limitSlots(n, n.ad.limit)
	default:
		n.limit = l.limitSlots(n, float64(l.cfg.NodeLimit))
	}
}

// Acquire asks for a permit on one of candidates (nil means any node) for a
// request of the given flow (the client connection's id) and priority
// class, and answers through w (see Waiter), exactly once.
//
// Fast path: when nothing is queued and a candidate node and the global
// limit have room, the least loaded candidate relative to its limit is
// chosen and w.Admitted runs before Acquire returns. Otherwise the request
// queues, or, when the queue is full, w.Rejected(QueueFull) runs before
// Acquire returns. A queued request waits at most until the earlier of
// deadline (zero means none) and MaxWait from now. A deadline already past
// is rejected at once (Deadline) unless the fast path admits the request.
//
// The Limiter keeps candidates until it calls w and never modifies it: the
// caller must not change it meanwhile. There is no cancellation of a single
// request: a Waiter whose client went away is still called, and releases
// the permit at once with Dropped; CancelFlow withdraws a whole connection.
// After Close, w.Rejected(Shutdown) runs before Acquire returns. A nil w
// panics when it is called.
//
// Cost: about 50 ns and no allocation on the fast path; queueing and
// handing a permit over from the queue cost about 300 ns (two clock reads
// included) and allocate only when the queue, or the set of flows with
// requests queued, grows past its largest size so far.
func (l *Limiter) Acquire(w Waiter, flow uint64, class int, candidates []NodeID, deadline time.Time) {
	l.acquire(w, flow, class, candidates, deadline, 0)
}

// AcquireAt is Acquire for a caller that has just read the Limiter's clock
// itself: now saves the Limiter a reading (tens of nanoseconds, on every
// request that queues or is shed). now must come from the same clock.
func (l *Limiter) AcquireAt(w Waiter, flow uint64, class int, candidates []NodeID, deadline, now time.Time) {
	l.acquire(w, flow, class, candidates, deadline, max(int64(now.Sub(l.epoch)), 1))
}

// acquire is Acquire with the time since the epoch in ns (0: read the clock).
func (l *Limiter) acquire(w Waiter, flow uint64, class int, candidates []NodeID, deadline time.Time, now int64) {
	l.mu.Lock()
	if l.closed {
		l.rejected[Shutdown]++
		l.mu.Unlock()
		w.Rejected(Reason{Kind: Shutdown})
		return
	}
	if l.q.n == 0 {
		if p, ok := l.admitLocked(candidates, &now); ok {
			l.mu.Unlock()
			var at time.Time // Acquire, admitted at once, has not read the clock
			if now != 0 {
				at = l.epoch.Add(time.Duration(now))
			}
			w.Admitted(p, at)
			return
		}
	}
	if l.q.n >= l.cfg.QueueLength {
		l.rejected[QueueFull]++
		r := Reason{Kind: QueueFull, Limit: int64(max(l.cfg.QueueLength, 0))}
		l.mu.Unlock()
		w.Rejected(r)
		return
	}
	if now == 0 {
		now = l.now()
	}
	dl := now + int64(l.cfg.MaxWait)
	byCaller := false
	if !deadline.IsZero() {
		if d := int64(deadline.Sub(l.epoch)); d < dl {
			dl, byCaller = d, true
		}
	}
	if dl <= now {
		l.rejected[Deadline]++
		l.mu.Unlock()
		w.Rejected(Reason{Kind: Deadline})
		return
	}
	if class < 0 || class >= len(l.cfg.ClassWeights) {
		class = 0
	}
	// Half the target: predictions are rough, and an arrival predicted
	// just under the target that then waits just over it would be dropped
	// after its wait, which is what shedding is there to avoid.
	if l.q.shed(flow, int32(class), now, int64(l.cfg.QueueInterval), l.rate, int64(l.cfg.QueueTarget/2)) {
		l.rejected[Shed]++
		r := Reason{Kind: Shed, Limit: int64(l.cfg.QueueTarget)}
		l.mu.Unlock()
		w.Rejected(r)
		return
	}
	wasQueued := l.q.n > 0
	l.q.push(w, candidates, flow, int32(class), now, dl, byCaller)
	if !wasQueued {
		// The fast path just failed: no room for this request.
		l.mu.Unlock()
		return
	}
	l.drainLocked(now, nil)
}

// rateTau is the time constant of the admission rate's smoothing: long
// enough to even out ticks, short enough to follow a node slowing down.
const rateTau = 100 * time.Millisecond

// updateRateLocked folds the admissions since the last update into rate.
func (l *Limiter) updateRateLocked(now int64) {
	dt := now - l.rateAt
	if dt <= 0 {
		return
	}
	inst := float64(l.admitted-l.rateAdmitted) / float64(dt)
	if l.rateAt == 0 {
		l.rate = inst
	} else {
		l.rate += (inst - l.rate) * (1 - math.Exp(-float64(dt)/float64(rateTau)))
	}
	l.rateAt, l.rateAdmitted = now, l.admitted
}

// TryAcquire returns a permit on the least loaded of candidates (nil means
// any node) if one has room right now, and never queues. It fails while
// requests are queued, so speculative work (hedges) never takes capacity
// from waiting requests, and after Close.
func (l *Limiter) TryAcquire(candidates []NodeID) (Permit, bool) {
	l.mu.Lock()
	if l.closed || l.q.n > 0 {
		l.mu.Unlock()
		return Permit{}, false
	}
	var now int64
	p, ok := l.admitLocked(candidates, &now)
	l.mu.Unlock()
	return p, ok
}

// admitLocked grants a permit on the least loaded candidate with room.
// now is the time since the epoch in ns, or 0: read when pacing needs it.
func (l *Limiter) admitLocked(cands []NodeID, now *int64) (Permit, bool) {
	if l.globalLimit > 0 && l.inflight >= l.globalLimit {
		return Permit{}, false
	}
	id := l.pickLocked(cands, now)
	if id < 0 {
		return Permit{}, false
	}
	if n := &l.nodes[id]; n.frac > 0 && n.inflight == n.limit-1 {
		n.late = 0 // nobody was waiting
	}
	return l.grantLocked(id), true
}

// pickLocked returns the candidate (nil: active node) with room whose in
// flight is the lowest fraction of its limit, or -1. The scan starts at a
// rotating offset so that ties, such as idle nodes, share the load. now is
// as for admitLocked.
func (l *Limiter) pickLocked(cands []NodeID, now *int64) int {
	if cands == nil {
		cands = l.active
	}
	k := len(cands)
	if k == 0 {
		return -1
	}
	start := 0
	if k > 1 {
		l.rr++
		start = int(l.rr % uint32(k))
	}
	best := -1
	var bi, bl int64
	for i := range k {
		j := start + i
		if j >= k {
			j -= k
		}
		id := cands[j]
		if uint(id) >= uint(len(l.nodes)) {
			continue
		}
		n := &l.nodes[id]
		if !n.active || !l.room(n, now) {
			continue
		}
		// n.inflight/n.limit < bi/bl without dividing.
		if best < 0 || int64(n.inflight)*bl < bi*int64(n.limit) {
			best, bi, bl = int(id), int64(n.inflight), int64(n.limit)
		}
	}
	return best
}

// roomLocked reports whether some request could be admitted now.
func (l *Limiter) roomLocked(now *int64) bool {
	if l.globalLimit > 0 && l.inflight >= l.globalLimit {
		return false
	}
	for _, id := range l.active {
		if l.room(&l.nodes[id], now) {
			return true
		}
	}
	return false
}

func (l *Limiter) grantLocked(id int) Permit {
	n := &l.nodes[id]
	if l.cfg.DebugPermits && (!n.active || n.inflight >= n.limit || l.globalLimit > 0 && l.inflight >= l.globalLimit) {
		msg := fmt.Sprintf("limiter: admitting to node %d (active %v) with %d/%d in flight, %d/%d globally", id, n.active, n.inflight, n.limit, l.inflight, l.globalLimit)
		l.mu.Unlock() // so that the test's cleanup can still Close
		panic(msg)
	}
	n.inflight++
	if n.inflight > n.ad.maxInflight {
		n.ad.maxInflight = n.inflight
	}
	l.inflight++
	l.admitted++
	var s uint32
	if k := len(l.freeSlots); k > 0 {
		s = l.freeSlots[k-1]
		l.freeSlots = l.freeSlots[:k-1]
	} else {
		s = uint32(len(l.slots))
		l.slots = append(l.slots, 1)
	}
	return Permit{l: l, slot: s, gen: l.slots[s], node: int32(id)}
}

// restartBinding forgets whether a request found no room on n and the
// most it had in flight: a new window, or a raise in the middle of one,
// judges the limit from here.
func (n *node) restartBinding() { n.blocked, n.ad.maxInflight = false, n.inflight }

// adaptLocked closes the due sample windows of the active nodes.
func (l *Limiter) adaptLocked(now int64) {
	for _, id := range l.active {
		n := &l.nodes[id]
		if l.cfg.Law == LawFleet {
			if n.unreadable {
				continue
			}
			if n.inflight == 0 && l.q.n == 0 && n.fl.count == 0 && n.fl.drops == 0 {
				// Idle (nothing in flight, nobody waiting, as a paced
				// slot's clients would): growth and cuts are per Window
				// of time the limit was in use, and a window left open
				// over an idle minute grew the limit sixfold when the
				// clients came back (TestFleetLawIgnoresAnIdleSpan).
				// What bound it or peaked before the pause is no part
				// of the window either.
				n.fl.startWindow(now)
				n.restartBinding()
				continue
			}
			if n.fl.due(now, &l.cfg) {
				limited, peak := n.blocked, n.ad.maxInflight
				n.fl.noteDemand(float64(peak) + l.queuedFor(n))
				n.restartBinding()
				l.setLimitLocked(n, n.fl.update(now, limited, peak, &l.cfg))
			}
			continue
		}
		due, stale := n.ad.due(now, &l.cfg)
		switch {
		case due:
			l.setLimitLocked(n, n.ad.update(now, n.inflight, &l.cfg))
		case stale:
			n.ad.startWindow(now, n.inflight)
		}
	}
}

// queuedFor is node n's share of the queued requests: all of them with one
// active node, else in proportion to what it has in flight. A queued
// request may go to any of its candidate nodes, and they are not counted
// per node.
func (l *Limiter) queuedFor(n *node) float64 {
	if l.q.n == 0 {
		return 0
	}
	if len(l.active) == 1 {
		return float64(l.q.n)
	}
	if l.inflight == 0 {
		return 0
	}
	return float64(l.q.n) * float64(n.inflight) / float64(l.inflight)
}

// setLimitLocked sets a node's limit: whole slots, and for the fleet law a
// paced fraction of the last one.
func (l *Limiter) setLimitLocked(n *node, limit float64) {
	if v := l.limitSlots(n, limit); v != n.limit {
		n.limit = v
		n.changes++
		l.limitChanges++
	}
}

// CancelFlow withdraws every queued request of flow (in every class), for
// example when its client connection closed: their Waiters get
// Rejected(Cancelled) before CancelFlow returns. Requests already admitted
// are not affected. It returns how many were withdrawn.
func (l *Limiter) CancelFlow(flow uint64) int {
	var out []action
	l.mu.Lock()
	for ci := range l.q.classes {
		fi, ok := l.q.byKey[flowKey{flow, int32(ci)}]
		if !ok {
			continue
		}
		for l.q.flows[fi].n > 0 {
			out = append(out, l.rejectLocked(l.q.flows[fi].head, Reason{Kind: Cancelled}))
		}
	}
	l.mu.Unlock()
	for i := range out {
		out[i].deliver(l, nil)
	}
	return len(out)
}

// Reconfigure applies a new Config without dropping anything: queued
// requests stay queued (a shorter QueueLength only turns new ones away, a
// new MaxWait applies to requests queued afterwards), admitted requests keep
// their permits even above a lowered limit, and raised limits admit from the
// queue at once. Switching to Adaptive restarts every node at MinLimit in
// slow start; a change of adaptive settings keeps the learned limits,
// clamped to MinLimit..MaxLimit. TickInterval cannot change. On error
// nothing changes.
func (l *Limiter) Reconfigure(cfg Config) error {
	c, err := cfg.normalized()
	if err != nil {
		return err
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	c.TickInterval = l.cfg.TickInterval
	old := l.cfg
	l.cfg = c
	l.globalLimit = c.GlobalLimit
	l.q.setWeights(c.ClassWeights)
	l.q.resizeWheel(int64(max(c.MaxWait, old.MaxWait)))
	now := l.now()
	for _, id := range l.active {
		n := &l.nodes[id]
		switch {
		case !c.Adaptive:
			l.setLimitLocked(n, float64(c.NodeLimit))
		case c.Law == LawFleet && (!old.Adaptive || old.Law != LawFleet):
			n.fl.reset(&c, now)
			l.setLimitLocked(n, l.fleetLimit(n))
		case c.Law == LawFleet:
			n.fl.limit = min(max(n.fl.limit, c.Floor), float64(c.MaxLimit))
			l.setLimitLocked(n, l.fleetLimit(n))
		case !old.Adaptive || old.Law != LawGradient:
			n.ad.reset(&c, now, n.inflight)
			l.setLimitLocked(n, n.ad.limit)
		default:
			n.ad.limit = min(max(n.ad.limit, float64(c.MinLimit)), float64(c.MaxLimit))
			l.setLimitLocked(n, n.ad.limit)
		}
	}
	l.drainLocked(now, nil)
	return nil
}

// Close rejects every queued request with Shutdown (the Waiters are called
// before Close returns), stops the Limiter's goroutine and unregisters its
// metrics. Afterwards Acquire rejects with Shutdown and TryAcquire fails;
// Release keeps working for the permits still out. Close is idempotent. It
// waits for the Limiter's goroutine, so it must not be called from a
// Waiter.
func (l *Limiter) Close() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	out := make([]action, 0, l.q.n)
	for l.q.n > 0 {
		for ci := range l.q.classes {
			if c := &l.q.classes[ci]; c.n > 0 {
				out = append(out, l.rejectLocked(l.q.flows[c.cursor].head, Reason{Kind: Shutdown}))
			}
		}
	}
	l.mu.Unlock()
	if l.stop != nil {
		close(l.stop)
		<-l.done
	}
	for i := range out {
		out[i].deliver(l, nil)
	}
	if l.reg != nil {
		l.reg.Unregister(l.collector)
		l.reg.Unregister(l.queueWait)
	}
}

// SetNodeName makes the metrics label each node with name(id) instead of
// its number, e.g. the address the proxy dials, as the backend metrics do.
func (l *Limiter) SetNodeName(name func(NodeID) string) { l.nodeName.Store(&name) }
