// Package speculative holds the parts of hedged requests (speculative
// execution) that do not depend on the proxy's plumbing: how long to wait
// before a second copy, how many second copies to allow, and the timers
// that send them.
//
// One slow replica drags every query routed to it. The proxy sees the CQL
// text, so it can decide idempotency itself and, for an idempotent request
// still unanswered after a delay, send a second copy to another node. The
// first successful answer wins.
//
// Whether a statement may run twice at all is not decided here but by
// pkg/idempotency, which re-sends after a lost connection use too. This
// package must not import it, nor parse CQL or look at frames: it sees a
// request only as a class (for its delay), a count (for the budget) and a
// timer. Nor does it send anything: the proxy does, from Target.Hedge.
//
// # The parts
//
//   - Delay gives the hedge delay per class of requests (a table, a prepared
//     statement): a percentile of recent latencies over a sliding window,
//     within a floor and a cap, or a constant. Record is a few atomic
//     operations.
//   - Budget caps hedges at a share of requests over a sliding window, with
//     a floor, and can be paused.
//   - Scheduler runs the hedge timers on one goroutine and a timing wheel;
//     arming and disarming take about a hundred nanoseconds and allocate
//     nothing.
//   - NewCollector exports their state as Prometheus metrics.
//
// # Integration in the proxy's request path
//
// When a PREPARE is answered, classify the statement once with
// pkg/idempotency and keep the idempotency.Statement with the prepared id:
//
//	meta, err := frame.ParsePrepared(version, body)
//	st := classifier.Classify(query, keyspace, meta.VarTypes)
//
// For a QUERY, classify its text with nil bind types (about a microsecond;
// a small cache by text is optional). For a protocol BATCH, combine the
// children's verdicts (a prepared id the proxy does not know is not
// idempotent): idempotency.CombineBatch(batchType, verdicts...).
//
// A request may be hedged when its verdict is idempotent, its consistency
// passes idempotency.ConsistencyIdempotent, a delay is known for its class,
// and another node can take it. An idempotency.PayloadKey entry in the
// request's custom payload replaces the verdict (idempotency.PayloadVerdict)
// for statements of kind select, insert, update, delete and batch only.
// Then:
//
//	budget.RecordRequest(now)                      // every hedgeable request
//	class := delay.Class(key, label)               // or kept with the statement until delay.Stale(class)
//	if d, ok := delay.Get(class, now); ok {
//		sched.Arm(&r.timer, now.Add(d), r, r.seq) // before writing the request
//	}
//	... write the request ...
//
// When an answer arrives, Disarm the timer (a false return means the hedge
// fired or is firing; resolve that under the request's lock), and Record
// the latency of every attempt, winner or loser: delay.Record(class,
// now.Sub(sent), now).
//
// Hedge(token) runs on the Scheduler's goroutine and must not block: under
// the request's lock, check that token is the request's current sequence
// number (a pooled request may have been answered and reused meanwhile) and
// that it is still unanswered, ask budget.TryHedge(now), take a permit on
// another node without queueing, and send the copy. The first successful
// answer goes to the client; an error from one attempt is held while
// another is still in flight; the losers' answers are read and dropped
// (their permits released as dropped, not as samples). While the limiter
// rejects requests, budget.Pause(now.Add(time.Second)) keeps hedges from
// adding load.
//
// Two copies of a write may reach the replicas in either order, with
// different server-side timestamps; when another client writes the same
// cell in between, the later copy would overwrite its newer value. Unless
// idempotency.Statement.UsingTimestamp is set, give hedged writes a client
// timestamp (the default timestamp flag of QUERY, EXECUTE and BATCH,
// protocol v3+), the same for both copies, so that they are one write. The
// exception is idempotency.Statement.ListOverwrite: a whole list written
// twice with one timestamp is stored twice ([1, 2] becomes [1, 2, 1, 2];
// see pkg/idempotency's dml.go), so send such copies without a client
// timestamp, and do not hedge such a request when its client set a
// timestamp itself.
//
// # Concurrency and cost
//
// Everything here is safe for concurrent use. On the request path nothing
// allocates: Delay.Record and Delay.Get are a few atomic operations,
// Delay.Class a mutex and a map lookup (key: a hash of the table name or
// the prepared id; label: its name in metrics, such as "ks.table"),
// Budget.RecordRequest an atomic add, Scheduler.Arm a shard mutex and an
// append to a reused slice, Scheduler.Disarm one compare-and-swap. The time
// is passed in by the caller, who has it; it must come from the Clock given
// to the constructors (the real clock by default).
package speculative
