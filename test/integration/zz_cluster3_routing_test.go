package integration

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/cqlgate/cqlgate/pkg/config"
)

// TestTokenAwareRouting: with replication factor 1, every prepared read of
// a partition must be sent to the one node that owns it. The owner is
// computed here from Cassandra's own answers (token(k), and each node's
// tokens in system.local), independently of the proxy's placement code, and
// checked against the requests each node counted from the proxy.
func TestTokenAwareRouting(t *testing.T) {
	const keys = 300
	c := cluster3.Get(t)
	direct := newSession(t, c.Addrs, nil)
	recreateKeyspace(t, direct, "it_route", 1, "CREATE TABLE it_route.kv (k int PRIMARY KEY, v int)")
	for k := 0; k < keys; k++ {
		mustExec(t, direct, "INSERT INTO it_route.kv (k, v) VALUES (?, ?)", k, k)
	}
	// The ring, from each node's own system.local.
	type owned struct {
		tok  int64
		node int
	}
	var ring []owned
	for i, a := range c.Addrs {
		s := newSession(t, []string{a}, func(cc *gocql.ClusterConfig) {
			cc.HostFilter = gocql.WhiteListHostFilter(a)
		})
		var toks []string
		if err := s.Query("SELECT tokens FROM system.local").Scan(&toks); err != nil {
			t.Fatal(err)
		}
		for _, tk := range toks {
			v, err := strconv.ParseInt(tk, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			ring = append(ring, owned{v, i})
		}
		s.Close()
	}
	slices.SortFunc(ring, func(a, b owned) int {
		switch {
		case a.tok < b.tok:
			return -1
		case a.tok > b.tok:
			return 1
		}
		return 0
	})
	want := make([]int64, len(c.Addrs))
	for k := 0; k < keys; k++ {
		var tok int64
		if err := direct.Query("SELECT token(k) FROM it_route.kv WHERE k = ?", k).Scan(&tok); err != nil {
			t.Fatal(err)
		}
		i, _ := slices.BinarySearchFunc(ring, tok, func(o owned, t int64) int {
			switch {
			case o.tok < t:
				return -1
			case o.tok > t:
				return 1
			}
			return 0
		})
		want[ring[i%len(ring)].node]++
	}
	direct.Close()

	p := startProxy(t, c.Addrs[:1], nil)
	waitNodesUp(t, p, 3)
	s := proxySession(t, p, func(cc *gocql.ClusterConfig) { cc.Consistency = gocql.One })
	// Prepare first, so the proxy has the statement on every node.
	var v int
	if err := s.Query("SELECT v FROM it_route.kv WHERE k = ?", 0).Scan(&v); err != nil {
		t.Fatal(err)
	}
	before := make([]int64, len(c.Addrs))
	for i, a := range c.Addrs {
		_, before[i] = proxyRequestsOn(t, a)
	}
	began := time.Now()
	for k := 0; k < keys; k++ {
		if err := s.Query("SELECT v FROM it_route.kv WHERE k = ?", k).Scan(&v); err != nil || v != k {
			t.Fatalf("key %d: got %d, %v", k, v, err)
		}
	}
	// And a single-partition batch of prepared statements goes to the
	// owner of its first statement's partition.
	for k := 0; k < keys; k++ {
		b := s.NewBatch(gocql.UnloggedBatch)
		b.Query("UPDATE it_route.kv SET v = ? WHERE k = ?", k, k)
		b.Query("UPDATE it_route.kv SET v = ? WHERE k = ?", k, k)
		if err := s.ExecuteBatch(b); err != nil {
			t.Fatalf("batch for key %d: %v", k, err)
		}
	}
	for i := range want {
		want[i] *= 2
	}
	// Fleet mode (the default) reads each node's counts every
	// --limit-node-poll while this proxy carries its requests: those are
	// requests too.
	readings := int64(time.Since(began)/config.Default().LimitNodePoll) + 1
	for i, a := range c.Addrs {
		_, after := proxyRequestsOn(t, a)
		got := after - before[i]
		// Each node also counts the proxy's own few background requests
		// (heartbeats, topology refreshes, the fleet limit's readings),
		// and the request_count read itself.
		if got < want[i] || got > want[i]+10+readings {
			t.Errorf("node %s served %d requests from the proxy; want %d (a read and a batch for each of its keys)", a, got, want[i])
		}
		t.Logf("node %s: expected %d requests, served %d", a, want[i], got)
	}
}
