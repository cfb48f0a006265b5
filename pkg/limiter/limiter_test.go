package limiter

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestAcquireAdmitsSynchronouslyWhenThereIsRoom(t *testing.T) {
	l, _ := newTestLimiter(t, Config{NodeLimit: 2}, 1)
	r := &rec{t: t}
	l.Acquire(r, 1, 0, nil, time.Time{})
	if !r.ok {
		t.Fatalf("Acquire with room: calls %d, admitted %v; want admitted before returning", r.calls, r.ok)
	}
	if got := r.permit.Node(); got != 0 {
		t.Fatalf("permit node %d; want 0", got)
	}
	if s := l.Stats(); s.InFlight != 1 || s.Nodes[0].InFlight != 1 || s.Admitted != 1 {
		t.Fatalf("stats %+v; want 1 in flight, 1 admitted", s)
	}
	r.permit.Release(Success, time.Millisecond)
	if s := l.Stats(); s.InFlight != 0 {
		t.Fatalf("in flight %d after release; want 0", s.InFlight)
	}
}

func TestAcquirePicksLeastLoadedRelativeToLimit(t *testing.T) {
	l, _ := newTestLimiter(t, Config{NodeLimit: 4}, 3)
	// Load node 0 with 2 and node 1 with 1.
	var held []Permit
	for _, id := range []NodeID{0, 0, 1} {
		p, ok := l.TryAcquire([]NodeID{id})
		if !ok {
			t.Fatal("TryAcquire failed")
		}
		held = append(held, p)
	}
	for range 5 {
		p, ok := l.TryAcquire(nil)
		if !ok || p.Node() != 2 {
			t.Fatalf("got node %d (ok %v); want the idle node 2", p.Node(), ok)
		}
		p.Release(Dropped, 0)
	}
	p, _ := l.TryAcquire([]NodeID{0, 1})
	if p.Node() != 1 {
		t.Fatalf("among candidates 0 (2/4) and 1 (1/4) got %d; want 1", p.Node())
	}
	held = append(held, p)
	for _, p := range held {
		p.Release(Success, time.Millisecond)
	}
}

func TestIdleNodesShareTheLoad(t *testing.T) {
	l, _ := newTestLimiter(t, Config{NodeLimit: 4}, 3)
	seen := map[NodeID]int{}
	for range 30 {
		p, _ := l.TryAcquire(nil)
		seen[p.Node()]++
		p.Release(Success, time.Millisecond)
	}
	if len(seen) != 3 {
		t.Fatalf("sequential requests went to %v; want all three idle nodes used", seen)
	}
}

func TestCandidatesRestrictTheNode(t *testing.T) {
	l, _ := newTestLimiter(t, Config{NodeLimit: 1}, 3)
	p, ok := l.TryAcquire([]NodeID{2})
	if !ok || p.Node() != 2 {
		t.Fatalf("TryAcquire([2]) = %d, %v; want node 2", p.Node(), ok)
	}
	if _, ok := l.TryAcquire([]NodeID{2}); ok {
		t.Fatal("second TryAcquire([2]) with node 2 full succeeded")
	}
	if _, ok := l.TryAcquire([]NodeID{7, -1}); ok {
		t.Fatal("TryAcquire of unknown nodes succeeded")
	}
	// A waiter for node 2 only is not admitted when node 0 frees.
	r := &rec{t: t}
	l.Acquire(r, 1, 0, []NodeID{2}, time.Time{})
	q, _ := l.TryAcquire([]NodeID{0})
	if !r.pending() {
		t.Fatal("waiter for node 2 answered while node 2 was full")
	}
	q.Release(Success, time.Millisecond)
	if !r.pending() {
		t.Fatal("waiter for node 2 admitted when node 0 freed")
	}
	p.Release(Success, time.Millisecond)
	if !r.ok || r.permit.Node() != 2 {
		t.Fatalf("waiter: admitted %v on node %d; want node 2 once it freed", r.ok, r.permit.Node())
	}
	r.permit.Release(Success, time.Millisecond)
}

func TestGlobalLimitCapsTheSumOfNodes(t *testing.T) {
	l, _ := newTestLimiter(t, Config{NodeLimit: 10, GlobalLimit: 3}, 3)
	var ps []Permit
	for range 3 {
		p, ok := l.TryAcquire(nil)
		if !ok {
			t.Fatal("TryAcquire under the global limit failed")
		}
		ps = append(ps, p)
	}
	if _, ok := l.TryAcquire(nil); ok {
		t.Fatal("TryAcquire past the global limit succeeded")
	}
	r := &rec{t: t}
	l.Acquire(r, 1, 0, nil, time.Time{})
	if !r.pending() {
		t.Fatal("Acquire past the global limit answered at once")
	}
	ps[0].Release(Success, time.Millisecond)
	if !r.ok {
		t.Fatal("waiter not admitted when the global limit freed")
	}
	if s := l.Stats(); s.Limit != 3 || s.InFlight != 3 {
		t.Fatalf("stats limit %d in flight %d; want 3 and 3", s.Limit, s.InFlight)
	}
	r.permit.Release(Success, 0)
	ps[1].Release(Success, 0)
	ps[2].Release(Success, 0)
}

func TestQueueFullRejectsSynchronously(t *testing.T) {
	l, _ := newTestLimiter(t, Config{NodeLimit: 1, QueueLength: 2}, 1)
	rs := make([]*rec, 4)
	for i := range rs {
		rs[i] = &rec{t: t, id: i}
		l.Acquire(rs[i], uint64(i), 0, nil, time.Time{})
	}
	if !rs[0].ok || !rs[1].pending() || !rs[2].pending() {
		t.Fatalf("first admitted %v, next two pending %v %v; want admitted, queued, queued", rs[0].ok, rs[1].pending(), rs[2].pending())
	}
	if rs[3].calls != 1 || rs[3].reason.Kind != QueueFull || rs[3].reason.Limit != 2 {
		t.Fatalf("fourth: calls %d reason %+v; want QueueFull (limit 2) before Acquire returned", rs[3].calls, rs[3].reason)
	}
	if got, want := rs[3].reason.String(), "queue full: 2 requests waiting (--queue-length)"; got != want {
		t.Fatalf("message %q; want %q", got, want)
	}
}

func TestQueueDisabledRejectsAtOnce(t *testing.T) {
	l, _ := newTestLimiter(t, Config{NodeLimit: 1, QueueLength: -1}, 1)
	a, b := &rec{t: t}, &rec{t: t}
	l.Acquire(a, 1, 0, nil, time.Time{})
	l.Acquire(b, 1, 0, nil, time.Time{})
	if b.reason.Kind != QueueFull || !strings.Contains(b.reason.String(), "queueing disabled") {
		t.Fatalf("reason %+v %q; want QueueFull saying queueing is disabled", b.reason, b.reason.String())
	}
}

func TestQueueIsFIFOWhileHealthy(t *testing.T) {
	l, _ := newTestLimiter(t, Config{NodeLimit: 1}, 1)
	hold := &rec{t: t}
	l.Acquire(hold, 99, 0, nil, time.Time{})
	var order []int
	// Two rounds: flows 1..5 each queue one request, twice over.
	for i := range 10 {
		r := &rec{t: t, id: i, order: &order, then: func(r *rec) {
			if r.ok {
				r.permit.Release(Success, time.Millisecond)
			}
		}}
		l.Acquire(r, uint64(i%5), 0, nil, time.Time{})
	}
	hold.permit.Release(Success, time.Millisecond)
	for i, id := range order {
		if id != i {
			t.Fatalf("admission order %v; want arrival order", order)
		}
	}
	if len(order) != 10 {
		t.Fatalf("admitted %d; want 10", len(order))
	}
}

// AcquireAt takes the caller's clock reading as the arrival time: the wait
// is counted from it.
func TestAcquireAtCountsTheWaitFromTheCallersTime(t *testing.T) {
	l, clk := newTestLimiter(t, Config{NodeLimit: 1, MaxWait: 100 * time.Millisecond}, 1)
	hold := &rec{t: t}
	l.Acquire(hold, 1, 0, nil, time.Time{})
	clk.Advance(time.Second)
	l.Sweep()
	r := &rec{t: t}
	l.AcquireAt(r, 2, 0, nil, time.Time{}, clk.Now().Add(-50*time.Millisecond))
	clk.Advance(40 * time.Millisecond)
	l.Sweep()
	if !r.pending() {
		t.Fatalf("answered %+v 90ms after arriving with a 100ms MaxWait", r.reason)
	}
	clk.Advance(20 * time.Millisecond)
	l.Sweep()
	if r.reason.Kind != QueueTimeout {
		t.Fatalf("110ms after arriving (60ms after queueing): %+v; want QueueTimeout", r.reason)
	}
	hold.permit.Release(Success, 0)
}

func TestMaxWaitExpiresWithoutAGoroutinePerWaiter(t *testing.T) {
	l, clk := newTestLimiter(t, Config{NodeLimit: 1, MaxWait: 100 * time.Millisecond}, 1)
	hold := &rec{t: t}
	l.Acquire(hold, 1, 0, nil, time.Time{})
	r := &rec{t: t}
	l.Acquire(r, 2, 0, nil, time.Time{})
	clk.Advance(99 * time.Millisecond)
	l.Sweep()
	if !r.pending() {
		t.Fatalf("answered %+v after 99ms of a 100ms MaxWait", r.reason)
	}
	clk.Advance(2 * time.Millisecond)
	l.Sweep()
	if r.reason.Kind != QueueTimeout || time.Duration(r.reason.Limit) != 100*time.Millisecond {
		t.Fatalf("after 101ms: %+v; want QueueTimeout with limit 100ms", r.reason)
	}
	if got, want := r.reason.String(), "queue timeout: no Cassandra capacity within 100ms (--queue-max-wait)"; got != want {
		t.Fatalf("message %q; want %q", got, want)
	}
	if s := l.Stats(); s.Queued != 0 || s.Rejected[QueueTimeout] != 1 {
		t.Fatalf("queued %d, timeouts %d; want 0 and 1", s.Queued, s.Rejected[QueueTimeout])
	}
	hold.permit.Release(Success, 0)
}

func TestCallerDeadlineBoundsTheWait(t *testing.T) {
	l, clk := newTestLimiter(t, Config{NodeLimit: 1, MaxWait: time.Second}, 1)
	hold := &rec{t: t}
	l.Acquire(hold, 1, 0, nil, time.Time{})
	r := &rec{t: t}
	l.Acquire(r, 2, 0, nil, clk.Now().Add(30*time.Millisecond))
	late := &rec{t: t}
	l.Acquire(late, 3, 0, nil, clk.Now().Add(time.Hour)) // MaxWait wins
	clk.Advance(40 * time.Millisecond)
	l.Sweep()
	if r.reason.Kind != Deadline {
		t.Fatalf("after the caller's deadline: %+v; want Deadline", r.reason)
	}
	if !late.pending() {
		t.Fatalf("waiter with a later deadline answered: %+v", late.reason)
	}
	clk.Advance(time.Second)
	l.Sweep()
	if late.reason.Kind != QueueTimeout {
		t.Fatalf("after MaxWait: %+v; want QueueTimeout", late.reason)
	}
	past := &rec{t: t}
	l.Acquire(past, 4, 0, nil, clk.Now().Add(-time.Millisecond))
	if past.reason.Kind != Deadline {
		t.Fatalf("deadline already past: %+v; want Deadline at once", past.reason)
	}
	hold.permit.Release(Success, 0)
}

// An expired waiter reached by a release before the ticker saw it is
// rejected, not admitted, and the permit goes to the next one.
func TestExpiredWaiterIsNotAdmittedOnRelease(t *testing.T) {
	l, clk := newTestLimiter(t, Config{NodeLimit: 1, MaxWait: 100 * time.Millisecond}, 1)
	hold := &rec{t: t}
	l.Acquire(hold, 1, 0, nil, time.Time{})
	old := &rec{t: t}
	l.Acquire(old, 2, 0, nil, time.Time{})
	clk.Advance(150 * time.Millisecond)
	fresh := &rec{t: t}
	l.Acquire(fresh, 3, 0, nil, time.Time{})
	hold.permit.Release(Success, time.Millisecond) // no Sweep in between
	if old.ok || old.reason.Kind != QueueTimeout {
		t.Fatalf("expired waiter: admitted %v reason %+v; want QueueTimeout", old.ok, old.reason)
	}
	if !fresh.ok {
		t.Fatal("the next waiter did not get the permit")
	}
	fresh.permit.Release(Success, 0)
}

func TestWheelNeverExpiresEarlyAndAtMostATickLate(t *testing.T) {
	const tick = 10 * time.Millisecond
	l, clk := newTestLimiter(t, Config{NodeLimit: 1, MaxWait: 500 * time.Millisecond, TickInterval: tick, QueueTarget: -1}, 1)
	start := clk.Now()
	hold := &rec{t: t}
	l.Acquire(hold, 0, 0, nil, time.Time{})
	type waiter struct {
		r        *rec
		deadline time.Time
		at       time.Time
	}
	var ws []*waiter
	for i := range 300 {
		w := &waiter{deadline: start.Add(time.Duration(1+i*7%499) * time.Millisecond)}
		w.r = &rec{t: t, id: i, then: func(*rec) { w.at = clk.Now() }}
		ws = append(ws, w)
		l.Acquire(w.r, uint64(i), 0, nil, w.deadline)
	}
	for range 60 {
		clk.Advance(tick)
		l.Sweep()
	}
	for _, w := range ws {
		if w.r.reason.Kind != Deadline {
			t.Fatalf("waiter %d: %+v; want Deadline", w.r.id, w.r.reason)
		}
		if w.at.Before(w.deadline) || w.at.Sub(w.deadline) > tick {
			t.Fatalf("waiter %d expired at %s for a deadline at %s; want within one tick after", w.r.id, w.at.Sub(start), w.deadline.Sub(start))
		}
	}
	hold.permit.Release(Success, 0)
}

func TestReleaseTwiceIsCountedAndIgnored(t *testing.T) {
	l, err := New(Config{NodeLimit: 1}, newFakeClock(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.SetNodes([]NodeID{0})
	p, _ := l.TryAcquire(nil)
	p.Release(Success, time.Millisecond)
	q, _ := l.TryAcquire(nil) // reuses p's slot
	p.Release(Success, time.Millisecond)
	if s := l.Stats(); s.DoubleReleases != 1 || s.InFlight != 1 {
		t.Fatalf("after a double release: double releases %d, in flight %d; want 1 and 1 (q still out)", s.DoubleReleases, s.InFlight)
	}
	if _, ok := l.TryAcquire(nil); ok {
		t.Fatal("a double release freed q's capacity")
	}
	q.Release(Success, 0)
	Permit{}.Release(Success, 0) // the zero Permit does nothing
}

func TestReleaseTwicePanicsWithDebugPermits(t *testing.T) {
	l, _ := newTestLimiter(t, Config{NodeLimit: 1}, 1)
	p, _ := l.TryAcquire(nil)
	p.Release(Success, 0)
	defer func() {
		if recover() == nil {
			t.Fatal("second Release did not panic with DebugPermits")
		}
	}()
	p.Release(Success, 0)
}

func TestTryAcquireNeverQueuesAndYieldsToTheQueue(t *testing.T) {
	l, _ := newTestLimiter(t, Config{NodeLimit: 2}, 1)
	p, _ := l.TryAcquire(nil)
	q, _ := l.TryAcquire(nil)
	if _, ok := l.TryAcquire(nil); ok {
		t.Fatal("TryAcquire past the limit succeeded")
	}
	if s := l.Stats(); s.Queued != 0 {
		t.Fatalf("TryAcquire queued %d", s.Queued)
	}
	// With a waiter queued on node 0 only and room appearing nowhere else,
	// a TryAcquire must not take capacity the queue is owed.
	w := &rec{t: t}
	l.Acquire(w, 1, 0, nil, time.Time{})
	p.Release(Success, 0) // goes to w
	if !w.ok {
		t.Fatal("waiter not admitted")
	}
	w2 := &rec{t: t}
	l.Acquire(w2, 1, 0, []NodeID{5}, time.Time{}) // waits for a node that is not there
	w.permit.Release(Success, 0)
	if _, ok := l.TryAcquire(nil); ok {
		t.Fatal("TryAcquire succeeded while a request was queued")
	}
	q.Release(Success, 0)
	l.CancelFlow(1)
}

func TestWaiterMayCallBackIntoTheLimiter(t *testing.T) {
	l, _ := newTestLimiter(t, Config{NodeLimit: 1}, 1)
	hold := &rec{t: t}
	l.Acquire(hold, 1, 0, nil, time.Time{})
	// The client went away: its Waiter drops the permit at once, from
	// inside Admitted, which hands it to the next waiter.
	gone := &rec{t: t, then: func(r *rec) { r.permit.Release(Dropped, 0) }}
	next := &rec{t: t}
	l.Acquire(gone, 2, 0, nil, time.Time{})
	l.Acquire(next, 3, 0, nil, time.Time{})
	hold.permit.Release(Success, time.Millisecond)
	if !gone.ok || !next.ok {
		t.Fatalf("gone admitted %v, next admitted %v; want both", gone.ok, next.ok)
	}
	if s := l.Stats(); s.InFlight != 1 {
		t.Fatalf("in flight %d; want 1 (next)", s.InFlight)
	}
	next.permit.Release(Success, 0)
}

func TestRemovedNodeRejectsNothingAndStopsAdmitting(t *testing.T) {
	l, _ := newTestLimiter(t, Config{NodeLimit: 1}, 2)
	p0, _ := l.TryAcquire([]NodeID{0})
	p1, _ := l.TryAcquire([]NodeID{1})
	only0 := &rec{t: t}
	l.Acquire(only0, 1, 0, []NodeID{0}, time.Time{})
	if err := l.SetNodes([]NodeID{1}); err != nil {
		t.Fatal(err)
	}
	if !only0.pending() {
		t.Fatalf("removing node 0 answered its waiter: %+v", only0.reason)
	}
	p0.Release(Success, 0) // the permit of a removed node still releases
	if !only0.pending() {
		t.Fatal("waiter admitted to a removed node")
	}
	if s := l.Stats(); s.InFlight != 1 {
		t.Fatalf("in flight %d; want 1", s.InFlight)
	}
	if err := l.SetNodes([]NodeID{0, 1, 1}); err != nil {
		t.Fatal(err)
	}
	if !only0.ok || only0.permit.Node() != 0 {
		t.Fatal("waiter not admitted when node 0 came back")
	}
	only0.permit.Release(Success, 0)
	p1.Release(Success, 0)
	if err := l.SetNodes([]NodeID{MaxNodes}); err == nil {
		t.Fatal("SetNodes accepted an id out of range")
	}
}

func TestNoNodesYetQueues(t *testing.T) {
	l, err := New(Config{}, newFakeClock(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	r := &rec{t: t}
	l.Acquire(r, 1, 0, nil, time.Time{})
	if !r.pending() {
		t.Fatalf("with no nodes: %+v; want queued", r.reason)
	}
	l.SetNodes([]NodeID{3})
	if !r.ok || r.permit.Node() != 3 {
		t.Fatal("not admitted when a node appeared")
	}
	r.permit.Release(Success, 0)
}

func TestCloseRejectsWaitersAndLaterAcquires(t *testing.T) {
	l, _ := newTestLimiter(t, Config{NodeLimit: 1}, 1)
	hold := &rec{t: t}
	l.Acquire(hold, 1, 0, nil, time.Time{})
	var ws []*rec
	for i := range 5 {
		w := &rec{t: t, id: i}
		ws = append(ws, w)
		l.Acquire(w, uint64(i%2), i%2, nil, time.Time{})
	}
	l.Close()
	for _, w := range ws {
		if w.reason.Kind != Shutdown || w.reason.String() != "proxy shutting down" {
			t.Fatalf("waiter %d after Close: %+v; want Shutdown", w.id, w.reason)
		}
	}
	after := &rec{t: t}
	l.Acquire(after, 1, 0, nil, time.Time{})
	if after.reason.Kind != Shutdown {
		t.Fatalf("Acquire after Close: %+v; want Shutdown", after.reason)
	}
	if _, ok := l.TryAcquire(nil); ok {
		t.Fatal("TryAcquire after Close succeeded")
	}
	hold.permit.Release(Success, 0)
	if s := l.Stats(); s.InFlight != 0 {
		t.Fatalf("in flight %d after the last release; want 0", s.InFlight)
	}
	l.Close()
}

func TestCancelFlowWithdrawsOnlyThatFlow(t *testing.T) {
	l, _ := newTestLimiter(t, Config{NodeLimit: 1, ClassWeights: []int{1, 1}}, 1)
	hold := &rec{t: t}
	l.Acquire(hold, 1, 0, nil, time.Time{})
	var mine, other []*rec
	for i := range 6 {
		m, o := &rec{t: t}, &rec{t: t}
		mine, other = append(mine, m), append(other, o)
		l.Acquire(m, 7, i%2, nil, time.Time{})
		l.Acquire(o, 8, 0, nil, time.Time{})
	}
	if n := l.CancelFlow(7); n != 6 {
		t.Fatalf("CancelFlow withdrew %d; want 6", n)
	}
	for _, m := range mine {
		if m.reason.Kind != Cancelled {
			t.Fatalf("cancelled waiter: %+v; want Cancelled", m.reason)
		}
	}
	for _, o := range other {
		if !o.pending() {
			t.Fatal("CancelFlow answered another flow's waiter")
		}
	}
	if n := l.CancelFlow(7); n != 0 {
		t.Fatalf("second CancelFlow withdrew %d", n)
	}
	l.CancelFlow(8)
	hold.permit.Release(Success, 0)
}

func TestReconfigureDropsNothing(t *testing.T) {
	l, _ := newTestLimiter(t, Config{NodeLimit: 1, QueueLength: 10}, 1)
	hold := &rec{t: t}
	l.Acquire(hold, 1, 0, nil, time.Time{})
	var ws []*rec
	for i := range 6 {
		w := &rec{t: t, id: i}
		ws = append(ws, w)
		l.Acquire(w, uint64(i), 0, nil, time.Time{})
	}
	// A shorter queue turns new requests away, not queued ones.
	if err := l.Reconfigure(Config{NodeLimit: 1, QueueLength: 2, DebugPermits: true}); err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		if !w.pending() {
			t.Fatalf("waiter %d answered by a reload: %+v", w.id, w.reason)
		}
	}
	extra := &rec{t: t}
	l.Acquire(extra, 9, 0, nil, time.Time{})
	if extra.reason.Kind != QueueFull {
		t.Fatalf("new request over the shorter queue: %+v; want QueueFull", extra.reason)
	}
	// A higher limit admits from the queue at once.
	if err := l.Reconfigure(Config{NodeLimit: 4, QueueLength: 2, DebugPermits: true}); err != nil {
		t.Fatal(err)
	}
	admitted := 0
	for _, w := range ws {
		if w.ok {
			admitted++
		}
	}
	if admitted != 3 {
		t.Fatalf("%d admitted after raising the limit to 4 with 1 out; want 3", admitted)
	}
	if s := l.Stats(); s.LimitChanges != 1 || s.Nodes[0].Limit != 4 {
		t.Fatalf("limit %d, changes %d; want 4 and 1", s.Nodes[0].Limit, s.LimitChanges)
	}
	// Errors change nothing.
	if err := l.Reconfigure(Config{NodeLimit: -1}); !errors.Is(err, ErrConfig) {
		t.Fatalf("Reconfigure(NodeLimit -1) = %v; want ErrConfig", err)
	}
	if s := l.Stats(); s.Nodes[0].Limit != 4 {
		t.Fatalf("a refused config changed the limit to %d", s.Nodes[0].Limit)
	}
	l.CancelFlow(3)
	l.CancelFlow(4)
	l.CancelFlow(5)
	hold.permit.Release(Success, 0)
	for _, w := range ws {
		if w.ok {
			w.permit.Release(Success, 0)
		}
	}
}

func TestReconfigureToAdaptiveAndBack(t *testing.T) {
	l, _ := newTestLimiter(t, Config{NodeLimit: 100}, 2)
	if err := l.Reconfigure(Config{Adaptive: true, MinLimit: 10, MaxLimit: 50}); err != nil {
		t.Fatal(err)
	}
	for _, n := range l.Stats().Nodes {
		if n.Limit != 10 {
			t.Fatalf("node %d limit %d after switching to adaptive; want MinLimit 10", n.ID, n.Limit)
		}
	}
	if err := l.Reconfigure(Config{NodeLimit: 7}); err != nil {
		t.Fatal(err)
	}
	for _, n := range l.Stats().Nodes {
		if n.Limit != 7 {
			t.Fatalf("node %d limit %d after switching back; want 7", n.ID, n.Limit)
		}
	}
}

func TestConfigValidation(t *testing.T) {
	for _, c := range []Config{
		{GlobalLimit: -1},
		{MinLimit: 10, MaxLimit: 5},
		{Tolerance: 1},
		{Tolerance: 11},
		{Backoff: 0.2},
		{Backoff: 1},
		{MaxWait: -1},
		{ClassWeights: []int{1, 0}},
		{ClassWeights: make([]int, 65)},
		{Window: time.Second, BaselineWindow: time.Millisecond},
		{NodeLimit: 1 << 25},
		{MaxLimit: 1 << 25},
	} {
		if _, err := New(c, newFakeClock(), nil); !errors.Is(err, ErrConfig) {
			t.Errorf("New(%+v) = %v; want ErrConfig", c, err)
		}
	}
	c, err := Config{MaxWait: 2 * time.Second}.normalized()
	if err != nil {
		t.Fatal(err)
	}
	if c.NodeLimit != 256 || c.QueueLength != 10000 || c.QueueTarget != 500*time.Millisecond || c.QueueInterval != 2*time.Second || len(c.ClassWeights) != 1 {
		t.Fatalf("defaults %+v", c)
	}
}

func TestReasonMessagesNameTheLimit(t *testing.T) {
	for _, tc := range []struct {
		r    Reason
		want string
	}{
		{Reason{QueueFull, 10000}, "queue full: 10000 requests waiting (--queue-length)"},
		{Reason{QueueTimeout, int64(time.Second)}, "queue timeout: no Cassandra capacity within 1s (--queue-max-wait)"},
		{Reason{Deadline, int64(800 * time.Millisecond)}, "request deadline passed after 800ms in the queue (--request-timeout)"},
		{Reason{StandingQueue, int64(250 * time.Millisecond)}, "overloaded: queued longer than 250ms while the queue was standing (--queue-target)"},
		{Reason{Kind: Cancelled}, "request cancelled while queued"},
		{Reason{Kind: Shutdown}, "proxy shutting down"},
	} {
		if got := tc.r.String(); got != tc.want {
			t.Errorf("%+v.String() = %q; want %q", tc.r, got, tc.want)
		}
	}
}

// A request sent again to another node moves its permit there: the node
// counts follow it, the global count does not change, the first node's
// freed room goes to the queue, and the old copy of the permit is spent.
func TestPermitMoveFollowsTheRequest(t *testing.T) {
	l, _ := newTestLimiter(t, Config{NodeLimit: 1, QueueLength: 10, MaxWait: time.Second}, 2)
	a := &rec{t: t, id: 1}
	l.Acquire(a, 1, 0, []NodeID{0}, time.Time{})
	if !a.ok || a.permit.Node() != 0 {
		t.Fatalf("first request: ok %v node %d; want admitted to node 0", a.ok, a.permit.Node())
	}
	waiting := &rec{t: t, id: 2}
	l.Acquire(waiting, 1, 0, []NodeID{0}, time.Time{})
	if !waiting.pending() {
		t.Fatal("second request for node 0 not queued")
	}

	moved, ok := a.permit.Move(1)
	if !ok || moved.Node() != 1 {
		t.Fatalf("Move(1): %v, node %d; want moved to node 1", ok, moved.Node())
	}
	if !waiting.ok || waiting.permit.Node() != 0 {
		t.Fatalf("queued request for node 0: ok %v; want admitted to node 0's freed room", waiting.ok)
	}
	st := l.Stats()
	if st.Nodes[0].ID != 0 || st.Nodes[0].InFlight != 1 || st.Nodes[1].InFlight != 1 || st.InFlight != 2 {
		t.Fatalf("nodes %+v, global %d in flight; want 1 and 1, 2", st.Nodes, st.InFlight)
	}
	// Node 1 is full now: a second move there fails and changes nothing.
	if p, ok := waiting.permit.Move(1); ok || p != waiting.permit {
		t.Fatalf("Move to a full node succeeded")
	}
	// The old copy is spent: releasing it is a double release (which
	// panics with DebugPermits, as in every test limiter).
	func() {
		defer func() {
			if recover() == nil {
				t.Error("releasing the moved-from copy did not panic as a double release")
			}
		}()
		a.permit.Release(Success, time.Millisecond)
	}()
	moved.Release(Success, time.Millisecond)
	waiting.permit.Release(Success, time.Millisecond)
	if st := l.Stats(); st.InFlight != 0 || st.Nodes[0].InFlight != 0 || st.Nodes[1].InFlight != 0 {
		t.Fatalf("after releasing both: %+v; want nothing in flight", st)
	}
}
