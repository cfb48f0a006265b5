package rules

import (
	"fmt"
	"math"
	"sync"
	"time"
)

// Waiter is a request waiting in a rule's queue. Exactly one of its methods
// is called, once, on whatever goroutine decides, with no lock of this
// package held.
type Waiter interface {
	// RuleAdmitted hands the waiter its permit at now.
	RuleAdmitted(p Permit, now time.Time)
	// RuleRejected refuses it: msg is the OVERLOADED message naming the
	// rule, or "" when its client is gone (CancelFlow).
	RuleRejected(msg string)
}

// Result is what Acquire did.
type Result int8

// Results of Acquire.
const (
	Granted  Result = iota // the permit is the caller's
	Queued                 // the waiter is queued; the caller must not touch it any more
	Rejected               // the queue is full; the message names the rule
)

// Permit is one request's hold on a rule. The zero Permit holds nothing.
type Permit struct{ r *Rule }

// Held reports whether p holds a rule's permit.
func (p *Permit) Held() bool { return p.r != nil }

// Release gives the permit back at now (the next waiter in the queue gets
// it, on this goroutine) and zeroes p, so that a second call does nothing.
func (p *Permit) Release(now time.Time) {
	r := p.r
	if r == nil {
		return
	}
	p.r = nil
	r.release(now)
}

// Rule is one rule's semaphore, queue and counters. Its name is its
// identity across reloads; its limits may change (Manager.Apply).
type Rule struct {
	name string

	mu  sync.Mutex
	def Def
	// msgFull and msgWait are the OVERLOADED messages, made once per
	// definition so that refusing thousands of requests formats nothing.
	msgFull, msgWait string
	inFlight         int
	queue            []waiting // FIFO; deadlines in arrival order per definition
	retired          bool      // removed by a reload: caps nothing any more

	admitted, waited       uint64
	rejectFull, rejectWait uint64
}

type waiting struct {
	w        Waiter
	flow     uint64
	deadline int64 // unix ns
}

func newRule(d Def) *Rule {
	r := &Rule{name: d.Name}
	r.setDefLocked(d)
	return r
}

// setDefLocked takes a new definition; r.mu is held (or r is new).
func (r *Rule) setDefLocked(d Def) {
	r.def = d
	prefix := fmt.Sprintf("cqlgate: rule %q (%s): %d in flight, ", d.Name, d.Match(), d.MaxInFlight)
	r.msgFull = prefix + "queue full"
	if d.QueueLength == 0 {
		r.msgFull = prefix + "no queue"
	}
	r.msgWait = prefix + "waited " + d.MaxQueueWait.String() + " in queue"
}

// Name is the rule's name.
func (r *Rule) Name() string { return r.name }

// Def is the rule's current definition.
func (r *Rule) Def() Def {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.def
}

func (r *Rule) limitLocked() int {
	if r.retired {
		return math.MaxInt
	}
	return r.def.MaxInFlight
}

// Acquire takes a permit for w at now if the rule has room; else queues w
// (with flow, for CancelFlow) until a permit frees, MaxQueueWait passes or
// deadline (unix ns; 0: none) does, whichever is first; else refuses it,
// returning the message to answer with.
func (r *Rule) Acquire(w Waiter, flow uint64, now time.Time, deadline int64) (Permit, Result, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inFlight < r.limitLocked() && len(r.queue) == 0 {
		r.inFlight++
		r.admitted++
		return Permit{r}, Granted, ""
	}
	if len(r.queue) >= r.def.QueueLength {
		r.rejectFull++
		return Permit{}, Rejected, r.msgFull
	}
	dl := now.Add(r.def.MaxQueueWait).UnixNano()
	if deadline > 0 && deadline < dl {
		dl = deadline
	}
	r.queue = append(r.queue, waiting{w: w, flow: flow, deadline: dl})
	return Permit{}, Queued, ""
}

// release frees one permit, or hands it to the next waiter when the rule
// is not over its limit (a reload may have lowered it).
func (r *Rule) release(now time.Time) {
	r.mu.Lock()
	if len(r.queue) > 0 && r.inFlight <= r.limitLocked() {
		next := r.popLocked()
		r.admitted++
		r.waited++
		r.mu.Unlock()
		next.w.RuleAdmitted(Permit{r}, now)
		return
	}
	r.inFlight--
	r.mu.Unlock()
}

func (r *Rule) popLocked() waiting {
	next := r.queue[0]
	r.queue[0] = waiting{}
	r.queue = r.queue[1:]
	if len(r.queue) == 0 {
		r.queue = r.queue[:0:0] // let the array go; the next wait allocates
	}
	return next
}

// admitLocked takes the waiters that room (a raised limit, a retirement)
// lets in; the caller delivers them once r.mu is released.
func (r *Rule) admitLocked(out []waiting) []waiting {
	for len(r.queue) > 0 && r.inFlight < r.limitLocked() {
		r.inFlight++
		r.admitted++
		r.waited++
		out = append(out, r.popLocked())
	}
	return out
}

// expireLocked removes the waits past their deadline at now.
func (r *Rule) expireLocked(now int64, out []waiting) []waiting {
	n := len(out)
	out = r.removeLocked(out, func(q *waiting) bool { return q.deadline <= now })
	r.rejectWait += uint64(len(out) - n)
	return out
}

// cancelLocked removes the waits of flow.
func (r *Rule) cancelLocked(flow uint64, out []waiting) []waiting {
	return r.removeLocked(out, func(q *waiting) bool { return q.flow == flow })
}

// removeLocked moves the waits for which drop is true from the queue to
// out, keeping the others in order.
func (r *Rule) removeLocked(out []waiting, drop func(*waiting) bool) []waiting {
	keep := r.queue[:0]
	for i := range r.queue {
		if q := r.queue[i]; drop(&q) {
			out = append(out, q)
		} else {
			keep = append(keep, q)
		}
	}
	clear(r.queue[len(keep):])
	r.queue = keep
	return out
}

// Stat is a rule's state and counters, as /statements shows them.
type Stat struct {
	Name           string  `json:"name"`
	Match          string  `json:"match"`
	Limit          int     `json:"max_in_flight"`
	QueueLength    int     `json:"queue_length"`
	MaxQueueWaitMs float64 `json:"max_queue_wait_ms"`
	InFlight       int     `json:"in_flight"`
	Queued         int     `json:"queued"`
	Admitted       uint64  `json:"admitted"`
	Waited         uint64  `json:"waited"`
	// Rejected is RejectedQueueFull plus RejectedQueueTimeout.
	Rejected             uint64 `json:"rejected"`
	RejectedQueueFull    uint64 `json:"rejected_queue_full"`
	RejectedQueueTimeout uint64 `json:"rejected_queue_timeout"`
}

// Stat returns the rule's state now.
func (r *Rule) Stat() Stat {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Stat{
		Name:                 r.name,
		Match:                r.def.Match(),
		Limit:                r.def.MaxInFlight,
		QueueLength:          r.def.QueueLength,
		MaxQueueWaitMs:       float64(r.def.MaxQueueWait) / 1e6,
		InFlight:             r.inFlight,
		Queued:               len(r.queue),
		Admitted:             r.admitted,
		Waited:               r.waited,
		Rejected:             r.rejectFull + r.rejectWait,
		RejectedQueueFull:    r.rejectFull,
		RejectedQueueTimeout: r.rejectWait,
	}
}
