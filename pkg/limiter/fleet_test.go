package limiter

import (
	"math"
	"testing"
	"time"
)

// frozenFleetConfig is the fleet law with windows so long that the limit stays
// at the floor: for tests of the pacing alone.
func frozenFleetConfig(floor float64) Config {
	return Config{Adaptive: true, Law: LawFleet, Floor: floor, Window: time.Hour, BaselineWindow: time.Hour}
}

// A limit of 0.25 is one request in flight, then three of its latencies of
// rest on average before the next: the node sees a quarter of a request.
// Past slow start the rests are drawn at random (restDraw), and a request granted late
// (the queue is served on ticks, every 10ms here) shortens the next rest
// by as much, so the slot's duty stays a quarter.
func TestFleetFractionalLimitPaces(t *testing.T) {
	l, clk := newTestLimiter(t, frozenFleetConfig(0.25), 1)
	if s := l.Stats(); s.Nodes[0].Limit != 1 || s.LimitExact != 0.25 {
		t.Fatalf("slots %d, exact limit %g; want 1 and 0.25", s.Nodes[0].Limit, s.LimitExact)
	}
	l.nodes[0].fl.slow = false // past slow start, whose rests are not drawn
	a, b := &rec{t: t, id: 1}, &rec{t: t, id: 2}
	l.Acquire(a, 1, 0, nil, time.Time{})
	l.Acquire(b, 1, 0, nil, time.Time{})
	if !a.ok || !b.pending() {
		t.Fatalf("first admitted %v, second pending %v; want one request in flight", a.ok, b.pending())
	}
	const n, latency = 2000, 10 * time.Millisecond
	start := clk.Now()
	var gaps []float64 // ticks from a release to the next grant
	cur, next := a, b
	for i := range n {
		clk.Advance(latency)
		cur.permit.Release(Success, latency)
		ticks := 0
		for !next.ok {
			clk.Advance(latency)
			l.Sweep()
			ticks++
		}
		gaps = append(gaps, float64(ticks))
		cur, next = next, &rec{t: t, id: i + 3}
		l.Acquire(next, 1, 0, nil, time.Time{})
	}
	duty := float64(n) * float64(latency) / float64(clk.Now().Sub(start))
	mean, sd := meanSD(gaps)
	t.Logf("duty %.3f; rest %.2f ± %.2f ticks", duty, mean, sd)
	if duty < 0.23 || duty > 0.27 {
		t.Errorf("the slot was held %.3f of the time; want 0.25", duty)
	}
	// Rests all alike would send sidecars whose requests waited together
	// back together: an exponential's deviation is its mean.
	if sd < 0.6*mean {
		t.Errorf("rests %.2f ± %.2f ticks; want them drawn (deviation near the mean)", mean, sd)
	}
}

func meanSD(x []float64) (mean, sd float64) {
	for _, v := range x {
		mean += v
	}
	mean /= float64(len(x))
	for _, v := range x {
		sd += (v - mean) * (v - mean)
	}
	return mean, math.Sqrt(sd / float64(len(x)))
}

// A schema change takes seconds and is no sample; at a small limit its
// latency must not set the rest, or the clients behind it wait three
// times as long (the proxy's first DROP and CREATE KEYSPACE in fleet mode
// timed out in the queue).
func TestFleetPaceIgnoresUnsampledLatency(t *testing.T) {
	cfg := frozenFleetConfig(0.25)
	cfg.MaxWait = time.Minute
	l, clk := newTestLimiter(t, cfg, 1)
	a, b := &rec{t: t, id: 1}, &rec{t: t, id: 2}
	l.Acquire(a, 1, 0, nil, time.Time{})
	l.Acquire(b, 1, 0, nil, time.Time{})
	clk.Advance(2 * time.Second)
	a.permit.Release(Unsampled, 2*time.Second)
	clk.Advance(10 * time.Millisecond)
	l.Sweep()
	if !b.ok {
		t.Fatal("after a 2s schema change at a limit of 0.25 the next request waits; want no 6s rest")
	}
}

// Between whole numbers only the last slot is paced: 2.5 is two requests
// at will and a third half of the time.
func TestFleetFractionalLimitPacesOnlyTheLastSlot(t *testing.T) {
	l, clk := newTestLimiter(t, frozenFleetConfig(2.5), 1)
	rs := make([]*rec, 4)
	for i := range rs {
		rs[i] = &rec{t: t, id: i}
		l.Acquire(rs[i], 1, 0, nil, time.Time{})
	}
	if !rs[0].ok || !rs[1].ok || !rs[2].ok || !rs[3].pending() {
		t.Fatalf("admitted %v %v %v %v; want the first three (3 slots)", rs[0].ok, rs[1].ok, rs[2].ok, rs[3].ok)
	}
	clk.Advance(4 * time.Millisecond)
	rs[2].permit.Release(Success, 4*time.Millisecond) // frees the third slot
	if !rs[3].pending() {
		t.Fatal("the third slot was taken again at once; want a 4ms rest at a fraction of 0.5")
	}
	rs[0].permit.Release(Success, 4*time.Millisecond) // a whole slot: no rest
	if !rs[3].ok {
		t.Fatal("a whole slot freed and the waiting request not admitted")
	}
}

// fleetSim is K sidecars, each a fleet-law Limiter with closed-loop
// clients, in front of one shared node on one clock.
type fleetSim struct {
	s  *sim
	b  *backend
	ls []*Limiter
	cs [][]*simClient
	// noList: the node's list of clients is never read, and the sidecars
	// do not know how many they are (fleetsize.go).
	noList bool
}

// Each sidecar reads the node's count of completed requests as often as its
// Limiter asks (NodeReadingDue), and the number of sidecars with it when
// asked (NodeSizeDue). with, when given, changes the config.
func newFleetSim(t *testing.T, k, clients, capacity int, service time.Duration, with ...func(*Config)) *fleetSim {
	t.Helper()
	if raceEnabled {
		// One goroutine on a virtual clock: nothing for the race detector
		// to find, and 10x slower under it (two minutes of make test).
		// make test runs ./pkg/... a second time without -race.
		t.Skip("a single-goroutine simulation: runs without -race")
	}
	clk := newFakeClock()
	fs := &fleetSim{s: newSim(clk, 1)}
	fs.b = &backend{s: fs.s, capacity: capacity, service: service}
	for i := range k {
		cfg := Config{Adaptive: true, Law: LawFleet, MaxWait: time.Minute, DebugPermits: true}
		for _, w := range with {
			w(&cfg)
		}
		l, err := New(cfg, clk, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.Close)
		if err := l.SetNodes([]NodeID{0}); err != nil {
			t.Fatal(err)
		}
		fs.ls = append(fs.ls, l)
		fs.s.after(time.Duration(i)*time.Millisecond/time.Duration(k), func() { fs.s.every(DefaultTickInterval, l.Sweep) })
		if d := l.NodePoll(); d > 0 {
			fs.s.after(time.Duration(i+1)*time.Millisecond, func() {
				fs.s.every(d, func() {
					if l.NodeReadingDue(0) {
						rd := NodeReading{Completed: fs.b.completed}
						if !fs.noList && l.NodeSizeDue(0) {
							rd.Sidecars, rd.FleetShare = k, 1
						}
						l.NodeRead(0, rd)
					}
				})
			})
		}
		var cs []*simClient
		for j := range clients {
			c := &simClient{l: l, s: fs.s, nodes: []*backend{fs.b}, flow: uint64(j % 8)}
			cs = append(cs, c)
			fs.s.after(time.Duration(j)*time.Microsecond, c.acquire)
		}
		fs.cs = append(fs.cs, cs)
	}
	return fs
}

// served returns the requests each sidecar's clients completed so far.
func (fs *fleetSim) served() []int {
	out := make([]int, len(fs.cs))
	for i, cs := range fs.cs {
		for _, c := range cs {
			out[i] += c.done
		}
	}
	return out
}

// servedBetween runs the simulation to from and then to to, and returns
// what the first sidecar's clients completed in between.
func (fs *fleetSim) servedBetween(from, to time.Duration) int {
	fs.s.run(from)
	before := fs.served()[0]
	fs.s.run(to)
	return fs.served()[0] - before
}

func (fs *fleetSim) limitSum() float64 {
	sum := 0.0
	for _, l := range fs.ls {
		sum += l.Stats().LimitExact
	}
	return sum
}

func jain(xs []float64) float64 {
	var s, s2 float64
	for _, x := range xs {
		s += x
		s2 += x * x
	}
	if s2 == 0 {
		return 0
	}
	return s * s / (float64(len(xs)) * s2)
}

// Eight sidecars of 100 closed-loop clients each in front of a node that
// serves 32 at once: the node stays busy, the sum of the limits settles
// near 32 (where the gradient law's per-sidecar floors alone add up to
// 128), and the sidecars share the node fairly. Without the node's list of
// clients the square root of the growth alone pulls them together (Jain's
// index 0.81-0.94 over seeds); with it, the pull towards each sidecar's
// share does (0.99 and more; 0.885 without it when the growth was slowed
// to 0.3 of its own).
func TestFleetLawSharesANode(t *testing.T) {
	for _, c := range []struct {
		name   string
		noList bool
		jain   float64
	}{{"with the list of clients", false, 0.95}, {"without", true, 0.9}} {
		t.Run(c.name, func(t *testing.T) { testFleetLawSharesANode(t, c.noList, c.jain) })
	}
}

func testFleetLawSharesANode(t *testing.T, noList bool, minJain float64) {
	const k, capacity, service = 8, 32, 5 * time.Millisecond
	fs := newFleetSim(t, k, 100, capacity, service)
	fs.noList = noList
	fs.s.run(10 * time.Second)
	before := fs.served()
	var sums []float64
	for range 100 {
		fs.s.run(fs.s.now + 100*time.Millisecond)
		sums = append(sums, fs.limitSum())
	}
	after := fs.served()
	var per []float64
	total := 0
	for i := range after {
		n := after[i] - before[i]
		per = append(per, float64(n))
		total += n
	}
	full := float64(capacity) / service.Seconds() * 10
	var avg float64
	for _, s := range sums {
		avg += s / float64(len(sums))
	}
	if float64(total) < 0.9*full {
		t.Errorf("served %d in 10s; want at least 90%% of the node's %.0f", total, full)
	}
	if avg < 0.8*capacity || avg > 1.5*capacity {
		t.Errorf("sum of limits %.1f on average; want within [0.8, 1.5] x %d", avg, capacity)
	}
	if j := jain(per); j < minJain {
		t.Errorf("Jain's index %.3f over the sidecars' throughput %v; want >= %.2f", j, per, minJain)
	}
}

// When the node itself gets slower (its latencies stretched, not shifted by
// a queue), the limit must not be cut for good: cuts that leave the
// minimum where it was make the new minimum the baseline and are undone.
func TestFleetLawRecoversFromASlowerNode(t *testing.T) {
	const capacity = 32
	fs := newFleetSim(t, 1, 400, capacity, 5*time.Millisecond)
	fs.s.run(10 * time.Second)
	fs.b.service = 10 * time.Millisecond
	n := fs.servedBetween(15*time.Second, 20*time.Second)
	full := capacity / 0.010 * 5
	if float64(n) < 0.85*full {
		t.Errorf("served %d in the 5s after the node slowed; want at least 85%% of %.0f (limit %.1f)", n, full, fs.limitSum())
	}
}

// One sidecar of 128 closed-loop clients in front of a node whose latency
// rises with its load without a queue (its cores shared with the
// application): more concurrency still serves more, as on make bench's
// machine, where 128 workers get 2.5 times what 16 get. The fleet law reads
// the rising latency as a queue; the node's rate shows that the cuts cost
// throughput, and they are undone. Without the node's rate the limit
// collapsed to a fraction of what a fixed limit serves.
func TestFleetLawKeepsAContendedNodesThroughput(t *testing.T) {
	contended := func(fs *fleetSim) {
		fs.b.capacity, fs.b.contention, fs.b.fixed = 1<<20, 0.03, 300*time.Microsecond
	}
	run := func(with ...func(*Config)) int {
		fs := newFleetSim(t, 1, 128, 0, 200*time.Microsecond, with...)
		contended(fs)
		return fs.servedBetween(5*time.Second, 15*time.Second)
	}
	fixed := run(func(c *Config) { c.Adaptive, c.NodeLimit = false, 1024 })
	fleet := run()
	latencyOnly := run(func(c *Config) { c.NodePoll = -1 })
	t.Logf("served in 10s: fixed %d, fleet %d (%.2fx), fleet without the node's rate %d (%.2fx)",
		fixed, fleet, float64(fleet)/float64(fixed), latencyOnly, float64(latencyOnly)/float64(fixed))
	// Without the node's rate the limit sinks to a quarter (0.80x).
	if float64(fleet) < 0.97*float64(fixed) {
		t.Errorf("fleet law served %.2fx what a fixed limit served; want >= 0.97", float64(fleet)/float64(fixed))
	}
}

// A fast node on a busy host, as in make bench: its fastest answers take
// tens of microseconds, and 16 clients make every answer a little slower
// (the cores it shares), with no queue. A tolerance of a fifth of such a
// baseline is a few microseconds, under the host's own jitter: the law read
// a standing queue in every window and cut 16 writers to 0.7x the fixed
// limit's throughput on the real node (and here, by latencies alone, to
// 0.45x). The standing wait tolerated is at least fleetMinWait.
func TestFleetLawToleratesAFastNodesJitter(t *testing.T) {
	run := func(with ...func(*Config)) int {
		fs := newFleetSim(t, 1, 16, 0, 50*time.Microsecond, with...)
		fs.b.capacity, fs.b.contention, fs.b.fixed = 1<<20, 0.1, 30*time.Microsecond
		return fs.servedBetween(5*time.Second, 15*time.Second)
	}
	fixed := run(func(c *Config) { c.Adaptive, c.NodeLimit = false, 1024 })
	latencyOnly := run(func(c *Config) { c.NodePoll = -1 })
	fleet := run()
	t.Logf("served in 10s: fixed %d, fleet %d (%.2fx), by latencies alone %d (%.2fx)",
		fixed, fleet, float64(fleet)/float64(fixed), latencyOnly, float64(latencyOnly)/float64(fixed))
	for _, r := range []struct {
		name   string
		served int
	}{{"fleet law", fleet}, {"fleet law by latencies alone", latencyOnly}} {
		if float64(r.served) < 0.97*float64(fixed) {
			t.Errorf("%s served %.2fx what a fixed limit served; want >= 0.97", r.name, float64(r.served)/float64(fixed))
		}
	}
}

// A lone sidecar that starts with a backlog (the seed experiment: 50,000
// goroutines at once) starts at the floor, like every sidecar of a fleet
// rolled out at once. On slow start's clock, which doubles every
// fleetDoubling Windows so that such a fleet stays fair, it served 0.9 of
// what a fixed limit serves only after 4.8 s, in front of a node of 5 ms;
// the node's rate shows it alone within two readings, and from then on it
// grows fleetSlowCatchUp-fold a reading while each raise pays (loneStart).
func TestFleetLawLoneSidecarStartsFast(t *testing.T) {
	const step = 200 * time.Millisecond
	// per returns what each step of the first 8 s served.
	per := func(with ...func(*Config)) []int {
		fs := newFleetSim(t, 1, 2048, 128, 5*time.Millisecond, with...)
		var out []int
		prev := 0
		for i := 1; i <= 40; i++ {
			fs.s.run(time.Duration(i) * step)
			out = append(out, fs.served()[0]-prev)
			prev = fs.served()[0]
		}
		return out
	}
	fixed := per(func(c *Config) { c.Adaptive, c.NodeLimit = false, 1024 })
	fleet := per()
	full := 0
	for _, n := range fixed {
		full += n
	}
	full /= len(fixed)
	at := -1
	for i, n := range fleet {
		if float64(n) >= 0.9*float64(full) {
			at = i + 1
			break
		}
	}
	t.Logf("fixed serves %d a step of %v; the fleet law 0.9 of that after %d steps: %v", full, step, at, fleet)
	if at < 0 || time.Duration(at)*step > 2*time.Second {
		t.Errorf("the fleet law served 0.9 of a fixed limit's throughput only after %d steps of %v; want within 2 s", at, step)
	}
}

// OVERLOADED answers cut the limit by Backoff.
func TestFleetLawCutsOnOverloaded(t *testing.T) {
	fs := newFleetSim(t, 1, 400, 10000, 5*time.Millisecond)
	fs.s.run(5 * time.Second)
	high := fs.limitSum()
	fs.b.overloadAbove = 20
	fs.s.run(8 * time.Second)
	if got := fs.limitSum(); got > 0.5*high || got > 40 {
		t.Errorf("limit %.1f after 3s of OVERLOADED above 20 in flight (it was %.1f); want it cut", got, high)
	}
}

func TestFleetConfig(t *testing.T) {
	c, err := Config{Adaptive: true, Law: LawFleet}.normalized()
	if err != nil {
		t.Fatal(err)
	}
	if c.Floor != DefaultFloor || c.Tolerance != DefaultFleetTolerance || c.MinSamples != DefaultFleetMinSamples {
		t.Errorf("defaults floor %g, tolerance %g, min samples %d; want %g, %g, %d", c.Floor, c.Tolerance, c.MinSamples, DefaultFloor, DefaultFleetTolerance, DefaultFleetMinSamples)
	}
	for _, bad := range []Config{{Floor: -1}, {Floor: 5000}, {Law: 7}} {
		if _, err := bad.normalized(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// fastClient sends left requests, each answered in 100µs and released as
// o, gap apart: an application's PREPAREs (at startup, then now and then
// as connections open and statements are first used).
type fastClient struct {
	l    *Limiter
	s    *sim
	o    Outcome
	left int
	gap  time.Duration
}

func (c *fastClient) acquire() {
	if c.left > 0 {
		c.left--
		c.l.Acquire(c, 0, 0, nil, time.Time{})
	}
}

func (c *fastClient) Admitted(p Permit, _ time.Time) {
	c.s.after(100*time.Microsecond, func() {
		p.Release(c.o, 100*time.Microsecond)
		c.s.after(c.gap, c.acquire)
	})
}

func (c *fastClient) Rejected(Reason) { c.s.after(time.Millisecond, c.acquire) }

// A sidecar's first requests are often its application's PREPAREs, which
// the node answers from its cache in a fraction of a read's time. Released
// as Unsampled they leave the fleet law's baseline (its fastest window) to
// the reads that follow. As samples they set it so low that every read
// looks queued, and the limit stays near the floor while the node idles.
// (The node's rate rescues such a limit too, in time; the test reads
// latencies alone, so that it shows what the samples do.)
func TestFleetLawIgnoresUnsampledAnswers(t *testing.T) {
	// Reads of 5ms + 5ms on average (exponential): the fastest takes 5ms.
	const capacity, fixed, service = 32, 5 * time.Millisecond, 5 * time.Millisecond
	served := map[Outcome]float64{}
	for _, o := range []Outcome{Unsampled, Success} {
		fs := newFleetSim(t, 1, 0, capacity, service, func(c *Config) { c.NodePoll = -1 })
		fs.b.fixed = fixed
		fs.s.after(0, (&fastClient{l: fs.ls[0], s: fs.s, o: o, left: 200, gap: 250 * time.Millisecond}).acquire)
		fs.s.run(2 * time.Second)
		var cs []*simClient
		for j := range 400 {
			c := &simClient{l: fs.ls[0], s: fs.s, nodes: []*backend{fs.b}, flow: uint64(j % 8)}
			cs = append(cs, c)
			fs.s.after(time.Duration(j)*time.Microsecond, c.acquire)
		}
		fs.s.run(12 * time.Second)
		before := 0
		for _, c := range cs {
			before += c.done
		}
		fs.s.run(17 * time.Second)
		n := -before
		for _, c := range cs {
			n += c.done
		}
		served[o] = float64(n) / (capacity / (fixed + service).Seconds() * 5)
		t.Logf("fast answers released as %s: the node served %.2f of its capacity (limit %.2f)", o, served[o], fs.limitSum())
	}
	if served[Unsampled] < 0.85 {
		t.Errorf("after 200 fast Unsampled answers the node served %.2f of its capacity; want at least 0.85", served[Unsampled])
	}
	if served[Success] > 0.5 {
		t.Errorf("fast answers released as samples left the node at %.2f of its capacity: this test no longer shows what it guards against", served[Success])
	}
}

// Eight sidecars in front of a node of 16 threads (the node of make fleet:
// 5ms + an exponential 5ms per request) that slows 1.6x. Each sidecar has
// two requests of the node's 16, so its windows' minima are noisy, the
// test on the latencies' shape alone does not fire, and the cuts went on
// for as long as the node stayed slow, sliding the fleet below the slower
// node's knee. The node's rate falling while the latency stands ends them.
func TestFleetOfSmallSidecarsRecognisesASlowerNode(t *testing.T) {
	const k, capacity = 8, 16
	run := func(with ...func(*Config)) float64 {
		fs := newFleetSim(t, k, 100, capacity, 5*time.Millisecond, with...)
		fs.b.fixed = 5 * time.Millisecond
		fs.s.run(10 * time.Second)
		fs.b.fixed, fs.b.service = 8*time.Millisecond, 8*time.Millisecond
		fs.s.run(14 * time.Second)
		before := 0
		for _, n := range fs.served() {
			before += n
		}
		fs.s.run(22 * time.Second)
		n := -before
		for _, c := range fs.served() {
			n += c
		}
		return float64(n) / (capacity / 0.016 * 8)
	}
	withRate := run()
	latencyOnly := run(func(c *Config) { c.NodePoll = -1 })
	t.Logf("the slower node's capacity served in the 8s after 4s: %.2f with the node's rate, %.2f without", withRate, latencyOnly)
	if withRate < 0.9 {
		t.Errorf("served %.2f of the slower node's capacity; want at least 0.9", withRate)
	}
}

// A probe that gains nothing makes the next one wait twice as long (up to
// fleetProbeGapMax): one sidecar in front of a node it keeps busy (where
// no probe can gain) probes a few times a minute. The raise that ends a
// climb is exempt, and every failure after it was exempt too, so that the
// limit doubled every second or so, a queue of more than the node's own
// concurrency each time (the simulator's backend p99 2.3x unloaded).
func TestFleetFailedProbesBackOff(t *testing.T) {
	fs := newFleetSim(t, 1, 2048, 128, 2500*time.Microsecond)
	fs.b.fixed = 2500 * time.Microsecond
	fs.s.run(10 * time.Second)
	f := &fs.ls[0].nodes[0].fl
	before := f.nr.failed
	fs.s.run(70 * time.Second)
	n := f.nr.failed - before
	t.Logf("%d probes taken back in a minute", n)
	if n > 10 {
		t.Errorf("%d probes taken back in a minute of a node kept busy; want at most 10 (one every %v at most, after the first few)", n, time.Duration(fleetProbeGapMax))
	}
}

// The node of make bench on its 2-core host: 128 readers, whose throughput
// still grows with concurrency up to 128 (the contention model), and which
// warms up as the clients connect, so that the rate doubles from one
// reading to the next while the limit holds. The rate's noise was learnt
// from those readings: half the rate at first, decaying for seconds, and
// no probe could pass twice that (0.73x of a fixed limit's throughput from
// 2 to 8 s, the limit at 3-28 until 4 s). The noise now starts at
// fleetRateNoise and a change counts as at most twice the noise so far.
func TestFleetLawLearnsTheRatesNoiseOnceWarm(t *testing.T) {
	run := func(with ...func(*Config)) int {
		fs := newFleetSim(t, 1, 128, 0, 200*time.Microsecond, with...)
		fs.b.capacity, fs.b.contention = 1<<20, 0.03
		// Four times slower at first, as fast as it gets from 1.2 s on.
		for i, x := range []time.Duration{4, 3, 2, 1} {
			fs.s.after(time.Duration(i)*400*time.Millisecond, func() {
				fs.b.service, fs.b.fixed = x*200*time.Microsecond, x*300*time.Microsecond
			})
		}
		return fs.servedBetween(2*time.Second, 8*time.Second)
	}
	fixed := run(func(c *Config) { c.Adaptive, c.NodeLimit = false, 1024 })
	fleet := run()
	t.Logf("served from 2 to 8 s: fixed %d, fleet %d (%.2fx)", fixed, fleet, float64(fleet)/float64(fixed))
	if float64(fleet) < 0.95*float64(fixed) {
		t.Errorf("fleet law served %.2fx what a fixed limit served; want >= 0.95", float64(fleet)/float64(fixed))
	}
}

// make bench measures each target in turn, five seconds a round, with no
// warm-up between rounds (only before the first): the proxy sits idle while
// the node serves the other targets, then its clients come back at once.
// Here 16 clients for 6 s (make bench's previous row), then 128: a warm-up
// of 2 s and two rounds, each after 10 s of other clients' load.
func TestFleetLawResumesWhereItLeft(t *testing.T) {
	const round, gap = 5 * time.Second, 10 * time.Second
	run := func(with ...func(*Config)) (rounds [2]int) {
		fs := newFleetSim(t, 1, 128, 0, 200*time.Microsecond, with...)
		fs.b.capacity, fs.b.contention, fs.b.fixed = 1<<20, 0.03, 300*time.Microsecond
		paused, few := false, true
		for i, c := range fs.cs[0] {
			c.paused = &paused
			if i >= 16 {
				c.paused = &few
			}
		}
		// The other targets: 128 closed loops straight to the node.
		others := false
		var other func()
		other = func() {
			if others {
				fs.b.send(func(Outcome, time.Duration) { other() })
			}
		}
		pause := func(at time.Duration) {
			fs.s.after(at, func() {
				paused, few, others = true, true, true
				for range 128 {
					other()
				}
			})
			fs.s.after(at+gap, func() { paused, few, others = false, false, false })
		}
		at := 6 * time.Second
		pause(at)
		at += gap + 2*time.Second // the warm-up
		for i := range rounds {
			pause(at)
			at += gap
			rounds[i] = fs.servedBetween(at, at+round)
			at += round
		}
		return rounds
	}
	fixed := run(func(c *Config) { c.Adaptive, c.NodeLimit = false, 1024 })
	fleet := run()
	for i := range fleet {
		x := float64(fleet[i]) / float64(fixed[i])
		t.Logf("round %d: fixed served %d, fleet %d (%.2fx)", i+1, fixed[i], fleet[i], x)
		if x < 0.97 {
			t.Errorf("round %d: the fleet law served %.2fx what a fixed limit served; want >= 0.97", i+1, x)
		}
	}
}

// A sidecar whose clients stop for a minute and come back: the window open
// when they stopped closed with their first answers, 60 s long. Growth is
// per Window of time, so the limit grew as if the sidecar had been limited
// all that minute: from 20 to 140 in front of a node of 16 threads, its
// queue filling until cuts took it back (a sidecar of a fleet was cut by
// half instead, the most one window cuts). An idle span is no part of a
// window.
func TestFleetLawIgnoresAnIdleSpan(t *testing.T) {
	fs := newFleetSim(t, 1, 64, 16, 5*time.Millisecond)
	paused := false
	for _, c := range fs.cs[0] {
		c.paused = &paused
	}
	fs.s.run(10 * time.Second)
	before := fs.limitSum()
	paused = true
	fs.s.run(70 * time.Second)
	paused = false
	most := 0.0
	for i := range 10 {
		fs.s.run(70*time.Second + time.Duration(i+1)*50*time.Millisecond)
		most = max(most, fs.limitSum())
	}
	t.Logf("limit %.1f before a minute idle, at most %.1f in the half second after", before, most)
	// A probe doubles it for a reading.
	if most > 2.2*before {
		t.Errorf("the limit rose from %.1f to %.1f after a minute idle; want at most a probe's doubling", before, most)
	}
}

// Clients that send at random find no room now and then even where they
// keep a tenth of the limit busy; growing on that alone took such
// sidecars past their needs, where they kept the room and served their
// clients' whole demand while the others were cut (at 1,000 simulated
// sidecars the top 5% held 2-5 times the median limit). A bound window
// grows the limit only if its answers kept fleetBusy of it busy.
func TestFleetGrowsOnlyALimitItsClientsKeepBusy(t *testing.T) {
	p := pastSlowStart(t, 10)
	window := func(answers int, limited bool) float64 {
		p.now += int64(100 * time.Millisecond)
		for range answers {
			p.f.record(Success, time.Millisecond)
		}
		return p.f.update(p.now, limited, 10, &p.cfg)
	}
	window(1000, false) // the baseline, 1 ms: holds
	// 100 answers of 1 ms in 100 ms: one request in flight on average.
	if got := window(100, true); got != 10 {
		t.Fatalf("a bound window that kept 1 of 10 busy: limit %v; want 10", got)
	}
	// 1,000: all ten busy.
	if got := window(1000, true); got <= 10 {
		t.Fatalf("a bound window that kept the limit busy: limit %v; want growth", got)
	}
}

// A node that cannot report its counts (before Cassandra 4.0, or a role
// without SELECT on system_views) is held at the fixed NodeLimit: latency
// alone cut a lone sidecar to a tenth of a fixed limit's throughput on a
// node slower under load. Its first reading restarts the law from the
// floor, which then finds the node's capacity.
func TestFleetHoldsAnUnreadableNodeAtTheFixedLimit(t *testing.T) {
	fs := newFleetSim(t, 1, 400, 32, 5*time.Millisecond, func(c *Config) { c.NodeLimit, c.NodePoll = 300, -1 })
	l := fs.ls[0]
	l.NodeUnreadable(0)
	fs.s.run(5 * time.Second)
	if st := l.Stats().Nodes[0]; st.LimitExact != 300 || !st.Unreadable {
		t.Fatalf("limit %.1f (unreadable %v) after 5s of a queue on a node that cannot report; want the fixed 300", st.LimitExact, st.Unreadable)
	}
	l.NodeRead(0, NodeReading{Completed: fs.b.completed})
	if st := l.Stats().Nodes[0]; st.Unreadable || st.LimitExact >= 1 {
		t.Fatalf("limit %.1f (unreadable %v) after the node's first reading; want the law's floor", st.LimitExact, st.Unreadable)
	}
	fs.s.run(15 * time.Second)
	if got := l.Stats().Nodes[0].LimitExact; got > 100 {
		t.Errorf("limit %.1f 10s after the node could be read, on a node of 32 threads; want the law to hold it near them", got)
	}
}

// NodeUnreadable concerns the fleet law alone.
func TestNodeUnreadableOutsideTheFleetLaw(t *testing.T) {
	for _, cfg := range []Config{{NodeLimit: 7}, {Adaptive: true, MinLimit: 7, MaxLimit: 7}} {
		l, _ := newTestLimiter(t, cfg, 1)
		l.NodeUnreadable(0)
		if st := l.Stats().Nodes[0]; st.Limit != 7 || st.Unreadable {
			t.Errorf("%+v: limit %d (unreadable %v); want 7, unchanged", cfg, st.Limit, st.Unreadable)
		}
	}
}
