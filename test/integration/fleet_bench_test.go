package integration

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cqlgate/cqlgate/internal/capnode"
	"github.com/cqlgate/cqlgate/internal/fleetsim"
)

// BenchmarkFleet is the fleet experiment with real processes (make fleet):
// N = 1, 4 and 8 cmd/proxy processes, each with its own open-loop raw-frame
// generator (two connections, in this process), in front of one real
// Cassandra node, offered 0.5x, 2x and 5x the node's capacity in total, with
// the node slowed 1.6x a third of the way in and restored at two thirds;
// fixed (--node-limit 1024, the default) and fleet limits
// (CQLGATE_FLEET_MODES, e.g. fixed,fleet,adaptive or "fixed 64").
//
// The node's capacity is set by an emulator in front of it
// (internal/capnode): 16 threads (CQLGATE_FLEET_THREADS), each request held
// 5 ms plus an exponential 5 ms on average (CQLGATE_FLEET_SERVICE=10ms, the
// mean), 1,600 requests/s, OVERLOADED past 32 per thread held.
// Answers are the real node's. On two cores a real node saturates the CPU
// long before eight proxies offer it 5x, and then goodput measures the
// machine; the emulator keeps the node's capacity known and far below what
// the machine can push through it, and its latency rising with load is what
// the limits read.
//
// Each run is also simulated (internal/fleetsim, the same node model,
// limiter settings, script and figures), and both are printed side by side.
// Tables go to the log, one PNG per run to CQLGATE_FLEET_OUT.
//
// Knobs: CQLGATE_FLEET_QUICK=1 (N = 8 only, 2x and 5x, 24 s runs: a few
// minutes), CQLGATE_FLEET_NS, CQLGATE_FLEET_LOADS (comma-separated),
// CQLGATE_FLEET_DURATION (per run, default 36s), CQLGATE_FLEET_HOST (the
// loopback address the proxies and the emulator listen on).
func BenchmarkFleet(b *testing.B) {
	quick := os.Getenv("CQLGATE_FLEET_QUICK") == "1"
	ns, loads, d := []float64{1, 4, 8}, []float64{0.5, 2, 5}, 36*time.Second
	if quick {
		ns, loads, d = []float64{8}, []float64{2, 5}, 24*time.Second
	}
	ns = envFloats(b, "CQLGATE_FLEET_NS", ns)
	loads = envFloats(b, "CQLGATE_FLEET_LOADS", loads)
	d = envDuration(b, "CQLGATE_FLEET_DURATION", d)
	modes := []string{"fixed", "fleet"}
	if v := os.Getenv("CQLGATE_FLEET_MODES"); v != "" {
		modes = strings.Split(v, ",")
	}
	host := os.Getenv("CQLGATE_FLEET_HOST")
	if host == "" {
		host = "127.0.0.1"
	}
	out := os.Getenv("CQLGATE_FLEET_OUT")
	if out == "" {
		out = filepath.Join(os.TempDir(), "cqlgate-fleet")
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		b.Fatal(err)
	}
	threads := envInt(b, "CQLGATE_FLEET_THREADS", 16)
	service := envDuration(b, "CQLGATE_FLEET_SERVICE", 10*time.Millisecond)
	model := capnode.Model{Threads: threads, ServiceFixed: service / 2, ServiceExp: service / 2, MaxInFlight: 32 * threads}
	warm := 5 * time.Second
	steps := []fleetsim.Step{{At: d / 3, Slow: 1.6}, {At: 2 * d / 3, Slow: 1}}

	c := singleCluster.Get(b)
	node := c.Addrs[0]
	s := newSession(b, c.Addrs, nil)
	recreateKeyspace(b, s, "it_fleet", 1, "CREATE TABLE it_fleet.kv (k int PRIMARY KEY, v blob)")
	for k := range 100 {
		mustExec(b, s, "INSERT INTO it_fleet.kv (k, v) VALUES (?, ?)", k, make([]byte, 64))
	}
	const query = "SELECT v FROM it_fleet.kv WHERE k = 42"
	bin := buildCqlgate(b, b.TempDir())
	logs := b.TempDir()

	for range b.N {
		// The real node's own latency, warmed: it must stay well under
		// the emulated service time, or the node and not the emulator
		// sets the capacity.
		direct := newOverloadGen(b, node, 2, query)
		direct.warmUp(8)
		dl := direct.openLoop(model.Capacity(1), 3*time.Second)
		direct.close()
		b.Logf("the real node direct, open loop at the emulated capacity (%.0f/s): p50 %s, p99 %s (the emulated service time: %s + exp(%s))",
			model.Capacity(1), us(dl.okLat.P50), us(dl.okLat.P99), model.ServiceFixed, model.ServiceExp)

		simNode := fleetsim.NodeModel{Threads: model.Threads, ServiceFixed: model.ServiceFixed, ServiceExp: model.ServiceExp,
			MaxInFlight: model.MaxInFlight, NetDelay: 50 * time.Microsecond}
		// The unloaded p99 divides every p99 of the table, so a stall of
		// the host while it is measured (one run measured 321 ms where the
		// model says 28 ms) would pass any p99 as a fraction of unloaded.
		// A stall only adds latency: the lowest of up to calTries
		// measurements is kept (the first within calNear times the model's
		// ends them), and one still over calStall times the model's is
		// said to be suspect.
		var cal *fleetOut
		for try := range calTries {
			r := runFleet(b, fleetSpec{mode: "fixed", n: 1, load: 0.1, d: 6 * time.Second, warm: time.Second}, model, bin, logs, host, node, query, 0, 0)
			b.Logf("unloaded (one fixed proxy, 0.1x), measurement %d: client p99 %s, in the emulated node p99 %s (the model's: %s)",
				try+1, r.OKP99, r.BackendP99, simNode.UnloadedP99(1))
			if cal == nil || r.BackendP99 < cal.BackendP99 {
				cal = r
			}
			if float64(cal.BackendP99) <= calNear*float64(simNode.UnloadedP99(1)) {
				break
			}
		}
		if float64(cal.BackendP99) > calStall*float64(simNode.UnloadedP99(1)) {
			b.Logf("the unloaded p99 stayed over %.1fx the model's in %d measurements: the host stalls, and the p99 ratios below are suspect", calStall, calTries)
		}
		unC, unB := float64(cal.OKP99.Microseconds()), float64(cal.BackendP99.Microseconds())
		b.Logf("emulated node: %d threads, %s + exp(%s) per request: %.0f requests/s, OVERLOADED past %d; runs of %s, warm-up %s, slowed %.1fx at %s, restored at %s; proxies on %s",
			model.Threads, model.ServiceFixed, model.ServiceExp, model.Capacity(1), model.MaxInFlight, d, warm, steps[0].Slow, steps[0].At, steps[1].At, host)

		var rows []string
		var checks []string
		for _, mode := range modes {
			for _, n := range ns {
				for _, load := range loads {
					spec := fleetSpec{mode: mode, n: int(n), load: load, d: d, warm: warm, steps: steps}
					began := time.Now()
					r := runFleet(b, spec, model, bin, logs, host, node, query, unC, unB)
					sim := simulate(b, spec, simNode)
					row := fleetRow(spec, r, sim)
					rows = append(rows, row)
					b.Logf("%s  (%s; per proxy: answers %v, mean limit %.1f, baseline %v, cuts ended by a node with room %v)", row, time.Since(began).Round(time.Second), r.PerProxy, r.LimitPerProxy, r.BasePerProxy, r.RoomPerProxy)
					if err := fleetsim.WritePlot(filepath.Join(out, plotName(spec)+".png"), r.Plot); err != nil {
						b.Error(err)
					}
					if mode == "fleet" && n == 8 {
						checks = append(checks, acceptance(spec, r)...)
					}
				}
			}
		}
		b.Logf("\n%s\n%s\n\nplots in %s", fleetHeader, strings.Join(rows, "\n"), out)
		b.Logf("each cell: real / simulated. Ratios: p99 over the unloaded p99 (client %s, node %s) times the slowdown; agreement within: goodput ±0.05, Jain ±0.05, node p99 ratio ±25%%, sum of limits ±25%%, convergence ±2 s",
			cal.OKP99, cal.BackendP99)
		if len(checks) > 0 {
			b.Logf("acceptance (fleet, N = 8):\n%s", strings.Join(checks, "\n"))
		}
	}
}

func fleetName(s fleetSpec) string { return fmt.Sprintf("%s, N=%d, open %.1fx", s.mode, s.n, s.load) }

func plotName(s fleetSpec) string {
	return "real_" + strings.NewReplacer(", ", "_", " ", "-", "=", "", ".", "_").Replace(fleetName(s))
}

// simulate runs spec's twin in the simulator.
func simulate(tb testing.TB, spec fleetSpec, node fleetsim.NodeModel) *fleetsim.Result {
	name := spec.mode
	if name == "fixed" {
		name = "fixed 1024"
	}
	mode, ok := fleetsim.ModeNamed(name)
	if !ok {
		return nil // a mode the simulator has no twin for
	}
	sc := fleetsim.Uniform(node, mode, spec.n, spec.load, spec.d, 1)
	sc.Steps, sc.Warmup = spec.steps, spec.warm
	r, err := fleetsim.Run(sc)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// lateStall is the generators' p99 lateness past which a run is not judged
// against the aims: quiet runs send 7-23 ms late at p99, and runs with
// 41-132 ms served 0.61-0.75 of capacity in fleet mode, where quiet ones
// of the same law served 0.96-0.97.
const lateStall = 30 * time.Millisecond

// The unloaded p99's calibration: at most calTries measurements, until one
// is within calNear times the model's (a quiet host measures 1.06x); over
// calStall times, the host stalled.
const (
	calTries = 3
	calNear  = 1.25
	calStall = 2.0
)

const fleetHeader = "| mode | N | load | goodput/cap | client p99 | its ratio | node p99 ratio | OVERLOADED | its p99 | node's own OL | Jain | converge slow (s) | converge restore (s) | sum of limits / best | disagree | generator late |\n" +
	"|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"

func fleetRow(s fleetSpec, r *fleetOut, sim *fleetsim.Result) string {
	pair := func(real, simv string) string {
		if sim == nil {
			return real
		}
		return real + " / " + simv
	}
	f2 := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
	f1 := func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
	conv := func(v []float64, i int) string {
		if i >= len(v) || math.IsNaN(v[i]) {
			return "never"
		}
		return f1(v[i])
	}
	var simC []float64
	sc := &fleetsim.Result{}
	if sim != nil {
		sc, simC = sim, sim.Converge
	}
	var off []string
	if sim != nil {
		if math.Abs(r.GoodCap-sim.GoodCap) > 0.05 {
			off = append(off, "goodput")
		}
		if math.Abs(r.Jain-sim.Jain) > 0.05 {
			off = append(off, "Jain")
		}
		if math.Abs(r.BackendRatio-sim.P99Ratio) > 0.25*sim.P99Ratio {
			off = append(off, "p99")
		}
		if math.Abs(r.LimitSum-sim.LimitSum) > 0.25*sim.LimitSum {
			off = append(off, "limits")
		}
		for i := range r.Converge {
			a, c := r.Converge[i], simC[i]
			if math.IsNaN(a) != math.IsNaN(c) || math.Abs(a-c) > 2 {
				off = append(off, "converge")
				break
			}
		}
	}
	gen := "p99 " + ms1(r.LateP99)
	if r.Unsent > 0 {
		gen += fmt.Sprintf(", %d unsent", r.Unsent)
	}
	return fmt.Sprintf("| %s | %d | %.1fx | %s | %s | %s | %s | %s | %s | %.1f%% | %s | %s | %s | %s | %s | %s |",
		s.mode, s.n, s.load, pair(f2(r.GoodCap), f2(sc.GoodCap)), ms1(r.OKP99), pair(f1(r.ClientRatio), f1(sc.ClientRatio)),
		pair(f1(r.BackendRatio), f1(sc.P99Ratio)), pair(share(r.OverShare), share(sc.OverShare)), ms1(r.OverP99), 100*r.NodeOverShare,
		pair(f2(r.Jain), f2(sc.Jain)), pair(conv(r.Converge, 0), conv(simC, 0)), pair(conv(r.Converge, 1), conv(simC, 1)),
		pair(f2(r.LimitSum), f2(sc.LimitSum)), strings.Join(off, ", "), gen)
}

func ms1(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1fms", float64(d)/1e6)
}

func share(v float64) string { return fmt.Sprintf("%.1f%%", 100*v) }

// acceptance checks a fleet-mode run of 8 proxies against the issue's
// targets.
func acceptance(s fleetSpec, r *fleetOut) []string {
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "MISSED"
	}
	var out []string
	conv := true
	for _, c := range r.Converge {
		conv = conv && !math.IsNaN(c) && c <= 5
	}
	switch s.load {
	case 2:
		out = append(out,
			fmt.Sprintf("2x: goodput %.2f of capacity (>= 0.95): %s", r.GoodCap, verdict(r.GoodCap >= 0.95)),
			fmt.Sprintf("2x: node p99 %.1fx unloaded (<= 2): %s; client p99 %.1fx", r.BackendRatio, verdict(r.BackendRatio <= 2), r.ClientRatio),
			fmt.Sprintf("2x: Jain %.2f (>= 0.95): %s", r.Jain, verdict(r.Jain >= 0.95)),
			fmt.Sprintf("2x: convergence %v s (<= 5 after each step): %s", r.Converge, verdict(conv)))
	case 5:
		out = append(out, fmt.Sprintf("5x: goodput %.2f of capacity (>= 0.90): %s", r.GoodCap, verdict(r.GoodCap >= 0.9)))
	}
	if len(out) > 0 && r.LateP99 > lateStall {
		return []string{fmt.Sprintf("%.0fx: not judged: the generators sent their requests %s late at p99 (over %s): the host stalled, and its stalls, not the limit, set the figures",
			s.load, r.LateP99.Round(time.Millisecond), lateStall)}
	}
	return out
}

func envFloats(tb testing.TB, name string, def []float64) []float64 {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var out []float64
	for _, f := range strings.Split(v, ",") {
		x, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || x <= 0 {
			tb.Fatalf("%s=%q: want positive numbers, comma-separated", name, v)
		}
		out = append(out, x)
	}
	return out
}

// A run whose generators fell behind their schedule measured the host's
// stalls: the aims are not judged on it, met or missed. One such run had
// printed goodput 0.61 "MISSED" for a law that served 0.97 in quiet runs.
func TestFleetAcceptanceSkipsAStalledRun(t *testing.T) {
	good := &fleetOut{GoodCap: 0.97, BackendRatio: 1.1, Jain: 0.97, Converge: []float64{0, 0}, LateP99: 11 * time.Millisecond}
	for _, line := range acceptance(fleetSpec{load: 2}, good) {
		if !strings.HasSuffix(line, ": met") && !strings.Contains(line, ": met;") {
			t.Errorf("quiet run: %q; want met", line)
		}
	}
	stalled := &fleetOut{GoodCap: 0.61, BackendRatio: 1.4, Jain: 0.95, Converge: []float64{math.NaN(), math.NaN()}, LateP99: 97 * time.Millisecond}
	for _, load := range []float64{2, 5} {
		got := acceptance(fleetSpec{load: load}, stalled)
		if len(got) != 1 || !strings.Contains(got[0], "not judged") || strings.Contains(got[0], "MISSED") {
			t.Errorf("stalled run at %.0fx: %q; want one line, not judged", load, got)
		}
	}
}
