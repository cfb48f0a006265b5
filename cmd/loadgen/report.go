package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"runtime"

	"github.com/cqlgate/cqlgate/internal/loadgen/driver"
	"github.com/cqlgate/cqlgate/internal/loadgen/roundstats"
)

// JSON output (--json): one object on stdout. Field names are stable;
// new fields may be added, existing ones keep their name and meaning.
// Latencies are in microseconds, throughputs in successful requests per
// second, CPU figures in microseconds per completed request.
//
//	command                   "run" or "compare" (scenarios: see scenario reports)
//	settings                  the flags that shape the load (settings below)
//	target                    run only: one target object
//	timeline                  run only: one point per --interval: t_s, phase,
//	                          ops_s, p50_us, p99_us, max_us, errors, late
//	proxy                     run only: null unless --proxy-metrics or
//	                          --proxy-pid (proxy object below)
//	order                     compare only: per round, target names in run order
//	targets                   compare only: target objects in --target order
//	loadgen_maybe_bottleneck  any window where loadgen used more than
//	                          bottleneckShare of the machine's CPUs
//
// A target object holds:
//
//	name, hosts
//	ops, errors_total         successful and failed requests
//	errors                    failed requests by kind: timeout, overloaded,
//	                          unavailable, no_streams, no_hosts, connection, other
//	error_samples             one message per kind that occurred
//	elapsed_s                 measured wall time (all rounds)
//	throughput_ops_s          ops / elapsed_s
//	latency_us                count, p50, p90, p99, p99_9, max, mean of
//	                          successful requests (all rounds merged); in the
//	                          open loop from each request's intended start
//	service_time_us           open loop: the same from the actual send; else null
//	error_latency_us          per error kind that occurred: its service time
//	schedule                  open loop: late_requests (sent > 1 ms behind
//	                          schedule), late_share, max_lag_us, unsent (due
//	                          but never sent), behind; else null
//	loadgen_cpu_us_per_op     loadgen's user+sys CPU per completed request
//	loadgen_cpu_user_us_per_op, loadgen_cpu_sys_us_per_op  its two parts
//	loadgen_cpu_cores         loadgen's CPU time / wall time
//	loadgen_maybe_bottleneck  loadgen_cpu_cores above the threshold
//	histograms                latency, service_time (open loop) and errors
//	                          (by kind): HdrHistogram V2 compressed, base64, µs
//
// and, for compare only:
//
//	round_throughput_ops_s    n, mean, stddev, min, max over the rounds
//	rounds                    per round: round, position, ops, errors_total,
//	                          throughput_ops_s, p50_us, p99_us,
//	                          loadgen_cpu_us_per_op, proxy_cpu_us_per_req
//	throughput_ratio          round mean / the first target's round mean
//	added_latency_us          p50, p99, p99_9 minus the first target's
//	significance              null for the first target; else test ("welch"),
//	                          t, df, p, mann_whitney_p (null when undefined),
//	                          significant (p < alpha), alpha
//	proxy_cpu_us_per_req      null unless this is the proxy target and
//	                          --proxy-metrics or --proxy-pid was given:
//	                          proxy CPU during its rounds / requests completed
//	proxy_cpu_source          where proxy CPU was read, or ""
//	proxy                     null unless this is the proxy target and a
//	                          probe was given (proxy object below)
//
// A proxy object holds rss_before_bytes, rss_peak_bytes (sampled every
// --interval), rss_after_bytes, counters (increase of every
// cqlgate_limiter_*, cqlgate_speculative_*, cqlgate_overloaded_rejections_total,
// cqlgate_request_timeouts_total and cqlgate_proxy_errors_total series; a
// histogram as NAME_count and NAME_sum), gauges (peak and after of the
// gauges among them, e.g. cqlgate_limiter_queue_depth), sample_errors, and
// in run also cpu_us_per_req. In run the probe spans warm-up and window
// (the CPU per request covers the window only); in compare, the proxy
// target's measured rounds.

// settings echoes the load's shape into reports.
type settings struct {
	Workload       string  `json:"workload"`
	ReadRatio      float64 `json:"read_ratio"`
	Keys           string  `json:"keys"`
	ZipfS          float64 `json:"zipf_s"`
	LoadModel      string  `json:"load_model"` // "closed" or "open"
	Workers        int     `json:"workers"`
	Rate           float64 `json:"rate"`          // open loop: requests per second
	MaxInFlight    int     `json:"max_in_flight"` // open loop
	DurationS      float64 `json:"duration_s"`
	Ops            int64   `json:"ops"` // closed loop: requests per window, 0 = by duration
	WarmupS        float64 `json:"warmup_s"`
	Rounds         int     `json:"rounds"`
	Keyspace       string  `json:"keyspace"`
	Rows           int64   `json:"rows"`
	ValueSize      int     `json:"value_size"`
	Proto          int     `json:"proto"`
	TimeoutS       float64 `json:"timeout_s"`   // 0 = gocql's default
	Consistency    string  `json:"consistency"` // "" = gocql's default
	NumConns       int     `json:"num_conns"`   // 0 = gocql's default
	NumCPU         int     `json:"num_cpu"`
	BottleneckCPUs float64 `json:"bottleneck_cores"` // loadgen_cpu_cores above this warns
}

func settingsOf(cfg *Config, workload driver.Workload, rounds int) settings {
	readRatio := cfg.ReadRatio
	if kv, ok := workload.(kvWorkload); ok {
		readRatio = kv.readRatio
	}
	s := settings{
		Workload:       workload.Name(),
		ReadRatio:      readRatio,
		Keys:           cfg.KeyDist,
		ZipfS:          cfg.ZipfS,
		LoadModel:      "closed",
		Workers:        cfg.Workers,
		DurationS:      cfg.Duration.Seconds(),
		Ops:            cfg.Ops,
		WarmupS:        cfg.Warmup.Seconds(),
		Rounds:         rounds,
		Keyspace:       cfg.Keyspace,
		Rows:           cfg.Rows,
		ValueSize:      cfg.ValueSize,
		Proto:          cfg.Proto,
		TimeoutS:       cfg.Timeout.Seconds(),
		Consistency:    cfg.Consistency,
		NumConns:       cfg.NumConns,
		NumCPU:         runtime.NumCPU(),
		BottleneckCPUs: bottleneckShare * float64(runtime.NumCPU()),
	}
	if cfg.Rate > 0 {
		s.LoadModel = "open"
		s.Rate = cfg.Rate
		s.MaxInFlight = cfg.MaxInFlight
		s.Workers = 0
	}
	return s
}

type runReport struct {
	Command           string                 `json:"command"`
	Settings          settings               `json:"settings"`
	Target            targetReport           `json:"target"`
	Timeline          []driver.TimelinePoint `json:"timeline"`
	Proxy             *runProxy              `json:"proxy"`
	LoadgenBottleneck bool                   `json:"loadgen_maybe_bottleneck"`
}

// runProxy is what the probe saw of the proxy during a run.
type runProxy struct {
	proxyFigures
	CPUPerReq *float64 `json:"cpu_us_per_req"`
}

type targetReport struct {
	Name  string   `json:"name"`
	Hosts []string `json:"hosts"`
	figures
}

type compareReport struct {
	Command           string          `json:"command"`
	Settings          settings        `json:"settings"`
	Order             [][]string      `json:"order"`
	Targets           []compareTarget `json:"targets"`
	LoadgenBottleneck bool            `json:"loadgen_maybe_bottleneck"`
}

type compareTarget struct {
	targetReport
	RoundThroughput roundstats.Summary `json:"round_throughput_ops_s"`
	Rounds          []roundReport      `json:"rounds"`
	ThroughputRatio float64            `json:"throughput_ratio"`
	AddedLatency    addedLatency       `json:"added_latency_us"`
	Significance    *significance      `json:"significance"`
	ProxyCPUPerReq  *float64           `json:"proxy_cpu_us_per_req"`
	ProxyCPUSource  string             `json:"proxy_cpu_source"`
	// MachineCPUPerReq is every CPU's busy time per request (/proc/stat):
	// generator, proxy, database and anything else running.
	MachineCPUPerReq *float64      `json:"machine_cpu_us_per_req"`
	ProxyCalls       *proxyCalls   `json:"proxy_calls_per_req"`
	Proxy            *proxyFigures `json:"proxy"`
}

// proxyCalls are the proxy's kernel counters per request (with
// --proxy-pid): read and write system calls (/proc/PID/io) and context
// switches (/proc/PID/task/*/status).
type proxyCalls struct {
	Reads             float64 `json:"read_syscalls"`
	Writes            float64 `json:"write_syscalls"`
	VoluntarySwitches float64 `json:"voluntary_switches"`
	Preemptions       float64 `json:"involuntary_switches"`
}

type roundReport struct {
	Round           int      `json:"round"`    // 1-based
	Position        int      `json:"position"` // 1-based place in the round's order
	Ops             int64    `json:"ops"`
	ErrorsTotal     int64    `json:"errors_total"`
	Throughput      float64  `json:"throughput_ops_s"`
	P50             int64    `json:"p50_us"`
	P99             int64    `json:"p99_us"`
	LoadgenCPUPerOp float64  `json:"loadgen_cpu_us_per_op"`
	ProxyCPUPerReq  *float64 `json:"proxy_cpu_us_per_req"`
}

type addedLatency struct {
	P50  int64 `json:"p50"`
	P99  int64 `json:"p99"`
	P999 int64 `json:"p99_9"`
}

type significance struct {
	Test         string   `json:"test"`
	T            *float64 `json:"t"`
	DF           *float64 `json:"df"`
	P            *float64 `json:"p"`
	MannWhitneyP *float64 `json:"mann_whitney_p"`
	Significant  bool     `json:"significant"`
	Alpha        float64  `json:"alpha"`
}

// finite returns a pointer to v, or nil for NaN and ±Inf, which JSON
// cannot carry.
func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	return nil
}
