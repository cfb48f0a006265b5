package proxy_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cqlgate/cqlgate/internal/fakenode"
	"github.com/cqlgate/cqlgate/internal/promtest"
	"github.com/cqlgate/cqlgate/internal/proxytest"
	"github.com/cqlgate/cqlgate/pkg/config"
	"github.com/cqlgate/cqlgate/pkg/frame"
)

// TestFleetReadingsOfABusyNodeGoOn: fleet mode reads each node's
// system_views.thread_pools. A node that answers the reading with
// OVERLOADED is busy, and is read again at the next poll; one that refuses
// it (no SELECT for the proxy's role) or lacks the table (before Cassandra
// 4.0) or answers without the counts is left alone for 10 minutes and
// gets the fixed --node-limit.
// Before, any error answer left the node unread for 10 minutes, judged by
// latency alone: an overloaded node lost the fleet limit when it needed it.
func TestFleetReadingsOfABusyNodeGoOn(t *testing.T) {
	const nodeLimit = 77
	for _, c := range []struct {
		name       string
		answer     *fakenode.Error
		unreadable bool
	}{
		{"overloaded", fakenode.Overloaded(), false},
		{"unauthorized", &fakenode.Error{Code: frame.ErrCodeUnauthorized,
			Message: "User app has no SELECT permission on <table system_views.thread_pools> or any of its parents"}, true},
		{"no such table", fakenode.Invalid("table thread_pools does not exist"), true},
		// A server that speaks CQL and answers the table without the
		// counts: before, it was asked every poll, forever, and the node
		// judged by latency alone.
		{"no counts in the answer", nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			node := fakenode.Start(t, fakenode.Config{})
			var reads atomic.Int32
			node.SetHook(func(r fakenode.Request) fakenode.Action {
				if strings.Contains(r.Query, "system_views.thread_pools") {
					reads.Add(1)
					return fakenode.Action{Error: c.answer}
				}
				return fakenode.Action{}
			})
			p := proxytest.Start(t, []string{node.Addr()}, func(cfg *config.Config) {
				cfg.LimitMode = "fleet"
				cfg.LimitNodePoll = 50 * time.Millisecond
				cfg.NodeLimit = nodeLimit
			})
			// The first reading comes at the start, then one every 50 ms.
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				if c.unreadable && promtest.Value(t, p.Reg, "cqlgate_limiter_node_unreadable") == 1 || !c.unreadable && reads.Load() >= 5 {
					break
				}
			}
			time.Sleep(500 * time.Millisecond) // ten polls more
			n := reads.Load()
			unreadable := promtest.Value(t, p.Reg, "cqlgate_limiter_node_unreadable")
			limit := promtest.Value(t, p.Reg, "cqlgate_limiter_limit")
			t.Logf("%d readings, node_unreadable %v, limit %v", n, unreadable, limit)
			if c.unreadable {
				if n != 1 || unreadable != 1 || limit != nodeLimit {
					t.Errorf("%d readings, node_unreadable %v, limit %v; want 1, 1 and the fixed %d", n, unreadable, limit, nodeLimit)
				}
				return
			}
			if n < 8 || unreadable != 0 || limit >= nodeLimit {
				t.Errorf("%d readings, node_unreadable %v, limit %v; want at least 8 (one per 50 ms), 0 and the fleet law's", n, unreadable, limit)
			}
		})
	}
}
