package main

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/cqlgate/cqlgate/internal/loadgen/stepstats"
)

// writeRunTable prints a run report for people.
func writeRunTable(w io.Writer, rep runReport) error {
	t := rep.Target
	s := rep.Settings
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "target\t%s\n", strings.Join(t.Hosts, ","))
	fmt.Fprintf(tw, "load\t%s, %s after %gs warm-up\n", describeLoad(s), describeWindow(s), s.WarmupS)
	fmt.Fprintf(tw, "ops\t%d in %.2fs\n", t.Ops, t.ElapsedSeconds)
	if t.ErrorsTotal == 0 {
		fmt.Fprintf(tw, "errors\t0\n")
	} else {
		fmt.Fprintf(tw, "errors\t%d (%s)\n", t.ErrorsTotal, t.Errors.String())
	}
	fmt.Fprintf(tw, "throughput\t%.0f ops/s\n", t.Throughput)
	name := "latency"
	if t.Service != nil {
		name = "latency (from intended start)"
	}
	fmt.Fprintf(tw, "%s\t%s\n", name, describeLatency(t.Latency))
	if t.Service != nil {
		fmt.Fprintf(tw, "service time\t%s\n", describeLatency(*t.Service))
	}
	for _, kind := range sortedKeys(t.ErrorLatency) {
		fmt.Fprintf(tw, "%s answers\t%s\n", kind, describeLatency(t.ErrorLatency[kind]))
	}
	if sc := t.Schedule; sc != nil {
		fmt.Fprintf(tw, "schedule\t%d late (%.2f%%), max lag %s, %d unsent%s\n",
			sc.Late, 100*sc.LateShare, stepstats.Micros(sc.MaxLagUS), sc.Unsent, map[bool]string{true: ": FELL BEHIND", false: ""}[sc.Behind])
	}
	fmt.Fprintf(tw, "loadgen cpu\t%.1f µs/op (user %.1f, sys %.1f; %.2f cores of %d)\n",
		t.LoadgenCPUPerOp, t.LoadgenUserPerOp, t.LoadgenSysPerOp, t.LoadgenCores, s.NumCPU)
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

// writeProxyFigures prints the probe's view of the proxy, one line per
// figure, into a two-column tabwriter.
func writeProxyFigures(w io.Writer, p *proxyFigures) {
	if p.RSSBefore > 0 {
		fmt.Fprintf(w, "proxy rss\t%s before, %s peak, %s after\n", mib(p.RSSBefore), mib(p.RSSPeak), mib(p.RSSAfter))
	}
	var unchanged []string
	for _, k := range sortedKeys(p.Counters) {
		if p.Counters[k] == 0 {
			unchanged = append(unchanged, k)
			continue
		}
		fmt.Fprintf(w, "  %s\t+%s\n", k, formatValue(p.Counters[k]))
	}
	// Listed, not dropped: a reader can tell "no rejections" from "no
	// such metric".
	label := "unchanged (+0)"
	for len(unchanged) > 0 {
		line := ""
		for len(unchanged) > 0 && (line == "" || len(line)+len(unchanged[0]) < 100) {
			line += strings.TrimPrefix(unchanged[0], "cqlgate_") + " "
			unchanged = unchanged[1:]
		}
		fmt.Fprintf(w, "  %s\t%s\n", label, strings.TrimSpace(line))
		label = ""
	}
	for _, k := range sortedKeys(p.Gauges) {
		g := p.Gauges[k]
		fmt.Fprintf(w, "  %s\tpeak %s, after %s\n", k, formatValue(g.Peak), formatValue(g.After))
	}
	if p.SampleErrors > 0 {
		fmt.Fprintf(w, "  (samples failed)\t%d\n", p.SampleErrors)
	}
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// formatValue prints counts as integers and the rest (sums of seconds)
// with a few decimals.
func formatValue(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'f', 4, 64)
}

func describeLatency(l stepstats.Latency) string {
	return fmt.Sprintf("p50 %s  p90 %s  p99 %s  p99.9 %s  max %s",
		stepstats.Micros(l.P50), stepstats.Micros(l.P90), stepstats.Micros(l.P99), stepstats.Micros(l.P999), stepstats.Micros(l.Max))
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// describeLoad names the workload and the load model.
func describeLoad(s settings) string {
	keys := s.Keys
	if keys == keysZipf {
		keys = fmt.Sprintf("zipf s=%g", s.ZipfS)
	}
	if s.LoadModel == "open" {
		return fmt.Sprintf("%s (%s keys), open loop at %.0f/s, at most %d in flight", describeWorkload(s), keys, s.Rate, s.MaxInFlight)
	}
	return fmt.Sprintf("%s (%s keys), closed loop, %d workers", describeWorkload(s), keys, s.Workers)
}

func describeWindow(s settings) string {
	if s.Ops > 0 {
		return fmt.Sprintf("%d requests measured", s.Ops)
	}
	return fmt.Sprintf("%gs measured", s.DurationS)
}

// writeCompareTable prints a compare report for people: one line per
// target, then one verdict line per non-baseline target.
func writeCompareTable(w io.Writer, rep compareReport) error {
	s := rep.Settings
	fmt.Fprintf(w, "%s, %d rounds of %s (order %s), warm-up %gs per target\n\n",
		describeLoad(s), s.Rounds, describeWindow(s), describeOrder(rep.Order), s.WarmupS)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target\tops/s mean\tmin\tmax\tratio\tp50 µs\t+p50 µs\tp99 µs\tp99.9 µs\terrors\tloadgen µs/op\tproxy µs/req\tmachine µs/req\t")
	for _, t := range rep.Targets {
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.0f\t%.3f\t%d\t%+d\t%d\t%d\t%d\t%.1f\t%s\t%s\t\n",
			t.Name, t.RoundThroughput.Mean, t.RoundThroughput.Min, t.RoundThroughput.Max, t.ThroughputRatio,
			t.Latency.P50, t.AddedLatency.P50, t.Latency.P99, t.Latency.P999,
			t.ErrorsTotal, t.LoadgenCPUPerOp, optional(t.ProxyCPUPerReq), optional(t.MachineCPUPerReq))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}

	for _, t := range rep.Targets {
		if c := t.ProxyCalls; c != nil {
			fmt.Fprintf(w, "\nproxy per request during the %s rounds: %.2f read and %.2f write syscalls, %.2f voluntary and %.2f involuntary context switches\n",
				t.Name, c.Reads, c.Writes, c.VoluntarySwitches, c.Preemptions)
		}
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
			for _, kind := range sortedKeys(t.ErrorLatency) {
				fmt.Fprintf(w, "  %s answers: %s\n", kind, describeLatency(t.ErrorLatency[kind]))
			}
		}
	}
	for _, t := range rep.Targets {
		if t.Proxy == nil {
			continue
		}
		fmt.Fprintf(w, "\nproxy during the %s rounds:\n", t.Name)
		ptw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		writeProxyFigures(ptw, t.Proxy)
		if err := ptw.Flush(); err != nil {
			return fmt.Errorf("write table: %w", err)
		}
	}
	return nil
}

// optional formats a figure that may not have been measured.
func optional(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f", *v)
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
