package security

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cqlgate/cqlgate/internal/cassandratest"
	"github.com/cqlgate/cqlgate/internal/promtest"
	"github.com/cqlgate/cqlgate/internal/proxytest"
	"github.com/cqlgate/cqlgate/pkg/config"
)

// TestFleetModeNeedsSelectOnSystemViews: fleet mode reads each node's
// system_views as the proxy's own role. A role without SELECT on it
// is refused, and the node's limit is then the fixed --node-limit, with a
// warning in the log and cqlgate_limiter_node_unreadable at 1 (before,
// the law judged by latency alone, which can starve a lone sidecar); the
// GRANTs that docs/sizing.md gives let the proxy read the node.
func TestFleetModeNeedsSelectOnSystemViews(t *testing.T) {
	n := cassandratest.Require(t, node)
	// Table by table: Cassandra refuses a grant on the virtual keyspace,
	// and SELECT ON ALL KEYSPACES does not cover it.
	rolesSetup(t, map[string][]string{
		"sec_fleet_plain": nil,
		"sec_fleet_views": {"SELECT ON system_views.thread_pools", "SELECT ON system_views.clients"},
	})
	const nodeLimit = 77
	start := func(role string) *proxytest.Proxy {
		return proxytest.Start(t, n.Addrs, func(c *config.Config) {
			c.BackendUsername, c.BackendPassword = role, "pw-"+role
			c.LimitMode, c.NodeLimit = "fleet", nodeLimit
			c.LimitNodePoll = 100 * time.Millisecond
		})
	}
	// waitFor polls the proxy's metrics until ok holds, for up to 10 s,
	// and returns what it saw last.
	waitFor := func(p *proxytest.Proxy, ok func(unreadable, limit, threads float64) bool) string {
		var unreadable, limit, threads float64
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			unreadable = promtest.Value(t, p.Reg, "cqlgate_limiter_node_unreadable")
			limit = promtest.Value(t, p.Reg, "cqlgate_limiter_limit")
			threads = promtest.Value(t, p.Reg, "cqlgate_backend_node_request_threads")
			if ok(unreadable, limit, threads) {
				return ""
			}
		}
		return fmt.Sprintf("node_unreadable %v, limit %v, node threads %v", unreadable, limit, threads)
	}

	plain := start("sec_fleet_plain")
	if got := waitFor(plain, func(u, l, _ float64) bool { return u == 1 && l == nodeLimit }); got != "" {
		t.Errorf("a proxy whose role has no SELECT on system_views: %s after 10s; want 1 and the fixed %d", got, nodeLimit)
	}
	if log := plain.Logs.String(); !strings.Contains(log, "GRANT SELECT ON system_views.thread_pools") || !strings.Contains(log, "Unauthorized") && !strings.Contains(log, "0x2100") {
		t.Errorf("the proxy's log does not say what to grant, or why:\n%s", log)
	}

	views := start("sec_fleet_views")
	if got := waitFor(views, func(u, _, th float64) bool { return u == 0 && th > 0 }); got != "" {
		t.Errorf("a proxy whose role has SELECT on system_views: %s after 10s; want 0 and the node's threads read", got)
	}
}
