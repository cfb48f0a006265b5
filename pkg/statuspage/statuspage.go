// Package statuspage renders cqlgate's status page, served at / on the admin
// address: the Cassandra nodes (up, latency, requests in flight against
// their limit), the limiter (queue depth, waits, rejections by reason),
// hedging (rate, wins, budget), the rules of --rules-file (in flight,
// queued, rejected) and the top statements. It is plain HTML
// rendered on the server from the proxy's own Prometheus registry and
// statement statistics, with a few lines of JavaScript that fetch the page
// again every two seconds and swap its content: no build step, no asset
// fetched from anywhere.
//
// It reads metrics by name and knows nothing else of the proxy.
package statuspage

import (
	"cmp"
	"html/template"
	"math"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/cqlgate/cqlgate/pkg/stmtstats"
)

// Handler serves the status page.
type Handler struct {
	reg   prometheus.Gatherer
	stmts func() *stmtstats.Table // nil or returning nil: no statements

	mu   sync.Mutex
	prev sample // the counters at the previous render, for rates
}

type sample struct {
	at                     time.Time
	requests, hedges, wins float64
	rejected               float64
}

// New returns the status page of the metrics in reg and the statements of
// stmts (may be nil).
func New(reg prometheus.Gatherer, stmts func() *stmtstats.Table) *Handler {
	return &Handler{reg: reg, stmts: stmts}
}

// Node is one Cassandra node's row.
type Node struct {
	Name          string
	Up            bool
	InFlight      float64
	Limit         float64
	MeanMs, P99Ms float64
}

// Rule is one rule's row (--rules-file), from the cqlgate_rule_* series.
type Rule struct {
	Name                         string
	InFlight, Limit, Queued      float64
	Admitted, QueueFull, Timeout float64
}

// Status is what the page shows.
type Status struct {
	Time          time.Time
	Nodes         []Node
	QueueDepth    float64
	QueueMaxWait  float64
	QueueWaits    float64            // requests admitted after waiting
	QueueWaitMs   float64            // their mean wait
	Rejected      map[string]float64 // by reason, the reasons with any only
	RejectedTotal float64
	RequestRate   float64 // per second since the previous render
	RejectRate    float64
	Hedges, Wins  float64
	HedgeRate     float64
	WinRate       float64
	Paused        bool
	Budget        float64 // hedges allowed by the budget so far
	Rules         []Rule
	Statements    *stmtstats.Report
	Err           string
}

func (h *Handler) status() Status {
	s := Status{Time: time.Now(), Rejected: map[string]float64{}}
	mfs, err := h.reg.Gather()
	if err != nil {
		s.Err = err.Error()
	}
	fams := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		fams[mf.GetName()] = mf
	}
	nodes := map[string]*Node{}
	node := func(name string) *Node {
		if n := nodes[name]; n != nil {
			return n
		}
		n := &Node{Name: name}
		nodes[name] = n
		return n
	}
	each := func(name string, f func(m *dto.Metric, label map[string]string)) {
		mf := fams[name]
		if mf == nil {
			return
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			f(m, l)
		}
	}
	val := func(m *dto.Metric) float64 {
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Counter != nil:
			return m.Counter.GetValue()
		}
		return 0
	}
	sum := func(name string) float64 {
		var t float64
		each(name, func(m *dto.Metric, _ map[string]string) { t += val(m) })
		return t
	}
	each("cqlgate_backend_node_up", func(m *dto.Metric, l map[string]string) { node(l["node"]).Up = val(m) == 1 })
	each("cqlgate_limiter_in_flight", func(m *dto.Metric, l map[string]string) { node(l["node"]).InFlight = val(m) })
	each("cqlgate_limiter_limit", func(m *dto.Metric, l map[string]string) { node(l["node"]).Limit = val(m) })
	each("cqlgate_backend_request_duration_seconds", func(m *dto.Metric, l map[string]string) {
		hg := m.GetHistogram()
		n := node(l["node"])
		if c := hg.GetSampleCount(); c > 0 {
			n.MeanMs = hg.GetSampleSum() / float64(c) * 1e3
			n.P99Ms = histQuantile(hg, 0.99) * 1e3
		}
	})
	for _, n := range nodes {
		s.Nodes = append(s.Nodes, *n)
	}
	slices.SortFunc(s.Nodes, func(a, b Node) int { return cmp.Compare(a.Name, b.Name) })
	rules := map[string]*Rule{}
	rule := func(name string) *Rule {
		if r := rules[name]; r != nil {
			return r
		}
		r := &Rule{Name: name}
		rules[name] = r
		return r
	}
	each("cqlgate_rule_in_flight", func(m *dto.Metric, l map[string]string) { rule(l["rule"]).InFlight = val(m) })
	each("cqlgate_rule_limit", func(m *dto.Metric, l map[string]string) { rule(l["rule"]).Limit = val(m) })
	each("cqlgate_rule_queued", func(m *dto.Metric, l map[string]string) { rule(l["rule"]).Queued = val(m) })
	each("cqlgate_rule_admitted_total", func(m *dto.Metric, l map[string]string) { rule(l["rule"]).Admitted = val(m) })
	each("cqlgate_rule_rejected_total", func(m *dto.Metric, l map[string]string) {
		if l["reason"] == "queue_full" {
			rule(l["rule"]).QueueFull = val(m)
		} else {
			rule(l["rule"]).Timeout += val(m)
		}
	})
	for _, r := range rules {
		s.Rules = append(s.Rules, *r)
	}
	slices.SortFunc(s.Rules, func(a, b Rule) int { return cmp.Compare(a.Name, b.Name) })
	s.QueueDepth = sum("cqlgate_limiter_queue_depth")
	s.QueueMaxWait = sum("cqlgate_limiter_queue_max_wait_seconds")
	each("cqlgate_limiter_queue_wait_seconds", func(m *dto.Metric, _ map[string]string) {
		hg := m.GetHistogram()
		s.QueueWaits = float64(hg.GetSampleCount())
		if hg.GetSampleCount() > 0 {
			s.QueueWaitMs = hg.GetSampleSum() / float64(hg.GetSampleCount()) * 1e3
		}
	})
	each("cqlgate_limiter_rejected_total", func(m *dto.Metric, l map[string]string) {
		// Every reason has a series from the start: list those that count.
		if v := val(m); v > 0 {
			s.Rejected[l["reason"]] += v
			s.RejectedTotal += v
		}
	})
	s.Hedges = sum("cqlgate_speculative_executions_total")
	s.Wins = sum("cqlgate_speculative_wins_total")
	s.Paused = sum("cqlgate_speculative_budget_paused") > 0
	s.Budget = sum("cqlgate_speculative_budget_allowed_total")
	cur := sample{at: s.Time, requests: sum("cqlgate_requests_total"), hedges: s.Hedges, wins: s.Wins, rejected: sum("cqlgate_overloaded_rejections_total")}
	h.mu.Lock()
	prev := h.prev
	if dt := cur.at.Sub(prev.at).Seconds(); !prev.at.IsZero() && dt > 0 {
		s.RequestRate = (cur.requests - prev.requests) / dt
		s.RejectRate = (cur.rejected - prev.rejected) / dt
		s.HedgeRate = (cur.hedges - prev.hedges) / dt
		s.WinRate = (cur.wins - prev.wins) / dt
	}
	if cur.at.Sub(prev.at) >= time.Second {
		h.prev = cur
	}
	h.mu.Unlock()
	if h.stmts != nil {
		if t := h.stmts(); t != nil {
			r := t.Snapshot("total", 15)
			s.Statements = &r
		}
	}
	return s
}

// histQuantile estimates quantile q of a Prometheus histogram from its
// cumulative buckets (the upper bound of the bucket holding it).
func histQuantile(h *dto.Histogram, q float64) float64 {
	rank := q * float64(h.GetSampleCount())
	for _, b := range h.GetBucket() {
		if float64(b.GetCumulativeCount()) >= rank {
			if math.IsInf(b.GetUpperBound(), 1) {
				break
			}
			return b.GetUpperBound()
		}
	}
	return math.NaN()
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'")
	_ = page.Execute(w, h.status())
}

var page = template.Must(template.New("status").Funcs(template.FuncMap{
	"f1": func(v float64) string {
		if math.IsNaN(v) {
			return "–"
		}
		return trimFloat(v, 1)
	},
	"f2": func(v float64) string {
		if math.IsNaN(v) {
			return "–"
		}
		return trimFloat(v, 2)
	},
	"pct": func(a, b float64) string {
		if b == 0 {
			return "–"
		}
		return trimFloat(100*a/b, 1) + "%"
	},
}).Parse(pageHTML))
