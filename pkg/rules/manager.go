package rules

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Set is an immutable index of rules: by statement id, then by table.
type Set struct {
	rules   []*Rule // in file order
	byStmt  map[string]*Rule
	byTable map[tableKey]*Rule
}

type tableKey struct{ keyspace, table string }

// Match returns the rule of a statement with the given id (hex, as
// /statements shows it) working on keyspace.table, or nil. A rule naming
// the statement wins over one naming its table. It allocates nothing.
func (s *Set) Match(id, keyspace, table string) *Rule {
	if r := s.byStmt[id]; r != nil {
		return r
	}
	if table == "" {
		return nil
	}
	return s.byTable[tableKey{keyspace, table}]
}

// Rules returns the rules in file order.
func (s *Set) Rules() []*Rule { return s.rules }

// Manager holds the current rules. The zero Manager has none.
type Manager struct {
	cur atomic.Pointer[Set] // nil: no rules
	mu  sync.Mutex          // serializes Apply
}

// Current returns the rules now, or nil when there are none: the one
// atomic load a request without rules pays.
func (m *Manager) Current() *Set { return m.cur.Load() }

// Change summarizes what Apply did, by rule name.
type Change struct {
	Added, Changed, Removed, Kept []string
}

// Apply makes defs the rules at now. A rule whose name was there already
// keeps its permits, queue and counters, and takes the new definition: a
// raised limit admits from its queue at once, a lowered one lets the
// requests in flight finish and admits again once under it. A rule no
// longer listed caps nothing any more: its queue is admitted, and its
// permits in flight are released into it as their requests end.
func (m *Manager) Apply(defs []Def, now time.Time) Change {
	m.mu.Lock()
	old := map[string]*Rule{}
	if s := m.cur.Load(); s != nil {
		for _, r := range s.rules {
			old[r.name] = r
		}
	}
	var ch Change
	var admit []waiting
	var admitBy []*Rule
	next := &Set{byStmt: map[string]*Rule{}, byTable: map[tableKey]*Rule{}}
	for _, d := range defs {
		r := old[d.Name]
		switch {
		case r == nil:
			r = newRule(d)
			ch.Added = append(ch.Added, d.Name)
		default:
			delete(old, d.Name)
			r.mu.Lock()
			if r.def == d {
				ch.Kept = append(ch.Kept, d.Name)
			} else {
				r.setDefLocked(d)
				n := len(admit)
				admit = r.admitLocked(admit)
				for range len(admit) - n {
					admitBy = append(admitBy, r)
				}
				ch.Changed = append(ch.Changed, d.Name)
			}
			r.mu.Unlock()
		}
		next.rules = append(next.rules, r)
		if d.Statement != "" {
			next.byStmt[d.Statement] = r
		} else {
			next.byTable[tableKey{d.Keyspace, d.Table}] = r
		}
	}
	for name, r := range old {
		r.mu.Lock()
		r.retired = true
		n := len(admit)
		admit = r.admitLocked(admit)
		for range len(admit) - n {
			admitBy = append(admitBy, r)
		}
		r.mu.Unlock()
		ch.Removed = append(ch.Removed, name)
	}
	slices.Sort(ch.Removed)
	if len(next.rules) == 0 {
		m.cur.Store(nil)
	} else {
		m.cur.Store(next)
	}
	m.mu.Unlock()
	for i, q := range admit {
		q.w.RuleAdmitted(Permit{admitBy[i]}, now)
	}
	return ch
}

// Sweep refuses the waits past their deadline at now; the proxy calls it
// every few milliseconds.
func (m *Manager) Sweep(now time.Time) {
	s := m.cur.Load()
	if s == nil {
		return
	}
	ns := now.UnixNano()
	var buf [16]waiting
	for _, r := range s.rules {
		r.mu.Lock()
		// Deadlines are not in queue order (a request's own deadline may be
		// earlier, a reload may change max_queue_wait): scan it, it is short.
		if len(r.queue) == 0 {
			r.mu.Unlock()
			continue
		}
		out := r.expireLocked(ns, buf[:0])
		msg := r.msgWait
		r.mu.Unlock()
		for _, q := range out {
			q.w.RuleRejected(msg)
		}
	}
}

// CancelFlow drops the waits of flow (a client that is gone): each gets
// RuleRejected("").
func (m *Manager) CancelFlow(flow uint64) {
	s := m.cur.Load()
	if s == nil {
		return
	}
	for _, r := range s.rules {
		r.mu.Lock()
		if len(r.queue) == 0 {
			r.mu.Unlock()
			continue
		}
		out := r.cancelLocked(flow, nil)
		r.mu.Unlock()
		for _, q := range out {
			q.w.RuleRejected("")
		}
	}
}

// Stats returns every rule's state, in file order (nil: no rules).
func (m *Manager) Stats() []Stat {
	s := m.cur.Load()
	if s == nil {
		return nil
	}
	out := make([]Stat, len(s.rules))
	for i, r := range s.rules {
		out[i] = r.Stat()
	}
	return out
}

type collector struct {
	m                                           *Manager
	limit, inFlight, queued, admitted, rejected *prometheus.Desc
}

// NewCollector returns the Prometheus collector of m's rules. Rule names
// come from the rules file, so the series are bounded by it.
func NewCollector(m *Manager) prometheus.Collector {
	l := []string{"rule"}
	return &collector{
		m:        m,
		limit:    prometheus.NewDesc("cqlgate_rule_limit", "Requests a rule of the rules file (--rules-file) allows in flight (max_in_flight).", l, nil),
		inFlight: prometheus.NewDesc("cqlgate_rule_in_flight", "Requests matched by a rule that hold one of its permits now (from admission to the end of the request, hedges included).", l, nil),
		queued:   prometheus.NewDesc("cqlgate_rule_queued", "Requests waiting in a rule's queue now.", l, nil),
		admitted: prometheus.NewDesc("cqlgate_rule_admitted_total", "Requests a rule admitted, at once or after waiting in its queue.", l, nil),
		rejected: prometheus.NewDesc("cqlgate_rule_rejected_total", "Requests a rule refused with OVERLOADED, by reason: queue_full (at arrival) or queue_timeout (waited max_queue_wait or the request's deadline).", []string{"rule", "reason"}, nil),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.limit, c.inFlight, c.queued, c.admitted, c.rejected} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.m.Stats() {
		ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(s.Limit), s.Name)
		ch <- prometheus.MustNewConstMetric(c.inFlight, prometheus.GaugeValue, float64(s.InFlight), s.Name)
		ch <- prometheus.MustNewConstMetric(c.queued, prometheus.GaugeValue, float64(s.Queued), s.Name)
		ch <- prometheus.MustNewConstMetric(c.admitted, prometheus.CounterValue, float64(s.Admitted), s.Name)
		ch <- prometheus.MustNewConstMetric(c.rejected, prometheus.CounterValue, float64(s.RejectedQueueFull), s.Name, "queue_full")
		ch <- prometheus.MustNewConstMetric(c.rejected, prometheus.CounterValue, float64(s.RejectedQueueTimeout), s.Name, "queue_timeout")
	}
}
