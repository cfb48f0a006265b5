// Package token computes where Cassandra keeps a partition: the Murmur3
// token of a partition key, exactly as Cassandra's Murmur3Partitioner does,
// and the replicas that own a token under a keyspace's replication
// strategy, computed once per topology and schema change into immutable
// tables whose lookups are a binary search without allocation.
//
// A proxy routes a request by token like this:
//
//	meta, _ := frame.ParsePrepared(v, prepResultBody)          // once per statement
//	parts, err := frame.ExecuteValues(v, execBody, meta.PKIndexes, parts[:0])
//	tok := token.PartitionToken(parts)
//	replicas := topo.Replicas(meta.Keyspace, tok)              // node IDs, primary first
//
// where topo is a *Topology built by NewTopology from the nodes' tokens,
// data centers and racks (system.local, system.peers_v2) and the
// keyspaces' replication (system_schema.keyspaces), and replaced as a whole
// when either changes. An empty replica list means "no preference": the
// keyspace is unknown, uses LocalStrategy, or names no data center of the
// ring. Tokens are those of Murmur3Partitioner only; a cluster with another
// partitioner (whose tokens NewRing refuses) gets no token awareness.
//
// It must not do I/O: the tables are built from what the caller read.
package token
