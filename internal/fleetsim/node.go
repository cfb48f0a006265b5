package fleetsim

import (
	"math"
	"time"

	"github.com/cqlgate/cqlgate/pkg/limiter"
)

// NodeModel describes the Cassandra node behind the fleet.
//
// The node serves Threads requests at once (Cassandra's
// native_transport_max_threads, 128 by default), first come first served,
// each for ServiceFixed plus an exponential ServiceExp on average; beyond
// that requests wait in its queue, so latency is flat up to Threads in
// flight and climbs linearly past it (an M/G/c queue). Threads is the
// node's best concurrency: fewer leaves throughput on the table, more only
// adds latency.
//
// Past MaxInFlight requests in the node (queued or served) it answers
// OVERLOADED at once: what Cassandra does past
// native_transport_max_request_data_in_flight when the client sent
// THROW_ON_OVERLOAD, as the proxy does. A request that waited in the node's
// queue longer than Timeout is answered with a timeout instead of being
// served (native_transport_timeout, or the read timeout firing first).
type NodeModel struct {
	Threads      int
	ServiceFixed time.Duration
	ServiceExp   time.Duration
	MaxInFlight  int
	Timeout      time.Duration
	// NetDelay is the one-way network delay between a sidecar and the node.
	NetDelay time.Duration
	// HostJitter is the mean of an exponential delay added to every answer
	// (0: none): the scheduling delays of a busy host. make fleet's
	// proxies, generators, emulator and node share two cores, and timers
	// and reads there run up to milliseconds late.
	HostJitter time.Duration
}

// DefaultNode is the node the sweep uses: 128 threads of 2.5ms + 2.5ms
// exponential (25,600 requests/s), OVERLOADED past 4,096 in flight (the
// bytes bound over requests of a few kilobytes), 2s timeout, 0.1ms network.
func DefaultNode() NodeModel {
	return NodeModel{Threads: 128, ServiceFixed: 2500 * time.Microsecond, ServiceExp: 2500 * time.Microsecond,
		MaxInFlight: 4096, Timeout: 2 * time.Second, NetDelay: 100 * time.Microsecond}
}

// meanService is the mean service time at slowdown factor f.
func (m NodeModel) meanService(f float64) float64 {
	return f * float64(m.ServiceFixed+m.ServiceExp)
}

// Capacity is the node's throughput in requests/s at slowdown factor f.
func (m NodeModel) Capacity(f float64) float64 { return float64(m.Threads) / m.meanService(f) * 1e9 }

// UnloadedP99 is the 99th percentile latency a request sees from the sidecar
// when the node has a free thread: service time plus the network both ways.
func (m NodeModel) UnloadedP99(f float64) time.Duration {
	return time.Duration(f*(float64(m.ServiceFixed)+float64(m.ServiceExp)*math.Log(100))) + 2*m.NetDelay
}

// node is the simulated node's state.
type node struct {
	m      NodeModel
	slow   float64 // service time factor: 1 normally, more after a step
	busy   int
	queue  []*request // FIFO; head at qhead
	qhead  int
	served uint64
}

func (n *node) inNode() int { return n.busy + len(n.queue) - n.qhead }

// arrive takes a request reaching the node.
func (n *node) arrive(s *Sim, r *request) {
	r.nodeIn = s.clk.now
	if n.inNode() >= n.m.MaxInFlight {
		r.outcome = limiter.Overloaded
		s.after(n.m.NetDelay, event{kind: evAnswer, r: r})
		return
	}
	if n.busy < n.m.Threads {
		n.start(s, r)
		return
	}
	n.queue = append(n.queue, r)
}

func (n *node) start(s *Sim, r *request) {
	n.busy++
	d := n.slow * (float64(n.m.ServiceFixed) + s.rng.ExpFloat64()*float64(n.m.ServiceExp))
	s.after(time.Duration(d), event{kind: evNodeDone, r: r})
}

// done finishes a request and starts the next queued ones.
func (n *node) done(s *Sim, r *request) {
	n.busy--
	n.served++
	r.outcome = limiter.Success
	d := n.m.NetDelay
	if n.m.HostJitter > 0 {
		d += time.Duration(s.rng.ExpFloat64() * float64(n.m.HostJitter))
	}
	s.after(d, event{kind: evAnswer, r: r})
	n.pull(s)
}

// pull starts queued requests while threads are free, answering those that
// waited past the timeout.
func (n *node) pull(s *Sim) {
	for n.busy < n.m.Threads && n.qhead < len(n.queue) {
		r := n.queue[n.qhead]
		n.queue[n.qhead] = nil
		n.qhead++
		if s.clk.now-r.nodeIn > int64(n.m.Timeout) {
			r.outcome = limiter.Timeout
			s.after(n.m.NetDelay, event{kind: evAnswer, r: r})
			continue
		}
		n.start(s, r)
	}
	if n.qhead > 1024 && 2*n.qhead > len(n.queue) {
		// Compact now and then rather than on every pop.
		k := copy(n.queue, n.queue[n.qhead:])
		clear(n.queue[k:])
		n.queue = n.queue[:k]
		n.qhead = 0
	}
}
