package limiter

// The queue of requests waiting for a permit. Everything here is guarded by
// Limiter.mu and allocates only when a slab grows: entries and flows live in
// slices, linked by int32 indices, and are recycled through free lists.
//
//   - Each flow (client connection, per class) is a FIFO of entries.
//   - Each class is a ring of its backlogged flows, served round robin, so a
//     flow with 10,000 waiting requests and one with 10 alternate.
//   - Classes are served by deficit round robin with their weights.
//   - Every entry also sits in a timer wheel bucket by deadline, so the
//     ticker expires the due ones without scanning the queue and without a
//     timer per request.

const none = -1

type flowKey struct {
	flow  uint64
	class int32
}

type entry struct {
	w        Waiter
	cands    []NodeID
	enq      int64 // when it was queued, ns since the Limiter's epoch
	deadline int64 // min(enq+MaxWait, the caller's deadline)
	byCaller bool  // the deadline is the caller's
	flow     int32
	prev     int32 // neighbours in the flow's FIFO; next also links the free list
	next     int32
	wprev    int32 // neighbours in the wheel bucket
	wnext    int32
	bucket   int32
}

type flowQ struct {
	key          flowKey
	class        int32
	n            int32
	head, tail   int32 // entries
	rprev, rnext int32 // the class's ring of backlogged flows; rnext links the free list

	// CoDel state, per flow as in fq_codel: with one state for the whole
	// queue, a quiet flow's short waits (round robin serves it first)
	// would keep resetting it while a greedy flow's queue stood. firstAbove
	// is when the flow's waits may be called standing (0 while the last
	// was below target); dropping is CoDel's state; lastDrop is when the
	// flow last had a request turned away (0 = never). The state goes with
	// the flow when its queue empties.
	firstAbove, lastDrop int64
	dropping             bool
	// nAbove is the flow's backlog when firstAbove was set: CoDel only
	// starts dropping if the backlog grew since (see codel).
	nAbove int32
}

type classQ struct {
	weight int
	credit int   // dequeues left in the current DRR round
	n      int   // waiting entries
	nflows int   // backlogged flows
	cursor int32 // the flow served next, none when nflows == 0
}

type queue struct {
	entries   []entry
	freeEntry int32
	flows     []flowQ
	freeFlow  int32
	byKey     map[flowKey]int32
	classes   []classQ
	cur       int // the class DRR serves now
	n         int // waiting entries

	wheel    []int32 // bucket heads
	tick     int64   // ns per bucket
	lastTick int64   // the last tick swept

	// lastDrop is when a request of any flow was last turned away as part
	// of a standing queue (0 = never). Within an interval of it the queue
	// is overloaded: arrivals are shed (see shed).
	lastDrop int64
}

func (q *queue) init(weights []int, tick, horizon, now int64) {
	q.freeEntry, q.freeFlow = none, none
	q.byKey = make(map[flowKey]int32)
	q.setWeights(weights)
	q.tick = tick
	q.lastTick = now/tick - 1
	q.resizeWheel(horizon)
}

// setWeights applies new class weights. Classes are never removed, so
// requests queued in a class that a reload dropped are still served (with
// weight 1) until they are gone.
func (q *queue) setWeights(weights []int) {
	for len(q.classes) < len(weights) {
		q.classes = append(q.classes, classQ{cursor: none})
	}
	for i := range q.classes {
		w := 1
		if i < len(weights) {
			w = weights[i]
		}
		q.classes[i].weight = w
		q.classes[i].credit = min(q.classes[i].credit, w)
	}
}

// resizeWheel makes the wheel cover horizon ns (the longest possible wait)
// plus two buckets, and rehashes the entries when its size changes.
func (q *queue) resizeWheel(horizon int64) {
	nb := int(horizon/q.tick) + 2
	nb = max(nb, 8)
	if nb == len(q.wheel) {
		return
	}
	q.wheel = make([]int32, nb)
	for i := range q.wheel {
		q.wheel[i] = none
	}
	for fi := range q.flows {
		f := &q.flows[fi]
		if f.n == 0 {
			continue
		}
		for ei := f.head; ei != none; ei = q.entries[ei].next {
			q.wheelInsert(ei)
		}
	}
}

// push queues a request at the tail of its flow.
func (q *queue) push(w Waiter, cands []NodeID, flow uint64, class int32, enq, deadline int64, byCaller bool) {
	key := flowKey{flow, class}
	fi, ok := q.byKey[key]
	if !ok {
		fi = q.newFlow(key, class)
		q.byKey[key] = fi
	}
	ei := q.newEntry()
	e := &q.entries[ei]
	*e = entry{w: w, cands: cands, enq: enq, deadline: deadline, byCaller: byCaller, flow: fi, prev: none, next: none}
	f := &q.flows[fi]
	if f.tail == none {
		f.head = ei
	} else {
		e.prev = f.tail
		q.entries[f.tail].next = ei
	}
	f.tail = ei
	f.n++
	q.wheelInsert(ei)
	q.classes[class].n++
	q.n++
}

func (q *queue) newEntry() int32 {
	if ei := q.freeEntry; ei != none {
		q.freeEntry = q.entries[ei].next
		return ei
	}
	q.entries = append(q.entries, entry{})
	return int32(len(q.entries) - 1)
}

// newFlow makes a backlogged flow and puts it last in its class's round:
// just before the cursor.
func (q *queue) newFlow(key flowKey, class int32) int32 {
	fi := q.freeFlow
	if fi != none {
		q.freeFlow = q.flows[fi].rnext
	} else {
		q.flows = append(q.flows, flowQ{})
		fi = int32(len(q.flows) - 1)
	}
	f := &q.flows[fi]
	*f = flowQ{key: key, class: class, head: none, tail: none}
	c := &q.classes[class]
	if c.cursor == none {
		f.rprev, f.rnext = fi, fi
		c.cursor = fi
	} else {
		next := c.cursor
		prev := q.flows[next].rprev
		f.rprev, f.rnext = prev, next
		q.flows[prev].rnext = fi
		q.flows[next].rprev = fi
	}
	c.nflows++
	return fi
}

// remove unlinks entry ei from its flow and the wheel and frees it; a flow
// left empty leaves its class's ring.
func (q *queue) remove(ei int32) {
	e := &q.entries[ei]
	fi := e.flow
	f := &q.flows[fi]
	if e.prev == none {
		f.head = e.next
	} else {
		q.entries[e.prev].next = e.next
	}
	if e.next == none {
		f.tail = e.prev
	} else {
		q.entries[e.next].prev = e.prev
	}
	f.n--
	q.wheelRemove(ei)
	c := &q.classes[f.class]
	c.n--
	q.n--
	if f.n == 0 {
		if c.cursor == fi {
			c.cursor = f.rnext
		}
		if f.rnext == fi {
			c.cursor = none
		} else {
			q.flows[f.rprev].rnext = f.rnext
			q.flows[f.rnext].rprev = f.rprev
		}
		c.nflows--
		delete(q.byKey, f.key)
		f.rnext = q.freeFlow
		q.freeFlow = fi
	}
	*e = entry{next: q.freeEntry}
	q.freeEntry = ei
}

func ceilDiv(a, b int64) int64 {
	d := a / b
	if a%b > 0 {
		d++
	}
	return d
}

func (q *queue) wheelInsert(ei int32) {
	e := &q.entries[ei]
	b := int32(ceilDiv(e.deadline, q.tick) % int64(len(q.wheel)))
	if b < 0 {
		b += int32(len(q.wheel))
	}
	e.bucket = b
	e.wprev = none
	e.wnext = q.wheel[b]
	if e.wnext != none {
		q.entries[e.wnext].wprev = ei
	}
	q.wheel[b] = ei
}

func (q *queue) wheelRemove(ei int32) {
	e := &q.entries[ei]
	if e.wprev == none {
		q.wheel[e.bucket] = e.wnext
	} else {
		q.entries[e.wprev].wnext = e.wnext
	}
	if e.wnext != none {
		q.entries[e.wnext].wprev = e.wprev
	}
}

// currentClass returns the class deficit round robin serves now: the
// current one while it has waiters and credit, else the next class with
// waiters, whose credit is refilled with its weight. It returns none when
// nothing waits.
func (q *queue) currentClass() int {
	if q.n == 0 {
		return none
	}
	for range len(q.classes) + 1 {
		c := &q.classes[q.cur]
		if c.n > 0 && c.credit > 0 {
			return q.cur
		}
		c.credit = 0
		q.cur++
		if q.cur == len(q.classes) {
			q.cur = 0
		}
		q.classes[q.cur].credit = q.classes[q.cur].weight
	}
	return none // unreachable: q.n > 0 means some class has waiters
}

// codel updates flow fi's CoDel state with the wait of its request
// leaving the queue and reports whether that request must be rejected as
// part of a standing queue. It follows CoDel (Nichols and Jacobson, RFC
// 8289) without its drop-rate control law: while dropping, every request
// that waited more than target is turned away, because a request is not a
// packet whose loss makes a sender back off; each drop costs a client an
// error, so only the requests that waited too long are dropped. As in
// CoDel, a flow whose queue stood less than an interval ago gets no new
// grace period. Unlike CoDel, a queue that stood above target for an
// interval is only called standing if it also grew by a quarter meanwhile:
// arrivals outpace the cluster (overload), rather than a fixed number of
// requests cycling through it (a closed loop).
func (q *queue) codel(fi int32, now, wait, target, interval int64) bool {
	if target < 0 {
		return false
	}
	f := &q.flows[fi]
	if wait <= target {
		f.firstAbove, f.dropping = 0, false
		return false
	}
	switch {
	case f.dropping:
	case f.lastDrop != 0 && now-f.lastDrop < interval:
		f.dropping = true
	case f.firstAbove == 0:
		f.firstAbove, f.nAbove = now+interval, f.n
	case now >= f.firstAbove && f.n > f.nAbove+f.nAbove/4:
		f.dropping = true
	case now >= f.firstAbove:
		// The queue stood for an interval without growing: a closed
		// loop (a client with a fixed number of requests outstanding,
		// each sent when the last is answered). Its wait is its own
		// concurrency over the cluster's throughput; turning requests
		// away would not shorten it, as each is sent again at once, and
		// would only trade latency for errors. Look again after another
		// interval; MaxWait still bounds the wait.
		f.firstAbove, f.nAbove = now+interval, f.n
	}
	if f.dropping {
		f.lastDrop, q.lastDrop = now, now
	}
	return f.dropping
}

// shed reports whether an arrival from flow in class is turned away at
// once: some flow's queue stood within the last interval (CoDel dropped
// or shed a request of it), and the arrival's predicted wait is over limit
// ns. Queued, it would likely wait past the target and be dropped after
// its wait; answering now keeps the OVERLOADED answers fast and the queue
// short. The wait is predicted from the arrival's round-robin position and
// rate, the admissions per ns: the arrival is served after its own flow's
// backlog has had that many turns, so a quiet flow's arrivals are placed
// near the front and kept, a greedy flow's behind the whole queue. Class
// weights are ignored: it is an estimate.
func (q *queue) shed(flow uint64, class int32, now, interval int64, rate float64, limit int64) bool {
	if !q.standing(now, interval) || rate <= 0 {
		return false
	}
	own, flows := 0, q.classes[class].nflows
	if fi, ok := q.byKey[flowKey{flow: flow, class: class}]; ok {
		own = int(q.flows[fi].n)
	} else {
		flows++
	}
	if pos := min(q.n+1, (own+1)*flows); float64(pos) <= rate*float64(limit) {
		return false
	}
	q.lastDrop = now
	return true
}

// standing reports whether a request was turned away as part of a
// standing queue within the last interval.
func (q *queue) standing(now, interval int64) bool {
	return q.lastDrop != 0 && now-q.lastDrop < interval
}
