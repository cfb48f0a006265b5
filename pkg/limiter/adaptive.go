package limiter

import (
	"math"
	"time"
)

// The adaptive limit of one node: a gradient limit in the family of Netflix
// concurrency-limits' Gradient2 and Vegas, with BBR's habit of measuring the
// no-load latency only where it can be seen.
//
// Samples are the latencies of Success outcomes. A window lasts at least
// Config.Window and twice the last window's mean, and until it has
// Config.MinSamples samples; recording a sample is two adds. Its statistic
// is the mean of all its samples, each clamped to 10 baselines: a 128-sample
// median was tried first, and its noise (about 13% for exponential service
// times) made the minimum of medians, the baseline, so low that noise alone
// crossed Tolerance; the mean of all samples is several times steadier and
// the clamp keeps stragglers (a GC pause, a huge partition) out of it.
//
// The baseline is the lowest window mean seen over Config.BaselineWindow
// (kept as 8 slots of minima). At the end of a window:
//
//   - mean > Tolerance*baseline (requests queue inside Cassandra): the
//     limit is multiplied by baseline/mean, at least 0.5. Against a node
//     whose latency is flat up to its capacity C and rises linearly past it,
//     that cut lands on C, where the latency is back at the baseline, so the
//     baseline keeps being re-measured; the limit then oscillates between
//     about C and Tolerance*C. A mean under twice that is only acted on
//     when the window before was over too: one such window is as often
//     noise, and the baseline, a minimum, sits at the low edge of it.
//   - else an OVERLOADED or timeout outcome in the window: limit *= Backoff.
//   - else, if the window used at least half the limit: the limit grows,
//     doubling until the first cut (slow start) and by sqrt(limit) after.
//   - else it holds: a client that does not use the limit says nothing about
//     the node.
//
// Two corrections keep the baseline honest:
//
//   - Stale low: when the no-load latency itself rises (heavier queries, a
//     node loaded from elsewhere), every window looks queued and cuts would
//     pin the limit at MinLimit for a whole BaselineWindow. Cuts that do not
//     move the latency give that away: once a run of cuts has divided the
//     limit by 4 (or brought it down to MinLimit, on a small node) and two
//     windows in a row did not lower the mean by 10%, the mean becomes the
//     baseline and slow start resumes.
//   - Stale high (a baseline first measured above capacity, or after the
//     reset above): every BaselineWindow/3 the limit is halved for two
//     windows (BBR's ProbeRTT), so the node is seen below its capacity.
//
// All of it runs under Limiter.mu; the per-request part is record and the
// max-in-flight update in grantLocked, the rest runs in Sweep.

const (
	baseSlots = 8 // the baseline window is kept as 8 slots of minima
	// clampFactor caps a sample at this many baselines, so that a few
	// stragglers (a GC pause, a huge partition) do not move a window's mean.
	clampFactor = 10
	// probeWindows is how many windows a baseline probe lasts: the first
	// one sees the backlog of the full limit drain.
	probeWindows = 2
)

type baseSlot struct {
	epoch int64 // slot number + 1; 0 = empty
	min   int64
}

type adaptive struct {
	limit   float64
	probing bool // slow start: double instead of adding sqrt(limit)

	// The current window.
	start       int64
	count       int   // samples
	sum         int64 // of the samples, each clamped to clamp
	clamp       int64 // 0 = none
	maxInflight int32
	drops       int32 // Overloaded and Timeout outcomes

	base [baseSlots]baseSlot
	last int64 // the last window's mean
	// above counts windows in a row whose mean was over Tolerance
	// baselines.
	above int

	// A run of cuts: the limit when it began (0 = none), the previous
	// window's mean, and how many windows in a row did not lower it by 10%.
	runStart float64
	prevMean int64
	flat     int

	// Probing the baseline: windows left at half the limit, the limit to
	// restore, and when the next probe is due.
	probeLeft int
	saved     float64
	nextProbe int64
}

// reset starts the node over at MinLimit in slow start, forgetting its
// baseline.
func (a *adaptive) reset(cfg *Config, now int64, inflight int32) {
	*a = adaptive{limit: float64(cfg.MinLimit), probing: true, nextProbe: now + probeInterval(cfg)}
	a.startWindow(now, inflight)
}

func (a *adaptive) startWindow(now int64, inflight int32) {
	a.start = now
	a.count, a.sum = 0, 0
	a.maxInflight = inflight
	a.drops = 0
}

// record notes one released permit.
func (a *adaptive) record(o Outcome, latency time.Duration) {
	switch o {
	case Success:
		if latency <= 0 {
			return
		}
		a.count++
		if a.clamp > 0 {
			latency = min(latency, time.Duration(a.clamp))
		}
		a.sum += int64(latency)
	case Overloaded, Timeout:
		a.drops++
	}
}

// due reports whether the window can close at now; stale reports whether it
// has gone on so long without enough samples that it should start over.
func (a *adaptive) due(now int64, cfg *Config) (due, stale bool) {
	elapsed := now - a.start
	if elapsed < max(int64(cfg.Window), 2*a.last) {
		return false, false
	}
	if a.count >= cfg.MinSamples || a.drops > 0 {
		return true, false
	}
	return false, elapsed >= 10*int64(cfg.Window)
}

// probeInterval is the time between two probes of the baseline.
func probeInterval(cfg *Config) int64 { return int64(cfg.BaselineWindow) / 3 }

// update closes the window and returns the new limit.
func (a *adaptive) update(now int64, inflight int32, cfg *Config) float64 {
	slot := max(int64(cfg.BaselineWindow)/baseSlots, 1)
	var mean, base int64
	if a.count > 0 {
		mean = a.sum / int64(a.count)
		a.last = mean
		a.observeBase(now, mean, slot)
		base = a.baseline(now, slot)
		a.clamp = clampFactor * base
	}
	defer a.startWindow(now, inflight)
	if a.probeLeft > 0 {
		// Probing: the window only measured the baseline.
		if a.probeLeft--; a.probeLeft == 0 {
			a.limit = min(max(a.saved, float64(cfg.MinLimit)), float64(cfg.MaxLimit))
			a.nextProbe = now + probeInterval(cfg)
		}
		return a.limit
	}
	limit := a.limit
	if a.count == 0 || float64(mean) <= cfg.Tolerance*float64(base) {
		a.above = 0
	}
	switch {
	case a.count > 0 && float64(mean) > cfg.Tolerance*float64(base):
		if a.above++; a.above < 2 && float64(mean) < 2*cfg.Tolerance*float64(base) {
			// One window a little over is as often noise as
			// queueing: on a busy host window means swing by half
			// around the same limit. Hold, and cut if the next one
			// is over too; far over is queueing, cut now.
			break
		}
		switch {
		case a.runStart == 0:
			a.runStart, a.flat = limit, 0
		case float64(mean) >= 0.9*float64(a.prevMean):
			a.flat++
		default:
			a.flat = 0
		}
		a.prevMean = mean
		if a.flat >= 2 && (limit <= a.runStart/4 || limit <= float64(cfg.MinLimit)) {
			// The limit is down 4x, or as far as it goes, and the
			// latency has not followed for two windows: the baseline
			// is stale.
			a.base = [baseSlots]baseSlot{}
			a.observeBase(now, mean, slot)
			a.clamp = clampFactor * mean
			a.runStart = 0
			a.probing = true
			break
		}
		limit *= max(0.5, float64(base)/float64(mean))
		a.probing = false
	case a.drops > 0:
		limit *= cfg.Backoff
		a.probing = false
		a.runStart = 0
	case 2*float64(a.maxInflight) >= limit:
		if a.probing {
			limit *= 2
		} else {
			limit += max(1, math.Sqrt(limit))
		}
		a.runStart = 0
	default:
		a.runStart = 0
	}
	a.limit = min(max(limit, float64(cfg.MinLimit)), float64(cfg.MaxLimit))
	if a.runStart == 0 && !a.probing && now >= a.nextProbe {
		a.saved = a.limit
		a.limit = max(a.limit/2, float64(cfg.MinLimit))
		a.probeLeft = probeWindows
	}
	return a.limit
}

func (a *adaptive) observeBase(now, v, slot int64) { observeBase(&a.base, now, v, slot) }

// baseline is the lowest window mean in the slots of the last BaselineWindow.
func (a *adaptive) baseline(now, slot int64) int64 { return baseline(&a.base, now, slot) }
