// Package stmtstats keeps per-statement statistics for the proxy, like
// PostgreSQL's pg_stat_statements or ProxySQL's query digest: which
// statement is slow, failing, queued, rejected or hedged, and in which
// keyspace and table.
//
// # What it owns
//
//   - Table: a bounded set of Entry values, one per statement. A prepared
//     statement is keyed by its id (EXECUTE), a QUERY string by its
//     fingerprint: the hash of its normalized text (idempotency.Normalize:
//     literals and bind markers to ?, IN lists collapsed, keyword case and
//     spacing normalized) and keyspace, so that literal-laden strings built
//     by concatenation fold into one entry. A BATCH is one entry keyed by
//     its type and its statements (ids and fingerprints), a run of one
//     statement repeated counting once, so that batches of any size fold.
//   - A cache of exact QUERY texts to their entries, bounded in bytes, so
//     that a repeated string costs one map lookup instead of a lexer pass.
//   - Entry.Record: what one request adds (calls, errors by code, rows,
//     bytes in and out, latency histogram, time queued, OVERLOADED
//     rejections, hedges sent and won, last seen).
//   - Snapshot and Reset for /statements, and a Prometheus collector of the
//     top N statements by calls (opt-in: per-statement series are bounded).
//
// # Bounds
//
// At most Config.MaxEntries entries are kept. When a new statement arrives
// at the bound, a sample of entries is taken and the least used (fewest
// calls) is evicted, as Redis approximates LFU; evictions are counted. An
// entry takes about 1.5 KiB with a 100-byte text (truncated to
// Config.MaxTextBytes); see TestEntryMemory, which measures it. The text
// cache holds at most MaxEntries KiB (each text charged its length plus its
// map slot's and entry's overhead), and holds its entries weakly, so that
// evicted entries are freed: TestCarelessQueriesFold and
// TestDistinctStatementsStayBounded measure the whole against that bound.
//
// # Concurrency and cost
//
// Everything is safe for concurrent use. Record takes the entry's own
// mutex once (uncontended unless many cores finish requests of one
// statement at the same moment) and allocates nothing; looking up a
// prepared statement's entry is done by the caller caching the *Entry
// (check Evicted), a QUERY's by one read-locked map lookup in one of 16
// shards. New statements (a miss) take the table's mutex and, for a QUERY,
// a lexer pass. A recording racing with an eviction or a Reset may be
// lost; that is the price of not locking the table per request.
//
// # What it must not do
//
// It never sees bind values (only statement texts) and must not log or
// export them. It knows nothing of connections, the limiter or hedging: the
// proxy tells it what happened in a Sample.
package stmtstats
