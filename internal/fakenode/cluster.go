package fakenode

import (
	"encoding/binary"
	"fmt"
	"math/big"
	"net"
	"sort"
	"strconv"
	"testing"

	"github.com/datastax/go-cassandra-native-protocol/datatype"
)

// clusterView is the membership every node of a cluster shares, for its
// system.peers answers. It is fixed once the cluster is started.
type clusterView struct {
	nodes []*Node
}

// Cluster is a few fake nodes that know each other: each one's
// system.local describes itself and its peers tables the others, on
// 127.0.0.1, 127.0.0.2, ... with one port, like a real cluster.
type Cluster struct {
	Nodes []*Node
}

// StartCluster starts n nodes (1 to 250) configured by cfg (its Addr is
// ignored; Tokens default to an even split of the Murmur3 ring). They are
// closed at the end of the test.
func StartCluster(tb testing.TB, n int, cfg Config) *Cluster {
	tb.Helper()
	if n < 1 || n > 250 {
		tb.Fatalf("fakenode: StartCluster with %d nodes", n)
	}
	lns := listenSamePort(tb, n)
	cl := &Cluster{}
	view := &clusterView{}
	for i, ln := range lns {
		c := cfg
		c.Addr = ln.Addr().String()
		if len(cfg.Tokens) == 0 {
			c.Tokens = []string{ringToken(i, n)}
		}
		if c.ReplicationFactor == 0 {
			c.ReplicationFactor = n
		}
		c.setDefaults()
		node := newNode(tb, c, ln)
		node.view = view
		cl.Nodes = append(cl.Nodes, node)
	}
	view.nodes = cl.Nodes
	for _, node := range cl.Nodes {
		node.serve()
		tb.Cleanup(node.Close)
	}
	return cl
}

// listenSamePort listens on 127.0.0.1..n with one port; the listeners are
// kept, so no other process can take the port between the choice and use.
func listenSamePort(tb testing.TB, n int) []net.Listener {
	for range 50 {
		first, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatalf("fakenode: listen: %v", err)
		}
		lns := []net.Listener{first}
		port := strconv.Itoa(first.Addr().(*net.TCPAddr).Port)
		for i := 2; i <= n; i++ {
			ln, err := net.Listen("tcp", net.JoinHostPort(fmt.Sprintf("127.0.0.%d", i), port))
			if err != nil {
				break
			}
			lns = append(lns, ln)
		}
		if len(lns) == n {
			return lns
		}
		for _, ln := range lns {
			ln.Close()
		}
	}
	tb.Fatalf("fakenode: no port free on 127.0.0.1-%d", n)
	return nil
}

// ringToken is node i's token in an even split of the Murmur3 ring.
func ringToken(i, n int) string {
	step := new(big.Int).Lsh(big.NewInt(1), 64)
	step.Div(step, big.NewInt(int64(n)))
	t := new(big.Int).Mul(step, big.NewInt(int64(i)))
	t.Add(t, new(big.Int).Lsh(big.NewInt(-1), 63))
	return t.String()
}

// Addrs returns the nodes' addresses.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr()
	}
	return out
}

// SetTable sets the table on every node (see Node.SetTable).
func (c *Cluster) SetTable(name string, cols []Column, rows ...[][]byte) {
	for _, n := range c.Nodes {
		n.SetTable(name, cols, rows...)
	}
}

// SetHook installs f on every node; Request.Conn and Seq are per node.
func (c *Cluster) SetHook(f func(*Node, Request) Action) {
	for _, n := range c.Nodes {
		if f == nil {
			n.SetHook(nil)
			continue
		}
		n.SetHook(func(r Request) Action { return f(n, r) })
	}
}

// ForgetPrepared empties every node's prepared set.
func (c *Cluster) ForgetPrepared() {
	for _, n := range c.Nodes {
		n.ForgetPrepared()
	}
}

// Executions sums Node.Executions over the nodes.
func (c *Cluster) Executions(id []byte) int {
	sum := 0
	for _, n := range c.Nodes {
		sum += n.Executions(id)
	}
	return sum
}

// QueryExecutions sums Node.QueryExecutions over the nodes.
func (c *Cluster) QueryExecutions(query string) int {
	sum := 0
	for _, n := range c.Nodes {
		sum += n.QueryExecutions(query)
	}
	return sum
}

// Close closes every node.
func (c *Cluster) Close() {
	for _, n := range c.Nodes {
		n.Close()
	}
}

// Values encoders for rows, in the native protocol's cell encoding.

// Int encodes a CQL int.
func Int(v int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(v)) }

// Bigint encodes a CQL bigint.
func Bigint(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

// Text encodes a CQL text/varchar.
func Text(s string) []byte { return []byte(s) }

// TextSet encodes a set<text> (or list<text>).
func TextSet(ss ...string) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(ss)))
	for _, s := range ss {
		b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
		b = append(b, s...)
	}
	return b
}

// TextMap encodes a map<text, text>, keys sorted.
func TextMap(m map[string]string) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b := binary.BigEndian.AppendUint32(nil, uint32(len(m)))
	for _, k := range keys {
		b = binary.BigEndian.AppendUint32(b, uint32(len(k)))
		b = append(b, k...)
		b = binary.BigEndian.AppendUint32(b, uint32(len(m[k])))
		b = append(b, m[k]...)
	}
	return b
}

func inet(ip net.IP) []byte {
	if v4 := ip.To4(); v4 != nil {
		return v4
	}
	return ip.To16()
}

// The system tables, with the columns of Cassandra 4/5 that drivers and
// the proxy read.
var (
	localCols = []Column{
		Col("key", datatype.Varchar), Col("bootstrapped", datatype.Varchar),
		Col("broadcast_address", datatype.Inet), Col("broadcast_port", datatype.Int),
		Col("cluster_name", datatype.Varchar), Col("cql_version", datatype.Varchar),
		Col("data_center", datatype.Varchar), Col("host_id", datatype.Uuid),
		Col("listen_address", datatype.Inet), Col("listen_port", datatype.Int),
		Col("native_protocol_version", datatype.Varchar), Col("partitioner", datatype.Varchar),
		Col("rack", datatype.Varchar), Col("release_version", datatype.Varchar),
		Col("rpc_address", datatype.Inet), Col("rpc_port", datatype.Int),
		Col("schema_version", datatype.Uuid), Col("tokens", datatype.NewSet(datatype.Varchar)),
	}
	peersCols = []Column{
		Col("peer", datatype.Inet), Col("data_center", datatype.Varchar), Col("host_id", datatype.Uuid),
		Col("preferred_ip", datatype.Inet), Col("rack", datatype.Varchar),
		Col("release_version", datatype.Varchar), Col("rpc_address", datatype.Inet),
		Col("schema_version", datatype.Uuid), Col("tokens", datatype.NewSet(datatype.Varchar)),
	}
	peersV2Cols = []Column{
		Col("peer", datatype.Inet), Col("peer_port", datatype.Int), Col("data_center", datatype.Varchar),
		Col("host_id", datatype.Uuid), Col("native_address", datatype.Inet), Col("native_port", datatype.Int),
		Col("preferred_ip", datatype.Inet), Col("preferred_port", datatype.Int), Col("rack", datatype.Varchar),
		Col("release_version", datatype.Varchar), Col("schema_version", datatype.Uuid),
		Col("tokens", datatype.NewSet(datatype.Varchar)),
	}
	keyspacesCols = []Column{Col("keyspace_name", datatype.Varchar), Col("durable_writes", datatype.Boolean),
		Col("replication", datatype.NewMap(datatype.Varchar, datatype.Varchar))}
)

// identity is what a node tells of itself, read under its own lock.
type identity struct {
	ip     net.IP
	port   int
	cfg    Config
	schema [16]byte
}

func (n *Node) identity() identity {
	n.mu.Lock()
	defer n.mu.Unlock()
	return identity{ip: n.ip, port: n.port, cfg: n.cfg, schema: n.schema.version}
}

// systemTable builds the rows of a system table the proxy reads, or nil if
// the name is not one of them. It must be called without n.mu held: it
// reads the other nodes' identities.
func (n *Node) systemTable(name string) *table {
	me := n.identity()
	id := func(u [16]byte) []byte { return u[:] }
	switch name {
	case "system.local":
		c := me.cfg
		row := [][]byte{Text("local"), Text("COMPLETED"), inet(me.ip), Int(7000), Text(c.ClusterName),
			Text("3.4.7"), Text(c.DataCenter), id(c.HostID), inet(me.ip), Int(7000),
			Text(strconv.Itoa(int(c.MaxVersion))), Text("org.apache.cassandra.dht.Murmur3Partitioner"),
			Text(c.Rack), Text(c.ReleaseVersion), inet(me.ip), Int(int32(me.port)), id(me.schema), TextSet(c.Tokens...)}
		return &table{ks: "system", name: "local", cols: localCols, rows: [][][]byte{row}}
	case "system.peers", "system.peers_v2":
		v2 := name == "system.peers_v2"
		if v2 && me.cfg.NoPeersV2 {
			return nil
		}
		t := &table{ks: "system", name: "peers", cols: peersCols}
		if v2 {
			t.name, t.cols = "peers_v2", peersV2Cols
		}
		for _, p := range n.view.nodes {
			if p == n {
				continue
			}
			o := p.identity()
			c := o.cfg
			ip := inet(o.ip)
			if v2 {
				t.rows = append(t.rows, [][]byte{ip, Int(7000), Text(c.DataCenter), id(c.HostID), ip, Int(int32(o.port)),
					ip, Int(7000), Text(c.Rack), Text(c.ReleaseVersion), id(o.schema), TextSet(c.Tokens...)})
			} else {
				t.rows = append(t.rows, [][]byte{ip, Text(c.DataCenter), id(c.HostID), ip, Text(c.Rack),
					Text(c.ReleaseVersion), ip, id(o.schema), TextSet(c.Tokens...)})
			}
		}
		return t
	case "system_schema.keyspaces":
		t := &table{ks: "system_schema", name: "keyspaces", cols: keyspacesCols}
		t.rows = append(t.rows, [][]byte{Text("system"), {1},
			TextMap(map[string]string{"class": "org.apache.cassandra.locator.LocalStrategy"})})
		rf := me.cfg.ReplicationFactor
		if rf <= 0 {
			rf = len(n.view.nodes)
		}
		for _, ks := range n.keyspaces() {
			t.rows = append(t.rows, [][]byte{Text(ks), {1}, TextMap(map[string]string{
				"class": "org.apache.cassandra.locator.SimpleStrategy", "replication_factor": strconv.Itoa(rf)})})
		}
		return t
	}
	return nil
}

// keyspaces lists the keyspaces of the node's tables, system ones aside.
func (n *Node) keyspaces() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	seen := map[string]bool{}
	var out []string
	for _, t := range n.schema.tables {
		if !seen[t.ks] && t.ks != "system" && t.ks != "system_schema" {
			seen[t.ks] = true
			out = append(out, t.ks)
		}
	}
	sort.Strings(out)
	return out
}
