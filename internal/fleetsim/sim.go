package fleetsim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/cqlgate/cqlgate/pkg/limiter"
)

// Step changes the node's speed at a moment of the run: its service times
// are multiplied by Slow (2 halves its throughput; 1 restores it). The
// node's best concurrency, its thread count, does not change: a slowed
// node (compaction, a GC-heavy phase, a noisy neighbour) serves fewer
// requests per second with the same threads.
type Step struct {
	At   time.Duration
	Slow float64
}

// Scenario is one run: a node, a fleet and a script of steps.
type Scenario struct {
	Name string
	Node NodeModel
	// Limiter is every sidecar's config (Adaptive or a fixed NodeLimit); the
	// simulation only adds its clock.
	Limiter  limiter.Config
	Sidecars []Workload
	Steps    []Step
	// Duration is the virtual length of the run; figures are taken after
	// Warmup.
	Duration, Warmup time.Duration
	Seed             uint64
}

type actionKind uint8

const (
	actStep actionKind = iota
	actStart
	actStop
)

type action struct {
	kind    actionKind
	sidecar int
	slow    float64
}

// Sim is one run in progress. It is not safe for concurrent use; distinct
// Sims share nothing and may run in parallel.
type Sim struct {
	sc      Scenario
	clk     *clock
	q       eventQueue
	rng     *rand.Rand
	node    node
	cars    []*sidecar
	pool    []*request
	actions []action
	tick    int64
	stats   stats
	events  uint64
	// connected is how many sidecars run: the proxies the node's list of
	// clients shows.
	connected int
}

// Run runs a scenario to its end and returns its figures.
func Run(sc Scenario) (*Result, error) {
	s, err := newSim(sc)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	end := int64(sc.Duration)
	for len(s.q.h) > 0 && s.q.h[0].at <= end {
		e := s.q.pop()
		s.clk.now = e.at
		s.events++
		s.dispatch(e)
	}
	s.clk.now = end
	res := s.result()
	res.Events = s.events
	res.Wall = time.Since(start)
	return res, nil
}

func newSim(sc Scenario) (*Sim, error) {
	if sc.Duration <= 0 || sc.Warmup < 0 || sc.Warmup >= sc.Duration {
		return nil, errors.New("fleetsim: need 0 <= Warmup < Duration")
	}
	if sc.Node.Threads <= 0 || sc.Node.MaxInFlight <= 0 || sc.Node.ServiceFixed+sc.Node.ServiceExp <= 0 {
		return nil, errors.New("fleetsim: node needs threads, an in-flight bound and a service time")
	}
	if sc.Node.Timeout <= 0 {
		sc.Node.Timeout = time.Duration(math.MaxInt64 / 4)
	}
	s := &Sim{
		sc:  sc,
		clk: &clock{base: time.Unix(1_700_000_000, 0)},
		rng: rand.New(rand.NewPCG(sc.Seed, sc.Seed^0x9e3779b97f4a7c15)),
	}
	s.node = node{m: sc.Node, slow: 1}
	s.tick = int64(sc.Limiter.TickInterval)
	if s.tick <= 0 {
		s.tick = int64(limiter.DefaultTickInterval)
	}
	// Validate the limiter config once, rather than at the first sidecar's
	// start in the middle of the run.
	if _, err := limiter.New(sc.Limiter, s.clk, nil); err != nil {
		return nil, fmt.Errorf("fleetsim: %w", err)
	}
	for i, w := range sc.Sidecars {
		if (w.Rate > 0) == (w.Outstanding > 0) && w.Rate != 0 {
			return nil, fmt.Errorf("fleetsim: sidecar %d: a rate or a number of outstanding requests, not both", i)
		}
		s.cars = append(s.cars, &sidecar{id: int32(i), w: w})
		s.control(w.Start, action{kind: actStart, sidecar: i})
		if w.Stop > 0 {
			s.control(w.Stop, action{kind: actStop, sidecar: i})
		}
	}
	steps := slices.Clone(sc.Steps)
	slices.SortStableFunc(steps, func(a, b Step) int { return int(a.At - b.At) })
	s.sc.Steps = steps
	for _, st := range steps {
		s.control(st.At, action{kind: actStep, slow: st.Slow})
	}
	s.stats.init(s)
	s.after(sampleEvery, event{kind: evSample})
	return s, nil
}

func (s *Sim) control(at time.Duration, a action) {
	s.actions = append(s.actions, a)
	s.q.push(event{at: int64(at), kind: evControl, id: int32(len(s.actions) - 1)})
}

func (s *Sim) after(d time.Duration, e event) {
	e.at = s.clk.now + int64(d)
	s.q.push(e)
}

func (s *Sim) measuring() bool { return s.clk.now >= int64(s.sc.Warmup) }

func (s *Sim) dispatch(e event) {
	switch e.kind {
	case evArrival:
		sc := s.cars[e.id]
		if !sc.active {
			return
		}
		s.send(sc, -1)
		s.after(s.interarrival(sc), e)
	case evIssue:
		if sc := s.cars[e.id]; sc.active {
			s.send(sc, e.aux)
		}
	case evNodeIn:
		s.node.arrive(s, e.r)
	case evNodeDone:
		s.node.done(s, e.r)
	case evAnswer:
		s.answer(e.r)
	case evTick:
		s.cars[e.id].lim.Sweep()
		s.after(time.Duration(s.tick), e)
	case evSample:
		s.stats.sample(s)
		s.after(sampleEvery, e)
	case evControl:
		s.act(s.actions[e.id])
	case evPoll:
		// What the proxy's poller does: read the node's counts (here its
		// served requests, its busy threads and its queue; a real node
		// counts in the same way) as often as the Limiter asks.
		sc := s.cars[e.id]
		if d := sc.lim.NodePoll(); sc.active && d > 0 {
			if sc.lim.NodeReadingDue(0) {
				rd := limiter.NodeReading{Completed: s.node.served, Active: int64(s.node.busy),
					Threads: int64(s.node.m.Threads), Queued: int64(len(s.node.queue) - s.node.qhead)}
				if sc.lim.NodeSizeDue(0) {
					// Every request the node serves comes through a sidecar.
					rd.Sidecars, rd.FleetShare = s.connected, 1
				}
				sc.lim.NodeRead(0, rd)
			}
			s.after(d, e)
		}
	}
}

func (s *Sim) interarrival(sc *sidecar) time.Duration {
	return time.Duration(s.rng.ExpFloat64() / sc.w.Rate * 1e9)
}

func (s *Sim) act(a action) {
	switch a.kind {
	case actStep:
		s.node.slow = a.slow
	case actStart:
		sc := s.cars[a.sidecar]
		l, err := limiter.New(s.sc.Limiter, s.clk, nil)
		if err != nil {
			panic(err) // validated in newSim
		}
		if err := l.SetNodes([]limiter.NodeID{0}); err != nil {
			panic(err)
		}
		sc.lim, sc.active = l, true
		s.connected++
		// Sidecars tick out of phase with one another, as real ones do.
		s.after(time.Duration(s.rng.Int64N(s.tick)+1), event{kind: evTick, id: sc.id})
		// Readings out of phase too, without a draw from the run's
		// generator: a run without readings stays the run it was.
		s.after(time.Duration(int64(sc.id)*7919*int64(time.Microsecond)%int64(limiter.DefaultNodePoll)+1), event{kind: evPoll, id: sc.id})
		switch {
		case sc.w.Rate > 0:
			s.after(s.interarrival(sc), event{kind: evArrival, id: sc.id})
		case sc.w.Outstanding > 0:
			for c := range sc.w.Outstanding {
				s.send(sc, int32(c))
			}
		}
	case actStop:
		s.cars[a.sidecar].active = false
		s.connected--
	}
}

// slowAt is the node's slowdown factor at t, from the script.
func (s *Sim) slowAt(t int64) float64 {
	f := 1.0
	for _, st := range s.sc.Steps {
		if int64(st.At) <= t {
			f = st.Slow
		}
	}
	return f
}
