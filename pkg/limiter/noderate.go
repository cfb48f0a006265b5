package limiter

// The node's rate: what keeps the fleet law from cutting throughput.
//
// From its own latencies alone a sidecar cannot tell a queue in the node
// from a node whose latency rises with its load for another reason (the
// cores it shares with the application fill up, its reads batch better):
// with its limit binding, its throughput is limit/latency either way (see
// docs/sizing.md). Cassandra counts the requests it completed
// (system_views.thread_pools, the Native-Transport-Requests row), and the
// proxy reads that count now and then (NodeCompleted). It is the same
// count for every sidecar, and does not depend on their shares, so it
// settles what latencies cannot: in a node whose latency comes from a
// queue, throughput does not fall while the queue stands, because its
// threads idle only once nothing waits. So:
//
//   - A run of cuts notes the node's rate and the window's minimum where it
//     began. It lasts until a reading finds the last window under the
//     target: the cuts drained what they were for.
//   - If a reading during the run finds the node's rate fallen by more than
//     its noise, while the last window was still over the target, the
//     latency was not a queue: the cuts are undone, the minimum where the
//     run began becomes the baseline (so the law measures queues from
//     there), and slow start resumes, to find out whether more concurrency
//     serves more.
//   - If it fell once the last window was under the target, the cuts
//     drained a queue and then went too far: the limit goes back to where
//     it was at the reading before, and the baseline stays.
//   - A limit that stands over the target for fleetProbeAfter windows in
//     a row while it binds is probed: raised by half for a reading's
//     interval. If the node then serves more by more than its noise, the
//     latency was the price of throughput, not a queue: the window's
//     minimum becomes the baseline and slow start resumes. Otherwise the
//     limit goes back, and the next probe waits twice as long as the last
//     (up to fleetProbeGapMax): a fleet in front of a queue probes seldom,
//     and all its sidecars together then add a queue for a moment that
//     the node does not serve any faster.
//
// Reading the count costs the node one small request. A sidecar reads it
// every Config.NodePoll, less often the smaller its share of the node's
// answers (NodePollInterval), so that a fleet asks each node about the
// same number of times a second however many sidecars there are.
import (
	"math"
	"time"
)

const (
	// fleetRateAllowance is the least fall of the node's rate that counts
	// as a fall; twice the rate's own variation between readings, when
	// larger, is used instead.
	fleetRateAllowance = 0.05
	// fleetRateShare is the least share of the node's requests with which
	// a sidecar judges its own cuts and raises by the node's rate.
	fleetRateShare = 0.5
	// fleetPollShare: a sidecar whose share of the node's answers is s
	// reads the count every NodePoll*max(1, fleetPollShare/s).
	fleetPollShare = 0.1
	// fleetPollMax bounds the period of a sidecar with a tiny share.
	fleetPollMax = 30 * time.Second
	// fleetProbeAfter is how many windows in a row over the target, the
	// limit bound, open a probe; fleetProbeStep is the probe's raise.
	fleetProbeAfter = 5
	fleetProbeStep  = 2
	// The spacing of probes after a failed one: it doubles from
	// fleetProbeGap to fleetProbeGapMax.
	fleetProbeGap    = int64(time.Second)
	fleetProbeGapMax = int64(30 * time.Second)
)

// nodeRate is the fleet law's view of the node's completed-request count.
type nodeRate struct {
	at, prevAt int64  // the last two readings (0: none)
	total      uint64 // the count at the last reading
	rate       float64
	noise      float64 // smoothed relative change of rate between readings
	answers    uint64  // this sidecar's answers from the node, all time
	answersAt  uint64  // answers at the last reading
	share      float64 // this sidecar's share of the node's answers
	limitAt    float64 // the limit at the last reading

	// The run of cuts (runLimit 0: none).
	runLimit float64
	runRate  float64
	runMin   int64
	runAt    int64

	// The probe (probeFrom 0: none): the limit and the node's rate before
	// it, and when it began.
	probeFrom float64
	probeRate float64
	probeAt   int64
	probeNext int64 // no probe before then
	probeGap  int64 // the wait after the last failed probe
	bound     int   // windows in a row in which the limit bound
	cutAt     int64 // the last cut (of a sidecar that judges its cuts)
	lastMin   int64 // the last window's minimum

	undone, probed uint64 // runs undone, probes kept (for tests)
}

// probing reports whether to open a probe at the end of a window (the
// caller raises the limit): the limit bound for fleetProbeAfter windows in
// a row, whether the latency law would cut it (the rise may be the price
// of throughput) or grow it (by far less than a doubling a reading).
func (f *fleet) probing(now int64) bool {
	r := &f.nr
	// Probes are for a sidecar that carries most of the node's requests:
	// another's raise cannot show in the node's rate.
	if r.rate == 0 || r.bound < fleetProbeAfter || now < r.probeNext || r.share < fleetRateShare {
		return false
	}
	r.bound = 0
	r.probeFrom, r.probeRate, r.probeAt = f.limit, r.rate, now
	r.runLimit = 0
	return true
}

// judgeProbe judges the open probe at a reading whose interval it covers,
// and reports whether the limit changed. A raise that the node turned
// into throughput is kept, and the climb goes on: the limit doubles while
// each doubling still serves more and the limit still binds. The first
// raise that does not pays its way is taken back, and the climb ends there.
func (f *fleet) judgeProbe(now int64) bool {
	r := &f.nr
	if r.prevAt < r.probeAt {
		return false
	}
	if r.rate > r.probeRate*(1+max(fleetRateAllowance, 2*r.noise)) {
		// More concurrency served more: not a queue.
		f.base = max(f.base, r.lastMin)
		f.refLimit = 0
		r.probeGap = 0
		r.probed++
		if !f.bound {
			r.probeFrom = 0 // the client does not use more
			return false
		}
		r.probeFrom, r.probeRate, r.probeAt = f.limit, r.rate, now
		f.limit = min(2*f.limit, f.maxLimit)
		return true
	}
	climbed := r.probeGap == 0 && r.probed > 0
	f.limit, r.probeFrom = r.probeFrom, 0
	// The next run of cuts is judged against the rate before the raise.
	r.rate = r.probeRate
	if !climbed {
		r.probeGap = min(max(2*r.probeGap, fleetProbeGap), fleetProbeGapMax)
	}
	r.probeNext = now + max(r.probeGap, fleetProbeGap)
	return true
}

// reading takes the node's count at now and reports whether it changed
// the limit.
func (f *fleet) reading(now int64, total uint64, cfg *Config) bool {
	r := &f.nr
	prevAt, prevTotal, prevRate := r.at, r.total, r.rate
	answers := r.answers - r.answersAt
	limitBefore := r.limitAt
	r.prevAt, r.at, r.total, r.answersAt, r.limitAt = prevAt, now, total, r.answers, f.limit
	if prevAt == 0 || now <= prevAt || total < prevTotal {
		// The first reading, or the node restarted (its count went
		// back): no rate yet, and nothing to judge a run by.
		r.rate, r.runLimit = 0, 0
		return false
	}
	done := total - prevTotal
	r.rate = float64(done) / (float64(now-prevAt) / 1e9)
	if done > 0 {
		s := min(float64(answers)/float64(done), 1)
		if r.share == 0 {
			r.share = s
		}
		r.share += (s - r.share) / 4
	}
	if prevRate > 0 && math.Abs(f.limit-limitBefore) <= 0.1*limitBefore {
		// The rate's noise, from readings between which this sidecar's
		// limit held: growth and cuts would count as noise.
		c := math.Abs(r.rate-prevRate) / prevRate
		if r.noise == 0 {
			r.noise = c
		}
		r.noise += (c - r.noise) / 8
	}
	if r.probeFrom != 0 {
		return f.judgeProbe(now)
	}
	if r.runLimit == 0 || now <= r.runAt {
		return false
	}
	fell := r.rate < r.runRate*(1-max(fleetRateAllowance, 2*r.noise))
	// Only a sidecar that carries most of the node's requests judges its
	// cuts by the node's rate: the cuts of one sidecar of many cannot move
	// it, and when all of them cut together the node's rate also moves
	// for reasons of its own (it got slower), which are not the cuts'
	// doing. Undoing those cuts in a fleet of 8 (in the simulator) took
	// Jain's index from 0.89 to 0.45.
	fell = fell && r.share >= fleetRateShare
	switch {
	case fell && !f.calm && f.limit < r.runLimit:
		// Cuts that cost throughput while the latency still stood: not a
		// queue. The run's start is the new baseline, and a climb from
		// there finds out whether more serves more still.
		f.base = max(f.base, r.runMin)
		f.refLimit = 0
		r.undone++
		r.probeFrom, r.probeRate, r.probeAt = r.runLimit, r.runRate, now
		r.runLimit = 0
		f.limit = min(2*r.probeFrom, f.maxLimit)
		return true
	case fell && f.calm && f.limit < limitBefore:
		// A queue drained, and the cuts went on past the node's knee.
		f.limit = limitBefore
		r.runLimit = 0
		r.undone++
		return true
	case f.calm:
		r.runLimit = 0
	}
	return false
}

// cutting notes the start of a run of cuts, when the node's rate is known,
// and reports whether to cut now. A sidecar that judges its cuts by the
// node's rate cuts once per reading: cuts every window would take the
// limit down tenfold before the first reading could tell whether the
// first cut cost throughput, and the rate would swing with the limit
// inside every reading's interval.
func (f *fleet) cutting(now int64) bool {
	r := &f.nr
	if r.rate == 0 {
		return true
	}
	if r.runLimit == 0 {
		r.runLimit, r.runRate, r.runMin, r.runAt = f.limit, r.rate, f.wmin, now
	}
	if r.share < fleetRateShare {
		return true
	}
	if r.prevAt < r.cutAt {
		return false // no reading's whole interval followed the last cut yet
	}
	r.cutAt = now
	return true
}

// pollInterval is how long to wait before the next reading (0: none).
func (f *fleet) pollInterval(cfg *Config) time.Duration {
	if cfg.NodePoll <= 0 {
		return 0
	}
	d := cfg.NodePoll
	if s := f.nr.share; s > 0 && s < fleetPollShare {
		d = time.Duration(float64(d) * fleetPollShare / s)
	}
	return min(d, max(fleetPollMax, cfg.NodePoll))
}

// NodeCompleted gives the fleet law node id's own count of the requests
// it completed (all clients', ever), read at the limiter's clock now:
// Cassandra's completed_tasks of the Native-Transport-Requests thread
// pool. It does nothing unless the limit follows the fleet law.
func (l *Limiter) NodeCompleted(id NodeID, total uint64) {
	l.mu.Lock()
	if !l.cfg.Adaptive || l.cfg.Law != LawFleet || id < 0 || int(id) >= len(l.nodes) || !l.nodes[id].active {
		l.mu.Unlock()
		return
	}
	n := &l.nodes[id]
	now := l.now()
	if !n.fl.reading(now, total, &l.cfg) {
		l.mu.Unlock()
		return
	}
	l.setLimitLocked(n, n.fl.limit)
	l.drainLocked(now)
}

// NodePollInterval is how long the caller of NodeCompleted should wait
// before reading node id's count again; 0 means it need not read it (the
// limit does not follow the fleet law, NodePoll is negative, or the node
// is not active).
func (l *Limiter) NodePollInterval(id NodeID) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.cfg.Adaptive || l.cfg.Law != LawFleet || id < 0 || int(id) >= len(l.nodes) || !l.nodes[id].active {
		return 0
	}
	return l.nodes[id].fl.pollInterval(&l.cfg)
}
