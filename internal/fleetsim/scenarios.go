package fleetsim

import (
	"fmt"
	"time"

	"github.com/cqlgate/cqlgate/pkg/limiter"
)

// Mode is a limiter setting compared in the sweep.
type Mode struct {
	Name string
	// Config returns the sidecars' config for a fleet of k in front of node.
	Config func(node NodeModel, k int) limiter.Config
}

// Modes are the settings the sweep compares: today's adaptive limit at its
// defaults, the proxy's default fixed limit (--node-limit 1024) and a fixed
// limit tuned by hand to the fleet, the node's threads shared out (what an
// operator who knows K and the node's capacity would set).
func Modes() []Mode {
	return []Mode{
		{"adaptive", func(NodeModel, int) limiter.Config { return limiter.Config{Adaptive: true} }},
		{"fixed 1024", func(NodeModel, int) limiter.Config { return limiter.Config{NodeLimit: 1024} }},
		{"fixed tuned", func(n NodeModel, k int) limiter.Config {
			return limiter.Config{NodeLimit: max(1, (n.Threads+k-1)/k)}
		}},
		{"fleet", func(NodeModel, int) limiter.Config { return limiter.Config{Adaptive: true, Law: limiter.LawFleet} }},
	}
}

// ModeNamed returns the mode of Modes called name.
func ModeNamed(name string) (Mode, bool) {
	for _, m := range Modes() {
		if m.Name == name {
			return m, true
		}
	}
	return Mode{}, false
}

// Timing of the sweep's runs: the node is slowed 1.6x a third of the way in
// and restored at two thirds. 1.6x keeps the 0.5x runs below capacity while
// slowed (at 80%), where 2x would make them 1x, a queue that never drains.
const (
	sweepDuration = 60 * time.Second
	sweepWarmup   = 5 * time.Second
	sweepSlow     = 1.6
)

func sweepSteps(d time.Duration) []Step {
	return []Step{{At: d / 3, Slow: sweepSlow}, {At: 2 * d / 3, Slow: 1}}
}

// Uniform is K sidecars, each an open loop at an equal share of load times
// the node's capacity.
func Uniform(node NodeModel, m Mode, k int, load float64, d time.Duration, seed uint64) Scenario {
	rate := load * node.Capacity(1) / float64(k)
	sc := Scenario{
		Name: fmt.Sprintf("%s, K=%d, open %.1fx", m.Name, k, load), Node: node, Limiter: m.Config(node, k),
		Steps: sweepSteps(d), Duration: d, Warmup: sweepWarmup, Seed: seed,
	}
	for range k {
		sc.Sidecars = append(sc.Sidecars, Workload{Rate: rate})
	}
	return sc
}

// Closed is K sidecars sharing total closed-loop clients (at least one
// each): the seed experiment's shape, scaled down so that it runs fast.
func Closed(node NodeModel, m Mode, k, total int, d time.Duration, seed uint64) Scenario {
	sc := Scenario{
		Name: fmt.Sprintf("%s, K=%d, closed %d", m.Name, k, total), Node: node, Limiter: m.Config(node, k),
		Steps: sweepSteps(d), Duration: d, Warmup: sweepWarmup, Seed: seed,
	}
	for range k {
		sc.Sidecars = append(sc.Sidecars, Workload{Outstanding: max(1, total/k)})
	}
	return sc
}

// Mixed is a heterogeneous fleet of K (a multiple of 10) at load times the
// node's capacity in total: per ten sidecars, two nearly idle (one request
// every 2s), five steady, one greedy (5x a steady one), one closed loop of
// 4 clients and one steady sidecar that joins a quarter of the way in and
// leaves at three quarters.
func Mixed(node NodeModel, m Mode, k int, load float64, d time.Duration, seed uint64) Scenario {
	sc := Scenario{
		Name: fmt.Sprintf("%s, K=%d, mixed %.1fx", m.Name, k, load), Node: node, Limiter: m.Config(node, k),
		Steps: sweepSteps(d), Duration: d, Warmup: sweepWarmup, Seed: seed,
	}
	// 5 steady + 5 greedy + 1 churning = 11 units per ten sidecars.
	unit := load * node.Capacity(1) / (11 * float64(k) / 10)
	for i := range k {
		var w Workload
		switch i % 10 {
		case 0, 1:
			w.Rate = 0.5
		case 2, 3, 4, 5, 6:
			w.Rate = unit
		case 7:
			w.Rate = 5 * unit
		case 8:
			w.Outstanding = 4
		case 9:
			w = Workload{Rate: unit, Start: d / 4, Stop: 3 * d / 4}
		}
		sc.Sidecars = append(sc.Sidecars, w)
	}
	return sc
}

// Sweep is the full set of scenarios behind docs/results.md: every mode at
// K = 1, 8, 100 and 1,000 with open loops at 0.5x, 2x and 5x capacity, a
// closed loop, and the mixed fleet at 2x for K = 100 and 1,000. The closed
// loops of several sidecars and the mixed fleets also run on a node that
// keeps its speed: the cuts that follow a step set every sidecar back near
// the others, and hide how far apart the sidecars drift while the node is
// steady, which is most of the time.
func Sweep(seed uint64) []Scenario {
	node := DefaultNode()
	var out []Scenario
	for _, m := range Modes() {
		for _, k := range []int{1, 8, 100, 1000} {
			for _, load := range []float64{0.5, 2, 5} {
				out = append(out, Uniform(node, m, k, load, sweepDuration, seed))
			}
			out = append(out, Closed(node, m, k, 16*node.Threads, sweepDuration, seed))
			if k > 1 {
				out = append(out, steadyNode(Closed(node, m, k, 16*node.Threads, sweepDuration, seed)))
			}
		}
		for _, k := range []int{100, 1000} {
			out = append(out, Mixed(node, m, k, 2, sweepDuration, seed))
			out = append(out, steadyNode(Mixed(node, m, k, 2, sweepDuration, seed)))
		}
	}
	return out
}

// steadyNode is sc without the node's steps.
func steadyNode(sc Scenario) Scenario {
	sc.Name += ", steady node"
	sc.Steps = nil
	return sc
}
