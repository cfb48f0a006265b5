package limiter

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics. The hot path updates none of them: gauges and counters are read
// from the Limiter's own state at scrape time (one lock, a copy), and only
// admissions from the queue observe the wait histogram.
//
//	cqlgate_limiter_limit{node}                 gauge    current limit of an active node
//	cqlgate_limiter_global_limit                gauge    GlobalLimit, or the sum of the active nodes' limits
//	cqlgate_limiter_in_flight{node}             gauge    permits out on a node
//	cqlgate_limiter_global_in_flight            gauge    permits out in total
//	cqlgate_limiter_queue_depth                 gauge    requests waiting
//	cqlgate_limiter_standing_queue              gauge    1 if CoDel rejected a request within QueueInterval
//	cqlgate_limiter_queue_wait_seconds          histogram wait of requests admitted from the queue
//	cqlgate_limiter_admitted_total              counter  permits granted
//	cqlgate_limiter_rejected_total{reason}      counter  requests turned away, by Kind.Label
//	cqlgate_limiter_limit_changes_total{node}   counter  changes of a node's limit
//	cqlgate_limiter_double_releases_total       counter  ignored second Releases (bugs)
//	cqlgate_limiter_node_rate{node}             gauge    the node's own completed requests/s (fleet law)
//	cqlgate_limiter_rate_decisions_total{node,decision} counter  limit changes the node's counts decided
//	cqlgate_limiter_baseline_seconds{node}      gauge    the node's unqueued latency the fleet law reads waits against
//	cqlgate_limiter_node_proxies{node}          gauge    proxies the node lists among its clients (fleet law)
//	cqlgate_limiter_fair_share_ratio{node}      gauge    this proxy's share of the fleet's requests times their number (fleet law)
//	cqlgate_limiter_node_unreadable{node}       gauge    1 while the node cannot report its counts and the fleet law holds it at NodeLimit
//	cqlgate_limiter_cpu_pressure_ratio          gauge    the share of the time the proxy's tasks waited for a CPU (fleet law; -1 unknown)

// NodeStats is one node's part of Stats.
type NodeStats struct {
	ID           NodeID
	Active       bool    // set by SetNodes
	Limit        int     // slots: the exact limit rounded up
	LimitExact   float64 // as the law set it (fractional for the fleet law)
	InFlight     int
	LimitChanges uint64
	// NodeRate is the node's own rate of completed requests (all its
	// clients'), as the fleet law last read it; 0 when unknown.
	NodeRate float64
	// Undone counts runs of cuts the node's rate undid; Probes counts
	// probes it kept; Rebased counts runs of cuts it ended with a new
	// baseline (a sidecar with a small share of the node), Room those a
	// reading of the node's threads with room ended (nodequeue.go).
	Undone, Probes, Rebased, Room uint64
	// Baseline is the fleet law's unqueued latency of the node (the lowest
	// window minimum, from the backend write to the backend read), against
	// which it reads the standing wait; 0 in the other modes or before the
	// first window.
	Baseline time.Duration
	// Proxies is the number of proxies the node lists among its clients,
	// as the fleet law last read it (0: unknown); ShareRatio this proxy's
	// share of their requests times their number, 1 at a fair share and
	// where unknown (fleetsize.go).
	Proxies    int
	ShareRatio float64
	// Unreadable: the node cannot report its counts, and the fleet law
	// holds it at NodeLimit (NodeUnreadable).
	Unreadable bool
}

// Stats is a snapshot of the Limiter, as exported in its metrics.
type Stats struct {
	Limit int // GlobalLimit, or the sum of the active nodes' limits
	// LimitExact is the sum of the active nodes' exact limits (the fleet
	// law's are fractional), whatever GlobalLimit.
	LimitExact     float64
	InFlight       int
	Queued         int
	Standing       bool // CoDel turned a request away within the last QueueInterval
	Admitted       uint64
	Rejected       [numKinds]uint64 // by Kind
	LimitChanges   uint64
	DoubleReleases uint64
	MaxWait        time.Duration // the configured MaxWait
	Nodes          []NodeStats   // active nodes, and inactive ones with permits out
	// CPUPressure is the last CPUPressure given (-1: none or unknown).
	CPUPressure float64
}

// Stats returns a snapshot. It allocates; it is meant for scrapes, tests and
// admin pages, not for the request path.
func (l *Limiter) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := Stats{
		InFlight:       l.inflight,
		Queued:         l.q.n,
		Standing:       l.q.standing(l.now(), int64(l.cfg.QueueInterval)),
		Admitted:       l.admitted,
		Rejected:       l.rejected,
		LimitChanges:   l.limitChanges,
		DoubleReleases: l.doubleReleases,
		MaxWait:        l.cfg.MaxWait,
		CPUPressure:    l.cpuPressure,
	}
	sum := 0
	for i := range l.nodes {
		n := &l.nodes[i]
		if !n.active && n.inflight == 0 {
			continue
		}
		if n.active {
			sum += int(n.limit)
			s.LimitExact += n.exact
		}
		s.Nodes = append(s.Nodes, NodeStats{ID: NodeID(i), Active: n.active, Limit: int(n.limit), LimitExact: n.exact, InFlight: int(n.inflight), LimitChanges: n.changes,
			NodeRate: n.fl.nr.rate, Undone: n.fl.nr.undone, Probes: n.fl.nr.probed, Rebased: n.fl.nr.rebased, Room: n.fl.nr.notQueued,
			Baseline: time.Duration(n.fl.base), Proxies: n.fl.size.k, ShareRatio: n.fl.x(), Unreadable: n.unreadable})
	}
	s.Limit = sum
	if l.globalLimit > 0 {
		s.Limit = l.globalLimit
	}
	return s
}

type collector struct {
	l                                                        *Limiter
	limit, globalLimit, inFlight, globalInFlight, queueDepth *prometheus.Desc
	standing, admitted, rejected, limitChanges, doubleRel    *prometheus.Desc
	maxWait, nodeRate, rateDecisions, baseline               *prometheus.Desc
	proxies, shareRatio, unreadable, cpuPressure             *prometheus.Desc
}

func newCollector(l *Limiter) *collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("cqlgate_limiter_"+name, help, labels, nil)
	}
	return &collector{
		l:              l,
		limit:          d("limit", "Current concurrency limit of a Cassandra node.", "node"),
		globalLimit:    d("global_limit", "Concurrency limit of the whole cluster: the global limit, or the sum of the node limits."),
		inFlight:       d("in_flight", "Requests admitted to a Cassandra node and not yet released.", "node"),
		globalInFlight: d("global_in_flight", "Requests admitted and not yet released."),
		queueDepth:     d("queue_depth", "Requests waiting for a permit."),
		standing:       d("standing_queue", "1 if a request of a standing queue was rejected within the queue interval (CoDel)."),
		admitted:       d("admitted_total", "Permits granted."),
		rejected:       d("rejected_total", "Requests answered OVERLOADED by the limiter, by reason.", "reason"),
		limitChanges:   d("limit_changes_total", "Changes of a node's concurrency limit.", "node"),
		doubleRel:      d("double_releases_total", "Permits released more than once (ignored; a bug)."),
		maxWait:        d("queue_max_wait_seconds", "The longest a request may wait in the queue (--queue-max-wait), for alerts on queue wait near its bound."),
		nodeRate:       d("node_rate", "Fleet mode: the rate of requests a Cassandra node completed for all its clients, from its own count (system_views.thread_pools), as last read; 0 in the other modes.", "node"),
		baseline:       d("baseline_seconds", "Fleet mode: the node's latency when unqueued, as this proxy measures it (the lowest minimum of a window, from the backend write to the backend read); the standing wait that cuts the limit is read against it, so proxies of one fleet should show about the same; 0 in the other modes.", "node"),
		proxies:        d("node_proxies", "Fleet mode: the proxies connected to a Cassandra node, this one included, from the node's list of clients (system_views.clients, the CQLGATE_INSTANCE option of each connection), as last read; 0 while unknown. The fleet law scales its growth by sqrt(8/proxies) past 8, so that a fleet's sum of limits does not rise with its size.", "node"),
		shareRatio:     d("fair_share_ratio", "Fleet mode: this proxy's share of the requests the node's proxies sent it, times their number: 1 at a fair share. Above 1 the fleet law grows this proxy's limit more slowly and cuts it more, below 1 the reverse (bounded to 0.25-4); 1 while the number of proxies is unknown, and for a proxy that carries nearly all of the node's requests.", "node"),
		unreadable:     d("node_unreadable", "Fleet mode: 1 while a Cassandra node cannot report its counts (system_views.thread_pools: Cassandra 4.0 or later, and SELECT on it for the proxy's role), so that its limit is the fixed --node-limit; 0 otherwise.", "node"),
		cpuPressure:    d("cpu_pressure_ratio", "Fleet mode: the share of the last 10 s in which the proxy's tasks waited for a CPU (Linux's pressure stall information, some avg10), as last read; -1 where the kernel does not report it, and in the other modes. At 0.25 or more a proxy that carries nearly all of a node's requests holds that node at --node-limit: its latencies then carry its own wait for a CPU."),
		rateDecisions:  d("rate_decisions_total", "Fleet mode: limit changes decided by the node's own counts: undo (cuts that cost the node throughput, undone), probe (a raise that the node turned into throughput, kept), rebase (cuts of many sidecars that cost the node throughput while its latency stood: a slower node, whose latency becomes the baseline) and room (cuts ended by a reading of the node with nothing queued and threads free: a slower node with room, whose latency becomes the baseline).", "node", "decision"),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.limit, c.globalLimit, c.inFlight, c.globalInFlight, c.queueDepth, c.standing, c.admitted, c.rejected, c.limitChanges, c.doubleRel, c.maxWait, c.nodeRate, c.rateDecisions, c.baseline, c.proxies, c.shareRatio, c.unreadable, c.cpuPressure} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := c.l.Stats()
	g, ctr := prometheus.GaugeValue, prometheus.CounterValue
	name := c.l.nodeName.Load()
	for _, n := range s.Nodes {
		id := strconv.Itoa(int(n.ID))
		if name != nil {
			id = (*name)(n.ID)
		}
		if n.Active {
			ch <- prometheus.MustNewConstMetric(c.limit, g, n.LimitExact, id)
		}
		ch <- prometheus.MustNewConstMetric(c.inFlight, g, float64(n.InFlight), id)
		ch <- prometheus.MustNewConstMetric(c.limitChanges, ctr, float64(n.LimitChanges), id)
		if n.Active {
			ch <- prometheus.MustNewConstMetric(c.nodeRate, g, n.NodeRate, id)
			ch <- prometheus.MustNewConstMetric(c.baseline, g, n.Baseline.Seconds(), id)
			ch <- prometheus.MustNewConstMetric(c.proxies, g, float64(n.Proxies), id)
			ch <- prometheus.MustNewConstMetric(c.shareRatio, g, n.ShareRatio, id)
			unreadable := 0.0
			if n.Unreadable {
				unreadable = 1
			}
			ch <- prometheus.MustNewConstMetric(c.unreadable, g, unreadable, id)
			ch <- prometheus.MustNewConstMetric(c.rateDecisions, ctr, float64(n.Undone), id, "undo")
			ch <- prometheus.MustNewConstMetric(c.rateDecisions, ctr, float64(n.Probes), id, "probe")
			ch <- prometheus.MustNewConstMetric(c.rateDecisions, ctr, float64(n.Rebased), id, "rebase")
			ch <- prometheus.MustNewConstMetric(c.rateDecisions, ctr, float64(n.Room), id, "room")
		}
	}
	ch <- prometheus.MustNewConstMetric(c.globalLimit, g, float64(s.Limit))
	ch <- prometheus.MustNewConstMetric(c.globalInFlight, g, float64(s.InFlight))
	ch <- prometheus.MustNewConstMetric(c.queueDepth, g, float64(s.Queued))
	standing := 0.0
	if s.Standing {
		standing = 1
	}
	ch <- prometheus.MustNewConstMetric(c.standing, g, standing)
	ch <- prometheus.MustNewConstMetric(c.admitted, ctr, float64(s.Admitted))
	for k := Kind(1); k < numKinds; k++ {
		ch <- prometheus.MustNewConstMetric(c.rejected, ctr, float64(s.Rejected[k]), k.Label())
	}
	ch <- prometheus.MustNewConstMetric(c.doubleRel, ctr, float64(s.DoubleReleases))
	ch <- prometheus.MustNewConstMetric(c.maxWait, g, s.MaxWait.Seconds())
	ch <- prometheus.MustNewConstMetric(c.cpuPressure, g, s.CPUPressure)
}
