package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/cqlgate/cqlgate/internal/loadgen/cputime"
	"github.com/cqlgate/cqlgate/internal/loadgen/driver"
	"github.com/cqlgate/cqlgate/internal/loadgen/roundstats"
)

// runCompare drives every target with the same workload in alternating
// rounds and reports each against the first target.
func runCompare(ctx context.Context, cfg *Config, stdout, stderr io.Writer) (errorsSeen bool, err error) {
	workload, err := newWorkload(cfg)
	if err != nil {
		return false, err
	}
	if cfg.Setup {
		// Every target reaches the same cluster: set it up through the
		// first.
		setupCfg := *cfg
		setupCfg.Hosts = cfg.Targets[0].Hosts
		if err := runSetup(ctx, &setupCfg, stderr); err != nil {
			return false, err
		}
	}
	proxyCPU := proxyCPUSource(cfg)
	probe := newProxyProbe(cfg.ProxyMetrics, cfg.ProxyPID)

	// One session per target, created once: reconnecting every round would
	// measure connection setup and cold prepared-statement caches.
	drivers := make([]*driver.Driver, len(cfg.Targets))
	for i, ep := range cfg.Targets {
		s, err := ep.Session(sessionOptionsFrom(cfg, cfg.Keyspace, stderr))
		if err != nil {
			return false, err
		}
		defer s.Close()
		drivers[i] = newDriver(cfg, s, workload, ep.Name, stderr)
	}

	if cfg.Warmup > 0 {
		for i, d := range drivers {
			d.Label = cfg.Targets[i].Name + " warmup"
			if _, err := d.Measure(ctx, cfg.Warmup, 0, 0); err != nil {
				return false, fmt.Errorf("warm up %s: %w", cfg.Targets[i].Name, err)
			}
		}
	}

	order := roundOrder(len(cfg.Targets), cfg.Rounds)
	results := make([][]roundResult, len(cfg.Targets))
	for r, targets := range order {
		for pos, i := range targets {
			ep := cfg.Targets[i]
			var (
				src cputime.Source
				pr  *proxyProbe
			)
			if ep.Name == cfg.ProxyTarget {
				src, pr = proxyCPU, probe
			}
			drivers[i].Label = fmt.Sprintf("%s r%d", ep.Name, r+1)
			res, err := measureRound(ctx, drivers[i], cfg, src, pr)
			if err != nil {
				return false, fmt.Errorf("round %d, %s: %w", r+1, ep.Name, err)
			}
			res.round, res.position = r+1, pos+1
			results[i] = append(results[i], res)
		}
	}

	rep := buildCompareReport(cfg, workload, order, results)
	if proxyCPU != nil {
		for i := range rep.Targets {
			if rep.Targets[i].Name == cfg.ProxyTarget {
				rep.Targets[i].ProxyCPUSource = proxyCPU.String()
			}
		}
	}
	for _, t := range rep.Targets {
		errorsSeen = errorsSeen || t.ErrorsTotal > 0
		warnHonesty(stderr, rep.Settings, t.figures)
	}
	if cfg.JSON {
		err = writeJSON(stdout, rep)
	} else {
		err = writeCompareTable(stdout, rep)
	}
	return errorsSeen, err
}

// proxyCPUSource reads the proxy's CPU time from /proc when its pid is
// known, else from its metrics; nil when neither is.
func proxyCPUSource(cfg *Config) cputime.Source {
	switch {
	case cfg.ProxyPID != 0:
		return cputime.ProcStat{PID: cfg.ProxyPID}
	case cfg.ProxyMetrics != "":
		return newPromCPU(cfg.ProxyMetrics)
	}
	return nil
}

// roundResult is one target's measured window in one round.
type roundResult struct {
	driver.Measurement
	round, position int
	// proxyCPU is the proxy's CPU time during the window; negative when
	// not measured.
	proxyCPU time.Duration
	// proxy is what the probe saw during the round; nil without a probe.
	proxy *proxyFigures
	// machineCPU is every CPU's busy time during the window (/proc/stat);
	// negative when not measured.
	machineCPU time.Duration
	// counters are the proxy's system calls and context switches during
	// the window; nil unless its pid is known.
	counters *cputime.Counters
}

// measureRound measures one window; when src is set, it reads the proxy's
// CPU time right before the workers start and right after they stop, and
// when probe is set it watches the proxy's metrics and memory meanwhile.
func measureRound(ctx context.Context, d *driver.Driver, cfg *Config, src cputime.Source, probe *proxyProbe) (roundResult, error) {
	res := roundResult{proxyCPU: -1, machineCPU: -1}
	var (
		before    time.Duration
		watch     *proxyWatch
		err       error
		counters0 cputime.Counters
	)
	countProxy := src != nil && cfg.ProxyPID != 0
	if probe != nil {
		if watch, err = probe.start(ctx, cfg.Interval); err != nil {
			return res, fmt.Errorf("proxy probe: %w", err)
		}
	}
	if src != nil {
		if before, err = src.CPU(ctx); err != nil {
			return res, fmt.Errorf("proxy cpu: %w", err)
		}
	}
	if countProxy {
		if counters0, err = cputime.ReadCounters("", cfg.ProxyPID); err != nil {
			return res, fmt.Errorf("proxy counters: %w", err)
		}
	}
	// The machine's CPU is read for every target, the direct one too: the
	// difference is what the sidecar costs the host.
	machine0, machineErr := cputime.Machine()
	window := cfg.Duration
	if cfg.Ops > 0 {
		window = 0
	}
	m, err := d.Measure(ctx, 0, window, cfg.Ops)
	if err != nil {
		return res, err
	}
	res.Measurement = m
	if machine1, err := cputime.Machine(); err == nil && machineErr == nil {
		res.machineCPU = machine1 - machine0
	}
	if countProxy {
		c, err := cputime.ReadCounters("", cfg.ProxyPID)
		if err != nil {
			return res, fmt.Errorf("proxy counters: %w", err)
		}
		c = c.Sub(counters0)
		res.counters = &c
	}
	if src != nil {
		after, err := src.CPU(ctx)
		if err != nil {
			return res, fmt.Errorf("proxy cpu: %w", err)
		}
		res.proxyCPU = after - before
	}
	if watch != nil {
		pf, err := watch.end(ctx)
		if err != nil {
			return res, fmt.Errorf("proxy probe: %w", err)
		}
		res.proxy = &pf
	}
	return res, nil
}

// buildCompareReport turns per-target round results into the report; the
// first target is the baseline of ratios, added latency and tests.
func buildCompareReport(cfg *Config, workload driver.Workload, order [][]int, results [][]roundResult) compareReport {
	rep := compareReport{
		Command:  cmdCompare,
		Settings: settingsOf(cfg, workload, cfg.Rounds),
		Order:    make([][]string, len(order)),
	}
	for r, targets := range order {
		for _, i := range targets {
			rep.Order[r] = append(rep.Order[r], cfg.Targets[i].Name)
		}
	}

	throughputs := make([][]float64, len(results))
	for i, rounds := range results {
		ms := make([]driver.Measurement, len(rounds))
		for j, rr := range rounds {
			ms[j] = rr.Measurement
			throughputs[i] = append(throughputs[i], throughputOf(rr.Measurement))
		}
		t := compareTarget{
			targetReport:     targetReport{Name: cfg.Targets[i].Name, Hosts: cfg.Targets[i].Hosts, figures: figuresOf(ms...)},
			RoundThroughput:  roundstats.Summarize(throughputs[i]),
			Rounds:           roundReports(rounds),
			ProxyCPUPerReq:   proxyCPUPerRequest(rounds),
			MachineCPUPerReq: machineCPUPerRequest(rounds),
			ProxyCalls:       proxyCallsPerRequest(rounds),
		}
		for _, rr := range rounds {
			if rr.proxy != nil {
				if t.Proxy == nil {
					t.Proxy = &proxyFigures{}
				}
				t.Proxy.add(*rr.proxy)
			}
		}
		rep.LoadgenBottleneck = rep.LoadgenBottleneck || t.LoadgenBottleneck
		rep.Targets = append(rep.Targets, t)
	}

	base := rep.Targets[0]
	for i := range rep.Targets {
		t := &rep.Targets[i]
		if base.RoundThroughput.Mean > 0 {
			t.ThroughputRatio = t.RoundThroughput.Mean / base.RoundThroughput.Mean
		}
		t.AddedLatency = addedLatency{
			P50:  t.Latency.P50 - base.Latency.P50,
			P99:  t.Latency.P99 - base.Latency.P99,
			P999: t.Latency.P999 - base.Latency.P999,
		}
		if i > 0 {
			t.Significance = testThroughput(throughputs[0], throughputs[i])
		}
	}
	return rep
}

func roundReports(rounds []roundResult) []roundReport {
	out := make([]roundReport, len(rounds))
	for j, rr := range rounds {
		f := figuresOf(rr.Measurement)
		out[j] = roundReport{
			Round:           rr.round,
			Position:        rr.position,
			Ops:             f.Ops,
			ErrorsTotal:     f.ErrorsTotal,
			Throughput:      f.Throughput,
			P50:             f.Latency.P50,
			P99:             f.Latency.P99,
			LoadgenCPUPerOp: f.LoadgenCPUPerOp,
			ProxyCPUPerReq:  proxyCPUPerRequest(rounds[j : j+1]),
		}
	}
	return out
}

// proxyCPUPerRequest is the proxy's CPU time over the rounds divided by the
// requests completed in them, in µs; nil if no round measured proxy CPU.
// Requests are counted by loadgen: the proxy served exactly these, give or
// take gocql's background heartbeats and topology queries.
func proxyCPUPerRequest(rounds []roundResult) *float64 {
	var (
		cpu      time.Duration
		reqs     int64
		measured bool
	)
	for _, rr := range rounds {
		if rr.proxyCPU < 0 {
			continue
		}
		measured = true
		cpu += rr.proxyCPU
		reqs += rr.Requests()
	}
	if !measured || reqs == 0 {
		return nil
	}
	return finite(float64(cpu.Microseconds()) / float64(reqs))
}

// machineCPUPerRequest is the whole machine's busy CPU time over the
// rounds divided by the requests completed in them, in µs; nil if no round
// measured it.
func machineCPUPerRequest(rounds []roundResult) *float64 {
	var (
		cpu  time.Duration
		reqs int64
	)
	for _, rr := range rounds {
		if rr.machineCPU >= 0 {
			cpu += rr.machineCPU
			reqs += rr.Requests()
		}
	}
	if reqs == 0 {
		return nil
	}
	return finite(float64(cpu.Microseconds()) / float64(reqs))
}

// proxyCallsPerRequest is the proxy's system calls and context switches
// over the rounds per request completed in them; nil if no round counted
// them.
func proxyCallsPerRequest(rounds []roundResult) *proxyCalls {
	var (
		c    cputime.Counters
		reqs int64
	)
	for _, rr := range rounds {
		if rr.counters == nil {
			continue
		}
		c.ReadCalls += rr.counters.ReadCalls
		c.WriteCalls += rr.counters.WriteCalls
		c.Voluntary += rr.counters.Voluntary
		c.Involuntary += rr.counters.Involuntary
		reqs += rr.Requests()
	}
	if reqs == 0 {
		return nil
	}
	n := float64(reqs)
	return &proxyCalls{
		Reads:             float64(c.ReadCalls) / n,
		Writes:            float64(c.WriteCalls) / n,
		VoluntarySwitches: float64(c.Voluntary) / n,
		Preemptions:       float64(c.Involuntary) / n,
	}
}

// testThroughput judges whether b's per-round throughputs differ from a's
// beyond round-to-round noise.
func testThroughput(a, b []float64) *significance {
	s := &significance{Test: "welch", Alpha: roundstats.Alpha}
	if w, ok := roundstats.WelchTTest(a, b); ok {
		s.T, s.DF, s.P = finite(w.T), finite(w.DF), finite(w.P)
		s.Significant = w.P < roundstats.Alpha
	}
	if p, ok := roundstats.MannWhitneyP(a, b); ok {
		s.MannWhitneyP = finite(p)
	}
	return s
}
