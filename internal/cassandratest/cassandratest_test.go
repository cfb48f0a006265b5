package cassandratest

import (
	"context"
	"net"
	"os"
	"sort"
	"strings"
	"testing"
	"time"
)

// These tests start real clusters: one node on 127.0.10.1 and three nodes on 127.0.11.1-3.
// Both run in parallel (different addresses), so the package costs about one 3-node start.
// They fail if Cassandra cannot start; CQLGATE_SKIP_CASSANDRA=1 skips them.

func query1(t *testing.T, c *Cluster, node int, stmt string) string {
	t.Helper()
	s, err := c.ClusterConfig(node).CreateSession()
	if err != nil {
		t.Fatalf("node %d: connect: %v", node, err)
	}
	defer s.Close()
	var v string
	if err := s.Query(stmt).Scan(&v); err != nil {
		t.Fatalf("node %d: %s: %v", node, stmt, err)
	}
	return v
}

func processGone(pid int) bool { return procState(pid) == 0 }

func TestSingleNode(t *testing.T) {
	if Skipped() {
		t.Skip("CQLGATE_SKIP_CASSANDRA=1")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	// An address of its own: this test stops its node, and `make test`
	// shares 127.0.10.1 and 127.0.11.1-3 among the other packages.
	c, err := Start(ctx, Options{Addresses: []string{"127.0.16.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if got := strings.Join(c.Addrs, ","); got != "127.0.16.1:9042" {
		t.Fatalf("Addrs = %s, want 127.0.16.1:9042", got)
	}
	if v := query1(t, c, 0, "SELECT release_version FROM system.local"); v != "5.0.4" {
		t.Fatalf("release_version = %q, want 5.0.4", v)
	}

	// Pause / resume.
	if err := c.PauseNode(0); err != nil {
		t.Fatal(err)
	}
	pid, err := c.PID(0)
	if err != nil {
		t.Fatal(err)
	}
	if st := procState(pid); st != 'T' {
		t.Errorf("node state %q after PauseNode, want T", st)
	}
	if err := c.ResumeNode(0); err != nil {
		t.Fatal(err)
	}
	query1(t, c, 0, "SELECT release_version FROM system.local")

	// Stop the node: the process must be gone and PID must fail.
	if err := c.StopNode(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if !processGone(pid) {
		t.Fatalf("pid %d still alive after StopNode", pid)
	}
	if _, err := c.PID(0); err == nil {
		t.Fatal("PID succeeded for a stopped node")
	}

	// Start it again with the same data.
	if err := c.StartNode(ctx, 0); err != nil {
		t.Fatal(err)
	}
	pid2, err := c.PID(0)
	if err != nil {
		t.Fatal(err)
	}
	query1(t, c, 0, "SELECT release_version FROM system.local")

	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if !processGone(pid2) {
		t.Fatalf("pid %d still alive after Stop", pid2)
	}
	if _, err := os.Stat(c.Dir); !os.IsNotExist(err) && os.Getenv("CQLGATE_KEEP_CASSANDRA_DIR") != "1" {
		t.Fatalf("cluster dir %s not removed by Stop: %v", c.Dir, err)
	}
}

func TestThreeNodes(t *testing.T) {
	if Skipped() {
		t.Skip("CQLGATE_SKIP_CASSANDRA=1")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	// Under `make test` the suite's 3-node cluster was started by the same
	// launcher: check its ring instead of starting three more nodes.
	c, cleanup, err := Shared(ctx, "CLUSTER3", Options{Addresses: []string{"127.0.11.1", "127.0.11.2", "127.0.11.3"}})
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	shared := os.Getenv("CQLGATE_TEST_CASSANDRA_CLUSTER3") != ""

	var pids []int
	for i := range c.Addrs {
		s, err := c.ClusterConfig(i).CreateSession()
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		var peers []string
		var p string
		iter := s.Query("SELECT peer FROM system.peers").Iter()
		for iter.Scan(&p) {
			peers = append(peers, p)
		}
		if err := iter.Close(); err != nil {
			t.Fatalf("node %d: system.peers: %v", i, err)
		}
		s.Close()
		sort.Strings(peers)
		var want []string
		for j, h := range c.Hosts {
			if j != i {
				want = append(want, h)
			}
		}
		if strings.Join(peers, ",") != strings.Join(want, ",") {
			t.Errorf("node %d: system.peers = %v, want %v", i, peers, want)
		}
		pid, err := c.PID(i)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}

	// All nodes NORMAL in everyone's view: a session on node 0 discovers the ring.
	s, err := c.ClusterConfig().CreateSession()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.Query("SELECT count(*) FROM system.peers").Scan(&n); err != nil || n != 2 {
		t.Errorf("count(*) system.peers = %d, %v", n, err)
	}
	s.Close()

	if shared {
		return // not ours to stop
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if !processGone(pid) {
			t.Errorf("pid %d still alive after Stop", pid)
		}
	}
}

// TestSharedFromEnv needs no Cassandra: CQLGATE_TEST_CASSANDRA_<NAME> points Shared at nodes
// that already run (here a bare TCP listener) and its cleanup leaves them alone.
func TestSharedFromEnv(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	t.Setenv("CQLGATE_SKIP_CASSANDRA", "")
	t.Setenv("CQLGATE_TEST_CASSANDRA_ENV_TEST", ln.Addr().String()+", 127.0.0.1")
	t.Setenv("CQLGATE_TEST_CASSANDRA_ENV_TEST_DIR", "")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// The second address (default port 9042) is not listening: Shared must fail loudly.
	if _, _, err := Shared(ctx, "env-test", Options{}); err == nil {
		t.Fatal("Shared succeeded with an unreachable node")
	}

	t.Setenv("CQLGATE_TEST_CASSANDRA_ENV_TEST", ln.Addr().String())
	c, cleanup, err := Shared(ctx, "env-test", Options{Auth: true})
	if err != nil {
		t.Fatal(err)
	}
	cleanup()
	if got := strings.Join(c.Addrs, ","); got != ln.Addr().String() {
		t.Fatalf("Addrs = %q", got)
	}
	if c.Hosts[0] != "127.0.0.1" || c.Username != DefaultUsername || !c.Auth {
		t.Fatalf("unexpected cluster %+v", c)
	}
	if err := c.StopNode(ctx, 0); err == nil {
		t.Fatal("StopNode worked on an external cluster without a dir")
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if conn, err := net.Dial("tcp", ln.Addr().String()); err != nil {
		t.Fatalf("listener gone after cleanup: %v", err)
	} else {
		conn.Close()
	}

	t.Setenv("CQLGATE_SKIP_CASSANDRA", "1")
	if _, _, err := Shared(ctx, "env-test", Options{}); err != ErrSkipped {
		t.Fatalf("Shared with CQLGATE_SKIP_CASSANDRA=1: %v, want ErrSkipped", err)
	}
}
