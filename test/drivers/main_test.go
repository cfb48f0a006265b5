// Package drivers runs cqlgate against client drivers that are not written
// in Go: each test starts a proxy in-process in front of a real Cassandra 5.0
// node and runs an external program (a Python script, ...) that connects to
// the proxy with an unmodified driver.
//
// Run them with
//
//	go test -race -count=1 ./test/drivers/
//
// The Cassandra node (cluster SINGLE) is started lazily with
// internal/cassandratest by the first test that needs it and stopped when
// the package's tests end; CQLGATE_TEST_CASSANDRA_SINGLE=host:port reuses a
// running node instead. When Cassandra cannot be started the tests fail,
// unless CQLGATE_SKIP_CASSANDRA=1, which makes them skip.
package drivers

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cqlgate/cqlgate/internal/proxytest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	single.stop()
	os.Exit(code)
}

// clusterStartTimeout bounds the start of the Cassandra node, including the
// wait for another test package that uses the same address (cassandratest
// serializes them with lock files). With the script's 3 minutes it keeps the
// package under go test's default 10-minute timeout.
const clusterStartTimeout = 5 * time.Minute

// lazyCluster is a Cassandra cluster started the first time a test asks
// for it and stopped by TestMain.
type lazyCluster struct {
	name  string
	nodes int

	mu      sync.Mutex
	addrs   []string
	cleanup func()
	err     error
	started bool
}

var single = &lazyCluster{name: "SINGLE", nodes: 1}

func skipCassandra() bool { return os.Getenv("CQLGATE_SKIP_CASSANDRA") == "1" }

// get returns the node addresses (host:port), starting the cluster if
// needed. A cluster that failed to start is not tried again.
func (l *lazyCluster) get(t testing.TB) []string {
	t.Helper()
	if skipCassandra() {
		t.Skip("CQLGATE_SKIP_CASSANDRA=1")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.started {
		l.started = true
		ctx, cancel := context.WithTimeout(context.Background(), clusterStartTimeout)
		start := time.Now()
		l.addrs, l.cleanup, l.err = startShared(ctx, l.name, l.nodes)
		cancel()
		if l.err == nil {
			t.Logf("cassandra cluster %s %v ready in %s", l.name, l.addrs, time.Since(start).Round(time.Millisecond))
		}
	}
	if l.err != nil {
		t.Fatalf("cassandra cluster %s could not be started: %v (set CQLGATE_TEST_CASSANDRA_%s=host:port to reuse a running node, or CQLGATE_SKIP_CASSANDRA=1 to skip)",
			l.name, l.err, l.name)
	}
	return l.addrs
}

func (l *lazyCluster) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cleanup != nil {
		l.cleanup()
	}
	l.addrs, l.cleanup, l.err, l.started = nil, nil, nil, false
}

// startProxy runs a proxy in-process on 127.0.0.1:0 in front of
// contactPoints and returns its address; it is stopped when the test ends.
func startProxy(t *testing.T, contactPoints []string) string {
	t.Helper()
	p := proxytest.Start(t, contactPoints, nil)
	t.Logf("proxy at %s in front of %v", p.Addr, contactPoints)
	return p.Addr
}

// repreparesOf returns the proxy's cqlgate_reprepares_total and
// cqlgate_reshaped_total (UNPREPARED answered by preparing again and
// re-sending, and UNPREPARED passed to the client because the statement's
// columns changed).
func repreparesOf(t *testing.T, reg *prometheus.Registry) (reprepares, reshaped float64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch mf.GetName() {
			case "cqlgate_reprepares_total":
				reprepares += m.GetCounter().GetValue()
			case "cqlgate_reshaped_total":
				reshaped += m.GetCounter().GetValue()
			}
		}
	}
	return reprepares, reshaped
}
