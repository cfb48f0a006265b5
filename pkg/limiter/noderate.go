package limiter

// The node's rate: what keeps the fleet law from cutting throughput.
//
// From its own latencies alone a sidecar cannot tell a queue in the node
// from a node whose latency rises with its load for another reason (the
// cores it shares with the application fill up, its reads batch better):
// with its limit binding, its throughput is limit/latency either way (see
// docs/sizing.md). Cassandra counts the requests it completed
// (system_views.thread_pools, the Native-Transport-Requests row), and the
// proxy reads that count now and then (NodeRead). In a node whose
// latency comes from a queue, throughput does not fall while the queue
// stands, because its threads idle only once nothing waits; and more
// concurrency does not serve more.
//
// A sidecar with a small share of the node's requests uses the rate for
// one thing only (rebase): when the node itself gets slower, every sidecar
// reads a standing wait that no cut drains, and their cuts together take
// the node below its knee. The node's rate falling, over blocks of
// readings long enough to rise above chance, while the latency stands
// ends the cuts: the latency becomes the baseline, the limits stay and
// grow back slowly. Before it, eight sidecars of two requests each in
// front of a node of 16 threads slid to 0.65 of a slower node's capacity
// (TestFleetOfSmallSidecarsRecognisesASlowerNode), as the real ones of
// make fleet did; the test on the latencies' shape (fleet.go) needs
// steadier minima than so few samples give.
//
// Only a sidecar that carries nearly all of the node's requests (its
// answers are at least fleetRateShare of the node's on average, and
// fleetRateOurs in the interval judged) acts on the rate further: the cuts
// or raises of one sidecar of many cannot move it, and when all of them
// move together the node's rate also moves for reasons of its own (it got
// slower), which are not their doing (undoing cuts in a fleet of 8 took
// Jain's index from 0.89 to 0.45 in the simulator). Such a sidecar:
//
//   - cuts only on a wait that stood through two windows in a row: on
//     make bench's node, which shares two cores with the proxy and the
//     client, one window in three or four at 128 readers has every answer
//     half a millisecond late or more, at random, whatever the limit. Each
//     cut a few percent, the rate's noise hid what the run cost, and the
//     limit sat at 90-120, under the readers' 128, where a fixed limit of
//     120 serves 0.92x what one of 1,024 does (the proxy's queue costs CPU
//     the node needs). A queue in the node stands in every window;
//   - cuts at most once per reading, so that a reading follows every cut
//     (cuts every window would take the limit down tenfold before the
//     first reading, and the rate would swing with the limit inside every
//     reading's interval);
//   - judges a run of cuts as a whole, against the node's rate and the
//     window's minimum where it began, until the limit grows back: cuts
//     that each cost less than the rate's noise would otherwise slide the
//     limit down step by step;
//   - undoes the run when a reading finds the rate fallen by more than its
//     noise while the last window was still over the target: the latency
//     was not a queue. The minimum where the run began becomes the
//     baseline, so that the law measures queues from there, and a climb
//     starts from the run's limit (below). If the rate fell once the last
//     window was under the target, the cuts drained a queue and went on
//     past the node's knee: the limit goes one reading back;
//   - probes a limit that bound for fleetProbeAfter windows in a row
//     (whether the law would cut it or grow it by its slow steps): it
//     doubles it for a reading's interval, or raises it to the clients'
//     whole demand when that is within fleetProbeReach of the limit. A
//     raise that the node turns into more throughput than fleetProbePays
//     times its noise is kept, the window's minimum becomes the baseline,
//     and the climb goes on, raising while the limit still binds and each
//     raise still serves more. The first raise that does not is taken
//     back. A raise that meets all the demand (its windows do not bind)
//     and gains something, but less than that, is read again, up to
//     fleetProbeReadings readings, and judged on their sum, whose noise
//     is less: a closed loop the raise covers whole may gain only a few
//     percent, under one reading's noise. A raise that meets all the
//     demand from a limit within reach of it (the most in flight during
//     the probe is within fleetProbeReach of where it began) is kept
//     unless the node's rate fell by more than the noise, and the demand
//     it met (as does a raise kept for its gain that met it) is the least
//     the sidecar cuts to until Cassandra answers OVERLOADED or times
//     out, or the sidecar stops being dominant: see judgeProbe. A probe
//     that gains nothing makes the next wait twice as long as the last
//     (up to fleetProbeGapMax), until the node's rate moves to half or
//     twice where it failed.
//
// On a host starved of CPU (the proxy's tasks wait for one a quarter of the
// time or more), such a sidecar takes the fixed NodeLimit at once and holds
// it, as it does for a node it cannot read: neither its latencies nor the
// node's rate tell it more there (starved.go). And all of its
// rules judge the node's rate over the time its clients kept the node busy,
// not over their pauses (idle.go).
//
// The rate's noise is the smoothed relative change between readings while
// the limit held after slow start, a change by more than half counting as
// half (an idle sidecar busy again is a change of load, not noise), and at
// least what chance gives counts of the readings' size (byChance); an
// interval in which this sidecar sent nothing is not judged. It starts at
// fleetRateNoise, and one change counts as at most twice the noise so far.
// The first readings come while the clients connect and the node warms up,
// when the rate doubles from one reading to the next at a steady limit:
// learnt from them, the noise started at a half and took seconds to decay,
// and no probe until then could pass twice that. A lone sidecar of 128
// readers on make bench's node sat at a limit of 5-30 for 7 s, then 60-70,
// where 64 and 128 serve 1.4x and 1.7x what 32 serve.
//
// Reading the count costs the node one small request. A sidecar reads it
// every Config.NodePoll, less often the smaller its share of the node's
// answers (NodeReadingDue), so that a fleet asks each node about the same
// number of times a second however many sidecars there are.
import (
	"math"
	"time"
)

const (
	// fleetRateAllowance is the least fall of the node's rate that counts
	// as a fall; twice the rate's own variation between readings, when
	// larger, is used instead.
	fleetRateAllowance = 0.05
	// fleetRateNoise is the rate's noise before any reading measured it
	// (see the file's comment): about what make bench's node showed
	// between readings 200 ms apart at a steady limit (0.08-0.15).
	fleetRateNoise = 0.1
	// fleetRateChance is how many standard deviations of chance (of
	// counts that vary as Poisson ones do) a change of the node's rate must
	// exceed to count (byChance).
	fleetRateChance = 2.5
	// fleetRateBlock is the fewest requests the node completes in a block
	// of readings that a small sidecar judges its cuts by (rebase): the
	// chance variation of a block is under 3%.
	fleetRateBlock = 1000
	// fleetRateShare is the least share of the node's requests with which
	// a sidecar judges its own cuts and raises by the node's rate: nearly
	// all of them. At a half, one of four real sidecars whose share
	// wandered over it undid its cuts and probed, and took twice its share
	// of the node (make fleet, N = 4, 2x and 5x: Jain 0.83 and 0.72). At
	// 0.8 two runs gave 0.98 and 0.96, then 0.80 and 0.92: real runs vary
	// by that much, and no sidecar of a fleet acts as if it were alone.
	fleetRateShare = 0.8
	// fleetRateOurs is the least share of one interval's requests with
	// which that interval is judged: lower than fleetRateShare, because
	// the sidecar's answers and the node's count are not taken at the same
	// instant, and one interval's share wanders by more than the average's.
	fleetRateOurs = 0.5
	// fleetPollShare: a sidecar whose share of the node's answers is s
	// reads the count every NodePoll*max(1, fleetPollShare/s).
	fleetPollShare = 0.1
	// fleetPollMax bounds the period of a sidecar with a tiny share.
	fleetPollMax = 30 * time.Second
	// fleetLonePays is the share of a lone sidecar's raise in slow start
	// that the node's rate must show for the next (loneStart).
	fleetLonePays = 0.75
	// fleetProbeAfter is how many windows in a row in which the limit
	// bound open a probe; fleetProbeStep is the probe's raise.
	fleetProbeAfter = 5
	fleetProbeStep  = 2
	// fleetProbePays is how many times the rate's noise a probe's gain
	// must exceed to be kept. A doubling on make bench's node of two
	// cores serves 1.2-1.3x more, its noise is 0.08-0.15: at twice the
	// noise most climbs stopped a doubling or two short, and the wait
	// after a failed probe (1-10 s) kept a lone sidecar of 128 readers
	// at 0.8x of a fixed limit's throughput for its first 10 s (0.9x at
	// 1.5). It is no lower because a probe kept by chance stays: its
	// window's minimum became the baseline, so the latency law does not
	// cut it back. At 1.5 a lone sidecar overloading make fleet's node at
	// 2x and 5x still kept the node's p99 at 1.2x the unloaded one.
	fleetProbePays = 1.5
	// fleetProbeReadings is the most readings a probe that meets all the
	// demand is judged over.
	fleetProbeReadings = 3
	// fleetHeldReadings is how many of the last readings at a steady limit
	// the rate before a probe is summed over.
	fleetHeldReadings = 5
	// fleetProbeReach: a probe raises the limit to the clients' whole
	// demand, fleetProbeMargin times it, when the demand is at most this
	// many times the limit (raised); a probe that met all the demand with
	// at most this many times the limit it began from in flight needs no
	// gain to be kept, only no loss (judgeProbe). Further off (the seed
	// experiment's 50,000 clients, an open loop over the node's capacity)
	// the limit is what keeps the backlog out of the node, and a probe
	// doubles and must gain.
	fleetProbeReach  = 4
	fleetProbeMargin = 1.5
	// fleetDemandDecay is how much of the highest demand seen a window
	// keeps (noteDemand).
	fleetDemandDecay = 0.9
	// The spacing of probes after a failed one: it doubles from
	// fleetProbeGap to fleetProbeGapMax.
	fleetProbeGap    = int64(time.Second)
	fleetProbeGapMax = int64(10 * time.Second)
)

// nodeRate is the fleet law's view of the node's completed-request count.
type nodeRate struct {
	at, prevAt int64  // the last two readings (0: none)
	total      uint64 // the count at the last reading
	rate       float64
	done       uint64  // requests the node completed between the last two readings
	noise      float64 // smoothed relative change of rate between readings
	answers    uint64  // this sidecar's answers from the node, all time
	answersAt  uint64  // answers at the last reading
	share      float64 // this sidecar's share of the node's answers
	lastShare  float64 // in the last interval, less chance (fleetsize.go)
	ours       bool    // the last interval's answers were mostly this sidecar's
	limitAt    float64 // the limit at the last reading

	// The run of cuts (runLimit 0: none).
	runLimit float64
	runRate  float64
	runMin   int64
	runAt    int64
	runDone  uint64 // the requests counted in runRate
	// The block of readings being summed up (rebase), whether every window
	// closed in it was under the target, and the reference block: the
	// node's rate in the last calm block, or higher since.
	blockDone uint64
	blockTime int64
	blockCalm bool
	refRate   float64
	refDone   uint64

	// The probe (probeFrom 0: none): the limit and the node's rate before
	// it, and when it began.
	probeFrom float64
	probeRate float64
	probeDone uint64 // the requests counted in probeRate
	probeN    int    // the readings summed in probeRate
	probeAt   int64
	probePeak int32 // the most requests in flight since it began
	// The last readings while the limit held (up to fleetHeldReadings;
	// heldN counts them all, the ring holds the last ones).
	held  [fleetHeldReadings]heldReading
	heldN int
	// met is the demand the last probe kept met, or the limit reached on a
	// starved host (0: none): the least a dominant sidecar cuts to
	// (judgeProbe, starvedBelow).
	met float64
	// starved: the proxy's tasks waited for a CPU fleetStarved of the time
	// or more, at the last reading; starvedMet: met was set because of it;
	// starvedOff: no such rule before then, after Cassandra's overload
	// (starvedBelow).
	starved, starvedMet bool
	starvedOff          int64
	// demand is how many requests wanted the node at the close of the
	// last windows: the most in flight in each, and its share of the
	// queue then (Limiter.adaptLocked), the highest of the last few
	// (noteDemand).
	demand float64
	// The readings judged since the probe began, summed: done requests,
	// nanoseconds, how many.
	pDone     uint64
	pTime     int64
	pN        int
	probeNext int64   // no probe before then
	probeGap  int64   // the wait after the last failed probe
	climbing  bool    // the last probe judged was kept
	gapRate   float64 // the node's rate when the last probe failed
	bound     int     // windows in a row in which the limit bound
	cutAt     int64   // the last cut (of a sidecar that judges its cuts)
	// loneFrom is the limit before a lone sidecar's last raise in slow
	// start (0: none), loneDone the requests counted in the rate then.
	loneFrom float64
	loneDone uint64
	lastMin  int64 // the last window's minimum

	// idle is how long the node was idle for this sidecar, all time, as
	// the limiter set it before the reading (ns); idleAt its value at the
	// last reading. bdt is the last interval less its idle time, and brate
	// the node's rate over bdt, which the dominant rules judge by (idle.go).
	idle, idleAt int64
	brate        float64
	bdt          int64

	undone, probed uint64 // runs undone, probes kept
	rebased        uint64 // runs ended by a new baseline (rebase)
	notQueued      uint64 // runs ended by a reading of a node with room (nodequeue.go)
	upBase         bool   // rebase raised the baseline since the node was last fast
	failed         uint64 // probes taken back (for tests)
}

// reading takes the node's counts at now and reports whether it changed
// the limit; limited: a request found no room since the window began, peak
// the most requests in flight since then.
func (f *fleet) reading(now int64, rd NodeReading, limited bool, peak int32, cfg *Config) bool {
	r := &f.nr
	f.readSize(now, rd)
	if r.starvedMet && !r.starved {
		r.met, r.starvedMet = 0, false // the law reads the latencies again
	}
	total := rd.Completed
	r.probePeak = max(r.probePeak, peak)
	prevAt, prevTotal, prevRate := r.at, r.total, r.brate
	answers := r.answers - r.answersAt
	limitBefore := r.limitAt
	idleDt := r.idle - r.idleAt
	r.prevAt, r.at, r.total, r.answersAt, r.limitAt, r.idleAt = prevAt, now, total, r.answers, f.limit, r.idle
	if prevAt == 0 || now <= prevAt || total < prevTotal {
		// The first reading, or the node restarted (its count went
		// back): no rate yet, and nothing to judge a run by.
		r.rate, r.brate, r.runLimit = 0, 0, 0
		return false
	}
	done := total - prevTotal
	r.done = done
	r.rate = float64(done) / (float64(now-prevAt) / 1e9)
	r.bdt = max(now-prevAt-idleDt, 0)
	idle := float64(r.bdt) < fleetBusyLeast*float64(now-prevAt)
	if !idle {
		r.brate = float64(done) / (float64(r.bdt) / 1e9)
	}
	r.ours, r.lastShare = false, 0
	if done > 0 && answers > 0 {
		// An interval in which this sidecar sent nothing says nothing
		// of its share when it sends: make bench's proxy sits idle while
		// the other targets' rounds run, and came back to 128 readers
		// with its share at nothing, judging by latencies alone for the
		// six readings (1.2 s) the average took to climb back.
		s := min(float64(answers)/float64(done), 1)
		// Less what chance gives a count (fleetRateChance standard
		// deviations): a small limit's interval holds a few answers.
		r.lastShare = max(0, float64(answers)-fleetRateChance*math.Sqrt(float64(answers))) / float64(done)
		r.ours = s >= fleetRateOurs
		if r.share == 0 {
			r.share = s
		}
		r.share += (s - r.share) / 4
	}
	if answers == 0 {
		// This sidecar sent nothing: the interval says nothing about
		// its limit, and the node's rate in it is other clients'.
		changed := r.probeFrom != 0
		if changed {
			f.limit = r.probeFrom
		}
		r.probeFrom, r.runLimit = 0, 0
		return changed
	}
	if idle && r.dominant() {
		// Mostly idle: the rate is the clients' pauses, not the limit's
		// (idle.go). A probe stays open for the next reading.
		return false
	}
	held := math.Abs(f.limit-limitBefore) <= 0.1*limitBefore // the limit held since the last reading
	if prevRate > 0 && !f.slow && held && !idle {
		// The rate's noise (see the file's comment). A change is counted
		// as at most twice the noise so far, so that one reading taken
		// while the node warms up moves it by an eighth, not by half:
		// a noise that is really larger takes a few readings more to
		// learn.
		c := min(math.Abs(r.brate-prevRate)/prevRate, 0.5, 2*r.noise)
		r.noise += (c - r.noise) / 8
	}
	if r.probeFrom == 0 && limitBefore > 0 && held && !idle {
		r.held[r.heldN%fleetHeldReadings] = heldReading{done, r.bdt}
		r.heldN++
	} else {
		r.heldN = 0
	}
	// A proxy the node lists alone starts alone as soon as most of an
	// interval's answers are its own: the smoothed share of a dominant
	// one took a second to rise from the driver's session setup among
	// other clients' requests, the limit at the floor meanwhile.
	alone := f.size.k == 1 && r.ours
	if f.slow && limited && r.probeFrom == 0 && (r.dominant() || alone) {
		return f.loneStart(prevRate, cfg)
	}
	r.loneFrom = 0
	if r.probeFrom != 0 {
		return f.judgeProbe(now, cfg)
	}
	if !r.dominant() { // see the file's comment
		if !r.keepsMet() {
			r.met, r.starvedMet = 0, false
		}
		before := f.limit
		if !f.calm && f.refLimit != 0 && f.notQueued(rd) {
			f.waitIsNotAQueue()
		}
		f.rebase(now)
		return f.limit != before // taken back (fleetsize.go)
	}
	if r.runLimit == 0 || now <= r.runAt {
		return false
	}
	if r.prevAt < r.cutAt {
		return false // judged by a reading after the last cut
	}
	// The run's cuts are judged together, against the rate where the run
	// began: cuts that each cost less than the rate's noise would
	// otherwise slide the limit down step by step.
	if r.brate >= r.runRate*(1-max(fleetRateAllowance, r.noise, byChance(r.done, r.runDone))) {
		return false
	}
	r.undone++
	if f.calm {
		// A queue drained, and the cuts went on past the node's knee:
		// one step back, and the run goes on.
		f.limit = max(f.limit, limitBefore)
		return true
	}
	// The cuts cost throughput while the latency still stood: not a
	// queue. Where the run began is the new baseline, and a climb from
	// there finds out whether more serves more still.
	f.base = max(f.base, r.runMin)
	f.refLimit = 0
	r.openProbe(max(f.limit, r.runLimit), r.runRate, r.runDone, 1, now)
	r.runLimit = 0
	f.limit = f.raised(r.probeFrom, cfg)
	return true
}

// rebase is the rule of a sidecar with a small share of the node, at every
// reading: when the node's rate over a block of readings fell below the
// reference (by more than chance) while the window is over the target in a
// run of cuts, the node serves less and the latency stands: the node is
// slower, not queued. The last window's minimum becomes the baseline, which
// ends the cuts; the limits stay where they are, and the law's sub-linear
// growth, which keeps the fleet fair, takes them back up. The limit is not
// restored as a dominant sidecar's is: sidecars that each restored their
// own run's start drifted apart (Jain 0.45 at K = 8 in the simulator).
// When the rate rises over the reference by more than chance again, the
// node is fast again and the baseline goes back to the lowest minimum.
//
// The reference is the node's rate in the last block in which every window
// was under the target, raised since by any block that served more by more
// than chance (the highest of several blocks' chance variations would
// stand above the next ordinary block by more than chance): what the node
// serves at its present speed. It is the node's, the same for every
// sidecar, so that the sidecars of a fleet tell a slower node together.
// Referring each to the rate where its own run of cuts began split them: a
// sidecar whose run began after the node slowed never saw the rate fall,
// kept the old baseline and cut on, down to a fifth of the others' limits
// (Jain 0.79 in the simulator, 8 sidecars of a node of 16 threads at 5x).
func (f *fleet) rebase(now int64) {
	r := &f.nr
	if r.blockDone == 0 {
		r.blockCalm = true
	}
	r.blockDone += r.done
	r.blockTime += now - r.prevAt
	r.blockCalm = r.blockCalm && f.calm
	// The rate is judged over blocks of at least fleetRateBlock requests:
	// a reading's own count varies by chance (byChance) as much as the
	// cuts past the knee of a node of 1,600 requests/s cost it.
	if r.blockDone < fleetRateBlock {
		return
	}
	rate := float64(r.blockDone) / (float64(r.blockTime) / 1e9)
	done, calm := r.blockDone, r.blockCalm
	r.blockDone, r.blockTime = 0, 0
	chance := max(fleetRateAllowance, byChance(done, r.refDone))
	rose := rate > r.refRate*(1+chance)
	switch {
	case calm || rose:
		if r.upBase && rose {
			// The node serves more than it did when it was last judged
			// slower: it is fast again (the compaction ended). The minimum
			// it was rebased to carried the wait its queue stood at then,
			// on top of the slower service; kept, it hid that much queue
			// from this sidecar for good. After 80 s of a node 1.6x
			// slower, 1,000 simulated sidecars' limits added up to 3.3x
			// its threads for as long as the run lasted (1.5x before); and
			// each kept the minimum of its own last window before the rate
			// fell, so that their limits spread: Jain's index over the
			// sweep's minute 0.90-0.91, 0.94-0.95 going back. If the node
			// is still slower than at first, the law reads its queue from
			// the lowest minimum, cuts, and the rate's next fall rebases
			// again. Only a baseline raised here goes back: one that a
			// dominant sidecar's probe raised measures latency that rises
			// with load (probe.go).
			f.base = f.lowest
			r.upBase = false
		}
		r.refRate, r.refDone = rate, done
	case r.runLimit == 0 || f.calm:
	case rate < r.refRate*(1-chance):
		f.base = max(f.base, r.lastMin)
		r.upBase = true
		f.takeBack()
		f.refLimit, r.runLimit = 0, 0
		r.refRate, r.refDone = rate, done
		r.rebased++
	}
}

// cutting notes the start of a run of cuts, when the node's rate is known,
// and reports whether to cut now (once per reading, for a sidecar that
// judges its cuts by the node's rate).
func (f *fleet) cutting(now int64) bool {
	r := &f.nr
	if r.rate == 0 {
		return true
	}
	if r.runLimit == 0 {
		r.runLimit, r.runRate, r.runDone, r.runMin, r.runAt = f.limit, r.brate, r.done, f.wmin, now
	}
	if r.share < fleetRateShare {
		return true
	}
	if f.wasCalm {
		// A wait that stood through one window only: on a host whose
		// cores the node shares, one window in three or four at 128
		// clients (see the file's comment).
		return false
	}
	if r.prevAt < r.cutAt {
		return false // no reading's whole interval followed the last cut yet
	}
	r.cutAt = now
	return true
}

// dominant reports whether this sidecar carries nearly all of the node's
// requests, on average and in the last interval: it then judges its own
// cuts and raises by the node's rate (see the file's comment).
func (r *nodeRate) dominant() bool { return r.ours && r.share >= fleetRateShare }

// byChance is how far apart two rates counted from a and b requests may be
// by chance alone, relative to either: counts vary as Poisson ones do, by
// about their square root, so a node of 1,600 requests/s read every 200 ms
// varies by 8% from one reading to the next.
func byChance(a, b uint64) float64 {
	return fleetRateChance * math.Sqrt(1/float64(max(a, 1))+1/float64(max(b, 1)))
}

// pollInterval is how long to wait before the next reading (0: none).
func (f *fleet) pollInterval(now int64, cfg *Config) time.Duration {
	if cfg.NodePoll <= 0 {
		return 0
	}
	r := &f.nr
	d := cfg.NodePoll
	s := r.share
	if r.rate > 0 && now > r.at {
		// Answers since the last reading count at once: a sidecar that
		// was idle (its share near 0, its readings 30s apart) and is
		// busy now must not wait for its next reading to learn it.
		s = max(s, float64(r.answers-r.answersAt)/(float64(now-r.at)/1e9)/r.rate)
	}
	if s > 0 && s < fleetPollShare {
		d = time.Duration(float64(d) * fleetPollShare / s)
	}
	d = f.sizePoll(d, cfg)
	return min(d, max(fleetPollMax, cfg.NodePoll))
}

// pollDue reports whether the node's count is due for a reading at now.
func (f *fleet) pollDue(now int64, cfg *Config) bool {
	d := f.pollInterval(now, cfg)
	return d > 0 && (f.nr.at == 0 || now-f.nr.at >= int64(d))
}

// NodeReading is one reading of a node's own counts: Cassandra's
// system_views.thread_pools.
type NodeReading struct {
	// Completed is the requests the node completed (all clients', ever):
	// the Native-Transport-Requests pool's completed_tasks.
	Completed uint64
	// Active is the requests its native transport threads serve, Threads
	// how many they serve at once (0: not read), and Queued the requests
	// waiting inside the node, for one of those threads or in the stages
	// that read and write (see nodequeue.go).
	Active, Threads, Queued int64
	// Sidecars is the number of proxies connected to the node, from its
	// list of clients (system_views.clients), and FleetShare the share of
	// the requests it completed since the list's last reading that came
	// through them (0: not read with this reading, or unknown). See
	// fleetsize.go.
	Sidecars   int
	FleetShare float64
}

// NodeRead gives the fleet law node id's own counts, read at the
// limiter's clock now. It does nothing unless the limit follows the fleet
// law.
func (l *Limiter) NodeRead(id NodeID, rd NodeReading) {
	l.mu.Lock()
	if !l.cfg.Adaptive || l.cfg.Law != LawFleet || id < 0 || int(id) >= len(l.nodes) || !l.nodes[id].active {
		l.mu.Unlock()
		return
	}
	n := &l.nodes[id]
	now := l.now()
	l.readable(n, now)
	n.fl.nr.idle = n.idleNs
	n.fl.nr.starved = l.cpuPressure >= fleetStarved
	before := n.fl.limit
	ch := n.fl.reading(now, rd, n.blocked, n.ad.maxInflight, &l.cfg)
	if !ch {
		l.mu.Unlock()
		return
	}
	if n.fl.limit > before {
		// A request that found no room found it at the old limit: the
		// window under way would report the raise as binding, and a climb
		// judged on it doubled on past its clients' demand (128 readers
		// took the limit to 350-500).
		n.restartBinding()
	}
	l.setLimitLocked(n, n.fl.limit)
	l.drainLocked(now, nil)
}

// NodeReadingDue reports whether node id's count of completed requests
// is due for a reading (NodeRead): never unless the limit follows the
// fleet law, NodePoll is positive and the node is active. A sidecar reads
// it every NodePoll, or less often when its share of the node's answers
// is under a tenth; callers ask every NodePoll or so, so that a sidecar
// whose share grows is read at once.
func (l *Limiter) NodeReadingDue(id NodeID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.cfg.Adaptive || l.cfg.Law != LawFleet || id < 0 || int(id) >= len(l.nodes) || !l.nodes[id].active {
		return false
	}
	return l.nodes[id].fl.pollDue(l.now(), &l.cfg)
}

// NodePoll is how often callers of NodeReadingDue should ask (0: never).
func (l *Limiter) NodePoll() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.cfg.Adaptive || l.cfg.Law != LawFleet || l.cfg.NodePoll <= 0 {
		return 0
	}
	return l.cfg.NodePoll
}
