package limiter

import (
	"testing"
	"time"
)

// queueHarness holds the only permit of a one-node, limit-1 Limiter and
// hands it on one dequeue at a time, so a test can watch the queue's order.
type queueHarness struct {
	t        *testing.T
	l        *Limiter
	clk      *fakeClock
	held     Permit
	order    []*rec          // admissions, in order
	waits    []time.Duration // their waits in the queue
	rejWaits []time.Duration // waits of the requests rejected as a standing queue or shed
	rejAt    []time.Time     // and when they were rejected
}

func newQueueHarness(t *testing.T, cfg Config) *queueHarness {
	cfg.NodeLimit = 1
	if cfg.QueueLength == 0 {
		cfg.QueueLength = 100000
	}
	l, clk := newTestLimiter(t, cfg, 1)
	h := &queueHarness{t: t, l: l, clk: clk}
	p, ok := l.TryAcquire(nil)
	if !ok {
		t.Fatal("no first permit")
	}
	h.held = p
	return h
}

func (h *queueHarness) add(id int, flow uint64, class int) *rec {
	r := &rec{t: h.t, id: id}
	enq := h.clk.Now()
	r.then = func(r *rec) {
		if r.ok {
			h.order = append(h.order, r)
			h.waits = append(h.waits, h.clk.Now().Sub(enq))
			h.held = r.permit
		} else if r.reason.Kind == StandingQueue || r.reason.Kind == Shed {
			h.rejWaits = append(h.rejWaits, h.clk.Now().Sub(enq))
			h.rejAt = append(h.rejAt, h.clk.Now())
		}
	}
	h.l.Acquire(r, flow, class, nil, time.Time{})
	return r
}

// next releases the held permit, which admits the next waiter.
func (h *queueHarness) next() {
	p := h.held
	h.held = Permit{}
	p.Release(Success, time.Millisecond)
}

// One greedy connection with 10,000 queued requests cannot starve another
// with 10: round robin across flows serves the small one's requests every
// other dequeue.
func TestGreedyFlowDoesNotStarveSmallFlow(t *testing.T) {
	h := newQueueHarness(t, Config{})
	for i := range 10000 {
		h.add(i, 1, 0)
	}
	var small []*rec
	for i := range 10 {
		small = append(small, h.add(100000+i, 2, 0))
	}
	dequeues := 0
	for {
		done := true
		for _, r := range small {
			done = done && r.ok
		}
		if done {
			break
		}
		h.next()
		dequeues++
		if dequeues > 10000 {
			t.Fatal("small flow never served")
		}
	}
	if dequeues > 20 {
		t.Fatalf("small flow's 10 requests took %d dequeues behind a 10,000-request flow; want at most 20", dequeues)
	}
	h.l.CancelFlow(1)
}

func TestPriorityClassesGetTheirShare(t *testing.T) {
	h := newQueueHarness(t, Config{ClassWeights: []int{3, 1}})
	for i := range 2000 {
		h.add(i, uint64(i%7), i%2) // both classes backlogged, several flows each
	}
	for range 400 {
		h.next()
	}
	got := [2]int{}
	for _, r := range h.order {
		got[r.id%2]++
	}
	if got[1] < 99 || got[1] > 101 {
		t.Fatalf("of 400 dequeues class 0 (weight 3) got %d and class 1 (weight 1) %d; want 300 and 100", got[0], got[1])
	}
	h.l.Close()
}

// A class with nothing waiting leaves its share to the others.
func TestIdleClassLeavesItsShare(t *testing.T) {
	h := newQueueHarness(t, Config{ClassWeights: []int{1, 9}})
	for i := range 50 {
		h.add(i, 1, 0)
	}
	for range 50 {
		h.next()
	}
	if len(h.order) != 50 {
		t.Fatalf("with class 1 idle class 0 got %d of 50 dequeues; want all", len(h.order))
	}
	// An unknown class is served as class 0.
	r := h.add(99, 1, 7)
	h.next()
	if !r.ok {
		t.Fatal("request of an unknown class not served")
	}
}

// Under sustained overload (requests arrive twice as fast as they are
// served) the queue stands: once waits have stayed above QueueTarget for
// QueueInterval, requests that waited longer than the target are turned
// away, and those admitted wait about the target instead of growing
// towards MaxWait.
func TestStandingQueuePolicyEngagesUnderSustainedOverload(t *testing.T) {
	const (
		target   = 50 * time.Millisecond
		interval = 200 * time.Millisecond
	)
	h := newQueueHarness(t, Config{MaxWait: 10 * time.Second, QueueTarget: target, QueueInterval: interval})
	s := newSim(h.clk, 1)
	id := 0
	s.every(time.Millisecond, func() { id++; h.add(id, uint64(id%10), 0) }) // 1000/s
	s.every(2*time.Millisecond, h.next)                                     // 500/s
	standingSeen := false
	s.every(10*time.Millisecond, func() {
		h.l.Sweep()
		standingSeen = standingSeen || h.l.Stats().Standing
	})
	s.run(3 * time.Second)

	st := h.l.Stats()
	if st.Rejected[StandingQueue]+st.Rejected[Shed] == 0 || !standingSeen {
		t.Fatalf("no standing-queue rejections after 3s at twice the capacity (stats %+v)", st)
	}
	// Admissions in the second half waited about the target, not seconds.
	var worst time.Duration
	for _, w := range h.waits[len(h.waits)/2:] {
		worst = max(worst, w)
	}
	t.Logf("admitted %d, standing-queue rejections %d, shed %d, worst wait in the second half %s, first wait over target at #%d", len(h.order), st.Rejected[StandingQueue], st.Rejected[Shed], worst, firstOver(h.waits, target))
	if worst > target+10*time.Millisecond {
		t.Fatalf("admitted requests waited up to %s in the second half; want at most about the %s target", worst, target)
	}
	// Once the queue is known to stand, rejections are answered at
	// arrival; a request that did queue is only turned away after waiting
	// longer than the target (those queued before the policy engaged).
	late, lateSecondHalf, secondHalf := 0, 0, 0
	half := s.base.Add(1500 * time.Millisecond)
	for i, w := range h.rejWaits {
		inSecondHalf := h.rejAt[i].After(half)
		if inSecondHalf {
			secondHalf++
		}
		if w == 0 {
			continue
		}
		late++
		if inSecondHalf {
			lateSecondHalf++
		}
		if w <= target {
			t.Fatalf("a queued request that waited %s was rejected as part of a standing queue; want only waits over the %s target", w, target)
		}
	}
	t.Logf("%d of %d standing-queue rejections after a wait; in the second half %d of %d", late, len(h.rejWaits), lateSecondHalf, secondHalf)
	if lateSecondHalf*100 > secondHalf {
		t.Fatalf("%d of %d standing-queue rejections in the second half came after a wait; want at most 1%% (the rest at arrival)", lateSecondHalf, secondHalf)
	}
	// Goodput: the node stayed busy; only the excess was turned away.
	if len(h.order) < 1450 {
		t.Fatalf("%d admitted in 3s at a capacity of 500/s; want about 1500", len(h.order))
	}
	if st.Rejected[QueueTimeout] != 0 {
		t.Fatalf("%d queue timeouts; the policy should reject long before MaxWait", st.Rejected[QueueTimeout])
	}
	h.l.Close()
}

// A burst that drains within QueueInterval is served in full, even though
// its last requests wait longer than the target.
func TestStandingQueuePolicyLeavesBurstsAlone(t *testing.T) {
	const (
		target   = 10 * time.Millisecond
		interval = 100 * time.Millisecond
	)
	h := newQueueHarness(t, Config{MaxWait: 10 * time.Second, QueueTarget: target, QueueInterval: interval})
	s := newSim(h.clk, 1)
	for i := range 45 {
		h.add(i, uint64(i%3), 0) // all at once; served one per 2ms: the last waits 90ms
	}
	s.every(2*time.Millisecond, h.next)
	s.run(100 * time.Millisecond)
	if st := h.l.Stats(); st.Rejected[StandingQueue]+st.Rejected[Shed] != 0 || len(h.order) != 45 {
		t.Fatalf("burst of 45: %d admitted, %d rejected as a standing queue, %d shed; want all admitted", len(h.order), st.Rejected[StandingQueue], st.Rejected[Shed])
	}
	if worst := h.waits[len(h.waits)-1]; worst <= target {
		t.Fatalf("the last request waited %s; the test needs waits above the %s target", worst, target)
	}
}

// The policy can be switched off: the same overload then only meets
// MaxWait.
func TestStandingQueuePolicyDisabled(t *testing.T) {
	h := newQueueHarness(t, Config{MaxWait: 300 * time.Millisecond, QueueTarget: -1})
	s := newSim(h.clk, 1)
	id := 0
	s.every(time.Millisecond, func() { id++; h.add(id, uint64(id%10), 0) })
	s.every(2*time.Millisecond, h.next)
	s.every(10*time.Millisecond, h.l.Sweep)
	s.run(2 * time.Second)
	st := h.l.Stats()
	if st.Rejected[StandingQueue]+st.Rejected[Shed] != 0 || st.Rejected[QueueTimeout] == 0 {
		t.Fatalf("disabled policy: %d standing-queue, %d shed and %d timeout rejections; want 0, 0 and some", st.Rejected[StandingQueue], st.Rejected[Shed], st.Rejected[QueueTimeout])
	}
	h.l.Close()
}

func firstOver(ws []time.Duration, d time.Duration) int {
	for i, w := range ws {
		if w > d {
			return i
		}
	}
	return -1
}

// While a greedy flow's queue stands, its arrivals are turned away at
// once, but a quiet flow's are still queued and served: CoDel's state and
// the predicted wait are per flow, as the round robin serves them. Once
// the greedy flow's queue empties, its bursts queue again.
func TestSheddingSparesQuietFlowsAndEndsWithTheOverload(t *testing.T) {
	const target = 20 * time.Millisecond
	h := newQueueHarness(t, Config{MaxWait: 10 * time.Second, QueueTarget: target, QueueInterval: 100 * time.Millisecond})
	s := newSim(h.clk, 1)
	id := 0
	var quiet []*rec
	greedySends, quietSends := true, true
	s.every(500*time.Microsecond, func() { // 2000/s from flow 1
		if greedySends {
			id++
			h.add(id, 1, 0)
		}
	})
	s.every(20*time.Millisecond, func() { // 50/s from flow 2
		if quietSends {
			id++
			quiet = append(quiet, h.add(id, 2, 0))
		}
	})
	s.every(time.Millisecond, h.next) // serves 1000/s
	s.every(10*time.Millisecond, h.l.Sweep)
	s.run(2 * time.Second)

	st := h.l.Stats()
	if st.Rejected[Shed] < 500 {
		t.Fatalf("%d requests shed at twice the capacity; want the excess turned away at arrival", st.Rejected[Shed])
	}
	for i, r := range quiet {
		if !r.pending() && !r.ok {
			t.Fatalf("quiet flow's request %d rejected (%v); want every one served", i, r.reason)
		}
	}
	var worst time.Duration
	for _, w := range h.waits[len(h.waits)/2:] {
		worst = max(worst, w)
	}
	if worst > target {
		t.Fatalf("admitted requests of the second second waited up to %s; want at most the %s target", worst, target)
	}

	// The overload ends: the greedy flow pauses and its queue drains.
	greedySends, quietSends = false, false
	s.run(3 * time.Second)
	h.l.mu.Lock()
	n := h.l.q.n
	h.l.mu.Unlock()
	if n != 0 {
		t.Fatalf("queue of %d a second after the overload; want it drained", n)
	}
	before := h.l.Stats().Rejected[Shed]
	for i := range 20 {
		h.add(100000+i, 1, 0)
	}
	if after := h.l.Stats().Rejected[Shed]; after != before {
		t.Fatalf("a burst of 20 from the greedy flow after its queue emptied: %d rejected at once; want all queued", after-before)
	}
}

// A closed loop keeps a queue standing for as long as it runs: 200
// requests outstanding, each sent again when answered, wait 200 ms at
// 1000/s whatever the proxy does. Turning them away would not shorten the
// queue (each is sent again at once), only trade latency for errors, so
// the policy leaves a queue that stands without growing alone.
func TestStandingQueuePolicyLeavesClosedLoopsAlone(t *testing.T) {
	const target, interval = 50 * time.Millisecond, 200 * time.Millisecond
	h := newQueueHarness(t, Config{MaxWait: 10 * time.Second, QueueTarget: target, QueueInterval: interval})
	s := newSim(h.clk, 1)
	flowOf := map[int]uint64{}
	id := 0
	send := func(flow uint64) {
		id++
		flowOf[id] = flow
		h.add(id, flow, 0)
	}
	for i := range 199 { // and the harness's own permit: 200 outstanding
		send(uint64(i % 4))
	}
	s.every(time.Millisecond, func() {
		done := len(h.order)
		h.next()
		if done > 0 {
			send(flowOf[h.order[done-1].id]) // the answered client sends again
		} else {
			send(0)
		}
	})
	s.every(10*time.Millisecond, h.l.Sweep)
	s.run(3 * time.Second)

	st := h.l.Stats()
	if n := st.Rejected[StandingQueue] + st.Rejected[Shed] + st.Rejected[QueueTimeout]; n != 0 {
		t.Fatalf("closed loop of 200: %d rejected (stats %+v); want none", n, st)
	}
	if w := h.waits[len(h.waits)-1]; w <= target {
		t.Fatalf("last wait %s; the test needs waits above the %s target", w, target)
	}
	if len(h.order) < 2900 {
		t.Fatalf("%d admitted in 3s at 1000/s; want about 3000", len(h.order))
	}
}
