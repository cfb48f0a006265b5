package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// proxyProbe watches the proxy under test during a run: its limiter and
// speculative-execution metrics (from /metrics) and its memory (from
// /proc/PID/status, or the process_resident_memory_bytes metric).
type proxyProbe struct {
	url    string // Prometheus text endpoint; "" for none
	pid    int    // 0 for none
	root   string // "/proc" outside tests
	client *http.Client
}

func newProxyProbe(url string, pid int) *proxyProbe {
	if url == "" && pid == 0 {
		return nil
	}
	// A short timeout: scrapes sit between measured rounds, and a hung
	// endpoint must not stall the benchmark.
	return &proxyProbe{url: url, pid: pid, root: "/proc", client: &http.Client{Timeout: 5 * time.Second}}
}

// watchedMetric tells whether a metric family is reported: the limiter's
// queue and rejections, hedging, and the proxy's own error answers.
func watchedMetric(name string) bool {
	switch {
	case strings.HasPrefix(name, "cqlgate_limiter_"),
		strings.HasPrefix(name, "cqlgate_speculative_"),
		name == "cqlgate_overloaded_rejections_total",
		name == "cqlgate_request_timeouts_total",
		name == "cqlgate_proxy_errors_total":
		return true
	}
	return false
}

// probeSample is one look at the proxy.
type probeSample struct {
	counters map[string]float64 // counter series (and histogram _count/_sum), by "name{labels}"
	gauges   map[string]float64
	rss      int64 // bytes; 0 when unknown
}

func (p *proxyProbe) sample(ctx context.Context) (probeSample, error) {
	s := probeSample{counters: map[string]float64{}, gauges: map[string]float64{}}
	if p.url != "" {
		fams, err := p.scrape(ctx)
		if err != nil {
			return s, err
		}
		for name, f := range fams {
			if name == "process_resident_memory_bytes" && p.pid == 0 && len(f.GetMetric()) > 0 {
				s.rss = int64(f.GetMetric()[0].GetGauge().GetValue())
			}
			if !watchedMetric(name) {
				continue
			}
			for _, m := range f.GetMetric() {
				key := seriesKey(name, m.GetLabel())
				switch f.GetType() {
				case dto.MetricType_COUNTER:
					s.counters[key] = m.GetCounter().GetValue()
				case dto.MetricType_GAUGE:
					s.gauges[key] = m.GetGauge().GetValue()
				case dto.MetricType_HISTOGRAM:
					s.counters[seriesKey(name+"_count", m.GetLabel())] = float64(m.GetHistogram().GetSampleCount())
					s.counters[seriesKey(name+"_sum", m.GetLabel())] = m.GetHistogram().GetSampleSum()
				case dto.MetricType_UNTYPED:
					s.gauges[key] = m.GetUntyped().GetValue()
				}
			}
		}
	}
	if p.pid != 0 {
		rss, err := readVmRSS(p.root, p.pid)
		if err != nil {
			return s, err
		}
		s.rss = rss
	}
	return s, nil
}

func (p *proxyProbe) scrape(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url, nil)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", p.url, err)
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", p.url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: status %s", p.url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", p.url, err)
	}
	return fams, nil
}

// seriesKey is name{a="x",b="y"} with the labels sorted, or name alone.
func seriesKey(name string, labels []*dto.LabelPair) string {
	if len(labels) == 0 {
		return name
	}
	parts := make([]string, len(labels))
	for i, l := range labels {
		parts[i] = fmt.Sprintf("%s=%q", l.GetName(), l.GetValue())
	}
	slices.Sort(parts)
	return name + "{" + strings.Join(parts, ",") + "}"
}

// readVmRSS returns the resident set of a process from /proc/PID/status.
func readVmRSS(root string, pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("%s/%d/status", root, pid))
	if err != nil {
		return 0, fmt.Errorf("read rss of pid %d: %w", pid, err)
	}
	return parseVmRSS(b)
}

// parseVmRSS reads the "VmRSS:  1234 kB" line of a /proc status file.
func parseVmRSS(status []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("malformed VmRSS line %q", sc.Text())
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("malformed VmRSS line %q: %w", sc.Text(), err)
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("no VmRSS line in /proc status")
}

// proxyWatch is one watched window: a sample before, samples every
// interval during it (for peaks), and one after.
type proxyWatch struct {
	probe  *proxyProbe
	before probeSample
	stop   chan struct{}
	done   chan struct{}

	mu        sync.Mutex
	peakRSS   int64
	peakGauge map[string]float64
	errs      []error
}

// start samples the proxy now and then every interval until end.
func (p *proxyProbe) start(ctx context.Context, every time.Duration) (*proxyWatch, error) {
	before, err := p.sample(ctx)
	if err != nil {
		return nil, err
	}
	w := &proxyWatch{probe: p, before: before, stop: make(chan struct{}), done: make(chan struct{}),
		peakRSS: before.rss, peakGauge: maps.Clone(before.gauges)}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				s, err := p.sample(ctx)
				w.note(s, err)
			}
		}
	}()
	return w, nil
}

func (w *proxyWatch) note(s probeSample, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.errs = append(w.errs, err)
		return
	}
	w.peakRSS = max(w.peakRSS, s.rss)
	for k, v := range s.gauges {
		if old, ok := w.peakGauge[k]; !ok || v > old {
			w.peakGauge[k] = v
		}
	}
}

// end stops sampling, samples once more and returns what was seen.
func (w *proxyWatch) end(ctx context.Context) (proxyFigures, error) {
	close(w.stop)
	<-w.done
	after, err := w.probe.sample(ctx)
	w.note(after, err)
	if err != nil {
		return proxyFigures{}, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	f := proxyFigures{
		RSSBefore: w.before.rss,
		RSSPeak:   w.peakRSS,
		RSSAfter:  after.rss,
		Counters:  map[string]float64{},
		Gauges:    map[string]gaugeFigures{},
	}
	for k, v := range after.counters {
		f.Counters[k] = v - w.before.counters[k]
	}
	for k, v := range after.gauges {
		f.Gauges[k] = gaugeFigures{After: v, Peak: w.peakGauge[k]}
	}
	f.SampleErrors = len(w.errs)
	return f, nil
}

// proxyFigures is what the proxy did during one or more windows.
type proxyFigures struct {
	RSSBefore int64 `json:"rss_before_bytes"`
	RSSPeak   int64 `json:"rss_peak_bytes"` // highest sample, taken every --interval
	RSSAfter  int64 `json:"rss_after_bytes"`
	// Counters are increases during the window(s); histograms appear as
	// their _count and _sum.
	Counters map[string]float64      `json:"counters"`
	Gauges   map[string]gaugeFigures `json:"gauges"`
	// SampleErrors counts samples during the window that failed.
	SampleErrors int `json:"sample_errors"`
}

type gaugeFigures struct {
	Peak  float64 `json:"peak"`
	After float64 `json:"after"`
}

// add merges another window's figures: counters add up, peaks take the
// maximum, before comes from the first window and after from the last.
func (f *proxyFigures) add(o proxyFigures) {
	if f.Counters == nil {
		*f = o
		f.Counters = maps.Clone(o.Counters)
		f.Gauges = maps.Clone(o.Gauges)
		return
	}
	f.RSSPeak = max(f.RSSPeak, o.RSSPeak)
	f.RSSAfter = o.RSSAfter
	for k, v := range o.Counters {
		f.Counters[k] += v
	}
	for k, g := range o.Gauges {
		old := f.Gauges[k]
		f.Gauges[k] = gaugeFigures{Peak: max(old.Peak, g.Peak), After: g.After}
	}
	f.SampleErrors += o.SampleErrors
}

// queueDepthPeak is the limiter's highest sampled queue depth, or -1 if
// the proxy does not export it.
func (f *proxyFigures) queueDepthPeak() float64 {
	g, ok := f.Gauges["cqlgate_limiter_queue_depth"]
	if !ok {
		return -1
	}
	return g.Peak
}
