package limiter

// Idle time: the time a node had nothing of this sidecar in flight and
// nothing was queued, because its clients sent nothing.
//
// A sidecar that carries nearly all of a node's requests judges its raises
// and cuts by the node's rate (noderate.go, probe.go), and the rate counts
// what the node completed over a reading's interval. When the clients stop
// sending for part of it, the node idles, and the rate falls for no fault
// of the limit. The seed experiment's 50,000 goroutines stall the client's
// process for tenths of a second at a time: sampled twice a second, its
// proxy had nothing in flight and nothing queued at one sample in three,
// and the node's rate swung between 5,000 and 48,000 requests/s from one
// 200 ms reading to the next: such a reading judges the clients' pauses,
// not the limit.
//
// Over the time the clients kept the node busy, the node's rate is what
// the limit let it serve. Sweep samples every TickInterval whether each
// node is idle, and a dominant sidecar judges by the completed requests
// over the rest of the interval; an interval mostly idle (fleetBusyLeast)
// is not judged at all. A request waiting in the queue is no idle time,
// whatever node it waits for: a limit under one rests its only slot
// between requests (pace.go), and its clients wait meanwhile. The other
// rules read the node's rate by the clock: it is the node's, other
// clients' requests included. What noise is left on such a host (the rate
// moved by 15-40% between readings in which the sidecar was busy
// throughout) is its CPU's: see starved.go.

// fleetBusyLeast is the least share of a reading's interval that must not be
// idle for the dominant rules to judge the interval.
const fleetBusyLeast = 0.5

// noteIdleLocked counts the time since the last Sweep as idle for the
// active nodes that have nothing in flight while nothing is queued. Only the
// fleet law uses it.
func (l *Limiter) noteIdleLocked(now int64) {
	from := l.sweptAt
	l.sweptAt = now
	if !l.cfg.Adaptive || l.cfg.Law != LawFleet || from == 0 || now <= from || l.q.n > 0 {
		return
	}
	for _, id := range l.active {
		if n := &l.nodes[id]; n.inflight == 0 {
			n.idleNs += now - from
		}
	}
}
