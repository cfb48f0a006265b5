package token

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocql/gocql"
	"golang.org/x/sync/errgroup"

	"github.com/cqlgate/cqlgate/internal/cassandratest"
)

// The tests in this file and pipeline_cassandra_test.go check the package
// against the shared 3-node cluster (CLUSTER3, 127.0.11.1-3): tokens
// against token(), replicas against nodetool's view of the ring, the
// frame decoders and AppendFrameWithTimestamp against real requests.
//
// Schema changes are slow on a loaded 3-node cluster (seconds each, as
// every node must agree), so the tests share one schema, created by the
// first test that needs it and dropped once all have run.

// testKeyspaces are the keyspaces of the shared schema and their
// replication; each has a table t_comp (a int, b text, v text, PRIMARY KEY
// ((a, b))), and tok_rf2 also tables keyed by one column of each type.
var testKeyspaces = map[string]string{
	"tok_rf1": "{'class': 'SimpleStrategy', 'replication_factor': 1}",
	"tok_rf2": "{'class': 'SimpleStrategy', 'replication_factor': 2}",
	"tok_nts": "{'class': 'NetworkTopologyStrategy', 'datacenter1': 2}",
}

var typedTables = []string{
	"CREATE TABLE tok_rf2.t_int (k int PRIMARY KEY)",
	"CREATE TABLE tok_rf2.t_bigint (k bigint PRIMARY KEY)",
	"CREATE TABLE tok_rf2.t_text (k text PRIMARY KEY)",
	"CREATE TABLE tok_rf2.t_uuid (k uuid PRIMARY KEY)",
	"CREATE TABLE tok_rf2.t_blob (k blob PRIMARY KEY)",
}

func TestMain(m *testing.M) {
	code := m.Run()
	if c := cluster3.Started(); schema.created && c != nil {
		if err := dropSchema(c); err != nil {
			fmt.Fprintf(os.Stderr, "dropping the test keyspaces: %v\n", err)
		}
	}
	cluster3.Stop()
	os.Exit(code)
}

// cluster3 is the 3-node cluster, got by the first test that needs it:
// benchmarks, fuzzing and -list never start one.
var cluster3 = &cassandratest.Lazy{
	Name:    "cluster3",
	Options: cassandratest.Options{Nodes: 3, Addresses: []string{"127.0.11.1", "127.0.11.2", "127.0.11.3"}},
	Timeout: 25 * time.Minute,
}

// schema records whether the shared schema was made, and how that went.
var schema struct {
	sync.Mutex
	created bool
	err     error
}

// sharedSchema creates the shared schema on first use; a failure fails
// every test that needs it.
func sharedSchema(t *testing.T, s *gocql.Session) {
	t.Helper()
	schema.Lock()
	defer schema.Unlock()
	if !schema.created && schema.err == nil {
		schema.created = true
		schema.err = createSchema(s)
	}
	if schema.err != nil {
		t.Fatalf("creating the test keyspaces: %v", schema.err)
	}
}

func createSchema(s *gocql.Session) error {
	stmts := []string{}
	for _, ks := range slices.Sorted(maps.Keys(testKeyspaces)) {
		stmts = append(stmts,
			"DROP KEYSPACE IF EXISTS "+ks,
			fmt.Sprintf("CREATE KEYSPACE %s WITH replication = %s", ks, testKeyspaces[ks]),
			fmt.Sprintf("CREATE TABLE %s.t_comp (a int, b text, v text, PRIMARY KEY ((a, b)))", ks))
	}
	for _, q := range append(stmts, typedTables...) {
		if err := s.Query(q).Exec(); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

func dropSchema(c *cassandratest.Cluster) error {
	s, err := c.ClusterConfig().CreateSession()
	if err != nil {
		return err
	}
	defer s.Close()
	for ks := range testKeyspaces {
		if err := s.Query("DROP KEYSPACE IF EXISTS " + ks).Exec(); err != nil {
			return err
		}
	}
	return nil
}

// session opens a gocql session to every node of c, closed at the end of
// the test, and makes sure the shared schema exists.
func session(t *testing.T, c *cassandratest.Cluster) *gocql.Session {
	t.Helper()
	cfg := c.ClusterConfig()
	cfg.Timeout = 30 * time.Second
	// Every statement here may be repeated; a loaded machine makes
	// Cassandra time out now and then.
	cfg.RetryPolicy = &gocql.SimpleRetryPolicy{NumRetries: 3}
	s, err := cfg.CreateSession()
	if err != nil {
		t.Fatalf("gocql session: %v", err)
	}
	t.Cleanup(s.Close)
	sharedSchema(t, s)
	return s
}

func int32Bytes(v int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(v)) }
func int64Bytes(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

func randomText(rng *rand.Rand) string {
	// Multi-byte runes put bytes >= 0x80 in the tail, where Cassandra's
	// murmur3 sign-extends.
	alphabet := []rune("abcxyz0123 _-éüßπ東京🙂")
	r := make([]rune, 1+rng.IntN(30))
	for i := range r {
		r[i] = alphabet[rng.IntN(len(alphabet))]
	}
	return string(r)
}

// TestTokensMatchCassandra compares PartitionToken with token() for keys
// of single and composite partition keys of several types.
func TestTokensMatchCassandra(t *testing.T) {
	c := cluster3.Get(t)
	s := session(t, c)
	rng := rand.New(rand.NewPCG(7, 8))
	const perTable = 120
	ints := []int32{0, 1, -1, math.MaxInt32, math.MinInt32}
	for len(ints) < perTable {
		ints = append(ints, int32(rng.Uint32()))
	}
	bigints := []int64{0, -1, math.MaxInt64, math.MinInt64}
	for len(bigints) < perTable {
		bigints = append(bigints, int64(rng.Uint64()))
	}
	type insert struct {
		q    string
		args []any
	}
	var inserts []insert
	for i := range perTable {
		blob := make([]byte, 1+rng.IntN(70)) // every tail length, up to 4 blocks
		for j := range blob {
			blob[j] = byte(rng.Uint32())
		}
		b := randomText(rng)
		if i%10 == 0 {
			b = "" // an empty component is allowed in a composite key
		}
		inserts = append(inserts,
			insert{"INSERT INTO tok_rf2.t_int (k) VALUES (?)", []any{ints[i]}},
			insert{"INSERT INTO tok_rf2.t_bigint (k) VALUES (?)", []any{bigints[i]}},
			insert{"INSERT INTO tok_rf2.t_text (k) VALUES (?)", []any{randomText(rng)}},
			insert{"INSERT INTO tok_rf2.t_uuid (k) VALUES (?)", []any{gocql.UUIDFromTime(time.Unix(int64(rng.Uint32()), 0))}},
			insert{"INSERT INTO tok_rf2.t_blob (k) VALUES (?)", []any{blob}},
			insert{"INSERT INTO tok_rf2.t_comp (a, b) VALUES (?, ?)", []any{ints[i], b}},
		)
	}
	// A few inserts in flight at once: the keys are many, the machine small.
	var g errgroup.Group
	g.SetLimit(8)
	for _, in := range inserts {
		g.Go(func() error { return s.Query(in.q, in.args...).Exec() })
	}
	if err := g.Wait(); err != nil {
		t.Fatalf("inserting keys: %v", err)
	}

	// compare reads every row of table, scanning the key columns into dest
	// and token() last, and checks routing()'s token against Cassandra's.
	compare := func(table, sel string, routing func() [][]byte, dest ...any) {
		t.Helper()
		it := s.Query(fmt.Sprintf("SELECT %s FROM tok_rf2.%s", sel, table)).Iter()
		var want int64
		n := 0
		for it.Scan(append(dest, &want)...) {
			parts := routing()
			if got := PartitionToken(parts); got != want {
				t.Errorf("%s: token of %x = %d; Cassandra says %d", table, parts, got, want)
			}
			n++
		}
		if err := it.Close(); err != nil {
			t.Fatalf("%s: %v", table, err)
		}
		if n != perTable {
			t.Errorf("%s: compared %d keys; want %d", table, n, perTable)
		}
	}
	var (
		vi   int32
		vb   int64
		vs   string
		vu   gocql.UUID
		vbl  []byte
		va   int32
		vtxt string
	)
	compare("t_int", "k, token(k)", func() [][]byte { return [][]byte{int32Bytes(vi)} }, &vi)
	compare("t_bigint", "k, token(k)", func() [][]byte { return [][]byte{int64Bytes(vb)} }, &vb)
	compare("t_text", "k, token(k)", func() [][]byte { return [][]byte{[]byte(vs)} }, &vs)
	compare("t_uuid", "k, token(k)", func() [][]byte { return [][]byte{vu[:]} }, &vu)
	compare("t_blob", "k, token(k)", func() [][]byte { return [][]byte{vbl} }, &vbl)
	compare("t_comp", "a, b, token(a, b)", func() [][]byte { return [][]byte{int32Bytes(va), []byte(vtxt)} }, &va, &vtxt)
}

// ringFromSystemTables reads the ring as the proxy does: tokens, data
// center and rack of every node from system.local and system.peers_v2 of
// node 0. Node IDs are indexes into c.Hosts.
func ringFromSystemTables(t *testing.T, c *cassandratest.Cluster) []Node {
	t.Helper()
	cfg := c.ClusterConfig(0)
	s, err := cfg.CreateSession()
	if err != nil {
		t.Fatalf("gocql session to node 0: %v", err)
	}
	defer s.Close()
	id := func(ip net.IP) int {
		i := slices.Index(c.Hosts, ip.String())
		if i < 0 {
			t.Fatalf("system tables name node %s, not one of %v", ip, c.Hosts)
		}
		return i
	}
	var nodes []Node
	var n Node
	var addr net.IP
	if err := s.Query("SELECT rpc_address, data_center, rack, tokens FROM system.local WHERE key = 'local'").
		Scan(&addr, &n.DC, &n.Rack, &n.Tokens); err != nil {
		t.Fatalf("system.local: %v", err)
	}
	n.ID = id(addr)
	nodes = append(nodes, n)
	it := s.Query("SELECT native_address, data_center, rack, tokens FROM system.peers_v2").Iter()
	for {
		var p Node
		if !it.Scan(&addr, &p.DC, &p.Rack, &p.Tokens) {
			break
		}
		p.ID = id(addr)
		nodes = append(nodes, p)
	}
	if err := it.Close(); err != nil {
		t.Fatalf("system.peers_v2: %v", err)
	}
	if len(nodes) != len(c.Hosts) {
		t.Fatalf("system tables list %d nodes; want %d", len(nodes), len(c.Hosts))
	}
	return nodes
}

// keyspaceReplication reads the replication of keyspaces from
// system_schema.keyspaces.
func keyspaceReplication(t *testing.T, s *gocql.Session, names ...string) map[string]Replication {
	t.Helper()
	out := map[string]Replication{}
	for _, ks := range names {
		var opts map[string]string
		if err := s.Query("SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = ?", ks).Scan(&opts); err != nil {
			t.Fatalf("replication of %s: %v", ks, err)
		}
		r, err := ParseReplication(opts)
		if err != nil {
			t.Fatalf("replication of %s %v: %v", ks, opts, err)
		}
		out[ks] = r
	}
	return out
}

// nodetool runs nodetool against node 1 of c.
func nodetool(t *testing.T, c *cassandratest.Cluster, args ...string) string {
	t.Helper()
	if c.Dir == "" {
		t.Skip("the cluster's directory is unknown (set CQLGATE_TEST_CASSANDRA_CLUSTER3_DIR): nodetool cannot reach it")
	}
	script := os.Getenv("CQLGATE_CASSANDRA_SCRIPT")
	if script == "" {
		script = filepath.Join("..", "..", "scripts", "cassandra-local.sh")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "bash", append([]string{script, "nodetool", "--dir", c.Dir, "--"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("nodetool %v: %v\n%s", args, err, out)
	}
	return string(out)
}

var tokenRangeRE = regexp.MustCompile(`start_token:(-?\d+), end_token:(-?\d+), endpoints:\[([^\]]*)\]`)

// TestReplicasMatchCassandra builds a Topology from the system tables and
// compares its replicas with nodetool's for every token range
// (describering) and for a few keys (getendpoints).
func TestReplicasMatchCassandra(t *testing.T) {
	c := cluster3.Get(t)
	s := session(t, c)
	names := slices.Sorted(maps.Keys(testKeyspaces))
	nodes := ringFromSystemTables(t, c)
	reps := keyspaceReplication(t, s, append(names, "system", "system_auth", "system_distributed", "system_traces")...)
	if reps["system"].Strategy != LocalStrategy || reps["tok_nts"].DCFactors["datacenter1"] != 2 {
		t.Fatalf("replication read from system_schema: %+v", reps)
	}
	topo, err := NewTopology(nodes, reps)
	if err != nil {
		t.Fatal(err)
	}
	if topo.Ring().Len() != 48 {
		t.Logf("ring has %d tokens (3 nodes of num_tokens 16 give 48)", topo.Ring().Len())
	}
	if topo.Replicas("system", 0) != nil {
		t.Error("LocalStrategy keyspace has replicas")
	}
	ips := func(ids []int) []string {
		out := make([]string, len(ids))
		for i, id := range ids {
			out[i] = c.Hosts[id]
		}
		return out
	}

	for _, ks := range append(names, "system_traces") {
		ranges := tokenRangeRE.FindAllStringSubmatch(nodetool(t, c, "describering", ks), -1)
		if len(ranges) != topo.Ring().Len() {
			t.Fatalf("%s: describering lists %d ranges; the ring has %d tokens", ks, len(ranges), topo.Ring().Len())
		}
		for _, r := range ranges {
			start, _ := strconv.ParseInt(r[1], 10, 64)
			end, _ := strconv.ParseInt(r[2], 10, 64)
			want := strings.Split(r[3], ", ")
			// A range (start, end] is replicated like its end token; its
			// first token is start+1.
			if got := ips(topo.Replicas(ks, end)); !slices.Equal(got, want) {
				t.Errorf("%s: range (%d, %d]: Replicas(end) = %v; nodetool says %v", ks, start, end, got, want)
			}
			if start != math.MaxInt64 {
				if got := ips(topo.Replicas(ks, start+1)); !slices.Equal(got, want) {
					t.Errorf("%s: range (%d, %d]: Replicas(start+1) = %v; nodetool says %v", ks, start, end, got, want)
				}
			}
		}
	}

	// getendpoints: a composite key per keyspace and a single one;
	// nodetool starts a JVM per call, so keep them few.
	for i, ks := range names {
		a, b := int32(1000+i), fmt.Sprintf("key-%d", i)
		got := ips(topo.Replicas(ks, PartitionToken([][]byte{int32Bytes(a), []byte(b)})))
		want := strings.Fields(nodetool(t, c, "getendpoints", ks, "t_comp", fmt.Sprintf("%d:%s", a, b)))
		if !slices.Equal(got, want) {
			t.Errorf("%s.t_comp key (%d, %s): replicas %v; nodetool getendpoints says %v", ks, a, b, got, want)
		}
	}
	got := ips(topo.Replicas("tok_rf2", PartitionToken([][]byte{int32Bytes(-77)})))
	want := strings.Fields(nodetool(t, c, "getendpoints", "tok_rf2", "t_int", "-77"))
	if !slices.Equal(got, want) {
		t.Errorf("tok_rf2.t_int key -77: replicas %v; nodetool getendpoints says %v", got, want)
	}
}
