package fleetsim

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Result is a run's figures, all taken after the warm-up.
type Result struct {
	Name string
	K    int // sidecars in the scenario

	// GoodCap is the requests served / what the node could serve over the
	// same time (its capacity changes with the steps); GoodTarget divides by
	// the lesser of capacity and offered load instead, so 1 is ideal at any
	// load.
	GoodCap, GoodTarget float64
	// P99 is the admitted requests' p99 latency at the client (queueing in
	// the sidecar included), ClientRatio its ratio to the unloaded p99;
	// P99Ratio is the same for the backend latency, from the write to the
	// node to its answer, which is what the limit controls (the sidecar's
	// queue answers to Config.QueueTarget). Each latency is divided by the
	// unloaded p99 of its moment (the node's slowdown changes it).
	P99                   time.Duration
	P99Ratio, ClientRatio float64
	// OverShare is the share of answers that were OVERLOADED (the proxy's or
	// the node's), OverP99 their p99 latency; TimeoutShare the node's
	// timeouts.
	OverShare, TimeoutShare float64
	OverP99                 time.Duration
	// Jain is Jain's fairness index over the sidecars with a fair share, of
	// served / max-min fair share of the node given their demands.
	Jain float64
	// Converge is, per step, the seconds until goodput stays >= 90% of the
	// target and the backend p99 ratio <= 2 for 2s (NaN: never before the next step).
	Converge []float64
	// LimitSum is the mean of the sum of the sidecars' limits / the node's
	// best concurrency (its threads); LimitIn20 the share of the time that
	// ratio was within 20% of 1.
	LimitSum, LimitIn20 float64

	Events uint64
	Wall   time.Duration

	// Series for the plot, one point per sampleEvery (latency: latencyBin).
	T, Goodput, Capacity, Limits, InNode, Over []float64
	TL, Ratio                                  []float64
	Threads                                    int
	StepsAt                                    []float64
}

// result computes the figures once the run has ended.
func (s *Sim) result() *Result {
	st := &s.stats
	res := &Result{Name: s.sc.Name, K: len(s.cars), Threads: s.sc.Node.Threads}
	dt := sampleEvery.Seconds()
	warm := int(s.sc.Warmup / sampleEvery)
	end := int(s.sc.Duration / sampleEvery)
	var ok, capSum, targetSum, limSum float64
	in20, nlim := 0, 0
	for i := range end {
		b := &st.bins[i]
		t := int64(i) * int64(sampleEvery)
		c := s.sc.Node.Capacity(s.slowAt(t))
		target := min(c, s.offeredAt(t))
		res.T = append(res.T, float64(i+1)*dt)
		res.Goodput = append(res.Goodput, float64(b.ok)/dt)
		res.Capacity = append(res.Capacity, c)
		res.Limits = append(res.Limits, b.limitSum)
		res.InNode = append(res.InNode, float64(b.inNode))
		ans := float64(b.ok + b.overloaded + b.timeouts)
		res.Over = append(res.Over, float64(b.overloaded)/max(ans, 1))
		if i < warm {
			continue
		}
		ok += float64(b.ok)
		capSum += c * dt
		targetSum += target * dt
		r := b.limitSum / float64(s.sc.Node.Threads)
		limSum += r
		nlim++
		if r >= 0.8 && r <= 1.2 {
			in20++
		}
	}
	res.GoodCap = ok / capSum
	res.GoodTarget = ok / targetSum
	res.LimitSum = limSum / float64(nlim)
	res.LimitIn20 = float64(in20) / float64(nlim)
	res.P99 = msDuration(st.okMs.quantile(0.99))
	res.P99Ratio = st.okRatio.quantile(0.99)
	res.ClientRatio = st.clientRatio.quantile(0.99)
	res.OverP99 = msDuration(st.overMs.quantile(0.99))
	var over, tmo uint64
	for _, sc := range s.cars {
		over += sc.overloaded
		tmo += sc.timeouts
	}
	if n := st.okMs.n + over + tmo; n > 0 {
		res.OverShare = float64(over) / float64(n)
		res.TimeoutShare = float64(tmo) / float64(n)
	}
	for i := range int(s.sc.Duration / latencyBin) {
		res.TL = append(res.TL, float64(i+1)*latencyBin.Seconds())
		res.Ratio = append(res.Ratio, st.ratio[i].quantile(0.99))
	}
	res.Jain = s.jain()
	for i, step := range s.sc.Steps {
		res.StepsAt = append(res.StepsAt, step.At.Seconds())
		next := s.sc.Duration
		if i+1 < len(s.sc.Steps) {
			next = s.sc.Steps[i+1].At
		}
		res.Converge = append(res.Converge, s.converge(step.At, next))
	}
	return res
}

// offeredAt is the fleet's offered load at t in requests/s (+Inf with a
// closed loop running, which always has a request waiting).
func (s *Sim) offeredAt(t int64) float64 {
	sum := 0.0
	for _, sc := range s.cars {
		if !alive(sc.w, t) {
			continue
		}
		if sc.w.Outstanding > 0 {
			return math.Inf(1)
		}
		sum += sc.w.Rate
	}
	return sum
}

func alive(w Workload, t int64) bool {
	return int64(w.Start) <= t && (w.Stop == 0 || t < int64(w.Stop))
}

// jain computes Jain's index of served_i / fair_i, where fair_i is the
// sidecar's max-min fair share of the node (water-filling over the demands
// of the sidecars alive at each moment), summed over the measured time.
func (s *Sim) jain() float64 {
	fair := make([]float64, len(s.cars))
	dt := sampleEvery.Seconds()
	type dem struct {
		i int
		d float64
	}
	var ds []dem
	for i := int(s.sc.Warmup / sampleEvery); i < int(s.sc.Duration/sampleEvery); i++ {
		t := int64(i) * int64(sampleEvery)
		slow := s.slowAt(t)
		c := s.sc.Node.Capacity(slow)
		// A closed loop's demand is what its clients could send at the
		// unloaded latency.
		rtt := s.sc.Node.meanService(slow) + 2*float64(s.sc.Node.NetDelay)
		ds = ds[:0]
		for j, sc := range s.cars {
			if !alive(sc.w, t) {
				continue
			}
			d := sc.w.Rate
			if sc.w.Outstanding > 0 {
				d = float64(sc.w.Outstanding) / rtt * 1e9
			}
			if d > 0 {
				ds = append(ds, dem{j, d})
			}
		}
		slices.SortFunc(ds, func(a, b dem) int {
			if a.d != b.d {
				if a.d < b.d {
					return -1
				}
				return 1
			}
			return a.i - b.i
		})
		left := c
		for k, d := range ds {
			share := min(d.d, left/float64(len(ds)-k))
			fair[d.i] += share * dt
			left -= share
		}
	}
	var sum, sq float64
	n := 0
	for i, sc := range s.cars {
		if fair[i] <= 0 {
			continue
		}
		x := float64(sc.ok) / fair[i]
		sum += x
		sq += x * x
		n++
	}
	if n == 0 || sq == 0 {
		return math.NaN()
	}
	return sum * sum / (float64(n) * sq)
}

// converge returns the seconds from a step at `from` until goodput stayed
// at >= 90% of its target and the p99 ratio at <= 2 for 2 seconds (or
// until `to`, if sooner), on latencyBin boundaries; NaN if that never
// happened before `to`.
func (s *Sim) converge(from, to time.Duration) float64 {
	const hold = 2 * time.Second
	good := func(t time.Duration) bool {
		i := int(t / latencyBin)
		if s.stats.ratio[i].n == 0 || s.stats.ratio[i].quantile(0.99) > 2 {
			return false
		}
		var ok, target float64
		for j := int(t / sampleEvery); j < int((t+latencyBin)/sampleEvery); j++ {
			ok += float64(s.stats.bins[j].ok)
			tt := int64(j) * int64(sampleEvery)
			target += min(s.sc.Node.Capacity(s.slowAt(tt)), s.offeredAt(tt)) * sampleEvery.Seconds()
		}
		return ok >= 0.9*target
	}
	return Converge(from, to, latencyBin, hold, good)
}

// Converge returns the seconds from `from` until good held on every bin
// of width bin for hold (or until `to`, if sooner), searching bin
// boundaries from `from` on; NaN if that never happened before `to`. The
// simulator and the real-process fleet benchmark share it, so that their
// convergence times mean the same thing.
func Converge(from, to, bin, hold time.Duration, good func(t time.Duration) bool) float64 {
	start := from.Truncate(bin)
	if start < from {
		start += bin
	}
	for t := start; t+bin <= to; t += bin {
		held := true
		for u := t; u < min(t+hold, to) && u+bin <= to; u += bin {
			if !good(u) {
				held = false
				break
			}
		}
		if held {
			return (t - from).Seconds()
		}
	}
	return math.NaN()
}

// TableHeader and Row format results as a Markdown table.
const TableHeader = "| scenario | K | goodput/cap | goodput/target | client p99 | its ratio | backend p99 ratio | OVERLOADED | its p99 | timeouts | Jain | converge (s) | sum of limits / best | within 20% |\n" +
	"|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"

// Row is one line of the table.
func (r *Result) Row() string {
	conv := make([]string, len(r.Converge))
	for i, c := range r.Converge {
		if math.IsNaN(c) {
			conv[i] = "never"
		} else {
			conv[i] = fmt.Sprintf("%.1f", c)
		}
	}
	if len(conv) == 0 {
		conv = []string{"-"} // no step
	}
	return fmt.Sprintf("| %s | %d | %.2f | %.2f | %s | %.1f | %.1f | %.1f%% | %s | %.1f%% | %.2f | %s | %.2f | %.0f%% |",
		r.Name, r.K, r.GoodCap, r.GoodTarget, ms(r.P99), r.ClientRatio, r.P99Ratio, 100*r.OverShare, ms(r.OverP99),
		100*r.TimeoutShare, r.Jain, strings.Join(conv, " / "), r.LimitSum, 100*r.LimitIn20)
}

// msDuration converts ms to a Duration, 0 for NaN (no sample).
func msDuration(v float64) time.Duration {
	if math.IsNaN(v) {
		return 0
	}
	return time.Duration(v * 1e6)
}

func ms(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1fms", float64(d)/1e6)
}
