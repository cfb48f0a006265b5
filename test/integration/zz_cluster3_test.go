package integration

// The tests that need the three-node cluster. The file is named to sort
// last: go test runs tests in source file order, and only one cluster runs
// at a time (see allClusters), so the single-node tests all run first.

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gocql2 "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/gocql/gocql"

	"github.com/cqlgate/cqlgate/pkg/config"
	"github.com/cqlgate/cqlgate/pkg/frame"
)

// proxyRequestsOn returns, for a node, the request_count Cassandra keeps
// for the connections whose driver_name is the proxy's ("cqlgate"), read
// from system_views.clients directly on that node.
func proxyRequestsOn(t *testing.T, addr string) (conns int, requests int64) {
	t.Helper()
	r := dialRaw(t, addr, 4)
	r.startup(nil)
	rs := r.mustRows("SELECT driver_name, request_count FROM system_views.clients")
	for i := range rs.rows {
		name, _ := rs.col(i, "driver_name")
		count, _ := rs.col(i, "request_count")
		if string(name) == "cqlgate" && len(count) == 8 {
			conns++
			requests += int64(binary.BigEndian.Uint64(count))
		}
	}
	r.nc.Close()
	return conns, requests
}

// TestClusterDiscoveryAndSpread gives the proxy one contact point of three
// and checks it discovers the other nodes and spreads requests over all.
func TestClusterDiscoveryAndSpread(t *testing.T) {
	const queries = 3000
	c := cluster3.Get(t)
	direct := newSession(t, c.Addrs, func(cc *gocql.ClusterConfig) { cc.Consistency = gocql.One }) // waits for schema agreement after DDL
	recreateKeyspace(t, direct, "it_spread", 3, "CREATE TABLE it_spread.kv (k int PRIMARY KEY, v int)")
	// The node that an earlier test restarted (zz_cluster3_faults_test.go
	// kills one) runs a JVM that has not compiled its read and write paths
	// yet, and answers so slowly that the proxy's least-loaded pick rightly
	// sends it almost nothing (26 of 3,000 once, on a 2-core CI machine).
	// The direct session spreads its queries round robin, so this pass warms
	// every node alike before the proxy is measured.
	runSpread(t, direct, queries)
	direct.Close()

	// A fixed limit: the spread measured is the least-loaded pick's.
	// Fleet mode (the default) also cuts a slow node's limit, and the
	// pick then sends it less still (22 of 3,000 once): right for the
	// node, and below this test's floor of 1%.
	p := startProxy(t, c.Addrs[:1], func(cc *config.Config) { cc.LimitMode = "fixed" })
	waitFor(t, 30*time.Second, "the proxy to discover every node", func() (bool, string) {
		up := metricSeries(t, p.Reg, "cqlgate_backend_node_up")
		if len(up) != len(c.Addrs) {
			return false, fmt.Sprintf("cqlgate_backend_node_up has %d series %v, want %d", len(up), up, len(c.Addrs))
		}
		for _, a := range c.Addrs {
			if up["node="+a] != 1 {
				return false, fmt.Sprintf("cqlgate_backend_node_up = %v, want 1 for each of %v", up, c.Addrs)
			}
		}
		return true, ""
	})

	s := proxySession(t, p, func(cc *gocql.ClusterConfig) { cc.Consistency = gocql.One })
	before := make([]int64, len(c.Addrs))
	for i, a := range c.Addrs {
		_, before[i] = proxyRequestsOn(t, a)
	}
	runSpread(t, s, queries)

	// Each node served a share of the 3,000 queries over the proxy's
	// connections. The proxy picks the least-loaded node, so under
	// concurrency a faster (warmer) node takes more than a third; a node
	// that was not discovered or not used would serve none (or only the
	// proxy's own few background requests).
	for i, a := range c.Addrs {
		conns, after := proxyRequestsOn(t, a)
		t.Logf("node %s: %d proxy connections served %d requests", a, conns, after-before[i])
		if conns == 0 {
			t.Errorf("node %s: no connection from the proxy in system_views.clients", a)
		}
		// A node that is slower at the moment (compacting, or starved of
		// CPU on a busy machine) rightly gets less: at least 1%.
		if got := after - before[i]; got < queries/100 {
			t.Errorf("node %s: served %d requests from the proxy, want at least %d of the %d", a, got, queries/100, queries)
		}
	}
}

// runSpread sends n queries, half writes and half reads, from 16 workers
// through s, and fails the test if any fails.
func runSpread(t *testing.T, s *gocql.Session, n int) {
	t.Helper()
	var failed atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	work := make(chan int)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				var err error
				if i%2 == 0 {
					err = s.Query("INSERT INTO it_spread.kv (k, v) VALUES (?, ?)", i%500, i).Exec()
				} else {
					var v int
					err = s.Query("SELECT v FROM it_spread.kv WHERE k = ?", i%500).Scan(&v)
					if err == gocql.ErrNotFound {
						err = nil
					}
				}
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	if f := failed.Load(); f > 0 {
		t.Fatalf("%d of %d queries failed; first: %v", f, n, firstErr.Load())
	}
}

// TestNodeRestart stops one node of three and restarts it, with the proxy
// serving throughout:
//   - while it is down, queries at CL=ONE keep succeeding (a few may fail
//     at the moment it stops, when requests are in flight there);
//   - after it is back, statements prepared before the restart (which the
//     node has forgotten: its system.prepared_statements is truncated
//     first, so it cannot reload them) still execute without any client
//     seeing UNPREPARED: the proxy prepares them again
//     (cqlgate_reprepares_total grows), for gocql on v4 with and without a
//     keyspace, for cassandra-gocql-driver/v2 on v5, and for a raw client
//     that would not re-prepare by itself.
//
// The subtests run in order, each on what the ones before did; no node is
// stopped unless the clients work before, the later ones stop at a node
// that does not come back, and the node is started again at the end
// whatever failed, so that the shared cluster stays whole.
func TestNodeRestart(t *testing.T) {
	const victim = 2 // not the contact point, which holds the control connection
	c := cluster3.Get(t)
	direct := newSession(t, c.Addrs, nil)
	recreateKeyspace(t, direct, "it_restart", 3, "CREATE TABLE it_restart.kv (k int PRIMARY KEY, v text)")
	direct.Close()

	// A fixed limit, so that the restarted node gets its share of this
	// light load at once: fleet mode (the default) starts a node that
	// comes back at --limit-floor, paced, and the least-loaded pick sends
	// it less while its limit grows (36 requests where 50 are wanted, its
	// limit at 0.4 and the others' at 1024). The re-preparing checked
	// here does not depend on the limit.
	p := startProxy(t, c.Addrs[:1], func(cc *config.Config) { cc.LimitMode = "fixed" })
	waitFor(t, 30*time.Second, "the proxy to connect to every node", func() (bool, string) {
		conns := metricSeries(t, p.Reg, "cqlgate_backend_connections")
		return len(conns) == 3 && conns["node="+c.Addrs[victim]] > 0, fmt.Sprintf("cqlgate_backend_connections = %v", conns)
	})
	rc := newRestartClients(t, p)

	if !t.Run("PreparedBeforeRestart", func(t *testing.T) {
		if errs := rc.workload(60); len(errs) > 0 {
			t.Fatalf("before the restart: %d failures; first: %s", len(errs), errs[0])
		}
		rc.rawExecute(t, 30)
	}) {
		t.FailNow() // nothing to compare a restart with: leave the node alone
	}

	// Make the victim forget its prepared statements across the restart.
	vr := dialRaw(t, c.Addrs[victim], 4)
	vr.startup(nil)
	if resp := vr.query(1, "TRUNCATE system.prepared_statements"); frame.Opcode(resp) != frame.OpResult {
		t.Fatalf("TRUNCATE system.prepared_statements on %s: %s", c.Addrs[victim], describe(resp))
	}
	vr.nc.Close()

	// From the stop on, the node may be down until a StartNode succeeds:
	// start it at the end if the test did not (StartNode of a running node
	// only waits for it to answer).
	down := true
	t.Cleanup(func() {
		if !down {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		if err := c.StartNode(ctx, victim); err != nil {
			t.Errorf("starting node %s again after the test: %v", c.Addrs[victim], err)
		}
	})
	t.Run("StoppedNodeIsAvoided", func(t *testing.T) { testStoppedNodeIsAvoided(t, c, p, rc.s, victim) })
	if !t.Run("NodeRestarts", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		began := time.Now()
		err := c.StartNode(ctx, victim)
		cancel()
		if err != nil {
			t.Fatalf("StartNode(%d): %v", victim, err)
		}
		down = false
		t.Logf("node %s started in %s", c.Addrs[victim], time.Since(began).Round(time.Millisecond))
		waitFor(t, 60*time.Second, "the proxy to reconnect every pool to the restarted node", func() (bool, string) {
			conns := metricSeries(t, p.Reg, "cqlgate_backend_connections")
			v, ref := conns["node="+c.Addrs[victim]], conns["node="+c.Addrs[0]]
			return v > 0 && v == ref, fmt.Sprintf("cqlgate_backend_connections = %v", conns)
		})
	}) {
		t.FailNow() // the node, or the proxy's connections to it, did not come back
	}

	reprepBefore := metricSum(t, p.Reg, "cqlgate_reprepares_total")
	t.Run("PreparedStatementsSurviveRestart", func(t *testing.T) {
		if errs := rc.workload(90); len(errs) > 0 {
			t.Errorf("after the restart: %d failures; first ones:\n  %s", len(errs), strings.Join(errs[:min(5, len(errs))], "\n  "))
		}
	})
	t.Run("RawClientSurvivesRestart", func(t *testing.T) { rc.rawExecute(t, 60) })
	t.Run("ProxyRepreparedOnRestartedNode", func(t *testing.T) {
		if after := metricSum(t, p.Reg, "cqlgate_reprepares_total"); after <= reprepBefore {
			t.Errorf("cqlgate_reprepares_total: %v before and %v after executing on the restarted node, want it to grow", reprepBefore, after)
		}
		_, requests := proxyRequestsOn(t, c.Addrs[victim])
		t.Logf("the restarted node served %d requests from the proxy; limits %v", requests, metricSeries(t, p.Reg, "cqlgate_limiter_limit"))
		if requests < 50 {
			t.Errorf("the restarted node served %d requests from the proxy, want its share", requests)
		}
	})
}

// restartClients are TestNodeRestart's clients of the proxy, each with
// statements it prepared before the restart.
type restartClients struct {
	s, sks *gocql.Session  // gocql on v4, without and with a keyspace
	s5     *gocql2.Session // cassandra-gocql-driver/v2 on v5, with a keyspace
	raw    *rawConn        // a raw v4 client, which would not re-prepare by itself
	rawID  []byte          // raw's prepared SELECT of row 42
}

// newRestartClients opens the clients, writes rows 0..99 of it_restart.kv
// and prepares the raw client's statement.
func newRestartClients(t *testing.T, p *testProxy) *restartClients {
	t.Helper()
	one := func(cc *gocql.ClusterConfig) { cc.Consistency = gocql.One }
	rc := &restartClients{
		s:   proxySession(t, p, one),
		sks: proxySession(t, p, func(cc *gocql.ClusterConfig) { one(cc); cc.Keyspace = "it_restart" }),
		s5:  newSession2(t, p.Addr, func(cc *gocql2.ClusterConfig) { cc.Consistency = gocql2.One; cc.Keyspace = "it_restart" }),
	}
	for k := 0; k < 100; k++ {
		mustExec(t, rc.s, "INSERT INTO it_restart.kv (k, v) VALUES (?, ?)", k, fmt.Sprint("v", k))
	}
	rc.raw = dialRaw(t, p.Addr, 4)
	rc.raw.startup(nil)
	prep := rc.raw.roundTrip(frame.AppendPrepare(nil, 4, 1, "SELECT v FROM it_restart.kv WHERE k = 42", ""))
	id, _, err := prepared(prep, 4)
	if err != nil {
		t.Fatalf("raw PREPARE: %v", err)
	}
	rc.rawID = id
	return rc
}

// workload runs n rounds of prepared statements through each session and
// returns the failures.
func (rc *restartClients) workload(n int) []string {
	var errs []string
	for i := 0; i < n; i++ {
		k := i % 100
		want := fmt.Sprint("v", k)
		var got string
		if err := rc.s.Query("SELECT v FROM it_restart.kv WHERE k = ?", k).Scan(&got); err != nil || got != want {
			errs = append(errs, fmt.Sprintf("gocql v4: got (%q, %v), want %q", got, err, want))
		}
		if err := rc.sks.Query("SELECT v FROM kv WHERE k = ?", k).Scan(&got); err != nil || got != want {
			errs = append(errs, fmt.Sprintf("gocql v4 with keyspace: got (%q, %v), want %q", got, err, want))
		}
		if err := rc.s5.Query("SELECT v FROM kv WHERE k = ?", k).Scan(&got); err != nil || got != want {
			errs = append(errs, fmt.Sprintf("gocql2 v5 with keyspace: got (%q, %v), want %q", got, err, want))
		}
		if err := rc.sks.Query("UPDATE kv SET v = ? WHERE k = ?", want, k).Exec(); err != nil {
			errs = append(errs, fmt.Sprintf("gocql v4 UPDATE: %v", err))
		}
		if i%5 == 0 { // a BATCH naming two prepared statements
			b := rc.s.NewBatch(gocql.UnloggedBatch)
			b.Query("UPDATE it_restart.kv SET v = ? WHERE k = ?", want, k)
			b.Query("INSERT INTO it_restart.kv (k, v) VALUES (?, ?)", k, want)
			if err := rc.s.ExecuteBatch(b); err != nil {
				errs = append(errs, fmt.Sprintf("gocql v4 BATCH: %v", err))
			}
		}
	}
	return errs
}

// rawExecute executes the raw client's prepared statement n times; each
// must return its one row. The connection outlives the subtest t, so its
// failures go to t while this runs.
func (rc *restartClients) rawExecute(t *testing.T, n int) {
	t.Helper()
	defer func(parent testing.TB) { rc.raw.t = parent }(rc.raw.t)
	rc.raw.t = t
	for i := 0; i < n; i++ {
		resp := rc.raw.roundTrip(appendExecute(nil, 4, int16(2+i%100), rc.rawID, nil, consistencyOne, nil))
		rs, err := decodeRows(resp)
		if err != nil || len(rs.rows) != 1 || string(rs.rows[0][0]) != "v42" {
			t.Fatalf("raw EXECUTE %d: got %s (%v), want one row v42", i, describe(resp), err)
		}
	}
}

// testStoppedNodeIsAvoided stops node victim with queries at CL=ONE
// running through s. While the node shuts down, requests it still receives
// fail: it answers OVERLOADED "Server is shutting down" until it closes its
// connections, and those in flight when they close are lost. Once StopNode
// returns (the process is gone), no query may fail.
func testStoppedNodeIsAvoided(t *testing.T, c *testCluster, p *testProxy, s *gocql.Session, victim int) {
	stop := make(chan struct{})
	var (
		mu       sync.Mutex
		failures []time.Time
		kinds    = map[string]int{}
		ran      atomic.Int64
		wg       sync.WaitGroup
	)
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
				if err := s.Query("SELECT v FROM it_restart.kv WHERE k = ?", i%100).Scan(&v); err != nil {
					code, _ := requestErrorCode(err)
					mu.Lock()
					failures = append(failures, time.Now())
					kinds[fmt.Sprintf("0x%04x %s", code, err)]++
					mu.Unlock()
				}
				ran.Add(1)
			}
		}()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	began := time.Now()
	err := c.StopNode(ctx, victim)
	cancel()
	stopped := time.Now()
	time.Sleep(2 * time.Second) // keep querying with the node gone
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("StopNode(%d): %v", victim, err)
	}
	t.Logf("node %s stopped in %s; %d queries ran meanwhile, %d failed: %v",
		c.Addrs[victim], stopped.Sub(began).Round(time.Millisecond), ran.Load(), len(failures), kinds)
	for k := range kinds {
		if !strings.HasPrefix(k, fmt.Sprintf("0x%04x ", gocql.ErrCodeOverloaded)) && !strings.Contains(k, "connection to Cassandra was lost") {
			t.Errorf("unexpected failure while the node stopped: %s", k)
		}
	}
	for _, at := range failures {
		if at.After(stopped.Add(500 * time.Millisecond)) {
			t.Errorf("a query failed %s after the node had stopped, want none", at.Sub(stopped).Round(time.Millisecond))
			break
		}
	}
	var errs []string
	for i := 0; i < 200; i++ {
		var v string
		if err := s.Query("SELECT v FROM it_restart.kv WHERE k = ?", i%100).Scan(&v); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		t.Errorf("with the node down, %d of 200 queries at CL=ONE failed, want 0; first: %s", len(errs), errs[0])
	}
	if conns := metricSeries(t, p.Reg, "cqlgate_backend_connections"); conns["node="+c.Addrs[victim]] != 0 {
		t.Errorf("cqlgate_backend_connections = %v, want 0 for the stopped node", conns)
	}
}

// TestPreparedSystemQueriesAcrossNodes prepares system.local and
// system.peers queries through the proxy on the three-node cluster and
// executes them many times (so on every node): each EXECUTE must return
// the proxy's rewritten rows, never UNPREPARED, even for a client that does
// not re-prepare by itself.
func TestPreparedSystemQueriesAcrossNodes(t *testing.T) {
	c := cluster3.Get(t)
	p := startProxy(t, c.Addrs[:1], nil)
	waitFor(t, 30*time.Second, "the proxy to connect to every node", func() (bool, string) {
		conns := metricSeries(t, p.Reg, "cqlgate_backend_connections")
		return len(conns) == 3, fmt.Sprintf("cqlgate_backend_connections = %v", conns)
	})
	proxyIP := netip.MustParseAddrPort(p.Addr).Addr().AsSlice()
	for _, v := range []byte{4, 5} {
		r := dialRaw(t, p.Addr, v)
		r.startup(nil)
		for _, q := range []string{"SELECT rpc_address, host_id FROM system.local", "SELECT * FROM system.peers"} {
			prep := r.roundTrip(frame.AppendPrepare(nil, v, 1, q, ""))
			id, metaID, err := prepared(prep, v)
			if err != nil {
				t.Fatalf("v%d PREPARE %s: %v", v, q, err)
			}
			for i := 0; i < 30; i++ {
				resp := r.roundTrip(appendExecute(nil, v, 2, id, metaID, consistencyOne, nil))
				rs, err := decodeRows(resp)
				if err != nil {
					t.Fatalf("v%d EXECUTE %d of %q: %v", v, i, q, err)
				}
				if strings.Contains(q, "peers") {
					if len(rs.rows) != 0 {
						t.Fatalf("v%d EXECUTE %d of %q: %d rows, want 0", v, i, q, len(rs.rows))
					}
				} else if len(rs.rows) != 1 || !bytes.Equal(rs.rows[0][0], proxyIP) {
					t.Fatalf("v%d EXECUTE %d of %q: rows %x, want one with rpc_address %v", v, i, q, rs.rows, proxyIP)
				}
			}
		}
	}
}
