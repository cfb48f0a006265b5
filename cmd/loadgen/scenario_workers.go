package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/cqlgate/cqlgate/internal/loadgen/cputime"
	"github.com/cqlgate/cqlgate/internal/loadgen/driver"
	"github.com/cqlgate/cqlgate/internal/loadgen/recorder"
)

// The workers scenario reproduces the published seed experiment: one gocql
// session at stock settings, N goroutines started at once, each running K
// sequential single-row SELECTs of its own key, and the wall time until
// the last one finishes. Directly, 100,000 goroutines exceed what gocql's
// default pool (2 connections x 32,768 streams per host) can carry, and the
// excess fails at once with "no streams available"; a proxy on two listen
// addresses looks like two hosts and doubles that.

// workersReport is the JSON of the workers scenario.
type workersReport struct {
	Command  string                 `json:"command"` // "workers"
	Settings workersSettings        `json:"settings"`
	WallS    float64                `json:"wall_s"` // first goroutine started to last one finished
	Target   targetReport           `json:"target"` // elapsed_s is the wall time
	Timeline []driver.TimelinePoint `json:"timeline"`
	Proxy    *runProxy              `json:"proxy"`
	Loadgen  workersGenerator       `json:"loadgen"`
}

type workersSettings struct {
	Workers     int     `json:"workers"`
	Queries     int     `json:"queries"` // per worker
	Rows        int64   `json:"rows"`    // worker i reads key i % rows
	Keyspace    string  `json:"keyspace"`
	Proto       int     `json:"proto"`
	TimeoutS    float64 `json:"timeout_s"`   // 0 = gocql's default (11 s)
	Consistency string  `json:"consistency"` // "" = gocql's default (QUORUM)
	NumConns    int     `json:"num_conns"`   // 0 = gocql's default (2)
	NumCPU      int     `json:"num_cpu"`
}

type workersGenerator struct {
	// MaxRSSBytes is loadgen's peak resident set (getrusage), which 100,000
	// goroutines with gocql requests dominate.
	MaxRSSBytes int64 `json:"max_rss_bytes"`
}

func runWorkers(ctx context.Context, cfg *Config, stdout, stderr io.Writer) (errorsSeen bool, err error) {
	if cfg.Setup {
		if err := runSetup(ctx, cfg, stderr); err != nil {
			return false, err
		}
	}
	ep := Endpoint{Name: "workers", Hosts: cfg.Hosts}
	s, err := ep.Session(sessionOptionsFrom(cfg, cfg.Keyspace, stderr))
	if err != nil {
		return false, err
	}
	defer s.Close()

	if err := driver.Sleep(ctx, cfg.Settle); err != nil {
		return false, fmt.Errorf("interrupted: %w", err)
	}
	probe := newProxyProbe(cfg.ProxyMetrics, cfg.ProxyPID)
	var watch *proxyWatch
	if probe != nil {
		if watch, err = probe.start(ctx, cfg.Interval); err != nil {
			return false, fmt.Errorf("proxy probe: %w", err)
		}
	}
	cpuSrc := proxyCPUSource(cfg)
	var pcpu0 time.Duration
	if cpuSrc != nil {
		if pcpu0, err = cpuSrc.CPU(ctx); err != nil {
			return false, fmt.Errorf("proxy cpu: %w", err)
		}
	}

	// Every request counts: the published figure is the wall time of the
	// whole flood, connection warm-up and prepares included.
	rec := recorder.New(cfg.Workers, false, 0)
	rec.SetPhase(recorder.Measure)
	d := &driver.Driver{Interval: cfg.Interval, Label: "workers"}
	if !cfg.Quiet {
		d.Progress = stderr
	}
	closeLog, err := openHDRLog(d, cfg.HDRLog)
	if err != nil {
		return false, err
	}
	d.Began = time.Now()
	stopProgress := d.StartProgress(rec)

	u0, s0, err := cputime.Self()
	if err != nil {
		return false, err
	}
	start := time.Now()
	var wg sync.WaitGroup
	for id := range cfg.Workers {
		wg.Go(func() {
			key := int64(id) % cfg.Rows
			var v []byte
			for range cfg.Queries {
				if ctx.Err() != nil {
					return
				}
				t := time.Now()
				err := readKV(ctx, s, key, &v)
				took := time.Since(t)
				rec.Record(id, recorder.Outcome{Latency: took, Service: took, Err: err})
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	u1, s1, err := cputime.Self()
	if err != nil {
		return false, err
	}
	rec.SetPhase(recorder.Done)
	stopProgress()
	if err := closeLog(); err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("interrupted: %w", err)
	}

	m := driver.Measurement{Recorded: rec.Snapshot(), Elapsed: wall, CPU: u1 - u0 + s1 - s0, CPUUser: u1 - u0, CPUSys: s1 - s0}
	rep := workersReport{
		Command: cmdWorkers,
		Settings: workersSettings{
			Workers: cfg.Workers, Queries: cfg.Queries, Rows: cfg.Rows, Keyspace: cfg.Keyspace,
			Proto: cfg.Proto, TimeoutS: cfg.Timeout.Seconds(), Consistency: cfg.Consistency,
			NumConns: cfg.NumConns, NumCPU: runtime.NumCPU(),
		},
		WallS:    wall.Seconds(),
		Target:   targetReport{Name: ep.Name, Hosts: ep.Hosts, figures: figuresOf(m)},
		Timeline: d.Timeline,
		Loadgen:  workersGenerator{MaxRSSBytes: maxRSS()},
	}
	if watch != nil {
		pf, err := watch.end(ctx)
		if err != nil {
			return false, fmt.Errorf("proxy probe: %w", err)
		}
		rep.Proxy = &runProxy{proxyFigures: pf}
		if cpuSrc != nil {
			pcpu1, err := cpuSrc.CPU(ctx)
			if err != nil {
				return false, fmt.Errorf("proxy cpu: %w", err)
			}
			if reqs := m.Requests(); reqs > 0 {
				rep.Proxy.CPUPerReq = finite(float64((pcpu1 - pcpu0).Nanoseconds()) / 1e3 / float64(reqs))
			}
		}
	}
	if cfg.JSON {
		err = writeJSON(stdout, rep)
	} else {
		err = writeWorkersTable(stdout, rep)
	}
	if err == nil && cfg.Plot != "" {
		title := fmt.Sprintf("loadgen workers: %d goroutines x %d SELECTs", cfg.Workers, cfg.Queries)
		err = writePlot(cfg.Plot, title, d.Timeline)
	}
	return rep.Target.ErrorsTotal > 0, err
}

// maxRSS is this process's peak resident set in bytes (Linux reports
// ru_maxrss in KiB).
func maxRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Maxrss * 1024
}

func writeWorkersTable(w io.Writer, rep workersReport) error {
	t, s := rep.Target, rep.Settings
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "target\t%s\n", strings.Join(t.Hosts, ","))
	fmt.Fprintf(tw, "load\t%d goroutines x %d single-row SELECTs (%d requests), gocql %s\n",
		s.Workers, s.Queries, int64(s.Workers)*int64(s.Queries), describeSession(s.TimeoutS, s.Consistency, s.NumConns))
	fmt.Fprintf(tw, "wall time\t%.2fs\n", rep.WallS)
	fmt.Fprintf(tw, "ok\t%d (%.0f/s)\n", t.Ops, t.Throughput)
	if t.ErrorsTotal == 0 {
		fmt.Fprintf(tw, "errors\t0\n")
	} else {
		fmt.Fprintf(tw, "errors\t%d (%s)\n", t.ErrorsTotal, t.Errors.String())
	}
	fmt.Fprintf(tw, "latency\t%s\n", describeLatency(t.Latency))
	for _, kind := range sortedKeys(t.ErrorLatency) {
		fmt.Fprintf(tw, "%s answers\t%s\n", kind, describeLatency(t.ErrorLatency[kind]))
	}
	fmt.Fprintf(tw, "loadgen\t%.1f µs CPU/op (user %.1f, sys %.1f), peak RSS %s\n",
		t.LoadgenCPUPerOp, t.LoadgenUserPerOp, t.LoadgenSysPerOp, mib(rep.Loadgen.MaxRSSBytes))
	if p := rep.Proxy; p != nil {
		if p.CPUPerReq != nil {
			fmt.Fprintf(tw, "proxy cpu\t%.1f µs/req\n", *p.CPUPerReq)
		}
		writeProxyFigures(tw, &p.proxyFigures)
	}
	writeSamples(tw, t.figures)
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}

// describeSession names the session settings, "default" for gocql's own.
func describeSession(timeoutS float64, consistency string, numConns int) string {
	var parts []string
	if timeoutS > 0 {
		parts = append(parts, fmt.Sprintf("timeout %gs", timeoutS))
	}
	if consistency != "" {
		parts = append(parts, "consistency "+consistency)
	}
	if numConns > 0 {
		parts = append(parts, fmt.Sprintf("%d conns/host", numConns))
	}
	if len(parts) == 0 {
		return "default settings"
	}
	return strings.Join(parts, ", ") + " (rest default)"
}
