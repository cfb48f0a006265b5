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
	"bytes"
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/cqlgate/cqlgate/pkg/config"
	"github.com/cqlgate/cqlgate/pkg/proxy"
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

// syncBuffer is a bytes.Buffer safe for concurrent writers, used as the
// proxy's log sink so that late log lines never reach a finished test's t.Log.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Sync() error { return nil }

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startProxy runs a proxy in-process on 127.0.0.1:0 in front of
// contactPoints and returns its address. It is stopped when the test ends;
// if the test failed, the proxy's log (info and above) is printed.
func startProxy(t *testing.T, contactPoints []string) string {
	t.Helper()
	cfg := config.Default()
	cfg.Listen = []string{"127.0.0.1:0"}
	cfg.ContactPoints = contactPoints
	logs := &syncBuffer{}
	enc := zap.NewDevelopmentEncoderConfig()
	log := zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(enc), logs, zapcore.InfoLevel))
	p, err := proxy.New(cfg, log, prometheus.NewRegistry())
	if err != nil {
		t.Fatalf("proxy.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("proxy.Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("proxy.Run did not return within 30s of cancel")
		}
		if t.Failed() {
			t.Logf("proxy log:\n%s", tail(logs.String(), 300))
		}
	})
	select {
	case <-p.Serving():
	case err := <-done:
		t.Fatalf("proxy.Run: %v\nproxy log:\n%s", err, tail(logs.String(), 300))
	case <-time.After(time.Minute):
		t.Fatalf("proxy not serving after 1m\nproxy log:\n%s", tail(logs.String(), 300))
	}
	addr := p.Addrs()[0].String()
	t.Logf("proxy at %s in front of %v", addr, contactPoints)
	return addr
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.SplitAfter(s, "\n")
	if len(lines) > n {
		lines = append([]string{"...\n"}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "")
}
