package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// writeRunTable prints a run report for people.
func writeRunTable(w io.Writer, rep runReport) error {
	t := rep.Target
	s := rep.Settings
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "target\t%s\n", strings.Join(t.Hosts, ","))
	fmt.Fprintf(tw, "load\t%s, %d workers, %gs measured after %gs warm-up\n", describeWorkload(s), s.Workers, s.DurationS, s.WarmupS)
	fmt.Fprintf(tw, "ops\t%d in %.2fs\n", t.Ops, t.ElapsedSeconds)
	if t.ErrorsTotal == 0 {
		fmt.Fprintf(tw, "errors\t0\n")
	} else {
		fmt.Fprintf(tw, "errors\t%d (%s)\n", t.ErrorsTotal, t.Errors.String())
	}
	fmt.Fprintf(tw, "throughput\t%.0f ops/s\n", t.Throughput)
	l := t.Latency
	fmt.Fprintf(tw, "latency\tp50 %s  p90 %s  p99 %s  p99.9 %s  max %s\n",
		micros(l.P50), micros(l.P90), micros(l.P99), micros(l.P999), micros(l.Max))
	fmt.Fprintf(tw, "loadgen cpu\t%.1f µs/op (%.2f cores of %d)\n", t.LoadgenCPUPerOp, t.LoadgenCores, s.NumCPU)
	writeSamples(tw, t.figures)
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}

// writeCompareTable prints a compare report for people: one line per
// target, then one verdict line per non-baseline target.
func writeCompareTable(w io.Writer, rep compareReport) error {
	s := rep.Settings
	fmt.Fprintf(w, "%s, %d workers, %d rounds of %gs (order %s), warm-up %gs per target\n\n",
		describeWorkload(s), s.Workers, s.Rounds, s.DurationS, describeOrder(rep.Order), s.WarmupS)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target\tops/s mean\tmin\tmax\tratio\tp50 µs\t+p50 µs\tp99 µs\tp99.9 µs\terrors\tloadgen µs/op\tproxy µs/req\t")
	for _, t := range rep.Targets {
		proxy := "-"
		if t.ProxyCPUPerReq != nil {
			proxy = fmt.Sprintf("%.1f", *t.ProxyCPUPerReq)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.0f\t%.3f\t%d\t%+d\t%d\t%d\t%d\t%.1f\t%s\t\n",
			t.Name, t.RoundThroughput.Mean, t.RoundThroughput.Min, t.RoundThroughput.Max, t.ThroughputRatio,
			t.Latency.P50, t.AddedLatency.P50, t.Latency.P99, t.Latency.P999,
			t.ErrorsTotal, t.LoadgenCPUPerOp, proxy)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}

	base := rep.Targets[0]
	for _, t := range rep.Targets[1:] {
		fmt.Fprintf(w, "\n%s vs %s: throughput %+.1f%%, %s\n",
			t.Name, base.Name, 100*(t.ThroughputRatio-1), describeSignificance(t.Significance))
	}
	for _, t := range rep.Targets {
		if t.ErrorsTotal > 0 {
			fmt.Fprintf(w, "%s errors: %s\n", t.Name, t.Errors.String())
			for kind, msg := range t.ErrorSamples {
				fmt.Fprintf(w, "  %s e.g. %q\n", kind, msg)
			}
		}
	}
	return nil
}

func writeSamples(w io.Writer, f figures) {
	for kind, msg := range f.ErrorSamples {
		fmt.Fprintf(w, "  %s e.g.\t%q\n", kind, msg)
	}
}

func describeWorkload(s settings) string {
	if s.Workload == workloadMixed {
		return fmt.Sprintf("%s (%.0f%% reads)", s.Workload, 100*s.ReadRatio)
	}
	return s.Workload
}

func describeOrder(order [][]string) string {
	rounds := make([]string, len(order))
	for i, o := range order {
		rounds[i] = strings.Join(o, ",")
	}
	return strings.Join(rounds, " | ")
}

func describeSignificance(s *significance) string {
	if s == nil || s.P == nil {
		return "not testable (needs at least 2 rounds)"
	}
	verdict := "within noise"
	if s.Significant {
		verdict = "beyond noise"
	}
	mw := "n/a"
	if s.MannWhitneyP != nil {
		mw = fmt.Sprintf("%.3f", *s.MannWhitneyP)
	}
	return fmt.Sprintf("%s (Welch t=%.2f df=%.1f p=%.4f; Mann-Whitney p=%s)", verdict, deref(s.T), deref(s.DF), *s.P, mw)
}

func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

func warnBottleneck(w io.Writer, cores, limit float64) {
	fmt.Fprintf(w, "loadgen: WARNING: loadgen used %.2f cores (above %.2f): the generator may be the bottleneck, not the target\n", cores, limit)
}
