package cassandratest

import (
	"context"
	"sync"
	"testing"
	"time"
)

// Lazy is a cluster a test package shares, got from Shared by the first
// test that needs it, so that benchmarks, fuzzing and -list never start
// one. Call Stop from TestMain after m.Run.
type Lazy struct {
	Name    string  // as for Shared: "single", "cluster3", ...
	Options Options // as for Shared
	// Timeout bounds getting the cluster; 0 means startBudget(Options).
	Timeout time.Duration
	// BeforeStart, when set, runs before each attempt to get the cluster,
	// e.g. to stop another cluster first.
	BeforeStart func()

	mu      sync.Mutex
	c       *Cluster
	cleanup func()
	err     error
}

// Get returns the cluster, getting it on first use. It skips tb if
// CQLGATE_SKIP_CASSANDRA=1 and fails it if the cluster cannot be had; a
// cluster that failed is not tried again, so every later test fails at
// once.
func (l *Lazy) Get(tb testing.TB) *Cluster {
	tb.Helper()
	if Skipped() {
		tb.Skip("Cassandra disabled by CQLGATE_SKIP_CASSANDRA=1")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.c == nil && l.err == nil {
		if l.BeforeStart != nil {
			l.BeforeStart()
		}
		timeout := l.Timeout
		if timeout == 0 {
			timeout = startBudget(l.Options)
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		start := time.Now()
		l.c, l.cleanup, l.err = Shared(ctx, l.Name, l.Options)
		cancel()
		if l.err == nil {
			tb.Logf("cassandra cluster %s %v ready in %s", l.Name, l.c.Addrs, time.Since(start).Round(time.Millisecond))
		}
	}
	if l.err != nil {
		tb.Fatalf("cassandra cluster %s: %v (set CQLGATE_SKIP_CASSANDRA=1 to skip instead)", l.Name, l.err)
	}
	return l.c
}

// Started returns the cluster if a test got it, else nil.
func (l *Lazy) Started() *Cluster {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.c
}

// Stop stops the cluster if this package started it, and forgets it (and
// any failure): a later Get gets it again.
func (l *Lazy) Stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cleanup != nil {
		l.cleanup()
	}
	l.c, l.cleanup, l.err = nil, nil, nil
}
