// Package fleetsim simulates a fleet of cqlgate sidecars, each running the
// real pkg/limiter code, in front of one Cassandra node, on a virtual clock.
//
// It exists to answer questions a 2-core machine cannot: what 1,000 sidecars
// with their own adaptive limits do to a node together, whether the sum of
// their limits tracks the node's best concurrency, how fair they are to one
// another and how fast they settle after the node slows down. Everything runs
// on one goroutine from an event queue (no sleeps, no goroutine per request),
// and all randomness comes from one seeded generator, so a seed reproduces a
// run exactly (see Run).
//
// It owns the model node and the virtual clock; it must not copy or fork
// limiter logic: a change to pkg/limiter is what it measures.
package fleetsim

import "time"

// clock is the virtual clock every sidecar's Limiter reads. The simulation is
// single-threaded, so it needs no lock.
type clock struct {
	base time.Time
	now  int64 // ns since base
}

func (c *clock) Now() time.Time { return c.base.Add(time.Duration(c.now)) }

type evKind uint8

const (
	evArrival  evKind = iota // an open-loop sidecar's next request arrives
	evIssue                  // a closed-loop client sends its next request
	evNodeIn                 // a request reaches the node
	evNodeDone               // the node finishes serving a request
	evAnswer                 // the node's answer reaches the sidecar
	evTick                   // a sidecar's Limiter.Sweep
	evSample                 // the 100ms sampler
	evControl                // a scenario action (capacity step, sidecar start or stop)
	evPoll                   // a sidecar reads the node's count of completed requests
)

// event is one entry of the queue. Plain fields rather than closures: a run
// at K=1,000 handles tens of millions of events, and a closure per event
// would be most of the garbage.
type event struct {
	at   int64
	seq  uint64 // ties run in scheduling order, for determinism
	kind evKind
	id   int32 // sidecar or action index
	aux  int32 // closed-loop client
	r    *request
}

// eventQueue is a binary min-heap on (at, seq), typed to avoid the boxing
// of container/heap.
type eventQueue struct {
	h   []event
	seq uint64
}

func (q *eventQueue) less(i, j int) bool {
	a, b := &q.h[i], &q.h[j]
	return a.at < b.at || a.at == b.at && a.seq < b.seq
}

func (q *eventQueue) push(e event) {
	q.seq++
	e.seq = q.seq
	q.h = append(q.h, e)
	i := len(q.h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !q.less(i, p) {
			break
		}
		q.h[i], q.h[p] = q.h[p], q.h[i]
		i = p
	}
}

func (q *eventQueue) pop() event {
	e := q.h[0]
	n := len(q.h) - 1
	q.h[0] = q.h[n]
	q.h[n] = event{}
	q.h = q.h[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && q.less(r, l) {
			m = r
		}
		if !q.less(m, i) {
			break
		}
		q.h[i], q.h[m] = q.h[m], q.h[i]
		i = m
	}
	return e
}
