//go:build cqlgate_repro

package integration

// Reproductions of proxy bugs found by this suite and not fixed yet. They
// fail (some of them intermittently) until the bugs are fixed, so they are
// kept out of the suite by a build tag:
//
//	go test -race -count=1 -tags cqlgate_repro -run 'TestRepro' ./test/integration/
//
// Once a bug is fixed, move its test into the suite proper.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/cqlgate/cqlgate/pkg/frame"
)

// TestReproDDLAnsweredBeforeSchemaAgreement (BUG 1) creates and alters
// tables through the proxy and uses them at once with simple statements
// spread over the three nodes. The proxy holds DDL answers until
// WaitSchemaAgreement reports agreement, but that compares the control
// node's own schema_version with its gossip view of the peers'; when the
// DDL ran on another node, all of these can still be the old version right
// after the answer, so "agreement" is reached on the schema from before
// the change and the client's next requests fail on the nodes that do not
// have it yet ("table t0 does not exist", 2 requests out of 3). Seen in
// about half the runs on a local 3-node cluster.
func TestReproDDLAnsweredBeforeSchemaAgreement(t *testing.T) {
	const tables, uses = 8, 30
	c := cluster3.get(t)
	p := startProxy(t, c.Addrs[:1], nil)
	s := proxySession(t, p, func(cc *gocql.ClusterConfig) { cc.Consistency = gocql.One })
	recreateKeyspace(t, s, "it_ddl", 3)
	raw := dialRaw(t, p.Addr, 4)
	raw.startup(nil)
	var errs []string
	for i := 0; i < tables; i++ {
		tbl := fmt.Sprintf("it_ddl.t%d", i)
		mustExec(t, s, "CREATE TABLE "+tbl+" (k int PRIMARY KEY, v int)")
		for k := 0; k < uses; k++ {
			// Simple statements, so that every one is a new request to
			// whichever node the proxy picks.
			resp := raw.query(int16(k+1), fmt.Sprintf("INSERT INTO %s (k, v) VALUES (%d, %d)", tbl, k, k))
			if frame.Opcode(resp) != frame.OpResult {
				errs = append(errs, fmt.Sprintf("INSERT %d into %s right after CREATE: %s", k, tbl, describe(resp)))
			}
		}
		mustExec(t, s, "ALTER TABLE "+tbl+" ADD w text")
		for k := 0; k < uses; k++ {
			resp := raw.query(int16(k+1), fmt.Sprintf("UPDATE %s SET w = 'x' WHERE k = %d", tbl, k))
			if frame.Opcode(resp) != frame.OpResult {
				errs = append(errs, fmt.Sprintf("UPDATE %d of %s's new column right after ALTER: %s", k, tbl, describe(resp)))
			}
		}
	}
	if len(errs) > 0 {
		t.Fatalf("%d of %d statements failed; first ones:\n  %s", len(errs), 2*tables*uses, strings.Join(errs[:min(10, len(errs))], "\n  "))
	}
}

// TestReproNodeShutdown (BUGS 2 and 3) stops one node of three while
// queries run through the proxy:
//   - BUG 2: while the node drains it answers every request with OVERLOADED
//     "Server is shutting down" (it did not execute them) and keeps its
//     connections open for seconds; the proxy relays those errors instead
//     of sending the requests to another node, and since that node answers
//     fastest, least-loaded picking sends it even more. Up to ~100 queries
//     failed here in a 5 s stop with 4 concurrent clients.
//   - BUG 3: with the node down, every DDL takes the proxy's whole 10 s
//     schemaAgreementTimeout: WaitSchemaAgreement compares the control
//     node's system.peers schema_version of every peer, including the down
//     one whose version never changes.
func TestReproNodeShutdown(t *testing.T) {
	const victim = 2
	c := cluster3.get(t)
	direct := newSession(t, c.Addrs, nil)
	recreateKeyspace(t, direct, "it_repro", 3, "CREATE TABLE it_repro.kv (k int PRIMARY KEY, v text)")
	for k := 0; k < 100; k++ {
		mustExec(t, direct, "INSERT INTO it_repro.kv (k, v) VALUES (?, 'x')", k)
	}
	direct.Close()
	p := startProxy(t, c.Addrs[:1], nil)
	s := proxySession(t, p, func(cc *gocql.ClusterConfig) { cc.Consistency = gocql.One })
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		if err := c.StartNode(ctx, victim); err != nil {
			t.Errorf("StartNode(%d): %v", victim, err)
		}
	})

	stop := make(chan struct{})
	var failed, ran atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				var v string
				if err := s.Query("SELECT v FROM it_repro.kv WHERE k = ?", i%100).Scan(&v); err != nil {
					failed.Add(1)
				}
				ran.Add(1)
			}
		}()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	err := c.StopNode(ctx, victim)
	cancel()
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("StopNode(%d): %v", victim, err)
	}
	if n := failed.Load(); n > 8 {
		t.Errorf("BUG 2: %d of %d queries failed while the node shut down, want at most the few in flight when its connections closed", n, ran.Load())
	}

	began := time.Now()
	mustExec(t, s, "CREATE TABLE it_repro.while_down (k int PRIMARY KEY)")
	if d := time.Since(began); d > 5*time.Second {
		t.Errorf("BUG 3: CREATE TABLE with a node down took %s, want well under the 10s schema agreement timeout", d.Round(time.Millisecond))
	}
}
