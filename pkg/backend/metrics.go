package backend

// The cluster's Prometheus collector: nodes, pools and connections.

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// loadStale is the age past which a node's thread pool reading is no longer
// shown: the proxy stopped reading it (the limit mode is no longer fleet),
// and a frozen queue would mislead. A sidecar with a tiny share of a node
// reads it every 30 s.
const loadStale = 2 * time.Minute

// metrics is a collector that reads pool state at scrape time, so the hot
// path pays nothing for per-node gauges.
type metrics struct {
	cl       *Cluster
	connects prometheus.Counter
	replaced prometheus.Counter
	orphans  prometheus.Gauge
	conns    *prometheus.Desc
	inflight *prometheus.Desc
	up       *prometheus.Desc
	pools    *prometheus.Desc
	roles    *prometheus.Desc
	// The node's own thread pool, as last read (Cluster.Load).
	active, threads, pending, stages *prometheus.Desc
}

func newMetrics(cl *Cluster) *metrics {
	return &metrics{
		cl: cl,
		connects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cqlgate_backend_connects_total",
			Help: "Backend connections opened (initial and reconnects).",
		}),
		replaced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cqlgate_backend_connections_replaced_total",
			Help: "Backend connections replaced because too many of their stream ids were held by timed-out requests (--max-orphans-per-connection).",
		}),
		orphans: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cqlgate_backend_orphaned_streams",
			Help: "Stream ids of timed-out requests still reserved until Cassandra answers them.",
		}),
		conns:    prometheus.NewDesc("cqlgate_backend_connections", "Open backend connections per node (all pools).", []string{"node"}, nil),
		inflight: prometheus.NewDesc("cqlgate_backend_in_flight_requests", "Requests sent to a node and not yet answered.", []string{"node"}, nil),
		up:       prometheus.NewDesc("cqlgate_backend_node_up", "1 when the node is believed reachable.", []string{"node"}, nil),
		pools:    prometheus.NewDesc("cqlgate_backend_pools", "Open connection pools: one per protocol version in use and per keyspace clients USE (see --keyspace-pool-idle-timeout), and with --passthrough-identity role, each of those per role (see --role-pool-idle-timeout).", nil, nil),
		active: prometheus.NewDesc("cqlgate_backend_node_active_requests",
			"Requests a node's native transport threads were serving, by its own count (system_views.thread_pools, Native-Transport-Requests: active_tasks), as last read (within 2 minutes); read in fleet mode only (--limit-mode fleet).", []string{"node"}, nil),
		threads: prometheus.NewDesc("cqlgate_backend_node_request_threads",
			"The most requests a node serves at once (active_tasks_limit: native_transport_max_threads), as last read (within 2 minutes); read in fleet mode only.", []string{"node"}, nil),
		pending: prometheus.NewDesc("cqlgate_backend_node_queued_requests",
			"Requests waiting inside a node for one of its native transport threads (pending_tasks), all its clients' and not only this proxy's, as last read (within 2 minutes); read in fleet mode only. A queue that stands here while the active requests sit at the threads is a node driven past its best concurrency.", []string{"node"}, nil),
		stages: prometheus.NewDesc("cqlgate_backend_node_stage_queued_requests",
			"Reads and writes that hold a native transport thread and wait inside a node for a thread of the stage that serves them (pending_tasks of ReadStage and MutationStage: concurrent_reads, concurrent_writes), all its clients', as last read (within 2 minutes); read in fleet mode only. Fleet mode ends its cuts on a reading with nothing queued here or for a thread and a tenth of the threads free.", []string{"node"}, nil),
		roles: prometheus.NewDesc("cqlgate_backend_roles", "Client roles with their own backend pools or client connections (--passthrough-identity role; at most --max-role-pools).", nil, nil),
	}
}

func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	m.connects.Describe(ch)
	m.replaced.Describe(ch)
	m.orphans.Describe(ch)
	ch <- m.conns
	ch <- m.inflight
	ch <- m.up
	ch <- m.pools
	ch <- m.roles
	ch <- m.active
	ch <- m.threads
	ch <- m.pending
	ch <- m.stages
}

func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	m.connects.Collect(ch)
	m.replaced.Collect(ch)
	m.orphans.Collect(ch)
	cl := m.cl
	conns, inflight := map[*Node]int{}, map[*Node]int{}
	pools := cl.readyPools()
	ch <- prometheus.MustNewConstMetric(m.pools, prometheus.GaugeValue, float64(len(pools)))
	ch <- prometheus.MustNewConstMetric(m.roles, prometheus.GaugeValue, float64(cl.Roles()))
	cl.mu.Lock()
	nodes := make([]*Node, 0, len(cl.nodes))
	for _, n := range cl.nodes {
		nodes = append(nodes, n)
	}
	cl.mu.Unlock()
	for _, p := range pools {
		for _, np := range *p.nodes.Load() {
			conns[np.node] += np.numConns()
			inflight[np.node] += np.inFlight()
		}
	}
	for _, n := range nodes {
		up := 0.0
		if n.Up() {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(m.conns, prometheus.GaugeValue, float64(conns[n]), n.Addr)
		ch <- prometheus.MustNewConstMetric(m.inflight, prometheus.GaugeValue, float64(inflight[n]), n.Addr)
		ch <- prometheus.MustNewConstMetric(m.up, prometheus.GaugeValue, up, n.Addr)
		if l := n.LastLoad(); l != nil && n.Up() && time.Since(l.At) < loadStale {
			ch <- prometheus.MustNewConstMetric(m.active, prometheus.GaugeValue, float64(l.Active), n.Addr)
			ch <- prometheus.MustNewConstMetric(m.threads, prometheus.GaugeValue, float64(l.Threads), n.Addr)
			ch <- prometheus.MustNewConstMetric(m.pending, prometheus.GaugeValue, float64(l.Pending), n.Addr)
			ch <- prometheus.MustNewConstMetric(m.stages, prometheus.GaugeValue, float64(l.StagePending), n.Addr)
		}
	}
}
