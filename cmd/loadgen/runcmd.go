package main

import (
	"context"
	"io"
)

// runRun drives one endpoint and reports on it. errorsSeen tells whether
// any measured request failed.
func runRun(ctx context.Context, cfg *Config, stdout, stderr io.Writer) (errorsSeen bool, err error) {
	workload, err := newWorkload(cfg)
	if err != nil {
		return false, err
	}
	ep := Endpoint{Name: "run", Hosts: cfg.Hosts}
	s, err := ep.Session(sessionOptionsFrom(cfg, cfg.Keyspace, stderr))
	if err != nil {
		return false, err
	}
	defer s.Close()

	d := &driver{session: s, workload: workload, workers: cfg.Workers, label: ep.Name}
	if !cfg.Quiet {
		d.progress = stderr
	}
	m, err := d.measure(ctx, cfg.Warmup, cfg.Duration)
	if err != nil {
		return false, err
	}

	rep := runReport{
		Command:  cmdRun,
		Settings: settingsOf(cfg, workload, 1),
		Target:   targetReport{Name: ep.Name, Hosts: ep.Hosts, figures: figuresOf(m)},
	}
	rep.LoadgenBottleneck = rep.Target.LoadgenBottleneck
	if rep.LoadgenBottleneck {
		warnBottleneck(stderr, rep.Target.LoadgenCores, rep.Settings.BottleneckCPUs)
	}
	if cfg.JSON {
		err = writeJSON(stdout, rep)
	} else {
		err = writeRunTable(stdout, rep)
	}
	return rep.Target.ErrorsTotal > 0, err
}
