// Package idempotency answers one question about a CQL statement: may it
// run twice? The proxy asks it before sending a second copy of a request,
// whether a hedge (pkg/speculative decides when) or a re-send after a
// connection was lost; along the way it reports the facts of the statement
// those callers need: its kind, keyspace and table, whether it sets USING
// TIMESTAMP, whether it may overwrite a whole list, and its number of bind
// markers.
//
// # What it owns
//
//   - Classify and Classifier decide, from the CQL text and the bind
//     variables' types of the PREPARED metadata, whether a statement is
//     idempotent, and why not (lightweight transactions, counters, list
//     appends and prepends, deletions by list position, non-deterministic or
//     unknown functions, USE, schema and auth statements, anything not
//     understood). A small CQL lexer (lexer.go) and parser (classify.go,
//     dml.go) do it, with the list of Cassandra's native functions by
//     determinism (functions.go); the result is a Statement (verdict.go).
//   - Overrides (ParseOverrides) force verdicts from configuration
//     (--speculative-idempotent); PayloadKey and PayloadVerdict let a client
//     say so per request; CombineBatch combines the verdicts of a protocol
//     BATCH's statements; ConsistencyIdempotent rules out SERIAL reads.
//   - Normalize (fingerprint.go) gives a statement's normalized text
//     (literals to ?, IN lists collapsed, keyword case and spacing
//     normalized) with the same lexer, for the statement statistics
//     (pkg/stmtstats) to fold literal-laden QUERY strings into one.
//   - testdata/classify.txt is the corpus of statements and verdicts; the
//     fuzz tests check that a statement that is not idempotent is never
//     reported idempotent (a wrong "no" costs a missed hedge, a wrong "yes"
//     a write applied twice); cassandra_test.go checks the corpus and the
//     bind types against a real Cassandra node.
//
// # What it must not do
//
// It decides and reports; it does not act. It knows nothing of hedge
// delays, budgets, timers, retries or connections, keeps no state between
// calls (a Classifier holds only its immutable Overrides), does no I/O, and
// imports nothing of the project: bind types come in as the protocol's type
// option ids (frame.PreparedMeta.VarTypes) and batch types and consistency
// levels as the protocol's numbers. What a caller does with a verdict is the
// caller's: for instance, Statement.ListOverwrite is idempotent only when the
// copies have different timestamps, so the proxy must not give them a
// common client timestamp (see dml.go and pkg/speculative's doc). Classify
// must never panic, whatever the input, and must never call a statement
// idempotent without being sure: anything not understood is not idempotent.
//
// # Concurrency and cost
//
// Everything here is safe for concurrent use. Classify allocates little
// (about a microsecond for a typical statement) and is meant to run once
// per PREPARE, the caller keeping the Statement with the prepared id; a
// QUERY's text is classified with nil bind types. CombineBatch,
// ConsistencyIdempotent and PayloadVerdict allocate nothing and may run per
// request.
package idempotency
