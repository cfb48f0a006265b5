package limiter

import (
	"strconv"
	"time"
)

// Outcome is how an admitted request ended, as reported to Permit.Release.
// It decides whether the request's latency is a sample for the adaptive
// limit and whether the limit is cut.
type Outcome uint8

const (
	// Success: Cassandra answered with a RESULT. The latency is a sample.
	Success Outcome = iota
	// Overloaded: Cassandra answered ERROR OVERLOADED (0x1001). No sample;
	// the node's adaptive limit is cut by Config.Backoff at the end of the
	// sample window.
	Overloaded
	// Timeout: Cassandra answered a read or write timeout (0x1200, 0x1100),
	// or the proxy's own deadline passed and the backend stream was freed
	// later. No sample; the limit is cut as for Overloaded.
	Timeout
	// Failure: any other error, or the connection died. Its latency says
	// nothing about load (a syntax error is answered in microseconds, a dead
	// connection is not a slow node), so it is neither a sample nor a cut.
	Failure
	// Dropped: the request was abandoned before Cassandra saw it (the client
	// went away, a hedge lost before it was sent). Neither sample nor cut.
	Dropped
	// Unsampled: Cassandra answered, but not with the work the limit is
	// about: a PREPARE or a USE is answered from the node's caches in a
	// fraction of a read's time. As a sample it would set the fleet mode's
	// baseline (its fastest window) so low that every read after it looks
	// queued, and an application starting up (its PREPAREs first) would
	// pin its limits at the floor. Neither sample nor cut.
	Unsampled

	numOutcomes
)

var outcomeNames = [numOutcomes]string{"success", "overloaded", "timeout", "failure", "dropped", "unsampled"}

func (o Outcome) String() string {
	if o < numOutcomes {
		return outcomeNames[o]
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// Kind says which limit turned a request away.
type Kind uint8

const (
	// QueueFull: the queue held Config.QueueLength requests (or queueing is
	// disabled). Reported synchronously by Acquire.
	QueueFull Kind = iota + 1
	// QueueTimeout: the request waited Config.MaxWait without a permit.
	QueueTimeout
	// Deadline: the deadline the caller passed to Acquire came first.
	Deadline
	// StandingQueue: the queue has stood above Config.QueueTarget for
	// Config.QueueInterval and this request waited more than QueueTarget
	// (CoDel; see Config.QueueTarget).
	StandingQueue
	// Cancelled: the caller withdrew the request with CancelFlow.
	Cancelled
	// Shutdown: the Limiter was closed.
	Shutdown
	// Shed: turned away on arrival, without queueing, because the queue
	// has been standing (a request was dropped or shed within
	// Config.QueueInterval) and this one would wait more than half of
	// Config.QueueTarget: queued, it would likely be dropped after its
	// wait. Reported synchronously by Acquire.
	Shed

	numKinds
)

var kindLabels = [numKinds]string{"", "queue_full", "queue_timeout", "deadline", "standing_queue", "cancelled", "shutdown", "shed"}

// Label is the kind's value of the reason label of
// cqlgate_limiter_rejected_total, e.g. "queue_full".
func (k Kind) Label() string {
	if k < numKinds && k != 0 {
		return kindLabels[k]
	}
	return "kind_" + strconv.Itoa(int(k))
}

// Reason says why a request was not admitted. The zero Reason is not used.
type Reason struct {
	Kind Kind
	// Limit is the bound that was hit: the queue length for QueueFull; the
	// wait, in nanoseconds (a time.Duration), for QueueTimeout, Deadline,
	// StandingQueue and Shed (the target); 0 for Cancelled and Shutdown.
	Limit int64
}

// String is the text for the client's OVERLOADED message, naming the limit
// hit and the setting that controls it, for example
// "queue full: 10000 requests waiting (--queue-length)". The proxy may
// prefix it ("cqlgate: ...").
func (r Reason) String() string {
	b := make([]byte, 0, 96)
	d := time.Duration(r.Limit)
	switch r.Kind {
	case QueueFull:
		if r.Limit == 0 {
			return "all Cassandra connections busy and queueing disabled (--queue-length)"
		}
		b = append(b, "queue full: "...)
		b = strconv.AppendInt(b, r.Limit, 10)
		b = append(b, " requests waiting (--queue-length)"...)
	case QueueTimeout:
		b = append(b, "queue timeout: no Cassandra capacity within "...)
		b = append(b, d.String()...)
		b = append(b, " (--queue-max-wait)"...)
	case Deadline:
		b = append(b, "request deadline passed after "...)
		b = append(b, d.String()...)
		b = append(b, " in the queue (--request-timeout)"...)
	case StandingQueue:
		b = append(b, "overloaded: queued longer than "...)
		b = append(b, d.String()...)
		b = append(b, " while the queue was standing (--queue-target)"...)
	case Shed:
		b = append(b, "overloaded: the queue stands above "...)
		b = append(b, d.String()...)
		b = append(b, " (--queue-target), turned away on arrival"...)
	case Cancelled:
		return "request cancelled while queued"
	case Shutdown:
		return "proxy shutting down"
	default:
		return "rejected (" + r.Kind.Label() + ")"
	}
	return string(b)
}
