package stmtstats

import (
	"github.com/prometheus/client_golang/prometheus"
)

// perStatementLabels label the per-statement series: the entry id (prepared
// id or fingerprint, as /statements shows it), its kind, keyspace and table.
// The text is left out: it is long and /statements has it.
var perStatementLabels = []string{"statement", "kind", "keyspace", "table"}

type collector struct {
	t   *Table
	top func() int

	entries, evictions                                      *prometheus.Desc
	calls, errors, rejected, rows, queued, hedges, duration *prometheus.Desc
}

// NewCollector returns a Prometheus collector of t (nil: statistics off,
// which it reports as 0 entries): the entry count and evictions always,
// and per-statement series for the top() statements by calls (none when
// top returns 0), so that the series stay bounded whatever the clients
// send. A statement leaving the top N drops its series; use /statements
// for the long tail.
func NewCollector(t *Table, top func() int) prometheus.Collector {
	d := func(name, help string, labels []string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	l := perStatementLabels
	return &collector{
		t:         t,
		top:       top,
		entries:   d("cqlgate_statement_stats_entries", "Statements whose statistics are kept (at most --statement-stats-entries).", nil),
		evictions: d("cqlgate_statement_stats_evictions_total", "Statements evicted from the statistics to make room for new ones (the least used of a sample); reset by POST /statements/reset.", nil),
		calls:     d("cqlgate_statement_calls_total", "Requests of a statement answered (top --statement-metrics-top statements by calls only).", l),
		errors:    d("cqlgate_statement_errors_total", "Requests of a statement answered with an ERROR, OVERLOADED rejections included (top statements only).", l),
		rejected:  d("cqlgate_statement_rejected_total", "Requests of a statement answered OVERLOADED by the proxy's limiter (top statements only).", l),
		rows:      d("cqlgate_statement_rows_total", "Rows returned for a statement, from the RESULT headers (top statements only).", l),
		queued:    d("cqlgate_statement_queued_seconds_total", "Time requests of a statement waited in the limiter's queue (top statements only).", l),
		hedges:    d("cqlgate_statement_hedges_total", "Hedges sent for a statement (top statements only).", l),
		duration:  d("cqlgate_statement_duration_seconds", "Latency of a statement's requests as clients see it, from reading the request to queueing its answer: p50 and p99 since the statistics were reset (top statements only).", l),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.entries, c.evictions, c.calls, c.errors, c.rejected, c.rows, c.queued, c.hedges, c.duration} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	if c.t == nil {
		ch <- prometheus.MustNewConstMetric(c.entries, prometheus.GaugeValue, 0)
		ch <- prometheus.MustNewConstMetric(c.evictions, prometheus.CounterValue, 0)
		return
	}
	n := c.top()
	r := c.t.Snapshot("calls", max(n, 1))
	ch <- prometheus.MustNewConstMetric(c.entries, prometheus.GaugeValue, float64(r.Entries))
	ch <- prometheus.MustNewConstMetric(c.evictions, prometheus.CounterValue, float64(r.Evictions))
	if n <= 0 {
		return
	}
	for _, s := range r.Statements {
		lv := []string{s.ID, s.Kind, s.Keyspace, s.Table}
		ch <- prometheus.MustNewConstMetric(c.calls, prometheus.CounterValue, float64(s.Calls), lv...)
		ch <- prometheus.MustNewConstMetric(c.errors, prometheus.CounterValue, float64(s.Errors), lv...)
		ch <- prometheus.MustNewConstMetric(c.rejected, prometheus.CounterValue, float64(s.Rejected), lv...)
		ch <- prometheus.MustNewConstMetric(c.rows, prometheus.CounterValue, float64(s.Rows), lv...)
		ch <- prometheus.MustNewConstMetric(c.queued, prometheus.CounterValue, s.QueuedMs/1e3, lv...)
		ch <- prometheus.MustNewConstMetric(c.hedges, prometheus.CounterValue, float64(s.Hedges), lv...)
		ch <- prometheus.MustNewConstSummary(c.duration, s.Calls, s.TotalMs/1e3,
			map[float64]float64{0.5: s.P50Ms / 1e3, 0.99: s.P99Ms / 1e3}, lv...)
	}
}
