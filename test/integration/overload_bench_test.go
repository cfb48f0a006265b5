package integration

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cqlgate/cqlgate/internal/faultinject"
	"github.com/cqlgate/cqlgate/internal/loadgen/cputime"
	"github.com/cqlgate/cqlgate/pkg/config"
)

// BenchmarkOverload is the overload experiment of the limiter's acceptance
// with a generator that costs next to nothing: raw pipelined EXECUTE frames
// on a few connections, a few hundred nanoseconds of CPU each, where gocql
// costs 10-30 µs. On a 2-core machine shared with Cassandra, loadgen cannot
// offer more than about one node's capacity (scripts/overload.sh says it
// falls behind), so this is where 2x, 5x and 10x are measured.
//
// Steps: the peak goodput (closed loop), the unloaded p99 (open loop at a
// tenth of the peak), then open loops at 2x, 5x and 10x the peak. Per step:
// goodput against the peak, the admitted requests' p99 service time against
// the unloaded p99, the OVERLOADED answers' p99, and whether the generator
// kept its schedule. Then the proxy's live heap per queued request, with
// tens of thousands of requests queued behind a limit of 1.
//
// Cassandra is pinned to CPU 0 and this process (proxy and generator) to
// the others, as if the proxy ran beside its application on another host,
// as it does in production: otherwise every rejection's CPU is taken from
// the node and goodput measures the machine, not the limiter. Set
// CQLGATE_OVERLOAD_PIN=0 to share the CPUs.
//
// The node limit is 32 (CQLGATE_OVERLOAD_NODE_LIMIT), enough to keep the
// node busy; the queue settings are those an operator sets for
// latency-sensitive traffic: --queue-max-wait 100ms --queue-target 2ms
// (CQLGATE_OVERLOAD_TARGET). Other knobs, with figures for each in
// docs/loadgen.md:
//
//   - CQLGATE_OVERLOAD_ADAPTIVE=1: --limit-mode adaptive
//     (CQLGATE_OVERLOAD_LIMIT_MIN sets --limit-min);
//
//   - CQLGATE_OVERLOAD_ROWS=N: read a partition of N 64-byte rows instead of
//     one, a read that costs the node more; with CQLGATE_OVERLOAD_COUNT=1 the
//     rows are counted instead of returned, which saturates the node rather
//     than the proxy's core;
//
//   - CQLGATE_OVERLOAD_LATENCY=2ms: delay the node's answers through a fault
//     injector, as a network between the proxy and a remote cluster would;
//
//   - CQLGATE_OVERLOAD_PROXY=process: run cmd/proxy as its own process;
//
//   - CQLGATE_OVERLOAD_STEPS=10,5,2: other steps, in that order.
//
//     go test ./test/integration -run '^$' -bench Overload -benchtime 1x
func BenchmarkOverload(b *testing.B) {
	c := singleCluster.Get(b)
	nodeLimit := envInt(b, "CQLGATE_OVERLOAD_NODE_LIMIT", 32)
	target := envDuration(b, "CQLGATE_OVERLOAD_TARGET", 2*time.Millisecond)
	limitMin := envInt(b, "CQLGATE_OVERLOAD_LIMIT_MIN", 16)
	steps := []float64{2, 5, 10}
	if v := os.Getenv("CQLGATE_OVERLOAD_STEPS"); v != "" {
		steps = nil
		for _, f := range strings.Split(v, ",") {
			m, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil || m <= 0 {
				b.Fatalf("CQLGATE_OVERLOAD_STEPS=%q: want multiples of the peak such as 2,5,10", v)
			}
			steps = append(steps, m)
		}
	}
	step := 4 * time.Second
	adaptive := os.Getenv("CQLGATE_OVERLOAD_ADAPTIVE") == "1"
	rows := envInt(b, "CQLGATE_OVERLOAD_ROWS", 1)
	var (
		addr string
		reg  prometheus.Gatherer
		pids []int
		stop = func() {} // before the memory measurement's proxy starts
	)
	// The node as clients see it: with CQLGATE_OVERLOAD_LATENCY, behind a
	// fault injector that delays its answers, as a network between the
	// proxy and a remote cluster would.
	nodeAddr := c.Addrs[0]
	var addrMap []string
	if lat := envDuration(b, "CQLGATE_OVERLOAD_LATENCY", 0); lat > 0 {
		inj := faultinject.New(b, "127.0.0.1:0", c.Addrs[0])
		if err := inj.Latency(lat, 0); err != nil {
			b.Fatal(err)
		}
		nodeAddr, addrMap = inj.Addr, []string{c.Addrs[0] + "=" + inj.Addr}
		b.Logf("the node's answers are delayed by %s (a fault injector in this process)", lat)
	}
	where := "in this process"
	if os.Getenv("CQLGATE_OVERLOAD_PROXY") == "process" {
		args := []string{"--node-limit", strconv.Itoa(nodeLimit), "--queue-max-wait", "100ms", "--queue-target", target.String()}
		if addrMap != nil {
			args = append(args, "--address-map", addrMap[0])
		}
		if adaptive {
			args = append(args, "--limit-mode", "adaptive", "--limit-min", strconv.Itoa(limitMin))
		}
		p := startCqlgate(b, c.Addrs, args...)
		addr, reg, pids = p.Addr, p.Gatherer, []int{p.Pid()}
		where = fmt.Sprintf("in its own process (pid %d)", p.Pid())
	} else {
		p := startProxy(b, c.Addrs, func(cfg *config.Config) {
			cfg.LimitMode, cfg.NodeLimit = "fixed", nodeLimit
			cfg.QueueMaxWait = 100 * time.Millisecond
			cfg.QueueTarget = target
			cfg.AddressMap = addrMap
			if adaptive {
				cfg.LimitMode = "adaptive"
				cfg.LimitMin = limitMin
			}
		})
		addr, reg, stop = p.Addr, p.Reg, p.Stop
	}
	defer pinApart(b, c, pids...)()
	nodePid, _ := c.PID(0)
	b.Logf("proxy %s", where)
	s := newSession(b, c.Addrs, nil)
	recreateKeyspace(b, s, "it_overload", 1, "CREATE TABLE it_overload.kv (k int PRIMARY KEY, v blob)",
		"CREATE TABLE it_overload.wide (k int, c int, v blob, PRIMARY KEY (k, c))")
	for k := range 100 {
		mustExec(b, s, "INSERT INTO it_overload.kv (k, v) VALUES (?, ?)", k, make([]byte, 64))
	}
	query := "SELECT v FROM it_overload.kv WHERE k = 42"
	if rows > 1 {
		for c := range rows {
			mustExec(b, s, "INSERT INTO it_overload.wide (k, c, v) VALUES (?, ?, ?)", 42, c, make([]byte, 64))
		}
		query = "SELECT v FROM it_overload.wide WHERE k = 42"
		if os.Getenv("CQLGATE_OVERLOAD_COUNT") == "1" {
			query = "SELECT count(*) FROM it_overload.wide WHERE k = 42"
		}
	}

	for range b.N {
		// Cassandra's own unloaded p99, for scale.
		d := newOverloadGen(b, nodeAddr, 4, query)
		d.closedLoop(8, time.Second)
		direct := d.openLoop(1000, 2*time.Second)
		b.Logf("direct to Cassandra, open loop at 1000/s: p99 %s, p50 %s", us(direct.okLat.P99), us(direct.okLat.P50))
		// The node's own steadiness, the floor under "goodput of peak":
		// the node limit's worth of requests outstanding directly, in
		// windows as long as a step.
		d.warmUp(max(nodeLimit/4, 1))
		lo, hi := math.Inf(1), 0.0
		for range 4 {
			r := d.closedLoop(max(nodeLimit/4, 1), step).goodput()
			lo, hi = min(lo, r), max(hi, r)
		}
		d.close()
		b.Logf("direct to Cassandra, closed loop with %d outstanding, 4 windows of %s: %.0f-%.0f/s (the lowest is %.0f%% of the highest)",
			4*max(nodeLimit/4, 1), step, lo, hi, 100*lo/hi)
		b.ReportMetric(lo/hi, "direct-min/max")

		g := newOverloadGen(b, addr, 4, query)
		// The peak keeps four times the node limit outstanding, so that
		// the queue always has the next request ready for a freed slot.
		g.warmUp(nodeLimit)
		peak := g.closedLoop(nodeLimit, step)
		unloaded := g.openLoop(peak.goodput()/10, step)
		limit := fmt.Sprintf("node limit %d", nodeLimit)
		if adaptive {
			limit = fmt.Sprintf("adaptive limit (now %.0f)", metricSum(b, reg, "cqlgate_limiter_limit"))
		}
		b.Logf("%s, queue max wait 100ms, target %s; %s per step; %d row(s) per read", limit, target, step, rows)
		b.Logf("peak (closed loop, %d outstanding): %.0f/s; unloaded p99 (open loop at %.0f/s): %s (p50 %s)",
			4*nodeLimit, peak.goodput(), peak.goodput()/10, us(unloaded.okLat.P99), us(unloaded.okLat.P50))
		type result struct {
			m       float64
			r       *stepStats
			proxyOL float64
			wait    float64 // p99 bound of the queue wait of admitted requests, seconds
			backend float64 // mean seconds from queueing to Cassandra to reading the answer
			limit   float64 // the node's limit at the end of the step
			cpu     []float64
			nodeW   float64 // the node's write syscalls per answer
		}
		var results []result
		best := peak.goodput()
		for _, m := range steps {
			var olBefore, waitBefore buckets
			var beSum, beCount float64
			var cpuBefore []cputime.Ticks
			var wBefore, nBefore float64
			g.atMeasure = func() {
				cpuBefore = cpuTicks(b)
				wBefore = procWrites(nodePid)
				olBefore = histogramBuckets(b, reg, "cqlgate_overloaded_answer_seconds")
				waitBefore = histogramBuckets(b, reg, "cqlgate_limiter_queue_wait_seconds")
				beSum, beCount = histogramSum(b, reg, "cqlgate_backend_request_duration_seconds")
				nBefore = beCount
			}
			g.atEnd = func() {
				cpu := cputime.Busy(cpuBefore, cpuTicks(b))
				proxyOL := histogramBuckets(b, reg, "cqlgate_overloaded_answer_seconds").minus(olBefore).quantile(0.99)
				wait := histogramBuckets(b, reg, "cqlgate_limiter_queue_wait_seconds").minus(waitBefore).quantile(0.99)
				sum, count := histogramSum(b, reg, "cqlgate_backend_request_duration_seconds")
				results = append(results, result{m: m, proxyOL: proxyOL, wait: wait, backend: (sum - beSum) / (count - beCount),
					limit: metricSum(b, reg, "cqlgate_limiter_limit"), cpu: cpu, nodeW: (procWrites(nodePid) - wBefore) / (count - nBefore)})
			}
			r := g.openLoop(peak.goodput()*m, step)
			g.atMeasure, g.atEnd = nil, nil
			results[len(results)-1].r = r
			best = max(best, r.goodput())
		}
		// Goodput is compared with the best any step achieved: the closed
		// loop's generator costs more per request than the open loop's, so
		// an overloaded step may serve more than the closed loop did.
		b.Logf("peak goodput of all steps: %.0f/s", best)
		b.Logf("%-4s %9s %9s %7s %10s %7s %10s %11s %10s %10s %10s %5s %9s %8s %s", "step", "offered", "goodput", "of peak", "ok p99", "x unld", "queue p99", "overloaded", "OL p99", "proxy OL", "backend", "limit", "CPU busy", "node w/a", "generator")
		for _, res := range results {
			r, m := res.r, res.m
			ofPeak := r.goodput() / best
			x := float64(r.okLat.P99) / float64(unloaded.okLat.P99)
			b.Logf("%-4s %9.0f %9.0f %6.0f%% %10s %7.2f %10s %11d %10s %10s %10s %5.0f %9s %8.2f %s", fmt.Sprintf("%gx", m), r.offered,
				r.goodput(), ofPeak*100, us(r.okLat.P99), x, "≤"+us(int64(res.wait*1e6)), r.olLat.Count,
				us(r.olLat.P99), "≤"+us(int64(res.proxyOL*1e6)), us(int64(res.backend*1e6)), res.limit, percents(res.cpu), res.nodeW, r.schedule())
			b.ReportMetric(ofPeak, fmt.Sprintf("goodput/peak@%gx", m))
			b.ReportMetric(x, fmt.Sprintf("p99/unloaded@%gx", m))
			b.ReportMetric(float64(r.olLat.P99), fmt.Sprintf("OLp99-µs@%gx", m))
			b.ReportMetric(res.proxyOL*1e6, fmt.Sprintf("proxyOLp99-µs@%gx", m))
		}
		b.Logf("ok/OL p99: service times at the generator; queue p99: bound of cqlgate_limiter_queue_wait_seconds; proxy OL: of cqlgate_overloaded_answer_seconds; backend: mean of cqlgate_backend_request_duration_seconds; limit: at the step's end; CPU busy: each CPU's share of the step not idle (CPU 0 is the node's)")
		g.close()
	}
	stop()

	perQueued, sysPerQueued, depth := queuedRequestMemory(b, c.Addrs)
	b.Logf("memory: %d requests queued: %.0f B of live heap each (%.0f B of heap and stacks obtained from the OS)", depth, perQueued, sysPerQueued)
	b.ReportMetric(perQueued, "B/queued")
}

// queuedRequestMemory fills a proxy's queue (limit 1, 30 s max wait) with
// 40,000 requests on 4 connections and returns the growth of the live heap
// per queued request, of the heap and stacks obtained from the OS, and the
// queue depth. The generator's own memory is allocated before the baseline.
func queuedRequestMemory(b *testing.B, addrs []string) (live, sys float64, depth int) {
	p := startProxy(b, addrs, func(cfg *config.Config) {
		cfg.LimitMode, cfg.NodeLimit = "fixed", 1
		cfg.QueueMaxWait = 30 * time.Second
	})
	const conns, perConn = 4, 10_000
	g := newOverloadGen(b, p.Addr, conns, "SELECT v FROM it_overload.kv WHERE k = 42")
	defer g.close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for _, gc := range g.conns {
		gc.sendBurst(perConn)
	}
	waitFor(b, 30*time.Second, "the queue to fill", func() (bool, string) {
		d := metricSum(b, p.Reg, "cqlgate_limiter_queue_depth")
		return d >= conns*perConn*9/10, fmt.Sprintf("queue depth %.0f", d)
	})
	depth = int(metricSum(b, p.Reg, "cqlgate_limiter_queue_depth"))
	runtime.GC()
	runtime.ReadMemStats(&after)
	live = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(depth)
	sys = float64(int64(after.HeapSys+after.StackSys)-int64(before.HeapSys+before.StackSys)) / float64(depth)
	return live, sys, depth
}

func envDuration(tb testing.TB, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		tb.Fatalf("%s=%q: want a positive duration such as 2ms", name, v)
	}
	return d
}

func envInt(tb testing.TB, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		tb.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

func us(v int64) string { return strconv.FormatInt(v, 10) + "µs" }

// pinApart puts the node's process on CPU 0 and this one and others on the
// other CPUs (see BenchmarkOverload) and returns what undoes it. It does
// nothing on one CPU, without taskset, or with CQLGATE_OVERLOAD_PIN=0.
func pinApart(tb testing.TB, c *testCluster, others ...int) func() {
	n := runtime.NumCPU()
	if n < 2 || os.Getenv("CQLGATE_OVERLOAD_PIN") == "0" {
		return func() {}
	}
	if _, err := exec.LookPath("taskset"); err != nil {
		tb.Logf("not pinning: %v", err)
		return func() {}
	}
	node, err := c.PID(0)
	if err != nil {
		tb.Logf("not pinning: %v", err)
		return func() {}
	}
	pin := func(cpus string, pid int) error {
		out, err := exec.Command("taskset", "-a", "-p", "-c", cpus, strconv.Itoa(pid)).CombinedOutput()
		if err != nil {
			return fmt.Errorf("taskset -a -p -c %s %d: %v: %s", cpus, pid, err, out)
		}
		return nil
	}
	all := fmt.Sprintf("0-%d", n-1)
	undo := func() {
		for _, pid := range append([]int{node, os.Getpid()}, others...) {
			if err := pin(all, pid); err != nil {
				tb.Logf("unpinning: %v", err)
			}
		}
	}
	if err := pin("0", node); err != nil {
		tb.Logf("not pinning: %v", err)
		return func() {}
	}
	for _, pid := range append([]int{os.Getpid()}, others...) {
		if err := pin(fmt.Sprintf("1-%d", n-1), pid); err != nil {
			tb.Logf("not pinning: %v", err)
			undo()
			return func() {}
		}
	}
	tb.Logf("Cassandra (pid %d) pinned to CPU 0, proxy and generator to CPUs 1-%d", node, n-1)
	return undo
}

// buckets is a histogram's cumulative bucket counts by upper bound.
type buckets struct {
	upper []float64
	count []uint64
}

func histogramBuckets(tb testing.TB, reg prometheus.Gatherer, name string) buckets {
	mfs, err := reg.Gather()
	if err != nil {
		tb.Fatalf("gather metrics: %v", err)
	}
	var out buckets
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, bk := range m.GetHistogram().GetBucket() {
				out.upper = append(out.upper, bk.GetUpperBound())
				out.count = append(out.count, bk.GetCumulativeCount())
			}
		}
	}
	if len(out.upper) == 0 {
		tb.Fatalf("no histogram %s", name)
	}
	return out
}

// histogramSum returns the sum and count of a histogram, all series added.
func histogramSum(tb testing.TB, reg prometheus.Gatherer, name string) (sum, count float64) {
	mfs, err := reg.Gather()
	if err != nil {
		tb.Fatalf("gather metrics: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetHistogram().GetSampleSum()
				count += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return sum, count
}

func (b buckets) minus(o buckets) buckets {
	out := buckets{upper: b.upper, count: make([]uint64, len(b.count))}
	for i := range b.count {
		out.count[i] = b.count[i] - o.count[i]
	}
	return out
}

// quantile returns the upper bound of the bucket holding quantile q: an
// upper bound on the true value (0 when empty, +Inf beyond the last bucket).
func (b buckets) quantile(q float64) float64 {
	total := b.count[len(b.count)-1]
	if total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(total)))
	for i, c := range b.count {
		if c >= rank {
			return b.upper[i]
		}
	}
	return math.Inf(1)
}

// cpuTicks reads every CPU's times (nil, and a note in the log, where
// /proc/stat is missing).
func cpuTicks(tb testing.TB) []cputime.Ticks {
	t, err := cputime.PerCPU()
	if err != nil {
		tb.Logf("no CPU figures: %v", err)
	}
	return t
}

func percents(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprintf("%.0f%%", x*100)
	}
	return strings.Join(parts, "/")
}

// procWrites returns how many write syscalls process pid has made
// (/proc/PID/io), or 0 if it cannot tell.
func procWrites(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "syscw: "); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return n
		}
	}
	return 0
}
