package limiter

import (
	"math"
	"time"
)

// The fleet law (Config.Law = LawFleet): an adaptive limit meant for many
// sidecars in front of the same nodes, with no coordination service: each
// learns how many others there are from the node's list of clients, if at
// all (fleetsize.go). Its aims: the sum of the sidecars' limits settles
// near the node's best concurrency whatever their number, and they share
// it fairly.
//
// The signal is the node's standing queue, read the same way by every
// sidecar. A window's statistic is the minimum latency of its samples (from
// the backend write to the backend read): when the node's queue stands
// (never empties during the window) every request carries its wait, so the
// minimum rises by the standing wait, while a mean also moves with the
// service times. Minima are steady where means are not (the lower edge of
// a latency distribution is sharp), so every sidecar's baseline, the lowest
// window minimum it has seen, lands close to every other's: the unfairness
// of a per-sidecar minimum of noisy means, which sank the gradient law in
// fleets, is gone. The baseline is never probed: no sidecar can empty a
// node that a fleet keeps busy.
//
// The minimum of n samples sits above the lower edge by about
// noise = (mean-baseline)/n (exactly so for an exponential tail), so
//
//	d      = windowMin - baseline - noise                     (unbiased standing wait)
//	target = max((Tolerance-1)*baseline, fleetMinWait) + 2*noise  (+2*noise in slow start)
//
// The target is the same at every limit. A rule that depends on the limit
// splits a fleet of unequal clients: with no dead zone under a limit of
// 0.5 (which took 1,000 equal sidecars from 1.5x to 1.26-1.29x the node's
// threads in all), the closed loops of the simulator's mixed fleet that
// slow start had taken over 1 kept their dead zone and held a limit of 4,
// the sidecars under 0.5 were cut to 0.1-0.4, and the fleet stayed split
// for as long as the node kept its speed (Jain's index 0.65,
// TestMixedFleetStaysFairOnASteadyNode; 0.92 with one target).
//
// The noise terms matter: without them a sidecar with a small limit, hence
// few samples, reads queues that are not there and shrinks further; so
// does fleetMinWait, for a fast node (see there). At the end of each
// window:
//
//   - An OVERLOADED or timeout outcome: limit *= Backoff.
//   - d > target: limit = min(limit, peak) * (1 - fleetGain*(d-target)/mean)
//     per Window of the window's length, at least halved. By Little's law
//     d/mean is the share of the requests in the node that are standing in
//     its queue: every sidecar cutting that share (of what it used: room it
//     did not use is no share) lands the fleet on the node's knee plus the
//     target, in a few windows, whatever the number of sidecars. The cut
//     is proportional to the excess, so a window that noise pushes just
//     over the target cuts almost nothing.
//   - d <= target, and the limit bound (a request found no room): slow
//     start doubles the limit every fleetDoubling Windows by the clock
//     (sidecars started together stay equal; a sidecar the node's rate
//     shows alone grows faster, see loneStart), until the first window over
//     the target; after that it grows by fleetGrowth*sqrt(limit) per Window
//     of the window's length, if the window kept fleetBusy of the limit
//     busy (see there). The sub-linear growth is what makes the fleet
//     fair, as additive increase does for TCP (Chiu and Jain): the
//     proportional cuts keep ratios, the growth gives small limits a larger
//     share of growth. It is not additive, so that the fleet's sum grows
//     only as sqrt(K) with K sidecars: at K = 1,000 each adds 0.007 per
//     Window where the fleet shares 128. Growth as limit^0.75 pulled
//     limits apart by chance back together too weakly: Jain's index 0.84
//     for 8 closed loops in front of the simulated node of 128 threads,
//     0.94 with the square root.
//   - Otherwise it holds: a client that does not use its limit says nothing
//     about the node (the "app-limited" guard), and a window that began
//     before the last growth filled the node only settles.
//
// A limit starts at, and never goes below, Floor, which may be below one:
// a limit of 0.25 admits one request at a time and then rests for three of
// its latencies (see node.pace), so that a thousand sidecars can share a
// node of 128 threads. Starting at the floor means that a fleet starting at
// once (a deployment rolled out) starts below the node's concurrency, and
// every sidecar measures the baseline of an unqueued node.
//
// The node's own latency can rise too (compaction, a slower disk, heavier
// queries): every sidecar then reads a standing wait that cuts do not
// drain. It looks different: a queue shifts the whole latency distribution
// (minimum and mean rise by the same wait), a slower node stretches it (the
// mean rises over its unqueued value by more than the minimum does over the
// baseline). Where the node's count of completed requests cannot be read,
// once a run of cuts has taken the limit to fleetFutile of where the
// standing wait last fell by a tenth, and the window looks stretched (see
// slower), the minimum becomes the baseline and the cuts are undone.
//
// Latencies cannot tell one sidecar whether its limit's latency buys
// throughput. A sidecar that carries most of a node's requests also reads
// the node's own count of completed requests, and lets it overrule the
// rules above where they would cost throughput: see noderate.go.
const (
	// fleetGain is the share of its standing queue over the target that a
	// sidecar cuts per window: less than all of it, because each window's
	// reading is noisy and an independent noise per sidecar would make the
	// limits drift apart.
	fleetGain = 0.5
	// fleetGrowth*sqrt(limit) is the growth per Window.
	fleetGrowth = 0.02
	// fleetBusy is the least share of the limit a window must have kept
	// busy for it to grow: the time its answered requests spent in the
	// node, over the window's length (Little's law). Clients that send
	// at random find no room now and then even where they need a fraction
	// of the limit, and a rule of growth on that alone let such a sidecar
	// grow past its needs and keep the room: at 1,000 simulated sidecars
	// of equal clients, the top 5% held limits of 0.43-0.83 where the
	// median held 0.18, and served their clients' whole demand, twice
	// their share, while the others were cut. A paced limit that binds
	// kept 0.84-0.96 of it busy in the simulator (100 and 1,000 sidecars).
	fleetBusy = 0.75
	// fleetFutile: cuts to this fraction of the limit that leave the
	// standing wait where it was, in a stretched window, mean a slower
	// node.
	fleetFutile = 0.7
	// fleetDoubling is slow start's doubling time, in Windows;
	// fleetSlowCatchUp the most it raises the limit at one window.
	fleetDoubling    = 4
	fleetSlowCatchUp = 4
	// fleetMinSamples is how few samples a window may close with when it
	// has lasted 10 Windows without reaching MinSamples (a tiny limit in
	// front of a slow node).
	fleetMinSamples = 4
	// fleetMinWait is the least standing wait the law tolerates. A node
	// that answers in tens of microseconds (writes, cached reads) has a
	// tolerance of a fifth of that, a few microseconds: less than the
	// jitter of its host's scheduler, which then reads as a standing queue
	// in every window. A lone sidecar of 16 writers on make bench's node
	// was cut to 0.7x the fixed limit's throughput (0.90-1.03x with it);
	// half a millisecond of wait is still a small share of what a
	// Cassandra client waits for under load.
	fleetMinWait = 500 * time.Microsecond
)

type fleet struct {
	limit float64
	slow  bool // slow start
	// ssAt is when slow start's clock started: the close of the first
	// window (0: none yet).
	ssAt int64
	// grew: the last window raised the limit. The next one then only
	// settles (it may cut, not grow): it began before the new limit
	// filled the node, so its minimum says too little about it.
	grew bool

	// The current window.
	start int64
	count int
	sum   int64 // of the samples
	wmin  int64 // the lowest sample
	drops int32

	base int64 // the lowest window minimum (0: none yet)
	mean int64 // the last window's mean, for pacing
	// lowest is the lowest window minimum ever: where rebase takes the
	// baseline back once the node is fast again.
	lowest int64

	// In a run of cuts (which windows under the target interrupt without
	// ending it, until the limit grows back), the limit and the standing
	// wait when the wait last fell by a tenth (refLimit 0: no run).
	refLimit float64
	refWait  float64
	unqueued float64 // smoothed mean latency of the windows under the target

	calm    bool      // the last window was under the target
	wasCalm bool      // and the one before it
	nr      nodeRate  // the node's own count of completed requests (noderate.go)
	size    fleetSize // the node's list of clients (fleetsize.go)
}

// slower reports whether the window's latencies look scaled up rather than
// shifted: a standing queue adds the same wait to the minimum and to the
// mean, while a slower node (heavier queries, a slower disk) stretches its
// whole latency distribution, so the mean rises over its unqueued value by
// more than the minimum does over the baseline, by the ratio of the
// unqueued mean to the baseline. Halfway between the two is the line.
func (f *fleet) slower(mean int64) bool {
	a := float64(f.wmin - f.base)
	if a <= 0 || f.unqueued <= float64(f.base) {
		return false
	}
	r := (float64(mean) - f.unqueued) / a
	return r >= (1+f.unqueued/float64(f.base))/2
}

func (f *fleet) reset(cfg *Config, now int64) {
	*f = fleet{limit: cfg.Floor, slow: true, nr: nodeRate{noise: fleetRateNoise}}
	f.startWindow(now)
}

func (f *fleet) startWindow(now int64) {
	f.start, f.count, f.sum, f.wmin, f.drops = now, 0, 0, 0, 0
}

func (f *fleet) record(o Outcome, latency time.Duration) {
	if o != Failure && o != Dropped {
		f.nr.answers++ // the node completed it
	}
	switch o {
	case Success:
		if latency <= 0 {
			return
		}
		f.count++
		f.sum += int64(latency)
		if f.wmin == 0 || int64(latency) < f.wmin {
			f.wmin = int64(latency)
		}
	case Overloaded, Timeout:
		f.drops++
	}
}

func (f *fleet) due(now int64, cfg *Config) bool {
	elapsed := now - f.start
	if elapsed < int64(cfg.Window) {
		return false
	}
	return f.count >= cfg.MinSamples || f.drops > 0 || f.count >= fleetMinSamples && elapsed >= 10*int64(cfg.Window)
}

// update closes the window and returns the new limit. limited reports
// whether the limit bound during the window, peak is the most requests it
// had in flight.
func (f *fleet) update(now int64, limited bool, peak int32, cfg *Config) float64 {
	elapsed := now - f.start
	defer f.startWindow(now)
	f.size.noteAnswers(f.nr.answers, elapsed)
	limit := f.limit
	f.nr.probePeak = max(f.nr.probePeak, peak)
	settling := f.grew
	f.grew = false
	switch {
	case f.drops > 0:
		// Cassandra's own word: never undone by the node's rate.
		if f.nr.probeFrom != 0 {
			limit, f.nr.probeFrom = f.nr.probeFrom, 0
		}
		limit *= cfg.Backoff
		f.slow = false
		f.refLimit, f.nr.runLimit, f.nr.met = 0, 0, 0
		f.nr.starvedMet, f.nr.starvedOff = false, now+int64(fleetStarvedOff)
		f.calm = false
	case f.count > 0:
		mean := f.sum / int64(f.count)
		f.mean = mean
		if f.base == 0 || f.wmin < f.base {
			f.base = f.wmin
		}
		if f.lowest == 0 || f.wmin < f.lowest {
			f.lowest = f.wmin
		}
		// The minimum of few samples sits above the distribution's
		// lower edge by about (mean-edge)/count: a sidecar with a small
		// limit has few samples, and without this allowance would read
		// queues that are not there and shrink further.
		noise := float64(max(mean-f.base, 0)) / float64(f.count)
		// d estimates the standing wait without bias: noise alone
		// leaves it about 0, above or below, whatever the samples.
		d := float64(f.wmin-f.base) - noise
		// The target standing wait: the dead zone, plus twice the noise
		// of the minimum (the excess is about exponential: noise alone
		// passes it in one window out of 20, and then cuts little). A
		// sidecar that knows the fleet's size keeps less of both
		// (fleetsize.go).
		target := f.deadZone(cfg) + f.noiseAllowance()*noise
		if f.slow {
			// Slow start ends on a surer sign: noise alone passes
			// twice more noise once in 150 windows.
			target += 2 * noise
		}
		f.wasCalm, f.calm = f.calm, d <= target
		f.nr.lastMin = f.wmin
		if limited {
			f.nr.bound++
		} else {
			f.nr.bound = 0
		}
		if f.nr.probeFrom != 0 {
			break // a probe is open: the node's rate decides (reading)
		}
		if f.probing(now) {
			if f.starvedBelow(limit, cfg) {
				f.nr.probeFrom = 0 // no probe: the fixed limit at once
				limit = f.fixedWhileStarved(cfg)
				break
			}
			limit = f.raised(limit, cfg)
			break
		}
		if f.calm {
			// The mean latency of an unqueued node, smoothed: see the
			// slower-node test below.
			if f.unqueued == 0 {
				f.unqueued = float64(mean)
			}
			f.unqueued += (float64(mean) - f.unqueued) / 8
			switch {
			case f.slow:
				// Slow start doubles every fleetDoubling Windows by a
				// clock that starts when the first window closes (with the
				// first requests): sidecars whose traffic starts together
				// then stay equal, whatever their windows' lengths and
				// phases, until each ends it. The limit catches up with
				// the clock by up to fleetSlowCatchUp a window: a window
				// of a small limit lasts longer than a doubling, and a
				// doubling per window let sidecars drift apart fivefold
				// by the end of slow start, which the growth law takes
				// tens of seconds to even out (Jain 0.93-0.94 at K = 8 in
				// front of 16 threads in the simulator; 0.98 with the
				// clock).
				switch {
				case f.ssAt == 0:
					f.ssAt = now
				case f.joined():
					f.slow = false // see fleetsize.go
				case limited && !f.nr.dominant(): // else loneStart
					// Never below the limit: a lone sidecar's may be
					// past the clock when it stops being alone.
					limit = max(limit, min(fleetSlowCatchUp*limit, cfg.Floor*math.Exp2(float64(now-f.ssAt)/float64(fleetDoubling*cfg.Window))))
				}
			case !limited || settling || float64(f.sum) < fleetBusy*limit*float64(elapsed):
			default:
				f.grew = true
				limit += fleetGrowth * f.growthScale() * math.Sqrt(limit) * float64(elapsed) / float64(cfg.Window)
			}
			if limit > f.refLimit {
				f.refLimit = 0 // grown back: the run of cuts is over
			}
			if limit >= f.nr.runLimit {
				f.nr.runLimit = 0 // and so is the node's rate's
			}
			break
		}
		f.slow = false
		switch {
		case f.refLimit == 0 || d < 0.9*f.refWait:
			f.refLimit, f.refWait = limit, d
		case f.nr.rate == 0 && limit <= fleetFutile*f.refLimit && f.slower(mean):
			// The cuts did not move the minimum: the node itself is
			// slower, not queued. Its new minimum is the baseline, and
			// the cuts are undone. Only without the node's rate, which
			// tells a slower node surely (rebase, undo): the shape of
			// a few windows also took slow start's overshoot for a
			// slower node, and the sidecars it misled took 2-3 times the
			// others' share (Jain 0.69 in the simulator, 8 sidecars of
			// a node of 16 threads at 5x).
			f.base = f.wmin
			limit = f.refLimit
			f.refLimit = 0 // and no cut below
		}
		if f.refLimit != 0 && f.cutting(now) {
			// The standing wait over the target, as a share of the
			// mean, is the share of this sidecar's requests standing in
			// the node's queue (Little's law): cut (part of) it off.
			// A limit above what the window used is cut from what it
			// used: cutting room nobody uses would leave this sidecar
			// with more than its share.
			//
			// A window of a small limit lasts up to 10 Windows (it
			// waits for its samples), and counts as that many: growth
			// is per Window of time, and so are the cuts, or a fleet of
			// sidecars with long windows, cut once for ten Windows of
			// growth, settles on a standing queue that many times
			// larger (1,000 sidecars on a node of 128 threads: the sum
			// of their limits 2.5x its threads, 1.7x with cuts per
			// Window).
			cut := max(0.5, 1-fleetGain*f.cutScale()*(d-target)/float64(mean))
			from := limit
			limit = min(limit, max(float64(peak), 1)) * max(0.5, math.Pow(cut, float64(elapsed)/float64(cfg.Window)))
			if f.nr.keepsMet() {
				limit = max(limit, min(f.nr.met, from)) // see judgeProbe
			}
		}
	}
	f.limit = min(max(limit, cfg.Floor), float64(cfg.MaxLimit))
	return f.limit
}

// observeBase folds v into the baseline slot of now.
func observeBase(b *[baseSlots]baseSlot, now, v, slot int64) {
	e := now/slot + 1
	s := &b[e%baseSlots]
	if s.epoch != e {
		*s = baseSlot{epoch: e, min: v}
	} else if v < s.min {
		s.min = v
	}
}

// baseline is the lowest value in the slots of the last baseSlots slots.
func baseline(b *[baseSlots]baseSlot, now, slot int64) int64 {
	e := now/slot + 1
	var m int64
	for _, s := range b {
		if s.epoch != 0 && e-s.epoch < baseSlots && (m == 0 || s.min < m) {
			m = s.min
		}
	}
	return m
}
