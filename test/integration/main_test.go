package integration

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cqlgate/cqlgate/internal/cassandratest"
	"github.com/cqlgate/cqlgate/pkg/config"
	"github.com/cqlgate/cqlgate/pkg/proxy"
)

// proxyChildEnv, when set (to comma-separated contact points), turns the
// test binary into a standalone proxy process: see runProxyChild and
// startProxyProcess.
const proxyChildEnv = "CQLGATE_IT_PROXY_CHILD"

func TestMain(m *testing.M) {
	if cp := os.Getenv(proxyChildEnv); cp != "" {
		os.Exit(runProxyChild(cp))
	}
	code := m.Run()
	for _, l := range allClusters {
		l.stop()
	}
	os.Exit(code)
}

// runProxyChild runs a proxy in this process, prints "LISTEN host:port" on
// stdout once it serves, and stops when stdin reaches EOF (the parent
// closed it, or died).
func runProxyChild(contactPoints string) int {
	cfg := config.Default()
	cfg.Listen = []string{"127.0.0.1:0"}
	cfg.ContactPoints = strings.Split(contactPoints, ",")
	p, err := proxy.New(cfg, nil, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "proxy child:", err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	select {
	case <-p.Serving():
	case err := <-done:
		fmt.Fprintln(os.Stderr, "proxy child:", err)
		return 1
	case <-time.After(2 * time.Minute):
		fmt.Fprintln(os.Stderr, "proxy child: not serving after 2m")
		return 1
	}
	fmt.Printf("LISTEN %s\n", p.Addrs()[0])
	_, _ = io.Copy(io.Discard, os.Stdin)
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		fmt.Fprintln(os.Stderr, "proxy child: Run did not return after cancel")
		return 1
	}
	return 0
}

// testCluster is a running Cassandra cluster: Addrs[i] is node i's CQL
// address (host:9042), Hosts[i] its IP address.
type testCluster = cassandratest.Cluster

// lazyCluster starts a shared Cassandra cluster the first time a test asks
// for it. Only one cluster runs at a time (the machine has two cores): the
// other is stopped before a cluster starts. Test files are named so that
// every SINGLE test runs before the CLUSTER3 ones.
type lazyCluster struct {
	name  string
	addrs []string

	mu      sync.Mutex
	c       *testCluster
	cleanup func()
	err     error
}

var (
	singleCluster = &lazyCluster{name: "SINGLE", addrs: []string{"127.0.10.1"}}
	cluster3      = &lazyCluster{name: "CLUSTER3", addrs: []string{"127.0.11.1", "127.0.11.2", "127.0.11.3"}}
	allClusters   = []*lazyCluster{singleCluster, cluster3}
)

// clusterStartTimeout bounds the start of one whole cluster.
const clusterStartTimeout = 8 * time.Minute

func skipCassandra() bool { return os.Getenv("CQLGATE_SKIP_CASSANDRA") == "1" }

// get returns the running cluster, starting it if needed. A cluster that
// failed to start is not tried again: every test needing it fails at once.
func (l *lazyCluster) get(t testing.TB) *testCluster {
	t.Helper()
	if skipCassandra() {
		t.Skip("CQLGATE_SKIP_CASSANDRA=1")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.c == nil && l.err == nil {
		for _, other := range allClusters {
			if other != l {
				other.stop()
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), clusterStartTimeout)
		start := time.Now()
		l.c, l.cleanup, l.err = cassandratest.Shared(ctx, l.name, cassandratest.Options{Nodes: len(l.addrs), Addresses: l.addrs})
		cancel()
		if l.err == nil {
			t.Logf("cassandra cluster %s %v ready in %s", l.name, l.c.Addrs, time.Since(start).Round(time.Millisecond))
		}
	}
	if l.err != nil {
		t.Fatalf("cassandra cluster %s could not be started: %v (set CQLGATE_SKIP_CASSANDRA=1 to skip instead)", l.name, l.err)
	}
	return l.c
}

// stop stops the cluster if this package started it; a later get starts it
// again.
func (l *lazyCluster) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cleanup != nil {
		l.cleanup()
	}
	l.c, l.cleanup, l.err = nil, nil, nil
}
