package backend

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/cqlgate/cqlgate/pkg/token"

	"github.com/cqlgate/cqlgate/pkg/frame"
)

// Config says how the proxy reaches Cassandra. The zero value of each
// duration is replaced by the default named in its comment.
type Config struct {
	// ContactPoints are host:port addresses of some nodes; the others are
	// discovered from system.peers_v2 (or system.peers).
	ContactPoints []string
	// AddressMap translates the address a node advertises (host:port, or
	// the host alone for every port) to the host:port the proxy dials, for
	// NAT and fault-injection set-ups. Contact points are dialled as given.
	AddressMap map[string]string
	// MaxOrphans is how many timed-out requests may hold stream ids on one
	// connection before it is replaced (default 1024).
	MaxOrphans int
	// ConnectionsPerNode is the size of each pool per node (default 1).
	ConnectionsPerNode int
	ConnectTimeout     time.Duration // default 5s
	HeartbeatInterval  time.Duration // default 30s; negative disables
	ReconnectBaseDelay time.Duration // default 200ms
	ReconnectMaxDelay  time.Duration // default 30s
	// MaxFrame is the largest response body accepted (default 256 MiB).
	MaxFrame int
	// RequestTimeout is the deadline of every request (0: none); expired
	// requests fail with ErrTimeout, checked once a second.
	RequestTimeout time.Duration
	// MaxVersion is the highest protocol version tried (default 5).
	MaxVersion byte
	// PoolIdleTimeout closes a keyspace's pool (one opened for clients
	// that USE it) once no client connection has held it for this long and
	// nothing is in flight on it; it is opened again on the next USE. The
	// pools without a keyspace are kept. 0 keeps every pool.
	PoolIdleTimeout time.Duration
	Log             *zap.Logger
	// OnSchemaChange receives SCHEMA_CHANGE EVENT frames seen on the
	// control connection; it owns the frame and must not block.
	OnSchemaChange func(*frame.Buf)
	// OnNodes, if set, is called with the nodes that are up after every
	// change of the node set or of a node's up/down state (never
	// concurrently with itself, possibly with an unchanged list).
	OnNodes func(up []*Node)
	// TLS, when set, encrypts every connection to the nodes; an empty
	// ServerName checks each node's certificate against the address it is
	// dialled at.
	TLS *tls.Config
	// Credentials log every connection in to nodes that use
	// PasswordAuthenticator; nil fails such connections with
	// ErrAuthRequired.
	Credentials *Credentials
}

func (cfg *Config) setDefaults() {
	if cfg.ConnectionsPerNode <= 0 {
		cfg.ConnectionsPerNode = 1
	}
	if cfg.MaxOrphans <= 0 {
		cfg.MaxOrphans = 1024
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = 5 * time.Second
	}
	if cfg.HeartbeatInterval == 0 {
		cfg.HeartbeatInterval = 30 * time.Second
	}
	if cfg.ReconnectBaseDelay <= 0 {
		cfg.ReconnectBaseDelay = 200 * time.Millisecond
	}
	if cfg.ReconnectMaxDelay < cfg.ReconnectBaseDelay {
		cfg.ReconnectMaxDelay = 30 * time.Second
	}
	if cfg.MaxFrame <= 0 {
		cfg.MaxFrame = 256 << 20
	}
	if cfg.MaxVersion == 0 {
		cfg.MaxVersion = frame.MaxVersion
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
}

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

	up atomic.Bool
	cl *Cluster
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

type poolKey struct {
	version  byte
	keyspace string
}

type poolEntry struct {
	pool  *Pool
	ready chan struct{}
	err   error
}

// Cluster discovers the nodes through a control connection and owns the
// pools. Its methods are safe for concurrent use.
type Cluster struct {
	cfg     Config
	log     *zap.Logger
	metrics *metrics

	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	nodes  map[string]*Node // by Addr
	nextID int
	// notifyMu serializes OnNodes calls.
	notifyMu sync.Mutex
	pools    map[poolKey]*poolEntry
	control  *Conn
	version  byte
	local    Local
	// supported is the control node's answer to OPTIONS.
	supported map[string][]string
	refresh   chan struct{}
	// topology is the replica placement, replaced on every topology or
	// keyspace change.
	topology atomic.Pointer[token.Topology]
	// retiring are connections replaced for too many orphans, closed once
	// only orphans are left on them.
	retiring []*Conn
}

// Local describes the cluster as seen from the control node.
type Local struct {
	ClusterName    string
	Partitioner    string
	ReleaseVersion string
	DataCenter     string
	Rack           string
}

// NewCluster returns a Cluster; nothing is dialled until Connect.
func NewCluster(cfg Config, reg prometheus.Registerer) (*Cluster, error) {
	if len(cfg.ContactPoints) == 0 {
		return nil, errors.New("backend: no contact points")
	}
	cfg.setDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	cl := &Cluster{
		cfg:     cfg,
		log:     cfg.Log,
		ctx:     ctx,
		cancel:  cancel,
		nodes:   map[string]*Node{},
		pools:   map[poolKey]*poolEntry{},
		refresh: make(chan struct{}, 1),
	}
	cl.metrics = newMetrics(cl)
	if reg != nil {
		if err := reg.Register(cl.metrics); err != nil {
			return nil, fmt.Errorf("backend: register metrics: %w", err)
		}
	}
	return cl, nil
}

// Connect opens the control connection to the first contact point that
// answers, negotiating the highest protocol version both sides speak, and
// discovers the nodes. Background upkeep (topology refresh, heartbeats,
// control reconnection) runs until Close.
func (cl *Cluster) Connect(ctx context.Context) error {
	if err := cl.connectControl(ctx, cl.cfg.ContactPoints); err != nil {
		return err
	}
	go cl.upkeep()
	return nil
}

// Version returns the protocol version negotiated with the cluster.
func (cl *Cluster) Version() byte {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.version
}

// LocalInfo returns what the control node said of the cluster.
func (cl *Cluster) LocalInfo() Local {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.local
}

// Supported returns the control node's SUPPORTED options (CQL_VERSION...).
func (cl *Cluster) Supported() map[string][]string {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.supported
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

// Close closes every pool and the control connection.
func (cl *Cluster) Close() {
	cl.cancel()
	cl.mu.Lock()
	pools := cl.pools
	cl.pools = map[poolKey]*poolEntry{}
	ctrl := cl.control
	retiring := cl.retiring
	cl.retiring = nil
	cl.mu.Unlock()
	for _, c := range retiring {
		c.Close()
	}
	for _, e := range pools {
		<-e.ready
		if e.pool != nil {
			e.pool.close()
		}
	}
	if ctrl != nil {
		ctrl.Close()
	}
}

// Pool returns the pool for version and keyspace, creating and connecting it
// on first use. Creation returns once one connection is up, or with the
// first error when every node failed (a *ServerError when Cassandra refused,
// e.g. USE of a keyspace that does not exist). Failed pools are not kept.
func (cl *Cluster) Pool(ctx context.Context, version byte, keyspace string) (*Pool, error) {
	key := poolKey{version, keyspace}
	cl.mu.Lock()
	e, ok := cl.pools[key]
	if ok && e.pool != nil {
		// Under cl.mu, which closeIdlePools holds too: a pool handed out
		// is not idle.
		e.pool.lastUsed.Store(time.Now().UnixNano())
	}
	if !ok {
		e = &poolEntry{ready: make(chan struct{})}
		cl.pools[key] = e
		nodes := make([]*Node, 0, len(cl.nodes))
		for _, n := range cl.nodes {
			nodes = append(nodes, n)
		}
		cl.mu.Unlock()
		pool, err := cl.newPool(ctx, version, keyspace, nodes)
		cl.mu.Lock()
		e.pool, e.err = pool, err
		if err != nil {
			delete(cl.pools, key)
		} else {
			pool.lastUsed.Store(time.Now().UnixNano())
		}
		cl.mu.Unlock()
		close(e.ready)
		return e.pool, e.err
	}
	cl.mu.Unlock()
	select {
	case <-e.ready:
		return e.pool, e.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (cl *Cluster) newPool(ctx context.Context, version byte, keyspace string, nodes []*Node) (*Pool, error) {
	p := &Pool{cl: cl, version: version, keyspace: keyspace}
	empty := []*NodePool{}
	p.nodes.Store(&empty)
	results := make(chan error, len(nodes))
	for _, n := range nodes {
		p.addNode(n, results)
	}
	var firstErr error
	for range nodes {
		select {
		case err := <-results:
			if err == nil {
				return p, nil
			}
			var se *ServerError
			if firstErr == nil || errors.As(err, &se) {
				firstErr = err
			}
		case <-ctx.Done():
			p.close()
			return nil, ctx.Err()
		}
	}
	p.close()
	if firstErr == nil {
		firstErr = errors.New("backend: no nodes known")
	}
	return nil, fmt.Errorf("backend: no node accepted a connection (version %d, keyspace %q): %w", version, keyspace, firstErr)
}

// addNode adds a NodePool for n and starts keeping it connected.
func (p *Pool) addNode(n *Node, first chan<- error) {
	np := &NodePool{pool: p, node: n, wake: make(chan struct{}, 1)}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		if first != nil {
			first <- errors.New("backend: pool closed")
		}
		return
	}
	next := append(append([]*NodePool{}, *p.nodes.Load()...), np)
	p.nodes.Store(&next)
	p.mu.Unlock()
	go np.maintain(p.cl.ctx, first)
}

func (p *Pool) removeNode(n *Node) {
	p.mu.Lock()
	var next []*NodePool
	var gone *NodePool
	for _, np := range *p.nodes.Load() {
		if np.node == n {
			gone = np
			continue
		}
		next = append(next, np)
	}
	p.nodes.Store(&next)
	p.mu.Unlock()
	if gone != nil {
		gone.close()
	}
}

func (p *Pool) close() {
	p.mu.Lock()
	p.closed = true
	nps := *p.nodes.Load()
	p.mu.Unlock()
	for _, np := range nps {
		np.close()
	}
}

// connectControl dials candidates in order until one accepts, trying
// protocol versions from MaxVersion down, then loads the topology.
func (cl *Cluster) connectControl(ctx context.Context, candidates []string) error {
	var errs []error
	for _, addr := range candidates {
		for v := cl.cfg.MaxVersion; v >= frame.MinVersion; v-- {
			c, err := Dial(ctx, DialConfig{
				Addr:        addr,
				Version:     v,
				Events:      []string{"TOPOLOGY_CHANGE", "STATUS_CHANGE", "SCHEMA_CHANGE"},
				OnEvent:     cl.onEvent,
				Timeout:     cl.cfg.ConnectTimeout,
				MaxFrame:    cl.cfg.MaxFrame,
				TLS:         cl.cfg.TLS,
				Credentials: cl.cfg.Credentials,
			})
			if err != nil {
				errs = append(errs, err)
				var se *ServerError
				if errors.As(err, &se) && se.Code == frame.ErrCodeProtocol {
					continue // try an older protocol version
				}
				break
			}
			c.Start(func(_ *Conn, err error) {
				if cl.ctx.Err() == nil {
					cl.log.Warn("control connection lost", zap.String("node", addr), zap.Error(err))
					cl.requestRefresh()
				}
			})
			cl.mu.Lock()
			old := cl.control
			cl.control = c
			cl.version = v
			cl.mu.Unlock()
			if old != nil {
				old.Close()
			}
			if b, err := c.Request(ctx, frame.AppendOptions(nil, v, 0)); err == nil {
				if m, err := frame.ReadStringMultimap(frame.Body(b.B)); err == nil {
					cl.mu.Lock()
					cl.supported = m
					cl.mu.Unlock()
				}
				b.Release()
			}
			if err := cl.loadTopology(ctx); err != nil {
				c.Close()
				errs = append(errs, err)
				break
			}
			cl.log.Info("control connection ready", zap.String("node", addr), zap.Uint8("protocol_version", v))
			return nil
		}
	}
	return fmt.Errorf("backend: no contact point accepted a control connection: %w", errors.Join(errs...))
}

// onEvent runs on the control connection's read loop.
func (cl *Cluster) onEvent(b *frame.Buf) {
	typ, err := frame.EventType(frame.Body(b.B))
	if err != nil {
		b.Release()
		return
	}
	switch typ {
	case "SCHEMA_CHANGE":
		if target, err := schemaChangeTarget(frame.Body(b.B)); err == nil && target == "KEYSPACE" {
			cl.requestRefresh() // replication may have changed
		}
		if cl.cfg.OnSchemaChange != nil {
			cl.cfg.OnSchemaChange(b)
			return
		}
	case "STATUS_CHANGE":
		// Act on DOWN at once (a draining node answers everything with
		// OVERLOADED for seconds before it closes its connections); UP is
		// confirmed by reconnecting.
		if change, addr, err := parseStatusChange(frame.Body(b.B)); err == nil {
			if n := cl.nodeByAdvertised(addr); n != nil {
				if change == "DOWN" {
					cl.log.Info("node reported down", zap.String("node", n.Addr))
					n.markDown(nil)
				} else {
					n.markUp()
				}
			}
		}
		cl.requestRefresh()
	case "TOPOLOGY_CHANGE":
		cl.requestRefresh()
	}
	b.Release()
}

// schemaChangeTarget returns the target (KEYSPACE, TABLE, ...) of a
// SCHEMA_CHANGE event body: <type><change_type><target>...
func schemaChangeTarget(body []byte) (string, error) {
	rest := body
	var s string
	for i := 0; i < 3; i++ {
		if len(rest) < 2 {
			return "", errors.New("short SCHEMA_CHANGE event")
		}
		n := int(rest[0])<<8 | int(rest[1])
		if len(rest) < 2+n {
			return "", errors.New("short SCHEMA_CHANGE event")
		}
		s, rest = string(rest[2:2+n]), rest[2+n:]
	}
	return s, nil
}

// translate applies the address map to an advertised host:port: an entry
// for the host:port wins over one for the host alone.
func (cl *Cluster) translate(addr string) string {
	if len(cl.cfg.AddressMap) == 0 {
		return addr
	}
	if mapped, ok := cl.cfg.AddressMap[addr]; ok {
		return mapped
	}
	if host, _, err := net.SplitHostPort(addr); err == nil {
		if mapped, ok := cl.cfg.AddressMap[host]; ok {
			return mapped
		}
	}
	return addr
}

// nodeByAdvertised finds the node an event names by the address it
// advertises (before AddressMap).
func (cl *Cluster) nodeByAdvertised(addr string) *Node {
	addr = cl.translate(addr)
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if n, ok := cl.nodes[addr]; ok {
		return n
	}
	// Events carry the node's broadcast (storage) address and port; match
	// on the host alone, as nodes on distinct hosts share one CQL port.
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil
	}
	var found *Node
	for a, n := range cl.nodes {
		if h, _, err := net.SplitHostPort(a); err == nil && h == host {
			if found != nil {
				return nil // ambiguous
			}
			found = n
		}
	}
	return found
}

// MarkDown marks n down, so that requests avoid it until it is seen up
// again (a successful reconnect or an UP event); for callers that learn
// it from an answer, e.g. "server is shutting down".
func (cl *Cluster) MarkDown(n *Node) { n.markDown(nil) }

func (cl *Cluster) requestRefresh() {
	select {
	case cl.refresh <- struct{}{}:
	default:
	}
}

// upkeep refreshes the topology when asked (debounced), reconnects the
// control connection, and sends heartbeats on idle connections.
func (cl *Cluster) upkeep() {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-cl.ctx.Done():
			return
		case <-cl.refresh:
			// Events come in bursts when a node restarts; one refresh
			// after the burst is enough.
			select {
			case <-cl.ctx.Done():
				return
			case <-time.After(500 * time.Millisecond):
			}
			cl.refreshTopology()
		case now := <-tick.C:
			cl.heartbeat(now)
			cl.expire(now)
			cl.closeIdlePools(now)
		}
	}
}

func (cl *Cluster) refreshTopology() {
	ctx, cancel := context.WithTimeout(cl.ctx, 2*cl.cfg.ConnectTimeout)
	defer cancel()
	cl.mu.Lock()
	ctrl := cl.control
	cl.mu.Unlock()
	if ctrl != nil && ctrl.Err() == nil {
		if err := cl.loadTopology(ctx); err == nil {
			return
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
	if err := cl.connectControl(ctx, candidates); err != nil {
		cl.log.Warn("control connection reconnect failed", zap.Error(err))
		go func() {
			select {
			case <-cl.ctx.Done():
			case <-time.After(cl.cfg.ReconnectBaseDelay * 10):
				cl.requestRefresh()
			}
		}()
	}
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
	ring := make([]token.Node, 0, len(found))
	for addr, n := range found {
		if old, ok := cl.nodes[addr]; ok {
			// A known node's fields stay as first read (they are read
			// without a lock); the ring below carries fresh tokens.
			ring = append(ring, token.Node{ID: old.ID, DC: n.DataCenter, Rack: n.Rack, Tokens: n.Tokens})
			continue
		}
		n.ID = cl.nextID
		n.cl = cl
		cl.nextID++
		cl.nodes[addr] = n
		added = append(added, n)
		ring = append(ring, token.Node{ID: n.ID, DC: n.DataCenter, Rack: n.Rack, Tokens: n.Tokens})
	}
	for addr, n := range cl.nodes {
		if _, ok := found[addr]; !ok {
			delete(cl.nodes, addr)
			removed = append(removed, n)
		}
	}
	cl.mu.Unlock()
	pools := cl.readyPools()
	for _, n := range added {
		n.markUp()
		cl.log.Info("node discovered", zap.String("node", n.Addr), zap.String("dc", n.DataCenter), zap.String("rack", n.Rack))
		for _, p := range pools {
			p.addNode(n, nil)
		}
	}
	for _, n := range removed {
		cl.log.Info("node removed", zap.String("node", n.Addr))
		for _, p := range pools {
			p.removeNode(n)
		}
	}
	if len(added) > 0 || len(removed) > 0 {
		cl.notifyNodes()
	}
	if err := cl.loadPlacement(ctx, ctrl, v, ring); err != nil {
		// Requests are still served, without token awareness.
		cl.log.Warn("cannot compute replica placement; routing without token awareness", zap.Error(err))
	}
	// A node reported back up should be retried now, not after backoff.
	for _, p := range pools {
		for _, np := range *p.nodes.Load() {
			if np.numConns() < cl.cfg.ConnectionsPerNode {
				np.kick()
			}
		}
	}
	return nil
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

// heartbeat sends OPTIONS on connections that have read nothing for a
// heartbeat interval and closes those whose previous heartbeat went
// unanswered for as long, so a silently dead node is noticed even while
// requests are pending on it.
func (cl *Cluster) heartbeat(now time.Time) {
	if cl.cfg.HeartbeatInterval < 0 {
		return
	}
	conns := cl.poolConns()
	cl.mu.Lock()
	if cl.control != nil {
		conns = append(conns, cl.control)
	}
	cl.mu.Unlock()
	for _, c := range conns {
		idle := c.idleFor(now)
		if idle < cl.cfg.HeartbeatInterval {
			continue
		}
		if idle >= 2*cl.cfg.HeartbeatInterval && c.heartbeatPending.Load() {
			cl.log.Warn("heartbeat unanswered, closing connection", zap.String("node", c.Addr()), zap.Duration("idle", idle))
			c.fail(fmt.Errorf("heartbeat: no answer from %s for %s", c.Addr(), idle.Round(time.Millisecond)))
			continue
		}
		if c.heartbeatPending.CompareAndSwap(false, true) {
			hb := frame.GetBuf(0)
			hb.B = frame.AppendOptions(hb.B[:0], c.Version(), 0)
			if err := c.Send(hb.B, heartbeatHandler{hb}); err != nil {
				hb.Release()
				c.heartbeatPending.Store(false)
			}
		}
	}
}

// closeIdlePools closes the keyspace pools idle for PoolIdleTimeout: an
// application that USEs many keyspaces over time (one per tenant, say) would
// otherwise keep connections to every node for each of them for good.
func (cl *Cluster) closeIdlePools(now time.Time) {
	if cl.cfg.PoolIdleTimeout <= 0 {
		return
	}
	since := now.Add(-cl.cfg.PoolIdleTimeout)
	var idle []*Pool
	cl.mu.Lock()
	for key, e := range cl.pools {
		if key.keyspace == "" || e.pool == nil || !e.pool.idleSince(since) {
			continue
		}
		delete(cl.pools, key)
		idle = append(idle, e.pool)
	}
	cl.mu.Unlock()
	for _, p := range idle {
		cl.log.Info("closing an idle keyspace pool", zap.String("keyspace", p.keyspace),
			zap.Uint8("protocol_version", p.version), zap.Duration("idle_timeout", cl.cfg.PoolIdleTimeout))
		p.close()
	}
}

// expire enforces the request timeout on every pool connection, and
// replaces connections whose stream ids go to orphans: such a connection
// leaves its pool at once (a new one is dialled in its place) and is closed
// once nothing but orphans is left on it, so no live request is failed.
func (cl *Cluster) expire(now time.Time) {
	if cl.cfg.RequestTimeout <= 0 {
		return
	}
	orphans := 0
	for _, np := range cl.nodePools() {
		cs := np.conns.Load()
		if cs == nil {
			continue
		}
		for _, c := range *cs {
			n := c.ExpireRequests(now)
			orphans += n
			if n > cl.cfg.MaxOrphans {
				cl.log.Warn("replacing a connection with too many orphaned streams",
					zap.String("node", c.Addr()), zap.Int("orphans", n), zap.Int("max", cl.cfg.MaxOrphans))
				np.remove(c)
				np.kick()
				cl.metrics.replaced.Inc()
				cl.mu.Lock()
				cl.retiring = append(cl.retiring, c)
				cl.mu.Unlock()
			}
		}
	}
	cl.mu.Lock()
	retiring := cl.retiring[:0]
	for _, c := range cl.retiring {
		orphans += c.ExpireRequests(now)
		if c.Err() != nil || c.liveRequests() == 0 {
			c.Close()
			continue
		}
		retiring = append(retiring, c)
	}
	clear(cl.retiring[len(retiring):])
	cl.retiring = retiring
	cl.mu.Unlock()
	cl.metrics.orphans.Set(float64(orphans))
}

// nodePools returns every NodePool of every ready pool.
func (cl *Cluster) nodePools() []*NodePool {
	var nps []*NodePool
	for _, p := range cl.readyPools() {
		nps = append(nps, *p.nodes.Load()...)
	}
	return nps
}

// poolConns returns every open pool connection.
func (cl *Cluster) poolConns() []*Conn {
	var conns []*Conn
	for _, p := range cl.readyPools() {
		for _, np := range *p.nodes.Load() {
			if cs := np.conns.Load(); cs != nil {
				conns = append(conns, *cs...)
			}
		}
	}
	return conns
}

// connected reports whether any pool has an open connection to n.
func (cl *Cluster) connected(n *Node) bool {
	for _, p := range cl.readyPools() {
		for _, np := range *p.nodes.Load() {
			if np.node == n && np.numConns() > 0 {
				return true
			}
		}
	}
	return false
}

// readyPools returns the pools that finished connecting.
func (cl *Cluster) readyPools() []*Pool {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	var pools []*Pool
	for _, e := range cl.pools {
		select {
		case <-e.ready:
			if e.pool != nil {
				pools = append(pools, e.pool)
			}
		default:
		}
	}
	return pools
}

type heartbeatHandler struct{ req *frame.Buf }

func (h heartbeatHandler) OnTimeout(*Conn) {}

func (h heartbeatHandler) OnResponse(c *Conn, resp *frame.Buf) {
	resp.Release()
	h.req.Release()
	c.heartbeatPending.Store(false)
}

func (h heartbeatHandler) OnFailure(c *Conn, _ error, _ bool) {
	h.req.Release()
	c.heartbeatPending.Store(false)
}

// metrics is a collector that reads pool state at scrape time, so the hot
// path pays nothing for per-node gauges.
type metrics struct {
	cl       *Cluster
	connects prometheus.Counter
	replaced prometheus.Counter
	orphans  prometheus.Gauge
	conns    *prometheus.Desc
	inflight *prometheus.Desc
	up       *prometheus.Desc
	pools    *prometheus.Desc
}

func newMetrics(cl *Cluster) *metrics {
	return &metrics{
		cl: cl,
		connects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cqlgate_backend_connects_total",
			Help: "Backend connections opened (initial and reconnects).",
		}),
		replaced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cqlgate_backend_connections_replaced_total",
			Help: "Backend connections replaced because too many of their stream ids were held by timed-out requests (--max-orphans-per-connection).",
		}),
		orphans: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cqlgate_backend_orphaned_streams",
			Help: "Stream ids of timed-out requests still reserved until Cassandra answers them.",
		}),
		conns:    prometheus.NewDesc("cqlgate_backend_connections", "Open backend connections per node (all pools).", []string{"node"}, nil),
		inflight: prometheus.NewDesc("cqlgate_backend_in_flight_requests", "Requests sent to a node and not yet answered.", []string{"node"}, nil),
		up:       prometheus.NewDesc("cqlgate_backend_node_up", "1 when the node is believed reachable.", []string{"node"}, nil),
		pools:    prometheus.NewDesc("cqlgate_backend_pools", "Open connection pools: one per protocol version in use and per keyspace clients USE (see --keyspace-pool-idle-timeout).", nil, nil),
	}
}

func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	m.connects.Describe(ch)
	m.replaced.Describe(ch)
	m.orphans.Describe(ch)
	ch <- m.conns
	ch <- m.inflight
	ch <- m.up
	ch <- m.pools
}

func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	m.connects.Collect(ch)
	m.replaced.Collect(ch)
	m.orphans.Collect(ch)
	cl := m.cl
	conns, inflight := map[*Node]int{}, map[*Node]int{}
	pools := cl.readyPools()
	ch <- prometheus.MustNewConstMetric(m.pools, prometheus.GaugeValue, float64(len(pools)))
	cl.mu.Lock()
	nodes := make([]*Node, 0, len(cl.nodes))
	for _, n := range cl.nodes {
		nodes = append(nodes, n)
	}
	cl.mu.Unlock()
	for _, p := range pools {
		for _, np := range *p.nodes.Load() {
			conns[np.node] += np.numConns()
			inflight[np.node] += np.inFlight()
		}
	}
	for _, n := range nodes {
		up := 0.0
		if n.Up() {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(m.conns, prometheus.GaugeValue, float64(conns[n]), n.Addr)
		ch <- prometheus.MustNewConstMetric(m.inflight, prometheus.GaugeValue, float64(inflight[n]), n.Addr)
		ch <- prometheus.MustNewConstMetric(m.up, prometheus.GaugeValue, up, n.Addr)
	}
}

// WaitSchemaAgreement polls every reachable node for the schema_version
// in its own system.local until they all report the same one, which it
// returns, or ctx ends.
// The proxy looks like a single node to drivers, so their own agreement
// check is trivially true; this is the check that counts. Each node is asked
// directly, over its pool connection: the control node's gossip view of its
// peers can still show the old schema everywhere right after a DDL ran on
// another node, and a node that is down is left out instead of waited for.
func (cl *Cluster) WaitSchemaAgreement(ctx context.Context) ([16]byte, error) {
	const interval = 200 * time.Millisecond
	for {
		version, agreed, err := cl.schemaAgreed(ctx)
		if err == nil && agreed {
			return version, nil
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return version, fmt.Errorf("schema agreement: %w", err)
			}
			return version, fmt.Errorf("schema agreement: %w", ctx.Err())
		case <-time.After(interval):
		}
	}
}

func (cl *Cluster) schemaAgreed(ctx context.Context) (version [16]byte, agreed bool, err error) {
	v := cl.Version()
	pool, err := cl.Pool(ctx, v, "")
	if err != nil {
		return version, false, err
	}
	var want string
	asked := 0
	for _, np := range *pool.nodes.Load() {
		c, _ := np.leastLoaded()
		if c == nil || !np.node.Up() {
			continue
		}
		rows, err := c.query(ctx, v, "SELECT schema_version FROM system.local WHERE key='local'")
		if err != nil {
			// The node may be going away; its reconnection will tell.
			continue
		}
		if len(rows) != 1 {
			return version, false, fmt.Errorf("system.local on %s: %d rows", np.node.Addr, len(rows))
		}
		sv := string(rows[0].bytes("schema_version"))
		if len(sv) != len(version) {
			return version, false, fmt.Errorf("system.local on %s: schema_version of %d bytes", np.node.Addr, len(sv))
		}
		if asked > 0 && sv != want {
			return version, false, nil
		}
		want = sv
		asked++
	}
	if asked == 0 {
		return version, false, errors.New("no node answered")
	}
	copy(version[:], want)
	return version, true, nil
}
