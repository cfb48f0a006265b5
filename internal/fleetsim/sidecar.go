package fleetsim

import (
	"time"

	"github.com/cqlgate/cqlgate/pkg/limiter"
)

// Workload is what one sidecar's application sends.
type Workload struct {
	// Rate > 0 makes an open loop: requests arrive as a Poisson process at
	// Rate per second, whatever happens to the earlier ones.
	Rate float64
	// Outstanding > 0 (with Rate 0) makes a closed loop: that many clients,
	// each sending its next request as soon as the last is answered (or
	// RetryDelay after a rejection), like the 50,000 goroutines of the seed
	// experiment.
	Outstanding int
	// Start and Stop bound the sidecar's life (Stop 0: to the end). A sidecar
	// starts with a fresh Limiter, as a new pod does.
	Start, Stop time.Duration
}

// RetryDelay is how long a closed-loop client waits after a rejection
// before its next request: an application's error path is not free, and a
// zero delay would spin.
const RetryDelay = time.Millisecond

// openFlows is the client connections of an open-loop sidecar, which the
// Limiter's queue serves round robin.
const openFlows = 8

// sidecar is one proxy: a real Limiter in front of the node.
type sidecar struct {
	id     int32
	w      Workload
	lim    *limiter.Limiter
	active bool // between Start and Stop
	flow   uint64

	// Counters since the warm-up ended.
	offered, ok, overloaded, timeouts uint64
}

// request is one request of the simulation; it is the Limiter's Waiter. The
// Sim recycles them.
type request struct {
	s       *Sim
	sc      *sidecar
	client  int32 // closed-loop client, -1 for open loop
	flow    uint64
	arrived int64 // at the sidecar
	sent    int64 // written to the backend (the Limiter admitted it)
	nodeIn  int64
	permit  limiter.Permit
	outcome limiter.Outcome
}

// Admitted sends the request to the node. It may run inside Acquire,
// Release or Sweep: it only schedules.
func (r *request) Admitted(p limiter.Permit, _ time.Time) {
	r.permit = p
	r.sent = r.s.clk.now
	r.s.after(r.s.sc.Node.NetDelay, event{kind: evNodeIn, r: r})
}

// Rejected answers the client with the proxy's OVERLOADED at once.
func (r *request) Rejected(limiter.Reason) {
	r.s.finish(r, limiter.Overloaded)
}

// send makes a new request of sidecar sc (client c, -1 for open loop) and
// asks its Limiter for a permit.
func (s *Sim) send(sc *sidecar, c int32) {
	r := s.newRequest()
	r.sc, r.client, r.arrived = sc, c, s.clk.now
	if c >= 0 {
		r.flow = uint64(c % 64)
	} else {
		sc.flow++
		r.flow = sc.flow % openFlows
	}
	if s.measuring() {
		sc.offered++
	}
	sc.lim.Acquire(r, r.flow, 0, nil, time.Time{})
}

// answer handles the node's answer reaching the sidecar: the permit is
// released with the latency from the backend write to the backend read,
// and the client is answered.
func (s *Sim) answer(r *request) {
	r.permit.Release(r.outcome, time.Duration(s.clk.now-r.sent))
	s.finish(r, r.outcome)
}

// finish answers the client, records the outcome and, for a closed loop,
// sends the client's next request.
func (s *Sim) finish(r *request, o limiter.Outcome) {
	sc := r.sc
	lat := s.clk.now - r.arrived
	s.stats.record(s, sc, o, lat, s.clk.now-r.sent)
	c := r.client
	s.free(r)
	if c < 0 || !sc.active {
		return
	}
	if o == limiter.Success {
		s.send(sc, c)
		return
	}
	s.after(RetryDelay, event{kind: evIssue, id: sc.id, aux: c})
}

func (s *Sim) newRequest() *request {
	if n := len(s.pool); n > 0 {
		r := s.pool[n-1]
		s.pool = s.pool[:n-1]
		return r
	}
	return &request{s: s}
}

func (s *Sim) free(r *request) {
	*r = request{s: s}
	s.pool = append(s.pool, r)
}
