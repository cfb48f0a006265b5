// Package browser tests what an operator sees in a real browser: the status
// page the proxy serves at / on its admin address, loaded in a headless
// Chromium (Debian's chromium package) driven over the DevTools protocol
// with chromedp, while traffic goes through the proxy to a real Cassandra
// node.
//
// Without Chromium the tests are skipped, except in CI ($CI set), where they
// fail: scripts/ci-install.sh installs it. CQLGATE_CHROMIUM names another
// binary. Screenshots go to $CQLGATE_ARTIFACTS (default: the test's
// temporary directory, removed afterwards); their paths are logged.
package browser

import (
	"os"
	"testing"
	"time"

	"github.com/cqlgate/cqlgate/internal/cassandratest"
)

// single is the one-node Cassandra the tests share: the suite's
// (CQLGATE_TEST_CASSANDRA_SINGLE), or one started on first use.
var single = &cassandratest.Lazy{Name: "single", Options: cassandratest.Options{Addresses: []string{"127.0.10.1"}}, Timeout: 8 * time.Minute}

func TestMain(m *testing.M) {
	code := m.Run()
	single.Stop()
	os.Exit(code)
}
