package proxy_test

// TestChaos: a randomized, seeded fault schedule against the proxy. Each
// seed draws a small cluster of fake nodes, a proxy configuration (its
// limit mode among them: fixed, adaptive or fleet), a workload of pipelined requests (reads and writes, QUERY, EXECUTE and
// BATCH, idempotent and not) and faults for them (delays, lost answers,
// resets before and after executing, half answers, OVERLOADED,
// IS_BOOTSTRAPPING, UNPREPARED, server errors, stalls, dropped and refused
// connections). Timing still varies from run to run, so the checks are
// only what must hold whatever the timing:
//
//  1. every request gets exactly one answer, before its deadline plus slack;
//  2. no request that is not idempotent runs twice on the nodes (and one
//     answered with a success ran exactly once);
//  3. nothing is left behind: permits, queued requests, backend streams
//     and orphans drain to zero, no permit is released twice, and no
//     goroutine outlives the test;
//  4. nothing panics.
//
// Run more seeds with -chaos.seeds=N -chaos.from=S (or CQLGATE_CHAOS_SEEDS),
// one with -chaos.seed=S; `make chaos SEEDS=10000`.

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/datastax/go-cassandra-native-protocol/datatype"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/cqlgate/cqlgate/internal/fakenode"
	"github.com/cqlgate/cqlgate/internal/proxytest"
	"github.com/cqlgate/cqlgate/pkg/config"
	"github.com/cqlgate/cqlgate/pkg/frame"
)

var (
	chaosSeeds    = flag.Int("chaos.seeds", 0, "TestChaos: number of seeds to run (default 200, or $CQLGATE_CHAOS_SEEDS)")
	chaosFrom     = flag.Uint64("chaos.from", 1, "TestChaos: first seed")
	chaosSeed     = flag.Uint64("chaos.seed", 0, "TestChaos: run this one seed only")
	chaosParallel = flag.Int("chaos.parallel", 8, "TestChaos: seeds run at once (each mostly waits on timers)")
)

const defaultChaosSeeds = 200

func TestChaos(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	first, n := *chaosFrom, *chaosSeeds
	if n == 0 {
		n = defaultChaosSeeds
		if v, err := strconv.Atoi(os.Getenv("CQLGATE_CHAOS_SEEDS")); err == nil && v > 0 {
			n = v
		}
	}
	if *chaosSeed != 0 {
		first, n = *chaosSeed, 1
	}
	// t.Run may be called from several goroutines: a pool of workers runs
	// the seeds as subtests whatever -parallel says.
	seeds := make(chan uint64)
	var wg sync.WaitGroup
	var fmu sync.Mutex
	var failed []uint64
	for range max(1, *chaosParallel) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range seeds {
				if !t.Run(fmt.Sprintf("seed=%d", s), func(t *testing.T) { runChaosSeed(t, s) }) {
					fmu.Lock()
					failed = append(failed, s)
					fmu.Unlock()
				}
			}
		}()
	}
	for s := first; s < first+uint64(n); s++ {
		seeds <- s
	}
	close(seeds)
	wg.Wait()
	if len(failed) > 0 {
		t.Errorf("failing seeds: %v; reproduce one with: go test -race -run TestChaos ./pkg/proxy -chaos.seed=%d -v", failed, failed[0])
	}
	if err := goleak.Find(ignore); err != nil {
		t.Errorf("goroutines left after %d seeds: %v", n, err)
	}
}

// chaosEvent is a node-wide event before request at.
type chaosEvent struct {
	at   int
	desc string
	do   func()
}

func runChaosSeed(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x636861_6f73)) // "chaos"
	var report []string
	fail := func(format string, args ...any) {
		report = append(report, fmt.Sprintf(format, args...))
	}
	defer func() {
		if len(report) > 0 {
			t.Errorf("seed %d: %d invariant(s) broken:\n  %s\nreproduce: go test -race -run TestChaos ./pkg/proxy -chaos.seed=%d -v",
				seed, len(report), strings.Join(report, "\n  "), seed)
		}
	}()

	// The cluster and the proxy's configuration.
	nNodes := 2 + rng.IntN(2)
	cl := fakenode.StartCluster(t, nNodes, fakenode.Config{})
	defer cl.Close()
	cl.SetTable("ks.kv", []fakenode.Column{fakenode.Key("k", datatype.Int), fakenode.Col("v", datatype.Varchar)},
		[][]byte{fakenode.Int(1), fakenode.Text("one")})
	cl.SetTable("ks.c", []fakenode.Column{fakenode.Key("k", datatype.Int), fakenode.Col("n", datatype.Counter)})
	timeout := time.Duration(300+rng.IntN(701)) * time.Millisecond
	hedges := rng.IntN(3)
	nodeLimit := []int{1, 2, 4, 1024}[rng.IntN(4)]
	queue := []int{0, 2, 8, 1 << 17}[rng.IntN(4)]
	conns := 1 + rng.IntN(2)
	// The limit mode comes from a generator of its own, so that every
	// other draw of a seed stays what it was before modes were drawn.
	mode := []string{"fixed", "fixed", "adaptive", "fleet"}[rand.New(rand.NewPCG(seed, 0x6c696d6974)).IntN(4)] // "limit"
	if mode == "fleet" && queue == 0 {
		queue = 2 // fleet mode paces through the queue, and needs one (config.Validate)
	}
	setup := fmt.Sprintf("%d nodes, timeout %s, %d hedges, %s limit %d, queue %d, %d conns/node",
		nNodes, timeout, hedges, mode, nodeLimit, queue, conns)
	p := proxytest.Start(t, cl.Addrs()[:1], func(cfg *config.Config) {
		cfg.RequestTimeout = timeout
		cfg.QueueMaxWait = timeout
		cfg.SpeculativeMaxExecutions = hedges
		cfg.SpeculativeDelay = time.Duration(2+rng.IntN(4)) * time.Millisecond
		cfg.SpeculativeBudget = 1
		// fixed: nodeLimit in flight per node; adaptive: between 1 and
		// nodeLimit; fleet: from a fraction of one request (paced) up to
		// nodeLimit.
		cfg.LimitMode = mode
		cfg.NodeLimit = nodeLimit
		cfg.LimitMin = 1
		cfg.LimitMax = nodeLimit
		cfg.QueueLength = queue
		if mode == "fleet" {
			// The fake nodes report no counts, and a node that cannot
			// report gets the fixed nodeLimit: without readings the fleet
			// law runs on latencies alone, from its floor and paced.
			cfg.LimitNodePoll = 0
		}
		cfg.ConnectionsPerNode = conns
		// Dropped connections come back within the seed.
		cfg.ReconnectBaseDelay = 10 * time.Millisecond
		cfg.ReconnectMaxDelay = 100 * time.Millisecond
		cfg.DrainTimeout = 2 * time.Second
	})
	defer p.Stop()

	// The client and its prepared statements, before any fault.
	version := []byte{frame.V4, frame.V5}[rng.IntN(2)]
	setup += fmt.Sprintf(", protocol v%d", version)
	c, err := dialChaos(p.Addr, version)
	if err != nil {
		t.Fatalf("seed %d (%s): connect: %v", seed, setup, err)
	}
	defer c.nc.Close()
	c.margin = timeout + 2*time.Second
	w := newWorkload(t, c, rng, seed, nNodes)
	t.Logf("seed %d: %s, %d requests, window %d", seed, setup, len(w.reqs), cap(c.window))

	// The fault schedule.
	rate := []float64{0.1, 0.3, 0.5}[rng.IntN(3)]
	plans := make([]faultPlan, nNodes)
	for i := range plans {
		plans[i] = newFaultPlan(rng, 64, rate, timeout)
	}
	events := drawEvents(rng, cl, len(w.reqs))
	tally := &faultTally{start: time.Now()}
	cl.SetHook(chaosHook(cl.Nodes, plans, tally))

	// Send, in bursts, with node-wide events in between.
	c.startReader()
	ev := 0
	giveUp := func() time.Time { return time.Now().Add(c.margin + time.Second) }
	var lastSent time.Time
	for i, r := range w.reqs {
		for ev < len(events) && events[ev].at == i {
			t.Logf("seed %d: before request %d: %s", seed, i, events[ev].desc)
			events[ev].do()
			ev++
		}
		ok, err := c.send(r, giveUp())
		if err != nil {
			fail("write to the proxy: %v", err)
			break
		}
		if !ok {
			fail("no room to send request %d within %s: earlier requests went unanswered", i, c.margin+time.Second)
			break
		}
		lastSent = time.Now()
		if i == len(w.reqs)-1 || rng.IntN(3) == 0 {
			if err := c.w.Flush(); err != nil {
				fail("flush to the proxy: %v", err)
				break
			}
			if rng.IntN(2) == 0 {
				time.Sleep(time.Duration(rng.IntN(4000)) * time.Microsecond)
			}
		}
	}
	for ; ev < len(events); ev++ {
		events[ev].do()
	}

	// Invariant 1: exactly one answer each, in time.
	got, wait := 0, time.NewTimer(time.Until(lastSent.Add(c.margin+500*time.Millisecond)))
	defer wait.Stop()
	c.mu.Lock()
	want := len(c.reqs)
	c.mu.Unlock()
collect:
	for got < want {
		select {
		case <-c.answered:
			got++
		case <-wait.C:
			break collect
		}
	}
	c.mu.Lock()
	for _, r := range w.reqs {
		if !r.sentAt.IsZero() && r.answers == 0 {
			fail("stream %d (%s) never answered (sent %s before the check)", r.stream, r.desc, time.Since(r.sentAt).Round(time.Millisecond))
		}
	}
	c.mu.Unlock()

	// Invariant 3: with every node healthy again and the orphans' streams
	// freed (dropping the connections ends answers that will never come),
	// everything the proxy holds for requests drains to zero.
	cl.SetHook(nil)
	for _, n := range cl.Nodes {
		n.RejectConnections(false)
		n.Resume()
		n.DropConnections()
	}
	drainAt := time.Now()
	if msg := waitDrained(p.Reg, 5*time.Second); msg != "" {
		fail("not drained 5s after the last answer: %s", msg)
	}
	if d := time.Since(drainAt); d > time.Second {
		t.Logf("seed %d: drained after %s", seed, d.Round(time.Millisecond))
	}
	// Late duplicates would have arrived by now; the reader stops here.
	c.nc.Close()
	<-c.done
	c.mu.Lock()
	report = append(report, c.problems...)
	c.mu.Unlock()
	stopAt := time.Now()
	p.Stop()
	if d := time.Since(stopAt); d > time.Second {
		t.Logf("seed %d: the proxy took %s to stop", seed, d.Round(time.Millisecond))
	}
	cl.Close() // every frame the nodes hold is executed or dropped: the counts are final

	// Invariant 2: requests that are not idempotent ran at most once, and
	// exactly once when the client got a success.
	for _, r := range w.reqs {
		if r.idempotent || r.sentAt.IsZero() {
			continue
		}
		for _, q := range r.texts {
			n := cl.QueryExecutions(q)
			switch {
			case n > 1:
				fail("stream %d (%s, not idempotent): %q executed %d times; the client got %s",
					r.stream, r.desc, q, n, answerString(r))
			case n == 0 && r.answers > 0 && r.answerOp == frame.OpResult:
				fail("stream %d (%s): answered with a success but %q never executed", r.stream, r.desc, q)
			}
		}
	}
	if len(report) > 0 {
		t.Logf("seed %d: setup %s; faults applied %s", seed, setup, tally)
		if testing.Verbose() {
			t.Logf("seed %d: the nodes' requests (ms after the faults began):\n%s", seed, tally.Trace())
		}
	}
}

func answerString(r *chaosReq) string {
	if r.answers == 0 {
		return "no answer"
	}
	if r.answerOp == frame.OpError {
		return fmt.Sprintf("ERROR 0x%04x %s", r.answerCode, r.answerMsg)
	}
	return frame.OpcodeName(r.answerOp)
}

// drawEvents picks up to four node-wide events; the ones with a duration
// (refused connections, a stall) end a few requests later.
func drawEvents(rng *rand.Rand, cl *fakenode.Cluster, n int) []chaosEvent {
	var evs []chaosEvent
	for range rng.IntN(5) {
		at := rng.IntN(n)
		end := min(n-1, at+1+rng.IntN(8))
		node := cl.Nodes[rng.IntN(len(cl.Nodes))]
		name := node.Addr()
		switch rng.IntN(6) {
		case 0:
			evs = append(evs, chaosEvent{at, "drop connections of " + name, node.DropConnections})
		case 1:
			// Every connection gone at once, and none back for a while:
			// requests admitted meanwhile find no connection to queue on
			// while their nodes still count as up.
			evs = append(evs, chaosEvent{at, "drop and refuse all connections", func() {
				for _, n := range cl.Nodes {
					n.RejectConnections(true)
					n.DropConnections()
				}
			}}, chaosEvent{end, "accept connections again", func() {
				for _, n := range cl.Nodes {
					n.RejectConnections(false)
				}
			}})
		case 2:
			evs = append(evs, chaosEvent{at, "refuse connections on " + name, func() { node.RejectConnections(true) }},
				chaosEvent{end, "accept connections on " + name, func() { node.RejectConnections(false) }})
		case 3:
			evs = append(evs, chaosEvent{at, "stall " + name, node.Stall}, chaosEvent{end, "resume " + name, node.Resume})
		case 4:
			evs = append(evs, chaosEvent{at, name + " forgets its prepared statements", node.ForgetPrepared})
		default:
			// Connections stalled by a Stall fault wait for a Resume.
			evs = append(evs, chaosEvent{at, "resume every node", func() {
				for _, n := range cl.Nodes {
					n.Resume()
				}
			}})
		}
	}
	// Stable by position, so that events drawn for one point keep their
	// drawing order.
	sortEvents(evs)
	return evs
}

func sortEvents(evs []chaosEvent) {
	for i := 1; i < len(evs); i++ {
		for j := i; j > 0 && evs[j].at < evs[j-1].at; j-- {
			evs[j], evs[j-1] = evs[j-1], evs[j]
		}
	}
}

// waitDrained polls the proxy's gauges until no permit is out, nothing is
// queued, no backend stream is in use and no orphan is held; it returns
// what was left at the end of d, or "". A permit released twice is
// reported at once.
func waitDrained(reg prometheus.Gatherer, d time.Duration) string {
	deadline := time.Now().Add(d)
	for {
		m := gatherSums(reg)
		left := ""
		for _, name := range []string{"cqlgate_limiter_global_in_flight", "cqlgate_limiter_queue_depth",
			"cqlgate_backend_in_flight_requests", "cqlgate_backend_orphaned_streams"} {
			if v := m[name]; v != 0 {
				left += fmt.Sprintf(" %s=%g", name, v)
			}
		}
		if v := m["cqlgate_limiter_double_releases_total"]; v != 0 {
			return fmt.Sprintf("cqlgate_limiter_double_releases_total=%g (a permit released twice)", v) + left
		}
		if left == "" {
			return ""
		}
		if time.Now().After(deadline) {
			return strings.TrimSpace(left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// gatherSums returns each metric's value summed over its label sets.
func gatherSums(reg prometheus.Gatherer) map[string]float64 {
	out := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		return out
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch {
			case m.Gauge != nil:
				out[mf.GetName()] += m.Gauge.GetValue()
			case m.Counter != nil:
				out[mf.GetName()] += m.Counter.GetValue()
			case m.Untyped != nil:
				out[mf.GetName()] += m.Untyped.GetValue()
			}
		}
	}
	return out
}
