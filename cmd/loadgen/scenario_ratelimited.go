package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"text/tabwriter"
	"time"

	"github.com/cqlgate/cqlgate/internal/loadgen/driver"
	"github.com/cqlgate/cqlgate/internal/loadgen/errclass"
	"github.com/cqlgate/cqlgate/internal/loadgen/stepstats"
)

// The ratelimited scenario reproduces the published cql_stress tool: a
// writer with a bounded parallelism and a rate limit, run as a series of
// one-second runs, with serial or random keys, that keeps or drops what it
// wrote. Each run is an open-loop window: requests are scheduled at --rate
// and at most --parallelism are outstanding, so a run in which the target
// cannot keep up shows late and unsent requests instead of quietly sending
// fewer.

// rlTableDDL is the scenario's table; %s is the keyspace.
const rlTableDDL = `CREATE TABLE IF NOT EXISTS %s.rl (k bigint PRIMARY KEY, v blob)`

const insertRL = `INSERT INTO rl (k, v) VALUES (?, ?)`

// rateLimitedReport is the JSON of the ratelimited scenario.
type rateLimitedReport struct {
	Command  string              `json:"command"` // "ratelimited"
	Settings rateLimitedSettings `json:"settings"`
	Runs     []rateLimitedRun    `json:"runs"`
	Total    targetReport        `json:"total"` // every run merged
	Proxy    *runProxy           `json:"proxy"`
	Dropped  bool                `json:"dropped"` // the table was dropped at the end
}

type rateLimitedSettings struct {
	Parallelism int     `json:"parallelism"`
	Rate        float64 `json:"rate"`
	Runs        int     `json:"runs"`
	RunS        float64 `json:"run_s"`
	Keys        string  `json:"keys"` // serial or random
	Rows        int64   `json:"rows"` // keys are drawn from [0, rows)
	ValueSize   int     `json:"value_size"`
	Keyspace    string  `json:"keyspace"`
	Consistency string  `json:"consistency"`
	NumCPU      int     `json:"num_cpu"`
}

// rateLimitedRun is one one-second run.
type rateLimitedRun struct {
	Run         int                `json:"run"` // 1-based
	Ops         int64              `json:"ops"`
	ErrorsTotal int64              `json:"errors_total"`
	Errors      errclass.Counts    `json:"errors"`
	Throughput  float64            `json:"throughput_ops_s"`
	Latency     stepstats.Latency  `json:"latency_us"`      // from intended start
	Service     *stepstats.Latency `json:"service_time_us"` // from send
	Schedule    *scheduleFigures   `json:"schedule"`
	Histograms  encodedHistograms  `json:"histograms"`
}

// runDuration is the length of one run of the ratelimited scenario, as in
// the published tool.
const runDuration = time.Second

func runRateLimited(ctx context.Context, cfg *Config, stdout, stderr io.Writer) (errorsSeen bool, err error) {
	schema, err := schemaSession(cfg, stderr)
	if err != nil {
		return false, err
	}
	defer schema.Close()
	if err := createSchema(ctx, schema, cfg, rlTableDDL); err != nil {
		return false, err
	}

	ep := Endpoint{Name: "ratelimited", Hosts: cfg.Hosts}
	s, err := ep.Session(sessionOptionsFrom(cfg, cfg.Keyspace, stderr))
	if err != nil {
		return false, err
	}
	defer s.Close()

	dist := keysSequential
	if cfg.KeyOrder == "random" {
		dist = keysUniform
	}
	keys, err := newKeySource(dist, cfg.Rows, 0)
	if err != nil {
		return false, err
	}
	workload := kvWorkload{name: workloadWrite, keys: keys, valueSize: cfg.ValueSize, insert: insertRL}
	d := &driver.Driver{Session: s, Workload: workload, Workers: cfg.Parallelism, Rate: cfg.Rate, Interval: cfg.Interval}
	if !cfg.Quiet {
		d.Progress = stderr
	}

	probe := newProxyProbe(cfg.ProxyMetrics, cfg.ProxyPID)
	var watch *proxyWatch
	if probe != nil {
		if watch, err = probe.start(ctx, cfg.Interval); err != nil {
			return false, fmt.Errorf("proxy probe: %w", err)
		}
	}

	rep := rateLimitedReport{
		Command: cmdRateLimited,
		Settings: rateLimitedSettings{
			Parallelism: cfg.Parallelism, Rate: cfg.Rate, Runs: cfg.Runs, RunS: runDuration.Seconds(),
			Keys: cfg.KeyOrder, Rows: cfg.Rows, ValueSize: cfg.ValueSize, Keyspace: cfg.Keyspace,
			Consistency: cfg.Consistency, NumCPU: runtime.NumCPU(),
		},
	}
	var all []driver.Measurement
	for r := range cfg.Runs {
		d.Label = fmt.Sprintf("run %d", r+1)
		m, err := d.Measure(ctx, 0, runDuration, 0)
		if err != nil {
			return false, fmt.Errorf("run %d: %w", r+1, err)
		}
		all = append(all, m)
		f := figuresOf(m)
		rep.Runs = append(rep.Runs, rateLimitedRun{
			Run: r + 1, Ops: f.Ops, ErrorsTotal: f.ErrorsTotal, Errors: f.Errors, Throughput: f.Throughput,
			Latency: f.Latency, Service: f.Service, Schedule: f.Schedule, Histograms: f.Histograms,
		})
		if !cfg.Quiet {
			fmt.Fprintf(stderr, "loadgen: run %d: %.0f ops/s, p99 %s, errors %d\n", r+1, f.Throughput, stepstats.Micros(f.Latency.P99), f.ErrorsTotal)
		}
	}
	rep.Total = targetReport{Name: ep.Name, Hosts: ep.Hosts, figures: figuresOf(all...)}
	if watch != nil {
		pf, err := watch.end(ctx)
		if err != nil {
			return false, fmt.Errorf("proxy probe: %w", err)
		}
		rep.Proxy = &runProxy{proxyFigures: pf}
	}
	if !cfg.Keep {
		stmt := fmt.Sprintf("DROP TABLE IF EXISTS %s.rl", cfg.Keyspace)
		if err := execIdempotent(ctx, schema, stmt); err != nil {
			return false, fmt.Errorf("%s: %w", stmt, err)
		}
		rep.Dropped = true
	}
	warnHonesty(stderr, settings{Rate: cfg.Rate, MaxInFlight: cfg.Parallelism,
		BottleneckCPUs: bottleneckShare * float64(runtime.NumCPU())}, rep.Total.figures)
	if cfg.JSON {
		err = writeJSON(stdout, rep)
	} else {
		err = writeRateLimitedTable(stdout, rep)
	}
	return rep.Total.ErrorsTotal > 0, err
}

func writeRateLimitedTable(w io.Writer, rep rateLimitedReport) error {
	s := rep.Settings
	fmt.Fprintf(w, "%d writers, %.0f requests/s, %d runs of %gs, %s keys, %d-byte values, table %s.rl %s\n\n",
		s.Parallelism, s.Rate, s.Runs, s.RunS, s.Keys, s.ValueSize, s.Keyspace,
		map[bool]string{true: "dropped at the end", false: "kept"}[rep.Dropped])
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\tops/s\terrors\tp50\tp99\tmax\tservice p99\tlate\tunsent\t")
	row := func(name string, ops float64, errs int64, l stepstats.Latency, svc *stepstats.Latency, sc *scheduleFigures) {
		sp99, late, unsent := "-", "-", "-"
		if svc != nil {
			sp99 = stepstats.Micros(svc.P99)
		}
		if sc != nil {
			late, unsent = fmt.Sprint(sc.Late), fmt.Sprint(sc.Unsent)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n", name, ops, errs,
			stepstats.Micros(l.P50), stepstats.Micros(l.P99), stepstats.Micros(l.Max), sp99, late, unsent)
	}
	for _, r := range rep.Runs {
		row(fmt.Sprint(r.Run), r.Throughput, r.ErrorsTotal, r.Latency, r.Service, r.Schedule)
	}
	t := rep.Total
	row("all", t.Throughput, t.ErrorsTotal, t.Latency, t.Service, t.Schedule)
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	fmt.Fprintf(w, "\nlatency from each request's intended start; loadgen %.1f µs CPU/op\n", t.LoadgenCPUPerOp)
	if t.ErrorsTotal > 0 {
		fmt.Fprintf(w, "errors: %s\n", t.Errors.String())
		for kind, msg := range t.ErrorSamples {
			fmt.Fprintf(w, "  %s e.g. %q\n", kind, msg)
		}
	}
	if p := rep.Proxy; p != nil {
		fmt.Fprintln(w, "\nproxy:")
		ptw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		writeProxyFigures(ptw, &p.proxyFigures)
		if err := ptw.Flush(); err != nil {
			return fmt.Errorf("write table: %w", err)
		}
	}
	return nil
}
