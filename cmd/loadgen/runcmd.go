package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/gocql/gocql"

	"github.com/cqlgate/cqlgate/internal/loadgen/driver"
	"github.com/cqlgate/cqlgate/internal/loadgen/recorder"
	"github.com/cqlgate/cqlgate/internal/loadgen/stepstats"
)

// runRun drives one endpoint and reports on it. errorsSeen tells whether
// any measured request failed.
func runRun(ctx context.Context, cfg *Config, stdout, stderr io.Writer) (errorsSeen bool, err error) {
	workload, err := newWorkload(cfg)
	if err != nil {
		return false, err
	}
	if cfg.Setup {
		if err := runSetup(ctx, cfg, stderr); err != nil {
			return false, err
		}
	}
	ep := Endpoint{Name: "run", Hosts: cfg.Hosts}
	s, err := ep.Session(sessionOptionsFrom(cfg, cfg.Keyspace, stderr))
	if err != nil {
		return false, err
	}
	defer s.Close()

	d := newDriver(cfg, s, workload, ep.Name, stderr)
	closeLog, err := openHDRLog(d, cfg.HDRLog)
	if err != nil {
		return false, err
	}

	// The probe watches warm-up and window (its peaks matter in both);
	// proxy CPU is read around the measured window only.
	probe := newProxyProbe(cfg.ProxyMetrics, cfg.ProxyPID)
	cpuSrc := proxyCPUSource(cfg)
	var (
		watch      *proxyWatch
		cpu0, cpu1 time.Duration
		cpuErr     error
		window     = cfg.Duration
	)
	if probe != nil {
		if watch, err = probe.start(ctx, cfg.Interval); err != nil {
			return false, fmt.Errorf("proxy probe: %w", err)
		}
		d.Around = func(start bool) {
			var v time.Duration
			var err error
			if v, err = cpuSrc.CPU(ctx); err != nil {
				cpuErr = err
			}
			if start {
				cpu0 = v
			} else {
				cpu1 = v
			}
		}
	}
	if cfg.Ops > 0 {
		window = 0
	}
	m, err := d.Measure(ctx, cfg.Warmup, window, cfg.Ops)
	if cerr := closeLog(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, err
	}

	rep := runReport{
		Command:  cmdRun,
		Settings: settingsOf(cfg, workload, 1),
		Target:   targetReport{Name: ep.Name, Hosts: ep.Hosts, figures: figuresOf(m)},
		Timeline: d.Timeline,
	}
	if watch != nil {
		pf, err := watch.end(ctx)
		if err != nil {
			return false, fmt.Errorf("proxy probe: %w", err)
		}
		if cpuErr != nil {
			return false, fmt.Errorf("proxy cpu: %w", cpuErr)
		}
		rep.Proxy = &runProxy{proxyFigures: pf}
		if reqs := m.Requests(); reqs > 0 {
			rep.Proxy.CPUPerReq = finite(float64((cpu1 - cpu0).Nanoseconds()) / 1e3 / float64(reqs))
		}
	}
	rep.LoadgenBottleneck = rep.Target.LoadgenBottleneck
	warnHonesty(stderr, rep.Settings, rep.Target.figures)
	if cfg.JSON {
		err = writeJSON(stdout, rep)
	} else {
		err = writeRunTable(stdout, rep)
	}
	// The plot comes after the report: a run too short to plot still
	// reports its figures.
	if err == nil && cfg.Plot != "" {
		err = writePlot(cfg.Plot, "loadgen run: "+describeLoad(rep.Settings), d.Timeline)
	}
	return rep.Target.ErrorsTotal > 0, err
}

// newDriver builds the driver of cfg's load model.
func newDriver(cfg *Config, s *gocql.Session, workload driver.Workload, label string, stderr io.Writer) *driver.Driver {
	d := &driver.Driver{Session: s, Workload: workload, Workers: cfg.Workers, Label: label, Interval: cfg.Interval}
	if cfg.Rate > 0 {
		d.Rate = cfg.Rate
		d.Workers = cfg.MaxInFlight
	}
	if !cfg.Quiet {
		d.Progress = stderr
	}
	return d
}

// openHDRLog makes the driver write its interval histograms to path; the
// returned function closes the file. An empty path logs nothing.
func openHDRLog(d *driver.Driver, path string) (closeLog func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("hdr log: %w", err)
	}
	w := hdrhistogram.NewHistogramLogWriter(f)
	for _, line := range []func() error{
		w.OutputLogFormatVersion,
		func() error { return w.OutputComment("cqlgate loadgen: latency in microseconds, tag = phase") },
		w.OutputLegend,
	} {
		if err := line(); err != nil {
			f.Close()
			return nil, fmt.Errorf("hdr log %s: %w", path, err)
		}
	}
	d.HDRLog = w
	return func() error {
		if err := f.Close(); err != nil {
			return fmt.Errorf("hdr log %s: %w", path, err)
		}
		return nil
	}, nil
}

// warnHonesty tells on stderr when the figures may describe the generator
// rather than the target.
func warnHonesty(stderr io.Writer, s settings, f figures) {
	if f.LoadgenBottleneck {
		warnBottleneck(stderr, f.LoadgenCores, s.BottleneckCPUs)
	}
	if sc := f.Schedule; sc != nil && sc.Behind {
		fmt.Fprintf(stderr, "loadgen: WARNING: fell behind the schedule of %.0f/s: %d requests (%.1f%%) sent over %s late, "+
			"max lag %s, %d due but never sent; the offered load was below --rate "+
			"(all --max-in-flight %d senders busy, or loadgen short of CPU)\n",
			s.Rate, sc.Late, 100*sc.LateShare, recorder.LateThreshold, stepstats.Micros(sc.MaxLagUS), sc.Unsent, s.MaxInFlight)
	}
}
