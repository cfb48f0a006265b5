package integration

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
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
		l.Stop()
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

// The shared Cassandra clusters, started the first time a test asks for
// one. Only one runs at a time (the machine has two cores): the other is
// stopped before a cluster starts. Test files are named so that every
// SINGLE test runs before the CLUSTER3 ones.
var (
	singleCluster = &cassandratest.Lazy{Name: "SINGLE", Options: cassandratest.Options{Addresses: []string{"127.0.10.1"}}, Timeout: clusterStartTimeout}
	cluster3      = &cassandratest.Lazy{Name: "CLUSTER3", Options: cassandratest.Options{Nodes: 3, Addresses: []string{"127.0.11.1", "127.0.11.2", "127.0.11.3"}}, Timeout: clusterStartTimeout}
	allClusters   = []*cassandratest.Lazy{singleCluster, cluster3}
)

func init() {
	for _, l := range allClusters {
		l.BeforeStart = func() {
			for _, other := range allClusters {
				if other != l {
					other.Stop()
				}
			}
		}
	}
}

// clusterStartTimeout bounds the start of one whole cluster.
const clusterStartTimeout = 8 * time.Minute
