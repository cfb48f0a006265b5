package limiter

// A node whose counts cannot be read (Cassandra before 4.0 has no
// system_views; a role without SELECT on it is refused) is held at the
// fixed NodeLimit while the fleet law is in force, until a reading comes
// through. The law's other signal, latency alone, cannot tell a node that
// is slower under load for reasons no limit changes (cores it shares with
// its clients, reads that batch better when more are in flight) from a
// queue: a lone sidecar driven by 16 or 128 closed-loop workers was cut to
// 0.01-0.12x a fixed limit's throughput that way (make bench). A proxy
// that cannot read a node does what fixed mode does there: the limit an
// operator sized by hand (docs/sizing.md), never less.

// NodeUnreadable tells the fleet law that node id cannot report its
// counts: its limit becomes NodeLimit until NodeRead next brings a
// reading, which restarts the law from its floor. It does nothing unless
// the limit follows the fleet law.
func (l *Limiter) NodeUnreadable(id NodeID) {
	l.mu.Lock()
	if !l.cfg.Adaptive || l.cfg.Law != LawFleet || id < 0 || int(id) >= len(l.nodes) || !l.nodes[id].active {
		l.mu.Unlock()
		return
	}
	n := &l.nodes[id]
	n.unreadable = true
	l.setLimitLocked(n, float64(l.cfg.NodeLimit))
	l.drainLocked(l.now(), nil) // unlocks
}

// fleetLimit is the limit of node n under the fleet law: the law's own,
// or NodeLimit while the node cannot report its counts.
func (l *Limiter) fleetLimit(n *node) float64 {
	if n.unreadable {
		return float64(l.cfg.NodeLimit)
	}
	return n.fl.limit
}

// readable takes node n back to the fleet law on its first reading after
// NodeUnreadable: from the floor, in slow start, as a new node.
func (l *Limiter) readable(n *node, now int64) {
	if !n.unreadable {
		return
	}
	n.unreadable = false
	n.fl.reset(&l.cfg, now)
	l.setLimitLocked(n, n.fl.limit)
}
