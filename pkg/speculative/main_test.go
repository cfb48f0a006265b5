package speculative

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/cqlgate/cqlgate/internal/cassandratest"
)

// TestMain runs the tests, stops the Cassandra node if a test started one,
// and fails on leaked goroutines (the Scheduler's, above all).
func TestMain(m *testing.M) {
	code := m.Run()
	shared.Lock()
	if shared.cleanup != nil {
		shared.cleanup()
	}
	shared.Unlock()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// shared is the single Cassandra node, got by the first test that needs it:
// benchmarks, fuzzing and unit tests never start one.
var shared struct {
	sync.Mutex
	tried   bool
	c       *cassandratest.Cluster
	cleanup func()
	err     error
}

// requireCassandra returns the shared single node. The test is skipped if
// CQLGATE_SKIP_CASSANDRA=1 and fails if the node cannot be had.
func requireCassandra(t *testing.T) *cassandratest.Cluster {
	t.Helper()
	if cassandratest.Skipped() {
		t.Skip("Cassandra disabled by CQLGATE_SKIP_CASSANDRA=1")
	}
	shared.Lock()
	defer shared.Unlock()
	if !shared.tried {
		shared.tried = true
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		shared.c, shared.cleanup, shared.err = cassandratest.Shared(ctx, "single", cassandratest.Options{Addresses: []string{"127.0.10.1"}})
		cancel()
	}
	if shared.err != nil {
		t.Fatalf("cassandra single: %v (set CQLGATE_SKIP_CASSANDRA=1 to skip instead)", shared.err)
	}
	return shared.c
}
