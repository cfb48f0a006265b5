package fleetsim

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// smallNode keeps the CI scenario cheap: 16 threads of 5ms (3,200/s).
func smallNode() NodeModel {
	n := DefaultNode()
	n.Threads = 16
	n.MaxInFlight = 512
	return n
}

// The CI scenario: 20 adaptive sidecars at 2x a small node, with a
// capacity step. It asserts what holds whatever the algorithm: the same
// seed gives the same run, the node never serves more than its capacity,
// every figure is in range.
func TestFleetSmallScenario(t *testing.T) {
	sc := Uniform(smallNode(), Modes()[0], 20, 2, 20*time.Second, 7)
	a, err := Run(sc)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Run(sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s\n%s\n%d events in %s", TableHeader, a.Row(), a.Events, a.Wall)
	if a.Row() != b.Row() || a.Events != b.Events {
		t.Errorf("the same seed gave two runs:\n%s\n%s", a.Row(), b.Row())
	}
	if a.GoodCap <= 0 || a.GoodCap > 1.05 {
		t.Errorf("goodput/capacity %.3f; want in (0, 1.05]", a.GoodCap)
	}
	if !(a.Jain > 0 && a.Jain <= 1) {
		t.Errorf("Jain %.3f; want in (0, 1]", a.Jain)
	}
	if a.P99Ratio < 1 || math.IsNaN(a.P99Ratio) {
		t.Errorf("admitted p99 ratio %.2f; want >= 1 (nothing beats the unloaded p99)", a.P99Ratio)
	}
	if len(a.Converge) != 2 {
		t.Errorf("%d convergence figures for 2 steps", len(a.Converge))
	}
	c, err := Run(Uniform(smallNode(), Modes()[0], 20, 2, 20*time.Second, 8))
	if err != nil {
		t.Fatal(err)
	}
	if c.Events == a.Events {
		t.Errorf("another seed gave the same number of events (%d)", c.Events)
	}
}

// A node behind fleet of one fixed-limit sidecar below its capacity serves
// everything offered: checks the model's accounting against arithmetic.
func TestFleetModelUnderCapacity(t *testing.T) {
	n := smallNode()
	sc := Uniform(n, Modes()[1], 4, 0.5, 10*time.Second, 1)
	sc.Steps = nil
	r, err := Run(sc)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(r.GoodTarget-1) > 0.05 || r.OverShare > 0 {
		t.Errorf("at half capacity: goodput/target %.3f, OVERLOADED %.2f%%; want 1 and 0\n%s", r.GoodTarget, 100*r.OverShare, r.Row())
	}
	// M/G/16 at 50% load hardly queues: the p99 is about the unloaded one.
	if r.P99Ratio > 1.3 {
		t.Errorf("p99 %.2f times the unloaded p99 at half load; want about 1", r.P99Ratio)
	}
}

// TestFleetSweep runs the full sweep (Sweep) when CQLGATE_FLEETSIM is set:
// the table goes to stdout, PNGs to CQLGATE_FLEETSIM_OUT (default a
// directory under the system's temporary one). CQLGATE_FLEETSIM_ONLY, a
// regular expression, selects scenarios by name; CQLGATE_FLEETSIM_PAR runs
// that many at once (default 1: the machine is shared).
//
//	CQLGATE_FLEETSIM=1 go test -run TestFleetSweep -v -timeout 60m ./internal/fleetsim
func TestFleetSweep(t *testing.T) {
	if os.Getenv("CQLGATE_FLEETSIM") == "" {
		t.Skip("set CQLGATE_FLEETSIM=1 to run the full sweep")
	}
	out := os.Getenv("CQLGATE_FLEETSIM_OUT")
	if out == "" {
		out = filepath.Join(os.TempDir(), "cqlgate-fleetsim")
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	var only *regexp.Regexp
	if s := os.Getenv("CQLGATE_FLEETSIM_ONLY"); s != "" {
		only = regexp.MustCompile(s)
	}
	par := 1
	if s := os.Getenv("CQLGATE_FLEETSIM_PAR"); s != "" {
		fmt.Sscan(s, &par)
	}
	var scs []Scenario
	for _, sc := range Sweep(1) {
		if only == nil || only.MatchString(sc.Name) {
			scs = append(scs, sc)
		}
	}
	rows := make([]string, len(scs))
	sem := make(chan struct{}, max(par, 1))
	var wg sync.WaitGroup
	for i, sc := range scs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			r, err := Run(sc)
			if err != nil {
				t.Error(err)
				return
			}
			rows[i] = r.Row()
			fmt.Printf("%s  (%d events, %s)\n", r.Row(), r.Events, r.Wall.Round(time.Millisecond))
			name := strings.NewReplacer(", ", "_", " ", "-", "=", "", ".", "_").Replace(sc.Name)
			if err := WritePlot(filepath.Join(out, name+".png"), r); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	fmt.Printf("\n%s\n%s\n\nplots in %s\n", TableHeader, strings.Join(rows, "\n"), out)
}

// Sidecars whose fixed limits add up to the node's threads keep it busy
// without a queue inside it, however much is offered: the model's queueing
// must come only from what the sidecars let through.
func TestFleetModelTunedFixedLimitKeepsTheNodeUnqueued(t *testing.T) {
	n := smallNode()
	sc := Uniform(n, Modes()[2], 4, 3, 10*time.Second, 1)
	sc.Steps = nil
	r, err := Run(sc)
	if err != nil {
		t.Fatal(err)
	}
	if r.GoodCap < 0.85 || r.P99Ratio > 1.3 || math.Abs(r.LimitSum-1) > 0.01 {
		t.Errorf("4 sidecars at %d each on %d threads, 3x offered: goodput/capacity %.2f, backend p99 ratio %.2f, limits %.2f; want >= 0.85, <= 1.3, 1\n%s",
			sc.Limiter.NodeLimit, n.Threads, r.GoodCap, r.P99Ratio, r.LimitSum, r.Row())
	}
}

// makeFleetNode is make fleet's emulated node: 16 threads of 5ms + exp(5ms),
// 1,600 requests/s.
func makeFleetNode() NodeModel {
	return NodeModel{Threads: 16, ServiceFixed: 5 * time.Millisecond, ServiceExp: 5 * time.Millisecond,
		MaxInFlight: 512, NetDelay: 50 * time.Microsecond}
}

// make fleet's quick run, simulated: 8 fleet-mode sidecars at 2x and 5x a
// node of 16 threads (about 2 requests each), slowed 1.6x for a third of
// the run. The sidecars must share the node fairly through slow start and
// both capacity steps, on a quiet host and on a busy one (answers up to
// milliseconds late, as make fleet's are on two cores). Before the law's
// slow start followed one clock and the sidecars told a slower node by the
// node's rate together, Jain's index was 0.76-0.97 over seeds 1-3. Before
// the sidecars read the fleet's size from the node's list of clients and
// pulled towards their share (pkg/limiter's fleetsize.go), the busy host
// gave 0.925-0.982 over seeds 1-6 (0.942 at 5x, seed 5), as real runs of
// make fleet gave 0.91-0.99; 0.98-0.999 after.
func TestFleetOfEightSharesASmallNodeFairly(t *testing.T) {
	fleet, _ := ModeNamed("fleet")
	for _, jitter := range []time.Duration{0, time.Millisecond} {
		seeds := uint64(3)
		if jitter > 0 {
			seeds = 6
		}
		for _, load := range []float64{2, 5} {
			for seed := uint64(1); seed <= seeds; seed++ {
				node := makeFleetNode()
				node.HostJitter = jitter
				sc := Uniform(node, fleet, 8, load, 24*time.Second, seed)
				sc.Warmup = 5 * time.Second
				r, err := Run(sc)
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("host jitter %s, %.0fx, seed %d: Jain %.3f, goodput %.2f of capacity", jitter, load, seed, r.Jain, r.GoodCap)
				if r.Jain < 0.95 || r.GoodCap < 0.95 {
					t.Errorf("host jitter %s, %.0fx, seed %d: Jain %.3f, goodput %.2f of capacity; want >= 0.95 both", jitter, load, seed, r.Jain, r.GoodCap)
				}
			}
		}
	}
}

// 8 fleet-mode sidecars in front of the sweep's node of 128 threads, each
// with 16 of them: limits that chance pulls apart must come back together.
// With growth as limit^0.75 the pull back was too weak: Jain's index
// averaged 0.89 (closed loops) and 0.91 (open loops at 2x) over these
// seeds, 0.95 and 0.95 with growth as the limit's square root.
func TestFleetOfEightSharesALargeNodeFairly(t *testing.T) {
	if raceEnabled {
		t.Skip("six 60 s simulations: minutes under -race; make test runs them without it")
	}
	fleet, _ := ModeNamed("fleet")
	node := DefaultNode()
	shapes := []struct {
		name string
		make func(seed uint64) Scenario
	}{
		{"closed", func(seed uint64) Scenario { return Closed(node, fleet, 8, 16*node.Threads, sweepDuration, seed) }},
		{"open 2x", func(seed uint64) Scenario { return Uniform(node, fleet, 8, 2, sweepDuration, seed) }},
	}
	for _, sh := range shapes {
		var sum float64
		for seed := uint64(1); seed <= 3; seed++ {
			r, err := Run(sh.make(seed))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s, seed %d: Jain %.3f, goodput %.2f of capacity", sh.name, seed, r.Jain, r.GoodCap)
			sum += r.Jain
		}
		if avg := sum / 3; avg < 0.93 {
			t.Errorf("%s: Jain's index %.3f on average over 3 seeds; want >= 0.93", sh.name, avg)
		}
	}
}

// 100 fleet-mode sidecars at 2x make fleet's node of 16 threads: each has a
// sixth of a request at the node, so its windows wait up to 10 Windows for
// their samples. The fleet must still hold the node near its knee. With one
// cut per window against growth per Window of time, the sum of their limits
// was 3.7-4.4x the node's threads and the node's p99 2.1-2.7x unloaded.
func TestFleetOfTinySidecarsHoldsTheNodesQueue(t *testing.T) {
	fleet, _ := ModeNamed("fleet")
	for seed := uint64(1); seed <= 3; seed++ {
		sc := Uniform(makeFleetNode(), fleet, 100, 2, 24*time.Second, seed)
		sc.Warmup = 5 * time.Second
		r, err := Run(sc)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("seed %d: sum of limits %.2f of the threads, node p99 %.2fx unloaded, goodput %.2f", seed, r.LimitSum, r.P99Ratio, r.GoodCap)
		if r.LimitSum > 2.5 || r.P99Ratio > 1.6 || r.GoodCap < 0.95 {
			t.Errorf("seed %d: sum of limits %.2f of the threads, node p99 %.2fx unloaded, goodput %.2f; want <= 2.5, <= 1.6, >= 0.95", seed, r.LimitSum, r.P99Ratio, r.GoodCap)
		}
	}
}

// One sidecar that carries all of the default node's requests, through the
// sweep's slowdown and restore: its probes (doubling a limit that binds,
// taken back when the node serves no more) must not cost throughput. The
// window under way when a probe was taken back began with the probe's
// queue in the node, and its minimum cut the limit below the node's
// threads, where it then grew back for seconds: goodput 0.95 (the closed
// loop, seed 1) and 0.94 (2x, seed 5) of capacity before the fix.
func TestLoneSidecarsProbesKeepItsThroughput(t *testing.T) {
	if raceEnabled {
		t.Skip("two 60 s simulations: a minute under -race; make test runs them without it")
	}
	fleet, _ := ModeNamed("fleet")
	node := DefaultNode()
	for _, sc := range []Scenario{
		Closed(node, fleet, 1, 16*node.Threads, sweepDuration, 1),
		Uniform(node, fleet, 1, 2, sweepDuration, 5),
	} {
		r, err := Run(sc)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s, seed %d: goodput %.3f of capacity, sum of limits %.2f of the threads", sc.Name, sc.Seed, r.GoodCap, r.LimitSum)
		if r.GoodCap < 0.98 {
			t.Errorf("%s, seed %d: goodput %.3f of capacity; want >= 0.98", sc.Name, sc.Seed, r.GoodCap)
		}
	}
}

// 1,000 fleet-mode sidecars at 2x the default node: their limits settle
// near 0.2, one request paced with rests of four latencies. A paced slot
// that rested in proportion to its request's latency sent requests that
// waited together back together: the fleet fell into step, the count of
// requests in the node swung from one 100 ms sample to the next, and the
// node idled between the waves. (With every limit held at 0.154, 1.2x the
// threads in all, it served 0.89 of its capacity, 0.99 with drawn rests.)
// The fleet's limits also add up to near the node's threads, and share it
// fairly.
func TestFleetOfPacedSidecarsDoesNotFallIntoStep(t *testing.T) {
	if raceEnabled {
		t.Skip("a 60 s simulation of 1,000 sidecars: minutes under -race; make test runs it without it")
	}
	fleet, _ := ModeNamed("fleet")
	r, err := Run(Uniform(DefaultNode(), fleet, 1000, 2, sweepDuration, 1))
	if err != nil {
		t.Fatal(err)
	}
	var x []float64
	for i, v := range r.InNode {
		if r.T[i] >= sweepWarmup.Seconds() {
			x = append(x, v)
		}
	}
	var mean, sd float64
	for _, v := range x {
		mean += v
	}
	mean /= float64(len(x))
	for _, v := range x {
		sd += (v - mean) * (v - mean)
	}
	sd = math.Sqrt(sd / float64(len(x)))
	t.Logf("requests in the node %.0f ± %.0f, sum of limits %.2f of the threads, goodput %.3f, Jain %.3f", mean, sd, r.LimitSum, r.GoodCap, r.Jain)
	// Before: 205 ± 38 requests in the node, limits adding up to 1.76x the
	// threads, to keep it busy between the waves. After: 173 ± 23, 1.51x,
	// Jain 0.943. With the fleet's size read from the node (its growth no
	// longer rising with the fleet's size, and a pull towards each
	// sidecar's share): 1.16x, Jain 0.98.
	threads := float64(DefaultNode().Threads)
	if sd > 0.25*threads || r.GoodCap < 0.95 {
		t.Errorf("requests in the node %.0f ± %.0f, goodput %.3f; want a deviation <= %.0f (a quarter of the threads), >= 0.95",
			mean, sd, r.GoodCap, 0.25*threads)
	}
	if r.LimitSum > 1.2 || r.Jain < 0.95 {
		t.Errorf("sum of limits %.2fx the threads, Jain %.3f; want <= 1.2x, >= 0.95", r.LimitSum, r.Jain)
	}
}

// 1,000 closed loops of two clients each in front of the default node,
// which keeps its speed: nothing sets the sidecars back near one another,
// and whatever pulls them together must do it on its own. The square root
// of the growth alone left them at Jain's index 0.87 (seed 1), the sum of
// their limits 1.48x the threads; with the fleet's size read from the node,
// 0.98 and 1.13x.
func TestThousandClosedLoopsShareASteadyNode(t *testing.T) {
	if raceEnabled {
		t.Skip("a 60 s simulation of 1,000 sidecars: minutes under -race; make test runs it without it")
	}
	fleet, _ := ModeNamed("fleet")
	node := DefaultNode()
	r, err := Run(steadyNode(Closed(node, fleet, 1000, 16*node.Threads, sweepDuration, 1)))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Jain %.3f, sum of limits %.2f of the threads, goodput %.3f", r.Jain, r.LimitSum, r.GoodCap)
	if r.Jain < 0.95 || r.LimitSum > 1.2 || r.GoodCap < 0.95 {
		t.Errorf("Jain %.3f, sum of limits %.2fx the threads, goodput %.3f; want >= 0.95, <= 1.2x, >= 0.95", r.Jain, r.LimitSum, r.GoodCap)
	}
}

// 100 fleet-mode closed loops in front of the default node, slowed 1.6x
// for 30 s. The sidecars' rebase to the minimum they read when the node's
// rate fell carries the queue of that moment; once the node is fast again,
// their limits must come back to what they were before the slowdown, not
// keep that queue for good.
func TestFleetLeavesASlowerNodesBaselineBehind(t *testing.T) {
	if raceEnabled {
		t.Skip("a 60 s simulation of 100 sidecars: slow under -race; make test runs it without it")
	}
	fleet, _ := ModeNamed("fleet")
	sc := Closed(DefaultNode(), fleet, 100, 16*DefaultNode().Threads, 60*time.Second, 1)
	sc.Steps = []Step{{At: 10 * time.Second, Slow: 1.6}, {At: 40 * time.Second, Slow: 1}}
	r, err := Run(sc)
	if err != nil {
		t.Fatal(err)
	}
	mean := func(from, to float64) float64 {
		var s float64
		n := 0
		for i, v := range r.Limits {
			if r.T[i] > from && r.T[i] <= to {
				s += v
				n++
			}
		}
		return s / float64(n)
	}
	before, after := mean(5, 10), mean(50, 60)
	t.Logf("sum of limits %.0f before the node slowed, %.0f 10 s after it was restored", before, after)
	// Before: 176 and 197 (1.12x). After: 176 and 177.
	if after > 1.06*before {
		t.Errorf("sum of limits %.0f after the node was restored, %.0f before it slowed; want within 6%%", after, before)
	}
}

// The mixed fleet of 1,000 sidecars (idle, steady, greedy, closed loops
// and sidecars that come and go) in front of a node that keeps its speed.
// The sweep slows its node a third of the way in, and the cuts that follow
// set every sidecar back near the others: a rule of the law that depends
// on the limit (a dead zone only above a limit of 0.5) split this fleet
// for good once nothing set it back. The closed loops of four that slow
// start took over 1 kept the whole dead zone and held 4; the rest, under
// 0.5, had none and were cut to 0.1-0.4. Jain's index 0.65 (seed 1), sum of
// limits 3.4x the threads. Then 0.92, until the sidecars that join mid-run
// ended slow start on their share of the node (pkg/limiter's fleetsize.go):
// they had taken 1.65x their max-min fair share; 0.96 since.
func TestMixedFleetStaysFairOnASteadyNode(t *testing.T) {
	if raceEnabled {
		t.Skip("a 60 s simulation of 1,000 sidecars: minutes under -race; make test runs it without it")
	}
	fleet, _ := ModeNamed("fleet")
	r, err := Run(steadyNode(Mixed(DefaultNode(), fleet, 1000, 2, sweepDuration, 1)))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Jain %.3f, sum of limits %.2f of the threads, goodput %.3f", r.Jain, r.LimitSum, r.GoodCap)
	if r.Jain < 0.95 || r.GoodCap < 0.95 {
		t.Errorf("Jain %.3f, goodput %.3f; want >= 0.95, >= 0.95", r.Jain, r.GoodCap)
	}
}

// A node that slows while its clients ask for less than it serves is not
// queued: its threads have room. The law read its slower answers as a
// standing wait and cut until the limits bound, and the sidecars shed what
// the node had room for: 8 sidecars offering half the node's capacity, the
// node slowed 1.6x for 20 s (80% busy), answered 1.2% OVERLOADED with a
// client p99 13.6x the unloaded one; fixed limits shed nothing. A reading
// of the node's threads with room ends such a run of cuts (nodequeue.go).
func TestFleetDoesNotShedWhatASlowerNodeHasRoomFor(t *testing.T) {
	if raceEnabled {
		t.Skip("a simulation runs in one goroutine; make test runs it without -race")
	}
	fleet, _ := ModeNamed("fleet")
	for _, k := range []int{8, 100} {
		r, err := Run(Uniform(DefaultNode(), fleet, k, 0.5, sweepDuration, 1))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("K=%d: OVERLOADED %.2f%%, client p99 %.1fx unloaded, goodput %.3f of the offered load", k, 100*r.OverShare, r.ClientRatio, r.GoodTarget)
		if r.OverShare > 0.001 || r.ClientRatio > 2 {
			t.Errorf("K=%d: OVERLOADED %.2f%%, client p99 %.1fx unloaded; want at most 0.1%% and 2x", k, 100*r.OverShare, r.ClientRatio)
		}
	}
}
