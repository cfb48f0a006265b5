package backend

// Topology and placement: which nodes exist, which are up, and which
// replicas own which tokens, as read from the system tables.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/cqlgate/cqlgate/pkg/token"
)

// Node is one Cassandra node.
type Node struct {
	// ID is a small integer unique to this node for the Cluster's life,
	// for arrays and limiters indexed by node.
	ID             int
	Addr           string // host:port the proxy dials (after AddressMap)
	HostID         [16]byte
	DataCenter     string
	Rack           string
	Tokens         []string
	ReleaseVersion string

	up   atomic.Bool
	load atomic.Pointer[NodeLoad] // the last reading (Cluster.Load)
	cl   *Cluster
}

// Up reports whether the node is believed reachable: it is after a
// successful connect and stops being so when connecting fails.
func (n *Node) Up() bool { return n.up.Load() }

func (n *Node) markUp() {
	if !n.up.Swap(true) && n.cl != nil {
		n.cl.notifyNodes()
	}
}

func (n *Node) markDown(_ error) {
	if n.up.Swap(false) && n.cl != nil {
		n.cl.notifyNodes()
	}
}

// notifyNodes tells OnNodes which nodes are up now.
func (cl *Cluster) notifyNodes() {
	if cl.cfg.OnNodes == nil {
		return
	}
	cl.notifyMu.Lock()
	defer cl.notifyMu.Unlock()
	var up []*Node
	for _, n := range cl.Nodes() {
		if n.Up() {
			up = append(up, n)
		}
	}
	cl.cfg.OnNodes(up)
}

// Nodes returns the known nodes.
func (cl *Cluster) Nodes() []*Node {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	out := make([]*Node, 0, len(cl.nodes))
	for _, n := range cl.nodes {
		out = append(out, n)
	}
	return out
}

// MarkDown marks n down, so that requests avoid it until it is seen up
// again (a successful reconnect or an UP event); for callers that learn
// it from an answer, e.g. "server is shutting down".
func (cl *Cluster) MarkDown(n *Node) { n.markDown(nil) }

// refreshTopology reloads the topology over the control connection, or
// reconnects it (then loading the topology), and says why it could not.
func (cl *Cluster) refreshTopology() error {
	ctx, cancel := context.WithTimeout(cl.ctx, 2*cl.cfg.ConnectTimeout)
	defer cancel()
	cl.mu.Lock()
	ctrl := cl.control
	cl.mu.Unlock()
	if ctrl != nil && ctrl.Err() == nil {
		if err := cl.loadTopology(ctx); err == nil {
			return nil
		} else {
			cl.log.Warn("topology refresh failed", zap.Error(err))
		}
	}
	// Reconnect the control connection to any node we know, then the
	// contact points.
	var candidates []string
	for _, n := range cl.Nodes() {
		candidates = append(candidates, n.Addr)
	}
	candidates = append(candidates, cl.cfg.ContactPoints...)
	return cl.connectControl(ctx, candidates)
}

// loadTopology reads system.local and system.peers_v2 (system.peers on
// clusters without it) and reconciles the node set and every pool with it.
func (cl *Cluster) loadTopology(ctx context.Context) error {
	cl.mu.Lock()
	ctrl, v := cl.control, cl.version
	cl.mu.Unlock()
	localRows, err := ctrl.query(ctx, v, "SELECT * FROM system.local WHERE key='local'")
	if err != nil {
		return fmt.Errorf("read system.local: %w", err)
	}
	if len(localRows) != 1 {
		return fmt.Errorf("read system.local: %d rows", len(localRows))
	}
	peerRows, err := ctrl.query(ctx, v, "SELECT * FROM system.peers_v2")
	v2 := true
	if err != nil {
		var se *ServerError
		if !errors.As(err, &se) {
			return fmt.Errorf("read system.peers_v2: %w", err)
		}
		v2 = false
		if peerRows, err = ctrl.query(ctx, v, "SELECT * FROM system.peers"); err != nil {
			return fmt.Errorf("read system.peers: %w", err)
		}
	}
	lr := localRows[0]
	found := map[string]*Node{}
	local := cl.nodeFromRow(lr, ctrl.Addr(), true, false)
	found[local.Addr] = local
	for _, r := range peerRows {
		n := cl.nodeFromRow(r, ctrl.Addr(), false, v2)
		if n != nil {
			found[n.Addr] = n
		}
	}

	cl.mu.Lock()
	cl.local = Local{
		ClusterName:    lr.text("cluster_name"),
		Partitioner:    lr.text("partitioner"),
		ReleaseVersion: lr.text("release_version"),
		DataCenter:     lr.text("data_center"),
		Rack:           lr.text("rack"),
	}
	var added, removed []*Node
	for addr, n := range cl.nodes {
		if _, ok := found[addr]; !ok {
			delete(cl.nodes, addr)
			removed = append(removed, n)
		}
	}
	ring := make([]token.Node, 0, len(found))
	for addr, n := range found {
		if old, ok := cl.nodes[addr]; ok {
			// A known node's fields stay as first read (they are read
			// without a lock); the ring below carries fresh tokens.
			ring = append(ring, token.Node{ID: old.ID, DC: n.DataCenter, Rack: n.Rack, Tokens: n.Tokens})
			continue
		}
		n.ID = cl.freeIDLocked()
		n.cl = cl
		cl.nodes[addr] = n
		added = append(added, n)
		ring = append(ring, token.Node{ID: n.ID, DC: n.DataCenter, Rack: n.Rack, Tokens: n.Tokens})
	}
	// The pools' node lists change with the node set, under cl.mu: a pool
	// listed a moment later (one that was connecting, a role's first
	// login) syncs its own, and none can miss a change or get a node twice.
	var gone []*NodePool
	for _, e := range cl.pools {
		if e.pool != nil {
			gone = append(gone, e.pool.syncNodesLocked()...)
		}
	}
	cl.mu.Unlock()
	closeNodePools(gone)
	for _, n := range removed {
		cl.log.Info("node removed", zap.String("node", n.Addr))
	}
	for _, n := range added {
		n.markUp()
		cl.log.Info("node discovered", zap.String("node", n.Addr), zap.String("dc", n.DataCenter), zap.String("rack", n.Rack))
	}
	if len(added) > 0 || len(removed) > 0 {
		cl.notifyNodes()
	}
	if err := cl.loadPlacement(ctx, ctrl, v, ring); err != nil {
		// Requests are still served, without token awareness.
		cl.log.Warn("cannot compute replica placement; routing without token awareness", zap.Error(err))
	}
	// A node reported back up should be retried now, not after backoff.
	for _, p := range cl.readyPools() {
		for _, np := range *p.nodes.Load() {
			if np.numConns() < cl.cfg.ConnectionsPerNode {
				np.kick()
			}
		}
	}
	return nil
}

// freeIDLocked returns the lowest node id no current node has. Ids of
// removed nodes are reused, so they stay below the cluster's size however
// many nodes were replaced (pods come and go): the limiter, hedging and
// the per-node metrics index small tables by id. Called with cl.mu held.
func (cl *Cluster) freeIDLocked() int {
	used := make([]bool, len(cl.nodes)+1)
	for _, n := range cl.nodes {
		if n.ID < len(used) {
			used[n.ID] = true
		}
	}
	for id, u := range used {
		if !u {
			return id
		}
	}
	return len(used) // unreachable: len(cl.nodes)+1 slots, len(cl.nodes) nodes
}

// loadPlacement reads every keyspace's replication and publishes the
// replica placement on ring for token-aware routing.
func (cl *Cluster) loadPlacement(ctx context.Context, ctrl *Conn, v byte, ring []token.Node) error {
	if p := cl.LocalInfo().Partitioner; !strings.HasSuffix(p, "Murmur3Partitioner") {
		return fmt.Errorf("partitioner %s: only Murmur3Partitioner rings are routed by token", p)
	}
	rows, err := ctrl.query(ctx, v, "SELECT keyspace_name, replication FROM system_schema.keyspaces")
	if err != nil {
		return fmt.Errorf("read system_schema.keyspaces: %w", err)
	}
	reps := make(map[string]token.Replication, len(rows))
	for _, r := range rows {
		rep, err := token.DecodeReplication(r.bytes("replication"))
		if err != nil {
			cl.log.Debug("keyspace without token-aware placement", zap.String("keyspace", r.text("keyspace_name")), zap.Error(err))
			continue
		}
		reps[r.text("keyspace_name")] = rep
	}
	topo, err := token.NewTopology(ring, reps)
	if err != nil {
		return err
	}
	cl.topology.Store(topo)
	return nil
}

// Topology returns the current replica placement, or nil before it is
// known (or when the cluster's partitioner is not Murmur3).
func (cl *Cluster) Topology() *token.Topology { return cl.topology.Load() }

// nodeFromRow builds a Node from a system.local or system.peers(_v2) row.
func (cl *Cluster) nodeFromRow(r row, ctrlAddr string, isLocal, v2 bool) *Node {
	_, defPort, _ := net.SplitHostPort(ctrlAddr)
	var addr string
	if isLocal {
		// The control node is reachable where we reached it, unless the
		// address map sends its advertised address elsewhere (a fault
		// injector in front of it).
		addr = ctrlAddr
		if ip := r.inet("rpc_address"); ip != nil && !ip.IsUnspecified() {
			adv := net.JoinHostPort(ip.String(), defPort)
			if mapped := cl.translate(adv); mapped != adv {
				addr = mapped
			}
		}
	} else {
		var ip net.IP
		port := defPort
		if v2 {
			ip = r.inet("native_address")
			if p, ok := r.int("native_port"); ok {
				port = strconv.Itoa(int(p))
			}
		} else {
			ip = r.inet("rpc_address")
		}
		if ip == nil || ip.IsUnspecified() {
			ip = r.inet("peer")
		}
		if ip == nil {
			return nil
		}
		addr = cl.translate(net.JoinHostPort(ip.String(), port))
	}
	n := &Node{
		Addr:           addr,
		DataCenter:     r.text("data_center"),
		Rack:           r.text("rack"),
		Tokens:         r.textSet("tokens"),
		ReleaseVersion: r.text("release_version"),
	}
	copy(n.HostID[:], r.bytes("host_id"))
	return n
}
