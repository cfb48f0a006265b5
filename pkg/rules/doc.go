// Package rules caps the requests in flight of chosen statements or tables:
// the operator's answer to one heavy query pattern hurting every other
// (Cassandra has no resource isolation between them). A rule names a
// statement (its id as /statements shows it: the prepared id of an
// EXECUTE, the fingerprint of a QUERY string, the key of a BATCH) or a
// keyspace.table, and allows it at most MaxInFlight requests at once; a few
// more wait in the rule's own small FIFO queue for at most MaxQueueWait,
// and the rest are refused at once with a message naming the rule.
//
// # What it owns
//
//   - Load: the rules file (YAML), checked as a whole.
//   - Rule: one rule's semaphore and queue, and its counters.
//   - Manager: the current Set (an immutable index from statement id and
//     table to rule), replaced as a whole by Apply. A rule whose name is
//     kept across Apply keeps its state (permits held, queue, counters)
//     and takes the new limits; a rule removed lets its queue go.
//   - Sweep expires queue waits; CancelFlow drops the waits of a client
//     that is gone; a Prometheus collector reports every rule.
//
// # Contract with the caller
//
// The caller (pkg/proxy) matches a request once, when it first arrives,
// and takes a Permit (Acquire), which it must release exactly once, when
// the request ends, whatever the path (answer, error, timeout, client
// gone): Permit.Release zeroes the permit, so a second call does nothing.
// Attempts of one request (hedges, sends to another node) share its one
// permit: the cap is on client requests, not on copies. A queued request
// is handed its permit (Waiter.RuleAdmitted) by whoever releases one, on
// that goroutine and with no lock of this package held, or refused
// (Waiter.RuleRejected) by Sweep, CancelFlow or Apply.
//
// # Cost
//
// With no rules, Manager.Current is one atomic load returning nil. With
// rules, a request costs two map lookups (statement id, then table), and
// a matching one a mutex taken twice (acquire, release); none of it
// allocates unless the request queues.
//
// It knows nothing of CQL frames or the node limiter.
package rules
