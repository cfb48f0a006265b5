package limiter

import "time"

// Permit is held by one admitted request, for one node. It is a small
// value: copy it freely, but call Release exactly once, whatever the path
// (answer, error, timeout, client gone, connection dead, Close). A permit
// is freed only by Release: a request that is never released holds its
// node's capacity forever.
//
// The zero Permit is not a permit: Node returns 0 and Release does nothing.
type Permit struct {
	l    *Limiter
	slot uint32 // the permit's slot in l.slots
	gen  uint32 // l.slots[slot] while the permit is out
	node int32
}

// Node returns the node the request must be sent to.
func (p Permit) Node() NodeID { return NodeID(p.node) }

// Release returns the permit with the request's outcome and its latency
// (from sending to the node to the end of the answer, or to the moment the
// stream was freed), which feed the node's adaptive limit (see Outcome). If
// requests are queued, the freed capacity goes to the next one, whose
// Waiter is called from Release before it returns.
//
// A second Release of the same Permit (or a copy) is detected: it panics
// when Config.DebugPermits is set and otherwise is counted in
// cqlgate_limiter_double_releases_total and ignored, so a bug in an error
// path cannot inflate the capacity of a production proxy.
func (p Permit) Release(o Outcome, latency time.Duration) { p.ReleaseVia(o, latency, nil) }

// ReleaseVia is Release by a goroutine that has more work to do before it
// blocks, such as a backend read loop with answers still to hand out: the
// ViaWaiters the freed capacity admits get via (see ViaWaiter).
func (p Permit) ReleaseVia(o Outcome, latency time.Duration, via any) {
	l := p.l
	if l == nil {
		return
	}
	l.mu.Lock()
	if l.slots[p.slot] != p.gen {
		l.doubleReleases++
		debug := l.cfg.DebugPermits
		l.mu.Unlock()
		if debug {
			panic("limiter: permit released twice")
		}
		return
	}
	gen := p.gen + 1
	if gen == 0 {
		gen = 1
	}
	l.slots[p.slot] = gen
	l.freeSlots = append(l.freeSlots, p.slot)
	n := &l.nodes[p.node]
	// A paced slot rests in proportion to the request's latency. Only a
	// sample's latency says how long the node's typical request takes: a
	// schema change or a timeout (seconds) would rest the slot for many
	// times as long, with clients waiting; pace uses the law's mean then.
	if o == Success {
		l.pace(n, latency)
	} else {
		l.pace(n, 0)
	}
	n.inflight--
	l.inflight--
	switch {
	case l.cfg.Adaptive && l.cfg.Law == LawFleet:
		n.fl.record(o, latency)
	case l.cfg.Adaptive:
		n.ad.record(o, latency)
	}
	if l.q.n == 0 || l.closed {
		l.mu.Unlock()
		return
	}
	l.drainLocked(l.now(), via)
}

// Move transfers p to node to, when p is for another node and to has room,
// and returns the permit to hold from then on (p itself is spent, as if
// released). It is for a request sent again to another node than the one
// it was admitted to (its connection died): the request keeps its place
// in the global count, and the node limits count it where it really is.
// When to is full or inactive, or p is stale, it returns p and false: the
// request then stays counted against its first node. Freed room on the
// first node goes to the queue.
func (p Permit) Move(to NodeID) (Permit, bool) {
	l := p.l
	if l == nil || NodeID(p.node) == to {
		return p, false
	}
	l.mu.Lock()
	if l.slots[p.slot] != p.gen || uint(to) >= uint(len(l.nodes)) {
		l.mu.Unlock()
		return p, false
	}
	n := &l.nodes[to]
	var now int64
	if !n.active || !l.room(n, &now) {
		l.mu.Unlock()
		return p, false
	}
	gen := p.gen + 1
	if gen == 0 {
		gen = 1
	}
	l.slots[p.slot] = gen
	l.nodes[p.node].inflight--
	n.inflight++
	if n.inflight > n.ad.maxInflight {
		n.ad.maxInflight = n.inflight
	}
	moved := Permit{l: l, slot: p.slot, gen: gen, node: int32(to)}
	if l.q.n == 0 || l.closed {
		l.mu.Unlock()
		return moved, true
	}
	l.drainLocked(l.now(), nil)
	return moved, true
}
