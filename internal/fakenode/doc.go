// Package fakenode is an in-process fake Cassandra node for deterministic
// tests of the proxy (pkg/backend, pkg/proxy). Tests against a real
// Cassandra show that the proxy works with the real thing; this package
// exists to reach what a real node cannot produce on demand: a given answer
// delayed, never sent, cut in half or replaced by a chosen ERROR, a
// connection reset before or after a request was executed, a socket that
// stops being read, a node that refuses connections, a prepared statement
// forgotten by one node only, a table whose columns changed under a prepared
// SELECT.
//
// It owns: a listener per node, the native protocol server side for v3, v4
// and v5 (segment framing after STARTUP), a tiny schema (tables with typed
// columns and rows given by the test), the node's prepared statements, the
// system tables the proxy's control connection reads (system.local,
// system.peers, system.peers_v2, system_schema.keyspaces) and counters a
// test reads to assert what reached the node.
//
// It must not: parse CQL beyond the few shapes tests use (SELECT cols FROM
// t, INSERT INTO t (cols) VALUES (?...), UPDATE/DELETE with `col = ?`),
// filter rows by WHERE clauses (a SELECT returns every row of its table),
// sleep to synchronise (delays are timers, every goroutine is joined by
// Close), or panic on any input a peer sends.
package fakenode
