package fleetsim

import (
	"math"
	"time"

	"github.com/cqlgate/cqlgate/pkg/limiter"
)

const (
	// sampleEvery is the resolution of the time series (goodput, limits).
	sampleEvery = 100 * time.Millisecond
	// latencyBin is the resolution of the p99 series: 100ms holds too few
	// samples for a p99 at small capacities.
	latencyBin = 500 * time.Millisecond
)

// hist is a log-bucket histogram (2% wide buckets from 1e-4 to 1e6, in
// whatever unit the caller records): enough for percentiles of latencies
// in ms and of latency ratios.
type hist struct {
	counts []uint32
	n      uint64
}

const (
	histMin  = 1e-4
	histStep = 1.02
	histLen  = 1164 // log(1e10)/log(1.02)
)

var histLogStep = math.Log(histStep)

func (h *hist) add(v float64) {
	if h.counts == nil {
		h.counts = make([]uint32, histLen)
	}
	i := 0
	if v > histMin {
		i = min(int(math.Log(v/histMin)/histLogStep), histLen-1)
	}
	h.counts[i]++
	h.n++
}

// quantile returns the upper edge of the bucket holding quantile q; NaN if
// empty.
func (h *hist) quantile(q float64) float64 {
	if h.n == 0 {
		return math.NaN()
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	var seen uint64
	for i, c := range h.counts {
		seen += uint64(c)
		if seen >= max(rank, 1) {
			return histMin * math.Pow(histStep, float64(i+1))
		}
	}
	return math.NaN()
}

// bin is one sampleEvery of the run.
type bin struct {
	ok, overloaded, timeouts uint32
	limitSum                 float64 // of the active sidecars, at the bin's end
	inNode                   int
}

type stats struct {
	bins []bin
	// ratio is per latencyBin, of successes: the backend latency (write to
	// the node to its answer, what the limit controls) / the unloaded p99.
	ratio []hist

	// After the warm-up: the client's latency of successes (the sidecar's
	// queue included) and of OVERLOADED answers in ms, the backend and
	// client latencies over the unloaded p99.
	okMs, overMs, okRatio, clientRatio hist
}

func (st *stats) init(s *Sim) {
	st.bins = make([]bin, s.sc.Duration/sampleEvery+1)
	st.ratio = make([]hist, s.sc.Duration/latencyBin+1)
}

// record notes a client's answer: its outcome, the latency the client saw
// from its request reaching the sidecar (queueing in the sidecar included)
// and, for a success, the backend latency.
func (st *stats) record(s *Sim, sc *sidecar, o limiter.Outcome, lat, backend int64) {
	t := s.clk.now
	b := &st.bins[t/int64(sampleEvery)]
	ms := float64(lat) / 1e6
	measuring := s.measuring()
	switch o {
	case limiter.Success:
		b.ok++
		u := float64(s.sc.Node.UnloadedP99(s.node.slow))
		r := float64(backend) / u
		st.ratio[t/int64(latencyBin)].add(r)
		if measuring {
			sc.ok++
			st.okMs.add(ms)
			st.okRatio.add(r)
			st.clientRatio.add(float64(lat) / u)
		}
	case limiter.Overloaded:
		b.overloaded++
		if measuring {
			sc.overloaded++
			st.overMs.add(ms)
		}
	default:
		b.timeouts++
		if measuring {
			sc.timeouts++
		}
	}
}

// sample closes a sampleEvery bin with the fleet's limits.
func (st *stats) sample(s *Sim) {
	i := s.clk.now/int64(sampleEvery) - 1
	if i < 0 || int(i) >= len(st.bins) {
		return
	}
	sum := 0.0
	for _, sc := range s.cars {
		if sc.active {
			sum += sc.lim.Stats().LimitExact
		}
	}
	st.bins[i].limitSum = sum
	st.bins[i].inNode = s.node.inNode()
}
