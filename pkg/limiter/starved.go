package limiter

// A host starved of CPU: what a sidecar alone in front of a node does when
// its own tasks wait for a CPU (see starvedBelow).

import "time"

const (
	// fleetStarved is the least share of the time the proxy's tasks wait
	// for a CPU (CPUPressure) at which its latencies are taken to carry
	// that wait (starvedBelow). The seed experiment's host waited 50-78% of
	// the time.
	fleetStarved = 0.25
	// fleetStarvedOff is how long after an OVERLOADED answer or a timeout
	// the rules of a starved host stay off (starvedBelow).
	fleetStarvedOff = time.Minute
)

// starvedBelow reports whether the proxy's host is starved of CPU (its tasks
// waited for one fleetStarved of the time or more, CPUPressure) while the
// limit is under NodeLimit, the fixed limit an operator sized for one
// proxy. Where a dominant sidecar would raise its limit (slow start, or a
// probe of a limit that binds), it then takes NodeLimit at once
// (fixedWhileStarved), and its cuts stop there while it stays the node's
// main client and the host starved, until Cassandra answers OVERLOADED or
// times out. After such an answer the rules stay off for
// fleetStarvedOff: Cassandra said where its limit is, and going back to
// NodeLimit at once would only meet it again. In make fleet, whose host is
// starved too (8 proxy processes, their generators, the node and its
// emulated capacity on two cores), a lone proxy did that in a cycle: at 2x
// the emulated node's capacity its clients' p99 was 2x fixed's.
//
// On such a host neither signal of the law holds. The latencies it reads
// carry the proxy's own wait for a CPU, and the node's, if it shares the
// host, which is no queue in Cassandra; and a node or proxy with more
// requests in hand serves each for less CPU, reading and answering more of
// them per system call and per wake-up of its threads, which is worth most
// where CPU is short. The seed experiment's host (two cores for the node,
// the proxy and 50,000 goroutines of the client, which waited for a CPU
// 50-78% of the time) ran its 1,000,000 requests in 1.2-1.6x the time
// behind a fixed limit of 40 as behind one of 1,024, and the node spent
// 1.27x the CPU per request; 128 took 1.1x, 512 and 4,096 as long as 1,024
// within the runs' spread (docs/results.md). Yet its native
// transport threads were 1-17 of 128 busy with nothing queued: the requests
// in flight waited for a CPU, not for the node. A doubling there gains
// 10-30%, under the noise of the node's rate between readings (0.15-0.4),
// and probes judged on their gain held the limit between 20 and 500 for
// most of a run, and a raise judged by a fall of the rate alone was taken
// back by chance within seconds.
func (f *fleet) starvedBelow(limit float64, cfg *Config) bool {
	return f.nr.starved && limit < float64(cfg.NodeLimit) && f.nr.at >= f.nr.starvedOff
}

// keepsMet reports whether the demand met (nodeRate.met) still stops the
// cuts: while the sidecar is dominant, or, when it was set on a starved
// host, while its share stays over fleetRateOurs. A lone sidecar's share
// wanders around fleetRateShare on such a host (0.74-0.90 over a seed run at
// 1,024 in flight: its answers and the node's count are not read at the
// same instant), and each reading under it dropped the floor, and the law
// cut the limit to 180-600 within seconds.
func (r *nodeRate) keepsMet() bool {
	return r.met > 0 && (r.dominant() || r.starvedMet && r.share >= fleetRateOurs)
}

// CPUPressure gives the fleet law the share of the last seconds in which
// the proxy's tasks waited for a CPU (package cpupressure): at
// fleetStarved or more, the latencies it measures carry that wait (see
// starvedBelow). Call it before NodeRead; a negative share means unknown.
func (l *Limiter) CPUPressure(share float64) {
	l.mu.Lock()
	l.cpuPressure = share
	l.mu.Unlock()
}

// fixedWhileStarved is the limit of a dominant sidecar on a starved host
// whose limit binds: NodeLimit, which its cuts then keep (starvedBelow).
func (f *fleet) fixedWhileStarved(cfg *Config) float64 {
	r := &f.nr
	r.met, r.starvedMet = float64(min(cfg.NodeLimit, cfg.MaxLimit)), true
	f.slow = false
	r.loneFrom = 0
	return r.met
}
