package idempotency

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/cqlgate/cqlgate/internal/cassandratest"
)

// TestMain runs the tests, stops the Cassandra node if a test started one,
// and fails on leaked goroutines.
func TestMain(m *testing.M) {
	code := m.Run()
	single.Stop()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// single is the Cassandra node, got by the first test that needs it
// (cassandra_test.go): benchmarks, fuzzing and unit tests never start one.
var single = &cassandratest.Lazy{Name: "single", Options: cassandratest.Options{Addresses: []string{"127.0.10.1"}}, Timeout: 10 * time.Minute}
