package limiter

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// simClient is a closed-loop client of the simulation: it asks for a
// permit, sends the request to the permit's node, releases with the node's
// outcome and asks again at once.
type simClient struct {
	l        *Limiter
	s        *sim
	nodes    []*backend
	flow     uint64
	done     int
	rejected int
	// paused, when set and true, holds the client's next request back.
	paused *bool
}

func (c *simClient) acquire() {
	if c.paused != nil && *c.paused {
		c.s.after(5*time.Millisecond, c.acquire)
		return
	}
	c.l.Acquire(c, c.flow, 0, nil, time.Time{})
}

func (c *simClient) Admitted(p Permit, _ time.Time) {
	c.nodes[p.Node()].send(func(o Outcome, latency time.Duration) {
		p.Release(o, latency)
		c.done++
		c.acquire()
	})
}

func (c *simClient) Rejected(Reason) {
	c.rejected++
	c.s.after(time.Millisecond, c.acquire)
}

// adaptiveSim is one node behind an adaptive Limiter, loaded by many more
// closed-loop clients than the node can serve at once.
type adaptiveSim struct {
	l       *Limiter
	s       *sim
	b       *backend
	clients []*simClient
	trace   []int // the limit every 100ms
}

func newAdaptiveSim(t *testing.T, cfg Config, capacity, clients int, service time.Duration) *adaptiveSim {
	return newAdaptiveSimSeed(t, cfg, capacity, clients, service, 1)
}

func newAdaptiveSimSeed(t *testing.T, cfg Config, capacity, clients int, service time.Duration, seed uint64) *adaptiveSim {
	cfg.Adaptive = true
	cfg.MaxWait = time.Minute // this test is about the limit, not the queue
	l, clk := newTestLimiter(t, cfg, 1)
	s := newSim(clk, seed)
	b := &backend{s: s, capacity: capacity, service: service}
	as := &adaptiveSim{l: l, s: s, b: b}
	s.every(DefaultTickInterval, l.Sweep)
	s.every(100*time.Millisecond, func() { as.trace = append(as.trace, l.Stats().Nodes[0].Limit) })
	for i := range clients {
		c := &simClient{l: l, s: s, nodes: []*backend{b}, flow: uint64(i % 64)}
		as.clients = append(as.clients, c)
		s.after(time.Duration(i)*time.Microsecond, c.acquire)
	}
	return as
}

// window returns the limits traced in [from, to).
func (as *adaptiveSim) window(from, to time.Duration) []int {
	return as.trace[from/(100*time.Millisecond) : to/(100*time.Millisecond)]
}

func (as *adaptiveSim) String() string {
	var b strings.Builder
	for i, v := range as.trace {
		if i%10 == 0 {
			fmt.Fprintf(&b, "\n%3ds:", i/10)
		}
		fmt.Fprintf(&b, " %4d", v)
	}
	return b.String()
}

func mean(xs []int) float64 {
	s := 0
	for _, x := range xs {
		s += x
	}
	return float64(s) / float64(len(xs))
}

func percentile(xs []int, p float64) int {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[int(p*float64(len(s)-1))]
}

// checkSettled asserts that over [from, to) the limit stayed between lo*c
// and hi*c (10th and 90th percentiles: a baseline probe halves the limit
// for two windows now and then) and averaged between c and avgHi*c.
func checkSettled(t *testing.T, as *adaptiveSim, what string, from, to time.Duration, c int, lo, avgHi, hi float64) {
	t.Helper()
	w := as.window(from, to)
	p10, p90, avg := percentile(w, 0.1), percentile(w, 0.9), mean(w)
	fc := float64(c)
	if float64(p10) < lo*fc || float64(p90) > hi*fc || avg < 0.85*fc || avg > avgHi*fc {
		t.Errorf("%s: limit p10 %d, p90 %d, mean %.0f between %s and %s; want p10 >= %.0f, p90 <= %.0f, mean in [%.0f, %.0f] (capacity %d)\ntrace:%s",
			what, p10, p90, avg, from, to, lo*fc, hi*fc, 0.85*fc, avgHi*fc, c, as)
	}
}

// The node serves C requests at once and queues the rest, so its latency is
// flat up to C and climbs past it. After a capacity step the limit must
// come to rest near C (between C and Tolerance*C, where the latency is at
// most Tolerance times the baseline) within a few seconds, both down and
// up, and the node must stay busy throughout.
func TestAdaptiveLimitSettlesNearCapacityAfterSteps(t *testing.T) {
	const (
		high, low = 200, 50
		service   = 10 * time.Millisecond
	)
	seeds := uint64(5)
	if raceEnabled || testing.Short() {
		seeds = 1
	}
	for seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			as := newAdaptiveSimSeed(t, Config{}, high, 1000, service, seed)

			as.s.run(10 * time.Second)
			checkSettled(t, as, "start", 5*time.Second, 10*time.Second, high, 0.75, 1.3, 1.6)

			as.b.setCapacity(low)
			as.s.run(20 * time.Second)
			if w := as.window(11*time.Second, 20*time.Second); slices.Max(w) > int(1.8*low) {
				t.Errorf("a second after the step down the limit still reached %d; want at most %d\ntrace:%s", slices.Max(w), int(1.8*low), as)
			}
			checkSettled(t, as, "after step down", 12*time.Second, 20*time.Second, low, 0.75, 1.3, 1.6)

			as.b.setCapacity(high)
			as.s.run(30 * time.Second)
			checkSettled(t, as, "after step up", 23*time.Second, 30*time.Second, high, 0.75, 1.3, 1.6)

			done, rejected := 0, 0
			for _, c := range as.clients {
				done += c.done
				rejected += c.rejected
			}
			if rejected > 0 {
				t.Errorf("%d rejections; the queue should have absorbed everything", rejected)
			}
			// The node's capacity is C/service requests per second.
			ideal := (10*high + 10*low + 10*high) / service.Seconds()
			if float64(done) < 0.85*ideal {
				t.Errorf("%d requests served in 30s; want at least 85%% of what the node can serve (%.0f)", done, ideal)
			}
		})
	}
}

// A larger node, to show the same behaviour does not depend on the scale.
func TestAdaptiveLimitSettlesNearCapacityLargeNode(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("long simulation")
	}
	const (
		high, low = 800, 200
		service   = 20 * time.Millisecond
	)
	as := newAdaptiveSim(t, Config{}, high, 3000, service)
	as.s.run(10 * time.Second)
	checkSettled(t, as, "start", 5*time.Second, 10*time.Second, high, 0.75, 1.3, 1.6)
	as.b.setCapacity(low)
	as.s.run(20 * time.Second)
	checkSettled(t, as, "after step down", 13*time.Second, 20*time.Second, low, 0.5, 1.3, 1.6)
	as.b.setCapacity(high)
	as.s.run(30 * time.Second)
	checkSettled(t, as, "after step up", 23*time.Second, 30*time.Second, high, 0.75, 1.3, 1.6)
}

// A node that answers OVERLOADED past a threshold, with no latency signal
// at all, still pulls the limit down to about that threshold.
func TestAdaptiveLimitCutsOnOverloaded(t *testing.T) {
	as := newAdaptiveSim(t, Config{}, 10000, 400, 10*time.Millisecond)
	as.b.overloadAbove = 100
	as.s.run(12 * time.Second)
	checkSettled(t, as, "overloaded above 100", 5*time.Second, 12*time.Second, 100, 0.75, 1.1, 1.2)
}

// When the no-load latency itself doubles (heavier queries), cutting does
// not lower it. The limit must not stay stuck at MinLimit for a whole
// baseline window: it finds the capacity again within a few seconds.
//
// The small node's limit cannot be cut by 4 before it reaches MinLimit:
// there, once the limit sits at MinLimit and the latency does not follow,
// the latency is the node's new baseline. Without that rule its limit
// stayed at MinLimit, 40% under capacity, for a whole baseline window (and
// on a busy 2-core machine, whose latency climbs with any load, for good:
// 13k requests/s through the proxy where a fixed limit served 47k).
func TestAdaptiveLimitRecoversFromStaleBaseline(t *testing.T) {
	for _, tc := range []struct {
		name              string
		capacity, clients int
	}{{"node", 200, 1000}, {"small node", 40, 400}} {
		t.Run(tc.name, func(t *testing.T) {
			as := newAdaptiveSim(t, Config{}, tc.capacity, tc.clients, 10*time.Millisecond)
			as.s.run(10 * time.Second)
			as.b.service = 20 * time.Millisecond
			as.s.run(20 * time.Second)
			checkSettled(t, as, "after the service time doubled", 12*time.Second, 20*time.Second, tc.capacity, 0.75, 1.3, 1.6)
		})
	}
}

// A client that keeps fewer requests in flight than the limit says nothing
// about the node: the limit must not grow without bound.
func TestAdaptiveLimitHoldsWhenClientsAreFew(t *testing.T) {
	as := newAdaptiveSim(t, Config{}, 10000, 40, 10*time.Millisecond)
	as.s.run(10 * time.Second)
	if mx := slices.Max(as.trace); mx > 160 {
		t.Errorf("limit grew to %d with 40 requests in flight; want at most 4x that\ntrace:%s", mx, as)
	}
}

// Failure and Dropped outcomes are not samples and cut nothing.
func TestAdaptiveIgnoresFailuresAndDrops(t *testing.T) {
	var a adaptive
	cfg, _ := Config{Adaptive: true}.normalized()
	a.reset(&cfg, 0, 0)
	for range 1000 {
		a.record(Failure, time.Microsecond)
		a.record(Dropped, time.Hour)
	}
	if a.count != 0 || a.drops != 0 {
		t.Fatalf("samples %d, drops %d after failures and drops; want none", a.count, a.drops)
	}
}

// Window means that swing around the same limit, as on a busy host where
// the node's latency is mostly scheduling noise, must not ratchet the limit
// down: a single window a little over Tolerance is held, not cut.
func TestAdaptiveLimitIgnoresSingleNoisyWindows(t *testing.T) {
	cfg, err := Config{Adaptive: true}.normalized()
	if err != nil {
		t.Fatal(err)
	}
	var a adaptive
	now := int64(0)
	a.reset(&cfg, now, 0)
	window := func(latency time.Duration) float64 {
		for range cfg.MinSamples {
			a.record(Success, latency)
		}
		a.maxInflight = int32(a.limit) // the clients use the whole limit
		now += int64(cfg.Window)
		return a.update(now, 0, &cfg)
	}
	window(time.Millisecond) // the baseline
	start := a.limit
	for i := range 40 {
		lat := time.Millisecond
		if i%2 == 0 {
			lat = 1700 * time.Microsecond // over 1.5 baselines, alone
		}
		if l := window(lat); l < start {
			t.Fatalf("window %d (mean %s): limit cut from %.0f to %.0f; want no cut for lone noisy windows", i, lat, start, l)
		}
	}
	// Two in a row are queueing: cut.
	before := a.limit
	window(1700 * time.Microsecond)
	if l := window(1700 * time.Microsecond); l >= before {
		t.Fatalf("two windows over Tolerance in a row left the limit at %.0f (was %.0f); want a cut", l, before)
	}
}
