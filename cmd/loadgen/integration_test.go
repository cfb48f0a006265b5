package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/gocql/gocql"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cqlgate/cqlgate/internal/cassandratest"
	"github.com/cqlgate/cqlgate/internal/loadgen/errclass"
	"github.com/cqlgate/cqlgate/internal/proxytest"
	"github.com/cqlgate/cqlgate/pkg/config"
)

// testCassandraAddr is where the fallback node runs: an address of its own,
// so that it collides neither with scripts/bench.sh's node (127.0.10.1) nor
// with other packages' clusters when go test runs packages in parallel.
const testCassandraAddr = "127.0.14.1"

// cassandraAddr returns host:port of a real single Cassandra node: the one
// named by CQLGATE_TEST_CASSANDRA_SINGLE, else one started for this test
// (and stopped after it). With CQLGATE_SKIP_CASSANDRA=1 the test is
// skipped; otherwise a Cassandra that cannot be had fails it, because a
// load generator never run against Cassandra is not tested.
func cassandraAddr(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, stop, err := cassandratest.Shared(ctx, "SINGLE", cassandratest.Options{
		Nodes:     1,
		Addresses: []string{testCassandraAddr},
	})
	if errors.Is(err, cassandratest.ErrSkipped) {
		t.Skip("CQLGATE_SKIP_CASSANDRA=1")
	}
	if err != nil {
		t.Fatalf("no Cassandra (set CQLGATE_TEST_CASSANDRA_SINGLE=host:port to use a running node): %v", err)
	}
	t.Cleanup(stop)
	return c.Addrs[0]
}

// runLoadgen runs one subcommand in-process and returns its exit code,
// stdout and stderr.
func runLoadgen(t *testing.T, ctx context.Context, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(ctx, args, &stdout, &stderr)
	t.Logf("loadgen %s -> %d\nstderr:\n%s", strings.Join(args, " "), code, stderr.String())
	return code, stdout.String(), stderr.String()
}

// TestAgainstCassandra runs setup, run and compare for real: 8 workers, 1 s
// windows; then the error classes, the closed and open loops' options, the
// proxy's figures and the scenarios. The subtests that use setup's table
// skip when setup failed.
func TestAgainstCassandra(t *testing.T) {
	addr := cassandraAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	ks := "loadgen_it_" + strconv.Itoa(os.Getpid())
	t.Cleanup(func() { dropKeyspace(t, addr, ks) })
	it := &loadgenIT{
		ctx:    ctx,
		addr:   addr,
		ks:     ks,
		schema: []string{"--keyspace", ks, "--rows", "500", "--value-size", "64"},
		// No --fail-on-errors: on a busy machine a request may time out, and
		// that is loadgen reporting honestly, not loadgen failing. A real
		// failure (nothing measured, mostly errors) is asserted below.
		load: []string{"--workers", "8", "--duration", "1s", "--warmup", "300ms"},
	}

	setupOK := t.Run("setup", it.testSetup)
	// withTable runs a subtest that reads or writes setup's table kv.
	withTable := func(name string, f func(*testing.T)) {
		t.Run(name, func(t *testing.T) {
			requires(t, setupOK, "setup")
			f(t)
		})
	}
	withTable("run", it.testRun)
	withTable("compare", it.testCompare)
	t.Run("failed requests exit 3 with --fail-on-errors", it.testFailOnErrors)
	withTable("run --ops with sequential keys stops at ops", it.testOps)
	withTable("open loop with zipf keys, HDR log and plot", it.testOpenLoop)
	withTable("through the proxy: compare with metrics", it.testCompareThroughProxy)
	withTable("OVERLOADED answers are classified and timed", it.testOverloaded)
	withTable("timeouts are classified", it.testTimeouts)
	withTable("workers scenario", it.testWorkers)
	t.Run("ratelimited scenario", it.testRateLimited)
	t.Run("multiget scenario", it.testMultiget)
	t.Run("unreachable target fails", it.testUnreachable)
}

// loadgenIT is what TestAgainstCassandra's subtests share: the node, the
// keyspace, and the flags of its table (schema) and of a short closed-loop
// measurement (load).
type loadgenIT struct {
	ctx          context.Context
	addr, ks     string
	schema, load []string
}

// withSchema returns args followed by the schema flags.
func (it *loadgenIT) withSchema(args ...string) []string {
	return append(args, it.schema...)
}

// withLoad returns args followed by the schema and load flags.
func (it *loadgenIT) withLoad(args ...string) []string {
	return append(it.withSchema(args...), it.load...)
}

// loadgenOK runs one subcommand in-process, fails the test unless it exits
// 0, and returns its stdout.
func (it *loadgenIT) loadgenOK(t *testing.T, args ...string) string {
	t.Helper()
	code, stdout, stderr := runLoadgen(t, it.ctx, args...)
	if code != exitOK {
		t.Fatalf("%s exit %d: %s", args[0], code, stderr)
	}
	return stdout
}

func (it *loadgenIT) testSetup(t *testing.T) {
	it.loadgenOK(t, it.withSchema("setup", "--hosts", it.addr)...)
	if n := countRows(t, it.addr, it.ks); n != 500 {
		t.Errorf("%s.kv has %d rows; want 500", it.ks, n)
	}
}

func (it *loadgenIT) testRun(t *testing.T) {
	code, stdout, stderr := runLoadgen(t, it.ctx, it.withLoad("run", "--hosts", it.addr, "--workload", "mixed")...)
	if code != exitOK {
		t.Fatalf("run exit %d: %s", code, stderr)
	}
	for _, want := range []string{"throughput", "p99.9", "loadgen cpu"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("run output lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "measure ops/s=") {
		t.Errorf("no progress line on stderr:\n%s", stderr)
	}
}

func (it *loadgenIT) testCompare(t *testing.T) {
	// Both targets are the same node. This test process stands in for
	// the proxy whose CPU is read from /proc: the figure must come out
	// positive and of the same order as loadgen's own CPU per op.
	stdout := it.loadgenOK(t, it.withLoad("compare",
		"--target", "direct="+it.addr, "--target", "again="+it.addr,
		"--rounds", "2", "--proxy-target", "again", "--proxy-pid", strconv.Itoa(os.Getpid()), "--json")...)
	rep := decodeJSON[compareReport](t, "compare --json", stdout)
	if got := fmt.Sprint(rep.Order); got != "[[direct again] [again direct]]" {
		t.Errorf("order = %s; want ABBA", got)
	}
	for _, tg := range rep.Targets {
		if tg.Ops == 0 || tg.ErrorsTotal*100 > tg.Ops || len(tg.Rounds) != 2 {
			t.Errorf("%s: %d ops, %d errors (%v), %d rounds; want >0, under 1%%, 2",
				tg.Name, tg.Ops, tg.ErrorsTotal, tg.ErrorSamples, len(tg.Rounds))
		}
		if tg.Latency.P50 <= 0 || tg.LoadgenCPUPerOp <= 0 {
			t.Errorf("%s: p50 %dµs, loadgen cpu %vµs/op; want both > 0", tg.Name, tg.Latency.P50, tg.LoadgenCPUPerOp)
		}
	}
	again := rep.Targets[1]
	if again.ProxyCPUPerReq == nil || *again.ProxyCPUPerReq <= 0 {
		t.Fatalf("again: proxy_cpu_us_per_req = %v; want > 0", again.ProxyCPUPerReq)
	}
	if r := *again.ProxyCPUPerReq / again.LoadgenCPUPerOp; r < 0.3 || r > 3 {
		t.Errorf("/proc CPU %vµs/req vs getrusage %vµs/op: same process, want within 3x",
			*again.ProxyCPUPerReq, again.LoadgenCPUPerOp)
	}
	if again.Significance == nil || again.Significance.P == nil {
		t.Errorf("no significance test for the second target")
	}
}

func (it *loadgenIT) testFailOnErrors(t *testing.T) {
	// A keyspace without table kv: every request fails on the server
	// with "unconfigured table", deterministically.
	empty := it.ks + "_empty"
	s := testSession(t, it.addr)
	err := s.Query("CREATE KEYSPACE IF NOT EXISTS " + empty +
		" WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}").Exec()
	s.Close()
	if err != nil {
		t.Fatalf("create keyspace %s: %v", empty, err)
	}
	t.Cleanup(func() { dropKeyspace(t, it.addr, empty) })

	code, stdout, stderr := runLoadgen(t, it.ctx, "run", "--hosts", it.addr, "--keyspace", empty,
		"--workers", "2", "--duration", "500ms", "--warmup", "0s", "--fail-on-errors", "--json")
	if code != exitErrorsSeen {
		t.Fatalf("exit %d; want %d: %s", code, exitErrorsSeen, stderr)
	}
	rep := decodeRun(t, stdout)
	if rep.Target.Ops != 0 || rep.Target.Errors[errclass.Other] == 0 || rep.Target.Errors[errclass.Other] != rep.Target.ErrorsTotal {
		t.Errorf("ops %d, errors %v; want 0 ops and only 'other' errors", rep.Target.Ops, rep.Target.Errors)
	}
	if msg := rep.Target.ErrorSamples["other"]; !strings.Contains(msg, "kv") {
		t.Errorf("error sample %q; want the server's message about table kv", msg)
	}
}

func (it *loadgenIT) testOps(t *testing.T) {
	stdout := it.loadgenOK(t, it.withSchema("run", "--hosts", it.addr, "--workload", "write", "--keys", "sequential",
		"--ops", "777", "--warmup", "0s", "--workers", "8", "--json", "--quiet")...)
	rep := decodeRun(t, stdout)
	if n := rep.Target.Ops + rep.Target.ErrorsTotal; n != 777 {
		t.Errorf("%d requests measured (%d ok, %v); want exactly 777", n, rep.Target.Ops, rep.Target.Errors)
	}
	if rep.Settings.LoadModel != "closed" || rep.Settings.Ops != 777 || rep.Target.Service != nil || rep.Target.Schedule != nil {
		t.Errorf("settings %+v, service %v, schedule %v; want a closed loop of 777 ops without open-loop figures",
			rep.Settings, rep.Target.Service, rep.Target.Schedule)
	}
}

func (it *loadgenIT) testOpenLoop(t *testing.T) {
	dir := t.TempDir()
	hlog, png := dir+"/run.hlog", dir+"/run.png"
	stdout := it.loadgenOK(t, it.withSchema("run", "--hosts", it.addr, "--rate", "400", "--max-in-flight", "16",
		"--keys", "zipf", "--duration", "1500ms", "--warmup", "300ms", "--interval", "250ms",
		"--hdr-log", hlog, "--plot", png, "--json")...)
	rep := decodeRun(t, stdout)
	tg := rep.Target
	if rep.Settings.LoadModel != "open" || rep.Settings.Rate != 400 || tg.Service == nil || tg.Schedule == nil {
		t.Fatalf("settings %+v, service %v, schedule %v; want the open loop's figures", rep.Settings, tg.Service, tg.Schedule)
	}
	// 400/s for 1.5 s is 600 requests; a busy machine may fall behind,
	// but the schedule must account for what was not sent.
	if sent := tg.Ops + tg.ErrorsTotal + tg.Schedule.Unsent; sent < 400 || sent > 700 {
		t.Errorf("%d ok + %d errors + %d unsent; want about 600", tg.Ops, tg.ErrorsTotal, tg.Schedule.Unsent)
	}
	// Latency from the intended start can only be longer than the
	// service time of the same requests.
	if tg.Latency.Max < tg.Service.Max || tg.Latency.P50 < tg.Service.P50 {
		t.Errorf("latency %+v below service time %+v", tg.Latency, *tg.Service)
	}
	if len(rep.Timeline) < 3 {
		t.Errorf("%d timeline points; want one per 250 ms", len(rep.Timeline))
	}
	h, err := hdrhistogram.Decode([]byte(tg.Histograms.Latency))
	if err != nil || h.TotalCount() != tg.Ops {
		t.Errorf("encoded latency histogram: %v, %d values; want %d", err, h.TotalCount(), tg.Ops)
	}
	if _, err := hdrhistogram.Decode([]byte(tg.Histograms.Service)); err != nil {
		t.Errorf("encoded service histogram: %v", err)
	}
	if n := hdrLogIntervals(t, hlog); n < 3 {
		t.Errorf("hdr log has %d interval histograms; want one per 250 ms", n)
	}
	b, err := os.ReadFile(png)
	if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Errorf("plot: %v, %d bytes; want a PNG", err, len(b))
	}
}

// hdrLogIntervals counts the interval histograms of the HDR log at path.
func hdrLogIntervals(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lr := hdrhistogram.NewHistogramLogReader(f)
	var intervals int
	for {
		ih, err := lr.NextIntervalHistogram()
		if err != nil {
			t.Fatalf("hdr log: %v", err)
		}
		if ih == nil {
			return intervals
		}
		intervals++
	}
}

func (it *loadgenIT) testCompareThroughProxy(t *testing.T) {
	p := proxytest.Start(t, []string{it.addr}, nil)
	metrics := serveMetrics(t, p)
	stdout := it.loadgenOK(t, it.withLoad("compare", "--target", "direct="+it.addr, "--target", "proxy="+p.Addr,
		"--rounds", "2", "--proxy-metrics", metrics, "--json", "--quiet")...)
	rep := decodeJSON[compareReport](t, "compare --json", stdout)
	px := rep.Targets[1]
	if px.Proxy == nil || px.ProxyCPUPerReq == nil {
		t.Fatalf("proxy target: probe %v, cpu %v; want both", px.Proxy, px.ProxyCPUPerReq)
	}
	if rep.Targets[0].Proxy != nil {
		t.Errorf("direct target has proxy figures %+v", rep.Targets[0].Proxy)
	}
	if got := px.Proxy.Counters["cqlgate_limiter_admitted_total"]; got < float64(px.Ops) {
		t.Errorf("cqlgate_limiter_admitted_total rose by %v over the proxy's rounds; want >= %d ops", got, px.Ops)
	}
	if _, ok := px.Proxy.Gauges["cqlgate_limiter_queue_depth"]; !ok {
		t.Errorf("no cqlgate_limiter_queue_depth gauge in %v", px.Proxy.Gauges)
	}
}

func (it *loadgenIT) testOverloaded(t *testing.T) {
	p := proxytest.Start(t, []string{it.addr}, func(c *config.Config) {
		c.LimitMode, c.NodeLimit = "fixed", 1
		c.QueueLength = 0
	})
	stdout := it.loadgenOK(t, it.withSchema("run", "--hosts", p.Addr, "--workers", "16", "--duration", "1s",
		"--warmup", "200ms", "--json", "--quiet")...)
	tg := decodeRun(t, stdout).Target
	if tg.Errors[errclass.Overloaded] == 0 {
		t.Fatalf("errors %v (%v); want OVERLOADED from a proxy admitting one request at a time", tg.Errors, tg.ErrorSamples)
	}
	if other := tg.ErrorsTotal - tg.Errors[errclass.Overloaded] - tg.Errors[errclass.Timeout]; other > 0 {
		t.Errorf("errors %v (%v); want only overloaded (and timeouts on a busy machine)", tg.Errors, tg.ErrorSamples)
	}
	ol, ok := tg.ErrorLatency["overloaded"]
	if !ok || ol.Count != tg.Errors[errclass.Overloaded] {
		t.Errorf("error_latency_us[overloaded] = %+v; want %d values", ol, tg.Errors[errclass.Overloaded])
	}
	if _, ok := tg.Histograms.Errors["overloaded"]; !ok {
		t.Errorf("no encoded histogram of the overloaded answers")
	}
	if !strings.Contains(tg.ErrorSamples["overloaded"], "cqlgate") {
		t.Errorf("overloaded sample %q; want the proxy's message", tg.ErrorSamples["overloaded"])
	}
}

func (it *loadgenIT) testTimeouts(t *testing.T) {
	// A proxy admitting one request at a time, with a queue that keeps
	// requests for 30 s: 400 workers make every query slow, far slower
	// than a 100 ms gocql timeout. (A tiny timeout straight against
	// Cassandra fails the session setup instead.)
	p := proxytest.Start(t, []string{it.addr}, func(c *config.Config) {
		c.LimitMode, c.NodeLimit = "fixed", 1
		c.QueueMaxWait = 30 * time.Second
		c.QueueTarget = 30 * time.Second
	})
	// The proxy opens its pool for a keyspace at the first USE: new
	// connections to Cassandra, each with its own USE. On a machine busy
	// starting other nodes that took longer than the 100 ms timeout, and
	// the session's setup failed instead of its queries. A session with
	// time to spare opens it first.
	testSession(t, p.Addr, it.ks).Close()
	stdout := it.loadgenOK(t, it.withSchema("run", "--hosts", p.Addr, "--workers", "400", "--duration", "1s",
		"--warmup", "0s", "--timeout", "100ms", "--json", "--quiet")...)
	tg := decodeRun(t, stdout).Target
	if tg.Errors[errclass.Timeout] == 0 || tg.Errors[errclass.Timeout] != tg.ErrorsTotal {
		t.Errorf("errors %v (%v); want timeouts only", tg.Errors, tg.ErrorSamples)
	}
	if tl, ok := tg.ErrorLatency["timeout"]; !ok || tl.P50 < 90_000 {
		t.Errorf("error_latency_us[timeout] = %+v; want about the 100 ms timeout", tl)
	}
}

func (it *loadgenIT) testWorkers(t *testing.T) {
	stdout := it.loadgenOK(t, "workers", "--hosts", it.addr, "--keyspace", it.ks, "--rows", "500",
		"--workers", "300", "--queries", "3", "--json", "--quiet")
	rep := decodeJSON[workersReport](t, "workers --json", stdout)
	doc := decodeDoc(t, stdout)
	wantKeys(t, "workers", doc, "command", "settings", "wall_s", "target", "timeline", "proxy", "loadgen")
	wantKeys(t, "workers settings", doc["settings"], "workers", "queries", "rows", "keyspace", "proto",
		"timeout_s", "consistency", "num_conns", "num_cpu")
	wantKeys(t, "workers target", doc["target"], figureKeys...)
	if rep.Command != cmdWorkers || rep.WallS <= 0 || rep.Target.Ops+rep.Target.ErrorsTotal != 900 {
		t.Errorf("command %q, wall %vs, %d ok + %d errors; want workers, > 0, 900 requests",
			rep.Command, rep.WallS, rep.Target.Ops, rep.Target.ErrorsTotal)
	}
	if rep.Settings.TimeoutS != 0 || rep.Settings.Consistency != "" || rep.Loadgen.MaxRSSBytes <= 0 {
		t.Errorf("settings %+v, loadgen %+v; want gocql's defaults and a peak RSS", rep.Settings, rep.Loadgen)
	}
}

func (it *loadgenIT) testRateLimited(t *testing.T) {
	stdout := it.loadgenOK(t, "ratelimited", "--hosts", it.addr, "--keyspace", it.ks,
		"--parallelism", "4", "--rate", "300", "--runs", "2", "--keys", "random", "--json", "--quiet")
	rep := decodeJSON[rateLimitedReport](t, "ratelimited --json", stdout)
	doc := decodeDoc(t, stdout)
	wantKeys(t, "ratelimited", doc, "command", "settings", "runs", "total", "proxy", "dropped")
	wantKeys(t, "ratelimited settings", doc["settings"], "parallelism", "rate", "runs", "run_s", "keys", "rows",
		"value_size", "keyspace", "consistency", "num_cpu")
	for _, r := range doc["runs"].([]any) {
		wantKeys(t, "ratelimited run", r, "run", "ops", "errors_total", "errors", "throughput_ops_s",
			"latency_us", "service_time_us", "schedule", "histograms")
	}
	if len(rep.Runs) != 2 || !rep.Dropped {
		t.Fatalf("%d runs, dropped %v; want 2, true", len(rep.Runs), rep.Dropped)
	}
	for _, r := range rep.Runs {
		if r.Schedule == nil || r.Service == nil || r.Ops+r.ErrorsTotal+r.Schedule.Unsent < 200 {
			t.Errorf("run %d: %d ok, %d errors, schedule %+v; want about 300 requests with open-loop figures",
				r.Run, r.Ops, r.ErrorsTotal, r.Schedule)
		}
	}
	s := testSession(t, it.addr)
	defer s.Close()
	var n int
	if err := s.Query("SELECT count(*) FROM system_schema.tables WHERE keyspace_name = ? AND table_name = 'rl'", it.ks).Scan(&n); err != nil || n != 0 {
		t.Errorf("table rl: %d left (%v); want dropped", n, err)
	}
}

func (it *loadgenIT) testMultiget(t *testing.T) {
	stdout := it.loadgenOK(t, "multiget", "--hosts", it.addr, "--keyspace", it.ks, "--rf", "1",
		"--setup", "--partitions", "8", "--rows-per-partition", "5", "--total-partitions", "20",
		"--batches", "4", "--in-limit", "30", "--json", "--quiet")
	rep := decodeJSON[multigetReport](t, "multiget --json", stdout)
	doc := decodeDoc(t, stdout)
	wantKeys(t, "multiget", doc, "command", "settings", "methods", "fastest", "error_samples")
	for _, m := range doc["methods"].([]any) {
		wantKeys(t, "multiget method", m, "name", "batches", "errors_total", "errors", "rows_per_batch",
			"batch_latency_us", "ratio_to_fastest", "histogram")
	}
	want := map[string]float64{"sequential": 40, "async": 40, "in": 40, "in_limit": 30}
	if len(rep.Methods) != 4 || rep.Fastest == "" {
		t.Fatalf("%d methods, fastest %q; want 4 and a winner", len(rep.Methods), rep.Fastest)
	}
	for _, m := range rep.Methods {
		if m.Batches+m.ErrorsTotal != 4 || (m.Batches > 0 && m.RowsPerBatch != want[m.Name]) {
			t.Errorf("%s: %d batches, %d errors, %v rows per batch; want 4 batches of %v rows",
				m.Name, m.Batches, m.ErrorsTotal, m.RowsPerBatch, want[m.Name])
		}
	}
}

func (it *loadgenIT) testUnreachable(t *testing.T) {
	host, _, _ := strings.Cut(it.addr, ":")
	code, _, stderr := runLoadgen(t, it.ctx, "run", "--hosts", host+":1", "--duration", "1s")
	if code != exitFailure || !strings.Contains(stderr, "connect to") {
		t.Errorf("exit %d, stderr %q; want %d and a connect error", code, stderr, exitFailure)
	}
}

// requires skips a subtest whose prerequisite, an earlier subtest of the
// same parent, failed: that failure is reported already, and what would
// follow from it would only add confusing ones.
func requires(t *testing.T, ok bool, prereq string) {
	t.Helper()
	if !ok {
		t.Skipf("skipped: needs %s, which failed", prereq)
	}
}

// testSession connects to addr, in keyspace if one is given.
func testSession(t *testing.T, addr string, keyspace ...string) *gocql.Session {
	t.Helper()
	c := gocql.NewCluster(addr)
	c.Timeout = 10 * time.Second
	if len(keyspace) > 0 {
		c.Keyspace = keyspace[0]
	}
	s, err := c.CreateSession()
	if err != nil {
		t.Fatalf("connect to %s: %v", addr, err)
	}
	return s
}

func countRows(t *testing.T, addr, ks string) int64 {
	t.Helper()
	s := testSession(t, addr)
	defer s.Close()
	var n int64
	if err := s.Query("SELECT count(*) FROM " + ks + ".kv").Scan(&n); err != nil {
		t.Fatalf("count rows: %v", err)
	}
	return n
}

func dropKeyspace(t *testing.T, addr, ks string) {
	s := testSession(t, addr)
	defer s.Close()
	if err := s.Query("DROP KEYSPACE IF EXISTS " + ks).Exec(); err != nil {
		t.Errorf("drop keyspace %s: %v", ks, err)
	}
}

func decodeRun(t *testing.T, stdout string) runReport {
	t.Helper()
	return decodeJSON[runReport](t, "run --json", stdout)
}

// decodeJSON decodes the --json output of a subcommand (what names it in
// failures) into a T.
func decodeJSON[T any](t *testing.T, what, stdout string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(stdout), &v); err != nil {
		t.Fatalf("%s output: %v\n%s", what, err, stdout)
	}
	return v
}

// serveMetrics serves the in-process proxy's registry as its admin server
// would, with the process collector's process_cpu_seconds_total (of this
// test process) added, and returns the URL.
func serveMetrics(t *testing.T, p *proxytest.Proxy) string {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	srv := httptest.NewServer(promhttp.HandlerFor(prometheus.Gatherers{p.Reg, reg}, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	return srv.URL + "/metrics"
}

func decodeDoc(t *testing.T, stdout string) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, stdout)
	}
	return doc
}
