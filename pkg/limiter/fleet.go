package limiter

import (
	"math"
	"time"
)

// The fleet law (Config.Law = LawFleet): an adaptive limit meant for many
// sidecars in front of the same nodes, none of which knows how many others
// there are. Its aims are that the sum of the sidecars' limits settles near
// the node's best concurrency whatever their number, and that they share it
// fairly.
//
// The signal is the node's standing queue, read the same way by every
// sidecar. A window's statistic is the minimum latency of its samples (from
// the backend write to the backend read): a request that waited in the
// node's queue carries the wait in its latency, and when the queue stands
// (never empties during the window) every request does, so the minimum
// rises by the standing wait. Minima are steady where means are not (the
// lower edge of a latency distribution is sharp: the minimum of 16
// exponential samples is 16 times less noisy than their mean), so every
// sidecar's baseline, the lowest window minimum over BaselineWindow, lands
// within a few percent of every other's: the unfairness of a per-sidecar
// minimum of noisy means is gone. The standing wait is
//
//	d = windowMin - Tolerance*baseline   (0 when negative)
//
// the Tolerance being a dead zone for the noise of the minimum and the
// host's jitter. By Little's law this sidecar's own requests standing in
// the node's queue number limit*d/mean, where mean is the window's mean
// latency. At the end of each window:
//
//   - An OVERLOADED or timeout outcome: limit *= Backoff.
//   - d > 0: FAST TCP's update, which drives this sidecar's standing
//     requests towards a target share alpha = fleetShare*sqrt(limit):
//     limit += fleetGain*(alpha - limit*d/mean), at most halved or
//     doubled. Every sidecar sees the same d and mean, so at equilibrium
//     limit*d/mean = fleetShare*sqrt(limit) has one solution, the same for
//     all: the law converges to equal limits (Vegas and FAST converge to
//     fairness this way when flows agree on the base latency). The square
//     root keeps the fleet's standing queue, the sum of the alphas,
//     growing only as sqrt(K*best) with K sidecars: about 5 requests at
//     K = 8 and 15 at K = 1,000 in front of a node of 128 threads, where a
//     constant alpha would queue K times it.
//   - d = 0, and the limit was used (a request waited for it, or the
//     window's peak in flight reached it): the limit doubles in slow start
//     (from the first window until the first queue or drop) and grows by
//     fleetGrowth after. Growth is multiplicative, so a fleet's sum grows
//     at the same pace whatever K; the fair share is restored by the
//     queue-driven update above.
//   - Otherwise it holds: a client that does not use its limit says nothing
//     about the node (the "app-limited" guard).
//
// A limit starts at, and never goes below, Floor, which may be below one:
// a limit of 0.25 admits one request at a time and then waits three of its
// latencies before the next (see node.pace), so that a thousand sidecars
// can share a node of 128 threads. The floor is also the start, so that a
// fleet starting at once (a deployment rolled out, a cluster restarted)
// starts below the node's concurrency and every sidecar measures the
// baseline of an unqueued node.
//
// The node's own latency can rise too (a slower disk, compaction, heavier
// queries): every sidecar then reads a queue that cuts do not drain. Cuts
// that do not move the minimum give it away: once a run of cuts has
// lowered the limit by a fifth and the window minimum has not fallen by 3%
// for two windows, the minimum becomes the baseline. All sidecars cut
// together on the same signal, so the minimum of a queued node does fall
// under their cuts, and the test cannot be fooled by one sidecar cutting
// alone.
const (
	// fleetGain is the share of its standing queue over the target that a
	// sidecar cuts per window: less than all of it, because each window's
	// reading is noisy and an independent noise per sidecar would make the
	// limits drift apart.
	fleetGain = 0.5
	// fleetGrowth*limit^0.75 is the growth per Window.
	fleetGrowth = 0.02
	// fleetFutile: cuts to this fraction of the limit that leave the
	// minimum where it was mean a slower node.
	fleetFutile = 0.5
	// fleetDoubling is slow start's doubling time, in Windows.
	fleetDoubling = 4
	// fleetMinSamples is how few samples a window may close with when it
	// has lasted 10 Windows without reaching MinSamples (a tiny limit in
	// front of a slow node).
	fleetMinSamples = 4
)

type fleet struct {
	limit float64
	slow  bool // slow start
	born  int64
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

	// In a run of cuts, the limit and the standing wait when the wait
	// last fell by a tenth (refLimit 0: no run).
	refLimit float64
	refWait  float64
	unqueued float64 // smoothed mean latency of the windows under the target
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
	*f = fleet{limit: cfg.Floor, slow: true, born: now}
	f.startWindow(now)
}

func (f *fleet) startWindow(now int64) {
	f.start, f.count, f.sum, f.wmin, f.drops = now, 0, 0, 0, 0
}

func (f *fleet) record(o Outcome, latency time.Duration) {
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
	limit := f.limit
	settling := f.grew
	f.grew = false
	switch {
	case f.drops > 0:
		limit *= cfg.Backoff
		f.slow = false
		f.refLimit = 0
	case f.count > 0:
		mean := f.sum / int64(f.count)
		f.mean = mean
		if f.base == 0 || f.wmin < f.base {
			f.base = f.wmin
		}
		// The minimum of few samples sits above the distribution's
		// lower edge by about (mean-edge)/count: a sidecar with a small
		// limit has few samples, and without this allowance would read
		// queues that are not there and shrink further.
		noise := float64(max(mean-f.base, 0)) / float64(f.count)
		// d estimates the standing wait without bias: noise alone
		// leaves it about 0, above or below, whatever the samples.
		d := float64(f.wmin-f.base) - noise
		target := (cfg.Tolerance - 1) * float64(f.base)
		if d <= target {
			f.refLimit = 0
			// The mean latency of an unqueued node, smoothed: see the
			// slower-node test below.
			if f.unqueued == 0 {
				f.unqueued = float64(mean)
			}
			f.unqueued += (float64(mean) - f.unqueued) / 8
			switch {
			case f.slow:
				// Slow start doubles every fleetDoubling Windows by the
				// clock, at most once a window: sidecars started
				// together stay equal whatever their windows' phases.
				if limited {
					limit = min(2*limit, cfg.Floor*math.Exp2(float64(now-f.born)/float64(fleetDoubling*cfg.Window)))
				}
			case !limited || settling:
			default:
				f.grew = true
				limit += fleetGrowth * math.Pow(limit, 0.75) * float64(elapsed) / float64(cfg.Window)
			}
			break
		}
		f.slow = false
		switch {
		case f.refLimit == 0 || d < 0.9*f.refWait:
			f.refLimit, f.refWait = limit, d
		case limit <= fleetFutile*f.refLimit && f.slower(mean):
			// The cuts did not move the minimum: the node itself is
			// slower, not queued. Its new minimum is the baseline, and
			// the cuts are undone.
			f.base = f.wmin
			limit = f.refLimit
			f.refLimit = 0
			break
		}
		if f.refLimit != 0 {
			// The whole standing wait over the baseline is this
			// sidecar's share of the standing queue (Little's law):
			// cut it off, and the fleet lands on the node's knee.
			// A limit above what the window used is cut from what it
			// used: cutting room nobody uses would leave this sidecar
			// with more than its share.
			limit = min(limit, max(float64(peak), 1)) * max(0.5, 1-fleetGain*(d-target)/float64(mean))
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
