package speculative

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics. Nothing on the request path updates them: the collector reads
// the Delay, Budget and Scheduler's own state at scrape time.
//
//	cqlgate_speculative_delay_seconds{class}          gauge    current hedge delay of a class with enough samples
//	cqlgate_speculative_delay_samples{class}          gauge    latencies in a class's window
//	cqlgate_speculative_budget_allowed_total          counter  hedges the budget allowed
//	cqlgate_speculative_budget_denied_total{reason}   counter  hedges refused: "budget" (share used up) or "paused"
//	cqlgate_speculative_budget_paused                 gauge    1 while hedging is paused
//	cqlgate_speculative_timers_pending                gauge    hedge timers in the wheel (disarmed ones not yet dropped included)
//
// The proxy's own hedge counters (hedges sent, won, lost) belong to the
// proxy and should use other names.

type collector struct {
	d                       *Delay
	b                       *Budget
	s                       *Scheduler
	delay, samples          *prometheus.Desc
	allowed, denied, paused *prometheus.Desc
	pending                 *prometheus.Desc
}

// NewCollector returns a prometheus.Collector of the metrics above, for
// whichever of d, b and s are not nil. The class label is the label given
// to Delay.Class. Register it once.
func NewCollector(d *Delay, b *Budget, s *Scheduler) prometheus.Collector {
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("cqlgate_speculative_"+name, help, labels, nil)
	}
	return &collector{
		d:       d,
		b:       b,
		s:       s,
		delay:   desc("delay_seconds", "Current hedge delay of a class of requests (absent until it has enough latency samples).", "class"),
		samples: desc("delay_samples", "Latencies in the sliding window of a class of requests.", "class"),
		allowed: desc("budget_allowed_total", "Hedges the hedge budget allowed."),
		denied:  desc("budget_denied_total", "Hedges the hedge budget refused, by reason: budget (share of requests used up) or paused.", "reason"),
		paused:  desc("budget_paused", "1 while hedging is paused (the limiter is rejecting requests)."),
		pending: desc("timers_pending", "Hedge timers in the scheduler's wheel, disarmed ones not yet dropped included."),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	if c.d != nil {
		ch <- c.delay
		ch <- c.samples
	}
	if c.b != nil {
		ch <- c.allowed
		ch <- c.denied
		ch <- c.paused
	}
	if c.s != nil {
		ch <- c.pending
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	g, ctr := prometheus.GaugeValue, prometheus.CounterValue
	if c.d != nil {
		// Classes sharing a label (several prepared statements of one
		// table, say) are one series: the longest delay, all the samples.
		stats := c.d.Stats()
		byLabel := make(map[string]int, len(stats))
		merged := stats[:0]
		for _, cd := range stats {
			i, ok := byLabel[cd.Label]
			if !ok {
				byLabel[cd.Label] = len(merged)
				merged = append(merged, cd)
				continue
			}
			m := &merged[i]
			m.Samples += cd.Samples
			if cd.OK && (!m.OK || cd.Delay > m.Delay) {
				m.Delay, m.OK = cd.Delay, true
			}
		}
		for _, cd := range merged {
			if cd.OK {
				ch <- prometheus.MustNewConstMetric(c.delay, g, cd.Delay.Seconds(), cd.Label)
			}
			ch <- prometheus.MustNewConstMetric(c.samples, g, float64(cd.Samples), cd.Label)
		}
	}
	if c.b != nil {
		st := c.b.Stats()
		ch <- prometheus.MustNewConstMetric(c.allowed, ctr, float64(st.Allowed))
		ch <- prometheus.MustNewConstMetric(c.denied, ctr, float64(st.Denied), "budget")
		ch <- prometheus.MustNewConstMetric(c.denied, ctr, float64(st.DeniedPaused), "paused")
		paused := 0.0
		if st.Paused {
			paused = 1
		}
		ch <- prometheus.MustNewConstMetric(c.paused, g, paused)
	}
	if c.s != nil {
		ch <- prometheus.MustNewConstMetric(c.pending, g, float64(c.s.Pending()))
	}
}
