// Package systables makes a Cassandra cluster look, to the drivers connected
// through the proxy, like a cluster made of the proxy's own endpoints only.
//
// Drivers discover the topology of a cluster through three system tables on
// their control connection: system.local (the node the connection goes to),
// system.peers and system.peers_v2 (all the other nodes). The proxy forwards
// those queries to Cassandra like any other query, then rewrites the RESULT
// before it reaches the driver:
//
//   - Classify tells, for every QUERY, whether it selects from one of those
//     tables; ParseUse tracks the connection's keyspace so that an unqualified
//     `SELECT * FROM local` after `USE system` is recognised too.
//   - Rewriter.RewriteLocal replaces, in a system.local result, every column
//     that tells where the node is or which part of the ring it owns (addresses,
//     ports, host_id, tokens, data_center, rack) by the values of the proxy
//     endpoint the client is connected to, and keeps everything else (schema
//     version, release version, cluster name, ...) byte for byte.
//   - Rewriter.RewritePeers throws the real peers away and returns one row per
//     other proxy endpoint instead (no rows for a single-endpoint proxy).
//   - ParseLocal reads from a real system.local result the values the proxy
//     needs for its own bookkeeping (schema and release versions, data center,
//     ...), e.g. to fill the peers rows.
//   - HostID and RingTokens derive stable identities and an even split of the
//     Murmur3 ring for the proxy endpoints.
//
// Result bodies are parsed and written directly at the byte level (protocol
// v3, v4 and v5, section 4.2.5.2 of the native protocol specs): cells that are
// not rewritten are copied verbatim, and no input, however malformed, makes
// these functions panic. They run on the drivers' control connections only,
// not on the data path, with the exception of Classify, which runs on every
// QUERY and therefore does not allocate and returns early for queries that
// cannot match.
//
// Rewriting is fail-closed where the package can tell: a system.local result
// with a JSON selection or a computed selector over an identity column (e.g.
// `SELECT toJson(rpc_address) ...`) yields ErrUnsupportedSelection rather than
// the real value, and an identity column of an unexpected CQL type yields
// ErrUnexpectedType. Callers must not forward the original body when a
// rewrite fails. Column aliases (`SELECT rpc_address AS a ...`) cannot be
// detected from the result metadata; drivers do not use them on these tables.
package systables
