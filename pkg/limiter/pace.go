package limiter

// Fractional limits. The fleet law's limits may be fractions (0.25, 2.5):
// a node then has ceil(limit) slots, and the last one is paced so that it
// is held only the fraction of the time. No goroutine or timer is needed:
// the rest after a request is a time before which the slot is not given
// (node.paceAt), and the queue is served then by the Limiter's tick or the
// next release.

import (
	"math"
	"math/rand/v2"
	"time"
)

// limitSlots sets n's exact limit and paced fraction, and returns its slots.
func (l *Limiter) limitSlots(n *node, limit float64) int32 {
	n.exact = limit
	n.frac = 0
	if !l.cfg.Adaptive || l.cfg.Law != LawFleet {
		v := max(int32(limit), 1)
		n.exact = float64(v)
		return v
	}
	if f := limit - math.Floor(limit); f > 1e-6 {
		n.frac = f
	}
	return max(int32(math.Ceil(limit)), 1)
}

// room reports whether n can take one more request at now (read from l's
// clock when *now is 0 and pacing needs it).
func (l *Limiter) room(n *node, now *int64) bool {
	if n.inflight >= n.limit {
		n.blocked = true
		return false
	}
	if n.frac > 0 && n.inflight == n.limit-1 {
		if *now == 0 {
			*now = l.now()
		}
		if *now < n.paceAt {
			n.blocked = true
			return false
		}
	}
	return true
}

// pace is called when a request on n ends with n.inflight still counting
// it. A limit of floor+frac (frac in (0, 1)) holds its last slot frac of
// the time on average: after a request that used it, the slot rests for
// latency*(1-frac)/frac. Below 1 it is the only slot: a limit of 0.25 is
// one request at a time and three latencies of rest between them on
// average, drawn at random (see restDraw).
func (l *Limiter) pace(n *node, latency time.Duration) {
	if n.frac == 0 || n.inflight < n.limit {
		return
	}
	if latency <= 0 {
		latency = time.Duration(n.fl.mean)
	}
	rest := float64(latency) * (1 - n.frac) / n.frac
	now := l.now()
	if n.limit == 1 && !n.fl.slow {
		// The only slot: its rest is drawn from an exponential of that
		// mean. Requests that waited in the same burst at the node come
		// back with the same latency; rests in proportion to it, alike,
		// sent them back together, and a fleet of paced sidecars fell
		// into step: 1,000 simulated sidecars with limits held at 0.2
		// left the node swinging between 44 and 350 requests from one
		// 100 ms to the next, idle between the waves; held at 0.154 (1.2x
		// its threads in all) it served 0.89 of its capacity, 0.99 with
		// drawn rests. Not in slow start, whose clock keeps sidecars
		// started together equal: drawn rests there made their windows
		// differ, and 8 sidecars sharing a node of 16 threads at 5x its
		// capacity ended as low as 0.80 fair by Jain's index.
		rest *= n.restDraw(now)
	}
	r := int64(rest)
	n.paceAt = now + r - min(n.late, r)
}

// restDraw returns an exponential variate of mean 1, capped at 8 (which
// moves the mean by 0.03%), from a generator seeded by the clock at its
// first use: sidecars started together draw apart, and a simulation on a
// virtual clock replays the same draws.
func (n *node) restDraw(now int64) float64 {
	if n.rng == nil {
		n.rng = rand.New(rand.NewPCG(uint64(now), 0x9e3779b97f4a7c15))
	}
	return min(n.rng.ExpFloat64(), 8)
}
