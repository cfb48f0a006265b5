package main

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/cqlgate/cqlgate/internal/loadgen/driver"
	"github.com/cqlgate/cqlgate/internal/loadgen/recorder"
)

// syntheticMeasurement fakes one 1 s window: ops successes taking
// baseMicros + (i mod 100) µs, errs no-streams failures, and cpu of
// loadgen CPU time.
func syntheticMeasurement(ops int, baseMicros int64, errs int64, cpu time.Duration) driver.Measurement {
	r := recorder.New(1, false, 0)
	r.SetPhase(recorder.Measure)
	for i := range ops {
		took := time.Duration(baseMicros+int64(i%100)) * time.Microsecond
		r.Record(0, recorder.Outcome{Latency: took, Service: took})
	}
	for range errs {
		r.Record(0, recorder.Outcome{Err: gocql.ErrNoStreams})
	}
	r.SetPhase(recorder.Done)
	return driver.Measurement{Recorded: r.Snapshot(), Elapsed: time.Second, CPU: cpu}
}

func testConfig() *Config {
	cfg := defaultConfig()
	cfg.Targets = []Endpoint{
		{Name: "direct", Hosts: []string{"127.0.10.1:9042"}},
		{Name: "proxy", Hosts: []string{"127.0.0.1:9043"}},
	}
	cfg.Rounds = 2
	cfg.Duration = time.Second
	return cfg
}

func syntheticCompare(t *testing.T) compareReport {
	t.Helper()
	cfg := testConfig()
	w, err := newWorkload(cfg)
	if err != nil {
		t.Fatal(err)
	}
	order := roundOrder(2, 2)
	results := [][]roundResult{
		{
			{Measurement: syntheticMeasurement(1000, 500, 0, 20*time.Millisecond), round: 1, position: 1, proxyCPU: -1},
			{Measurement: syntheticMeasurement(1010, 500, 0, 20*time.Millisecond), round: 2, position: 2, proxyCPU: -1},
		},
		{
			{Measurement: syntheticMeasurement(900, 600, 0, 20*time.Millisecond), round: 1, position: 2, proxyCPU: 30 * time.Millisecond},
			{Measurement: syntheticMeasurement(890, 600, 10, 20*time.Millisecond), round: 2, position: 1, proxyCPU: 30 * time.Millisecond},
		},
	}
	return buildCompareReport(cfg, w, order, results)
}

func keysOf(t *testing.T, v any) []string {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%v is a %T, not an object", v, v)
	}
	return slices.Sorted(maps.Keys(m))
}

func wantKeys(t *testing.T, what string, v any, want ...string) {
	t.Helper()
	slices.Sort(want)
	if got := keysOf(t, v); !slices.Equal(got, want) {
		t.Errorf("%s keys:\n got %v\nwant %v", what, got, want)
	}
}

var figureKeys = []string{
	"name", "hosts", "ops", "errors_total", "errors", "error_samples", "elapsed_s",
	"throughput_ops_s", "latency_us", "service_time_us", "error_latency_us", "schedule",
	"loadgen_cpu_us_per_op", "loadgen_cpu_user_us_per_op", "loadgen_cpu_sys_us_per_op",
	"loadgen_cpu_cores", "loadgen_maybe_bottleneck", "histograms",
}

var settingsKeys = []string{"workload", "read_ratio", "keys", "zipf_s", "load_model", "workers", "rate",
	"max_in_flight", "duration_s", "ops", "warmup_s", "rounds", "keyspace", "rows", "value_size", "proto",
	"timeout_s", "consistency", "num_conns", "num_cpu", "bottleneck_cores"}

var latencyKeys = []string{"count", "p50", "p90", "p99", "p99_9", "max", "mean"}

// The JSON field names are a contract with scripts and CI: this test pins
// them, so a rename has to be deliberate.
func TestCompareJSONShape(t *testing.T) {
	var buf bytes.Buffer
	if err := writeJSON(&buf, syntheticCompare(t)); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, buf.String())
	}
	wantKeys(t, "top level", doc, "command", "settings", "order", "targets", "loadgen_maybe_bottleneck")
	if doc["command"] != "compare" {
		t.Errorf("command = %v", doc["command"])
	}
	wantKeys(t, "settings", doc["settings"], settingsKeys...)

	targets := doc["targets"].([]any)
	if len(targets) != 2 {
		t.Fatalf("%d targets; want 2", len(targets))
	}
	compareKeys := append(slices.Clone(figureKeys), "round_throughput_ops_s", "rounds", "throughput_ratio",
		"added_latency_us", "significance", "proxy_cpu_us_per_req", "proxy_cpu_source", "machine_cpu_us_per_req",
		"proxy_calls_per_req", "proxy")
	for _, tv := range targets {
		tm := tv.(map[string]any)
		wantKeys(t, "target", tm, compareKeys...)
		wantKeys(t, "latency_us", tm["latency_us"], latencyKeys...)
		wantKeys(t, "histograms", tm["histograms"], "latency", "errors")
		wantKeys(t, "errors", tm["errors"], "timeout", "overloaded", "unavailable", "no_streams", "no_hosts", "connection", "other")
		wantKeys(t, "added_latency_us", tm["added_latency_us"], "p50", "p99", "p99_9")
		wantKeys(t, "round_throughput_ops_s", tm["round_throughput_ops_s"], "n", "mean", "stddev", "min", "max")
		for _, r := range tm["rounds"].([]any) {
			wantKeys(t, "round", r, "round", "position", "ops", "errors_total", "throughput_ops_s",
				"p50_us", "p99_us", "loadgen_cpu_us_per_op", "proxy_cpu_us_per_req")
		}
	}

	direct, proxy := targets[0].(map[string]any), targets[1].(map[string]any)
	if direct["significance"] != nil || direct["proxy_cpu_us_per_req"] != nil {
		t.Errorf("baseline: significance %v, proxy cpu %v; want null, null", direct["significance"], direct["proxy_cpu_us_per_req"])
	}
	wantKeys(t, "significance", proxy["significance"], "test", "t", "df", "p", "mann_whitney_p", "significant", "alpha")
	// 60 ms of proxy CPU over 900+890+10 requests.
	if got := proxy["proxy_cpu_us_per_req"].(float64); !near(got, 60000.0/1800, 1e-9) {
		t.Errorf("proxy_cpu_us_per_req = %v; want %v", got, 60000.0/1800)
	}
	if got := proxy["errors"].(map[string]any)["no_streams"].(float64); got != 10 {
		t.Errorf("proxy no_streams errors = %v; want 10", got)
	}
	if got := proxy["added_latency_us"].(map[string]any)["p50"].(float64); got != 100 {
		t.Errorf("added p50 = %v; want 100", got)
	}
	order := doc["order"].([]any)
	if got := order[1].([]any)[0]; got != "proxy" {
		t.Errorf("round 2 starts with %v; want proxy (ABBA)", got)
	}
}

func TestRunJSONShape(t *testing.T) {
	cfg := testConfig()
	w, _ := newWorkload(cfg)
	rep := runReport{
		Command:  cmdRun,
		Settings: settingsOf(cfg, w, 1),
		Target:   targetReport{Name: "run", Hosts: []string{"h"}, figures: figuresOf(syntheticMeasurement(100, 10, 1, 5*time.Millisecond))},
	}
	var buf bytes.Buffer
	if err := writeJSON(&buf, rep); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	wantKeys(t, "top level", doc, "command", "settings", "target", "timeline", "proxy", "loadgen_maybe_bottleneck")
	wantKeys(t, "target", doc["target"], figureKeys...)
	tg := doc["target"].(map[string]any)
	// 5 ms over 101 completed requests, the failed one included.
	if got := tg["loadgen_cpu_us_per_op"].(float64); !near(got, 5000.0/101, 1e-9) {
		t.Errorf("loadgen_cpu_us_per_op = %v; want %v", got, 5000.0/101)
	}
	if _, ok := tg["error_samples"].(map[string]any)["no_streams"]; !ok {
		t.Errorf("error_samples = %v; want a no_streams sample", tg["error_samples"])
	}
}

func TestTablesRender(t *testing.T) {
	var buf bytes.Buffer
	if err := writeCompareTable(&buf, syntheticCompare(t)); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"direct", "proxy", "proxy vs direct: throughput", "Welch", "no_streams=10", "33.3"} {
		if !strings.Contains(out, want) {
			t.Errorf("compare table lacks %q:\n%s", want, out)
		}
	}
}
