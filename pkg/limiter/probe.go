package limiter

// The fleet law's probes: how a sidecar that carries nearly all of a
// node's requests finds out, from the node's own count of completed
// requests, whether more concurrency serves more (see noderate.go for the
// rules, and fleet.go for the law they overrule).

import "math"

// heldReading is one interval between readings of the node's count.
type heldReading struct {
	done uint64
	dt   int64
}

// probing reports whether to open a probe at the end of a window (the
// caller raises the limit): the limit bound for fleetProbeAfter windows in
// a row, whether the latency law would cut it (the rise may be the price
// of throughput) or grow it (by far less than a doubling a reading).
func (f *fleet) probing(now int64) bool {
	r := &f.nr
	if r.gapRate > 0 && (r.brate > 2*r.gapRate || 2*r.brate < r.gapRate) {
		// The node's rate moved far from where the last probe failed:
		// what that probe found says little about the node now.
		r.probeGap, r.probeNext, r.gapRate = 0, 0, 0
	}
	if r.rate == 0 || !r.dominant() || f.slow || r.bound < fleetProbeAfter || now < r.probeNext {
		return false
	}
	r.bound = 0
	// The rate before the probe is that of the last readings at this
	// limit, summed: one reading's noise, against which a probe is
	// judged, is as large again as that of the probe's own readings.
	rate, done, n := r.brate, r.done, 1
	if h := min(r.heldN, fleetHeldReadings); h > 1 {
		var t int64
		done = 0
		for _, x := range r.held[:h] {
			done, t = done+x.done, t+x.dt
		}
		rate, n = float64(done)/(float64(t)/1e9), h
	}
	r.openProbe(f.limit, rate, done, n, now)
	r.runLimit = 0
	return true
}

// openProbe starts a probe from limit, where the node's rate was rate over
// n readings that counted done requests.
func (r *nodeRate) openProbe(limit, rate float64, done uint64, n int, now int64) {
	r.probeFrom, r.probeRate, r.probeDone, r.probeN, r.probeAt = limit, rate, done, n, now
	r.pDone, r.pTime, r.pN, r.probePeak = 0, 0, 0, 0
}

// judgeProbe judges the open probe at a reading whose interval it covers,
// and reports whether the limit changed. A raise that the node turned
// into throughput is kept, and the climb goes on: the limit is raised again
// (raised) while each raise still serves more and the limit still binds.
// The first raise that does not pay its way is taken back, and the climb
// ends there.
func (f *fleet) judgeProbe(now int64, cfg *Config) bool {
	r := &f.nr
	if r.prevAt < r.probeAt {
		return false
	}
	r.pDone += r.done
	r.pTime += r.bdt
	r.pN++
	rate := float64(r.pDone) / (float64(r.pTime) / 1e9)
	// The noise is that of one reading against another: a rate summed
	// over more readings varies less.
	noise := r.noise * math.Sqrt((1/float64(r.pN)+1/float64(r.probeN))/2)
	if rate > r.probeRate*(1+max(fleetRateAllowance, fleetProbePays*noise, byChance(r.pDone, r.probeDone))) {
		// More concurrency served more: not a queue.
		f.base = max(f.base, r.lastMin)
		f.refLimit = 0
		r.probeGap = 0
		r.probed++
		r.climbing = true
		if r.bound == 0 {
			// The last window did not bind: the client uses no more. The
			// demand the raise met and paid for is where cuts stop, as for
			// a raise kept at no gain (below): a probe from 85 to 170 that
			// served 128 readers a tenth more was cut back under them by
			// two late windows, and sat there until the next probe.
			r.met = float64(r.probePeak)
			r.probeFrom = 0
			return false
		}
		r.openProbe(f.limit, rate, r.pDone, r.pN, now)
		f.limit = f.raised(f.limit, cfg)
		return true
	}
	// The raise met all the demand (the last window did not bind), and
	// the limit it began from stood within reach of it: a closed loop of
	// 128 readers on make bench's node held at 37-120 by windows that its
	// own concurrency makes late, where a fixed limit of 120 serves 0.92x
	// what one of 1,024 does (the proxy's queue takes CPU the node needs,
	// see raised). Meeting the demand then gains a few percent, under the
	// noise of the rate on that node (a tenth or more between readings):
	// probes judged on their gain failed, and the limit sat under the
	// demand between them. Such a raise is kept unless the node's rate
	// fell: it moves into the node a queue of requests that would
	// otherwise wait in the proxy, at most fleetProbeReach-1 times the
	// limit. A raise that meets a demand further off needs a gain: the
	// limit is then what keeps a large backlog out of the node.
	//
	// A fall is one past the noise of the readings compared, as a gain
	// is. Judged by a fixed 5%, three readings against five on a node
	// whose rate varies by a tenth between readings fell by chance about
	// one time in three, and 128 readers sat under their demand until the
	// next probe.
	inReach := r.bound == 0 && float64(r.probePeak) <= fleetProbeReach*r.probeFrom
	kept := rate >= r.probeRate*(1-max(fleetRateAllowance, noise, byChance(r.pDone, r.probeDone)))
	if r.bound == 0 && r.pN < fleetProbeReadings && (rate > r.probeRate || inReach) {
		// A gain under the noise, or a raise that needs no gain: one
		// reading cannot tell a few percent from noise (on make bench's
		// node one reading in three differs from the last by more than a
		// tenth). It is read again; a probe that binds is not, because a
		// queue in front of a full node is what it would hold meanwhile.
		return false
	}
	if inReach && kept {
		// The demand met is where this sidecar's cuts stop while it stays
		// dominant (fleet.update): below it they only move the demand's
		// queue from the node into the proxy, and each cut below it held
		// the readers under their demand until the next probe (1-5 s).
		r.met = float64(r.probePeak)
		f.base = max(f.base, r.lastMin)
		f.refLimit = 0
		r.probeGap = 0
		r.probed++
		r.climbing = false
		r.probeFrom = 0
		return false
	}
	// The raise that ends a climb is no failed probe; any later one is.
	climbed := r.climbing
	r.climbing = false
	r.failed++
	f.limit, r.probeFrom = r.probeFrom, 0
	// The window under way began with the raise's queue in the node: its
	// minimum carries that queue's wait, and the law would cut the limit
	// taken back below where it was (a lone closed loop in the simulator
	// spent seconds at 0.8 of the node's threads after each failed probe).
	// A new window measures the limit taken back.
	f.startWindow(now)
	// The next run of cuts is judged against the rate before the raise.
	r.brate = r.probeRate
	if !climbed {
		r.probeGap = min(max(2*r.probeGap, fleetProbeGap), fleetProbeGapMax)
		r.gapRate = r.probeRate
	}
	r.probeNext = now + max(r.probeGap, fleetProbeGap)
	return true
}

// noteDemand takes how many requests wanted the node at a window's close.
// One reading of the queue is a poor measure: 128 readers behind a limit of
// 32 left 0, 34 or 94 requests in the proxy's queue at the close of three
// windows in a row (the rest were on their way between the client and the
// proxy), and a raise sized to the first would have bound. The highest of
// the last few windows, each older one worth a tenth less, is the demand.
func (f *fleet) noteDemand(d float64) {
	f.nr.demand = max(d, fleetDemandDecay*f.nr.demand)
}

// raised is a probe's or a climb's next step from limit: a doubling, or
// the clients' whole demand (with a margin) when it is within
// fleetProbeReach of the limit. A doubling from under a demand more than
// twice the limit binds, and a binding probe must gain more than the
// rate's noise at once: 128 readers on make bench's node of two cores,
// held at 37-45 by latencies their own concurrency made, gained a few
// percent per doubling, and every probe to 75-90 was taken back. Meeting
// the demand serves them what a fixed limit does, because the proxy's queue
// costs CPU that the node shares: 128 requests against a limit of 40 cost
// the proxy 1.4-1.8x the CPU each of 128 in flight, mostly in smaller
// bursts of answers and writes (BenchmarkForward/v4/queued40 against
// BenchmarkForward/v4/proxied). Such a raise is judged as one that meets
// the demand (judgeProbe): kept unless the node's rate fell.
func (f *fleet) raised(limit float64, cfg *Config) float64 {
	to := max(fleetProbeStep*limit, limit+1)
	if d := f.nr.demand; d > to && d <= fleetProbeReach*limit {
		to = fleetProbeMargin * d
	}
	return min(to, float64(cfg.MaxLimit))
}

// loneStart is slow start for a sidecar alone in front of the node, at a
// reading: it has no fleet to stay fair to, so it leaves the shared clock
// (fleetDoubling Windows a doubling, from the floor) and raises its limit
// fleetSlowCatchUp-fold a reading, for as long as each raise pays: the
// node's rate must grow by fleetLonePays of the raise, by more than chance.
// The first raise that does not has passed the node's knee: the limit
// keeps what the raise bought, and slow start ends (as TCP's HyStart ends
// it on delay, before the loss). On the clock, a lone sidecar with a
// backlog (the seed experiment) took 4.8 s to serve 0.9 of what a fixed
// limit serves (TestFleetLawLoneSidecarStartsFast). Raising until a window
// showed a queue overshot: in front of make fleet's node of 16 threads the
// limit reached 370 before the first cut, and the probes judged during the
// climb raised the baseline to a queued latency (node p99 2.7-2.9x the
// unloaded one in the simulator, against 1.3x).
func (f *fleet) loneStart(prevRate float64, cfg *Config) bool {
	r := &f.nr
	if f.starvedBelow(f.limit, cfg) {
		f.limit = f.fixedWhileStarved(cfg)
		return true
	}
	if from := r.loneFrom; from > 0 && prevRate > 0 {
		gain := r.brate / prevRate
		if gain < fleetSlowCatchUp*fleetLonePays*(1-byChance(r.done, r.loneDone)) {
			f.limit = min(max(from*gain, from), f.limit)
			f.slow = false
			r.loneFrom = 0
			return true
		}
	}
	r.loneFrom, r.loneDone = f.limit, r.done
	f.limit = min(fleetSlowCatchUp*f.limit, float64(cfg.MaxLimit))
	return true
}
