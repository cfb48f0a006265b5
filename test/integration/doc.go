// Package integration holds cqlgate's end-to-end tests: unmodified drivers
// (gocql v1.7.0, cassandra-gocql-driver v2) and raw native-protocol clients
// talk to an in-process proxy in front of real Cassandra 5.0 clusters
// started with internal/cassandratest.
//
// Run them with
//
//	go test -race -count=1 ./test/integration/
//
// Two clusters are used, each started lazily by the first test that needs
// it and stopped when the package's tests end: SINGLE (one node,
// 127.0.10.1) and CLUSTER3 (three nodes, 127.0.11.1-3). Running nodes can be
// reused with CQLGATE_TEST_CASSANDRA_SINGLE / CQLGATE_TEST_CASSANDRA_CLUSTER3
// (comma-separated host:port; the _DIR variables name their cluster
// directories, needed by the tests that stop and start nodes). When
// Cassandra cannot be started the tests fail, unless
// CQLGATE_SKIP_CASSANDRA=1, which makes them skip.
//
// repro_test.go (build tag cqlgate_repro) holds reproductions of known,
// not yet fixed proxy bugs; they fail until the bugs are fixed.
package integration
