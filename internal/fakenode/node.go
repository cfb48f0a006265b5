package fakenode

import (
	"crypto/md5"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cqlgate/cqlgate/pkg/frame"
)

// Config describes one node. The zero value is a usable single node on
// 127.0.0.1 with an ephemeral port speaking v3 to v5.
type Config struct {
	// Addr is the host:port to listen on (default 127.0.0.1:0). Several
	// nodes of one cluster use distinct loopback addresses (127.0.0.2,
	// 127.0.0.3, ...) and the same port, as real nodes do.
	Addr string
	// MaxVersion is the highest protocol version accepted (default 5);
	// STARTUP or OPTIONS in a higher one gets PROTOCOL_ERROR, which makes
	// the proxy try the next lower version.
	MaxVersion byte
	// MaxFrame bounds request bodies (default 16 MiB); a larger one is
	// answered PROTOCOL_ERROR and the connection is closed.
	MaxFrame int
	// Supported is the SUPPORTED answer to OPTIONS (default CQL_VERSION
	// 3.4.7 and no compression).
	Supported map[string][]string

	// Identity, as system.local and the peers tables report it. Defaults:
	// cluster "fakecluster", dc1, rack1, release 5.0.4, host id derived
	// from the address, one token (a single node owns the whole ring).
	ClusterName    string
	DataCenter     string
	Rack           string
	ReleaseVersion string
	HostID         [16]byte
	Tokens         []string
	// ReplicationFactor of the SimpleStrategy keyspaces system_schema
	// reports for the tables' keyspaces (default: the number of nodes).
	ReplicationFactor int
	// NoPeersV2 makes system.peers_v2 an unconfigured table, as on
	// Cassandra 3, so the proxy falls back to system.peers.
	NoPeersV2 bool
	// Passwords, when set, makes the node answer STARTUP with
	// AUTHENTICATE, as PasswordAuthenticator does, and AUTH_RESPONSE
	// with AUTH_SUCCESS when its SASL PLAIN token names a username and
	// password of the map, else with Cassandra's "Bad credentials"
	// error. Requests are served without a login all the same: it is
	// there to count and time logins (Requests(frame.OpAuthResponse)),
	// not to guard anything.
	Passwords map[string]string
}

func (cfg *Config) setDefaults() {
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.MaxVersion == 0 || cfg.MaxVersion > frame.MaxVersion {
		cfg.MaxVersion = frame.MaxVersion
	}
	if cfg.MaxFrame <= 0 {
		cfg.MaxFrame = 16 << 20
	}
	if cfg.Supported == nil {
		cfg.Supported = map[string][]string{"CQL_VERSION": {"3.4.7"}, "COMPRESSION": {}}
	}
	if cfg.ClusterName == "" {
		cfg.ClusterName = "fakecluster"
	}
	if cfg.DataCenter == "" {
		cfg.DataCenter = "dc1"
	}
	if cfg.Rack == "" {
		cfg.Rack = "rack1"
	}
	if cfg.ReleaseVersion == "" {
		cfg.ReleaseVersion = "5.0.4"
	}
	if len(cfg.Tokens) == 0 {
		cfg.Tokens = []string{"0"}
	}
}

// Node is one fake Cassandra node. Its methods are safe for concurrent use.
type Node struct {
	tb  testing.TB
	cfg Config
	ln  net.Listener
	ip  net.IP
	// port is the listening port, reported as native_port to peers.
	port int

	wg sync.WaitGroup // accept loop and connections

	mu       sync.Mutex
	closed   bool
	reject   bool
	stalled  bool
	resume   chan struct{} // closed by Resume; replaced by Stall
	conns    map[*conn]struct{}
	nconns   int // connections accepted, also the next conn index
	startups []map[string]string
	schema   schema
	prepared map[string]*prepared // by id
	view     *clusterView
	stats    stats
	// qcache holds answers to QUERY texts; it is replaced, never
	// changed, and dropped on every schema change (under mu).
	qcache atomic.Pointer[queryCache]
	hook   atomic.Pointer[func(Request) Action]
	seq    atomic.Int64
	// holding is set while the node or any connection is stalled, so the
	// hot path needs no lock to know it is not.
	holding atomic.Bool
}

// Start listens on cfg.Addr and serves until Close, which runs at the end
// of the test if not called before.
func Start(tb testing.TB, cfg Config) *Node {
	tb.Helper()
	cfg.setDefaults()
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		tb.Fatalf("fakenode: listen on %s: %v", cfg.Addr, err)
	}
	n := newNode(tb, cfg, ln)
	n.view = &clusterView{nodes: []*Node{n}}
	n.serve()
	tb.Cleanup(n.Close)
	return n
}

// newNode wraps a listener; serve starts it.
func newNode(tb testing.TB, cfg Config, ln net.Listener) *Node {
	addr := ln.Addr().(*net.TCPAddr)
	n := &Node{
		tb:       tb,
		cfg:      cfg,
		ln:       ln,
		ip:       addr.IP,
		port:     addr.Port,
		conns:    map[*conn]struct{}{},
		prepared: map[string]*prepared{},
		resume:   make(chan struct{}),
		schema:   newSchema(),
		stats:    newStats(),
	}
	close(n.resume)
	if n.cfg.HostID == ([16]byte{}) {
		n.cfg.HostID = uuidFrom("host " + addr.String())
	}
	return n
}

func (n *Node) serve() {
	n.wg.Add(1)
	go n.accept()
}

// uuidFrom derives a version-3 style UUID from s, so identities are stable
// from run to run.
func uuidFrom(s string) [16]byte {
	u := md5.Sum([]byte(s))
	u[6] = u[6]&0x0f | 0x30
	u[8] = u[8]&0x3f | 0x80
	return u
}

// Addr returns the host:port the node listens on.
func (n *Node) Addr() string { return n.ln.Addr().String() }

// HostID returns the node's host_id.
func (n *Node) HostID() [16]byte { return n.cfg.HostID }

// Close closes the listener and every connection and waits for all of the
// node's goroutines (connection readers and pending delayed answers) to
// end. It is idempotent.
func (n *Node) Close() {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		n.wg.Wait()
		return
	}
	n.closed = true
	n.ln.Close()
	for c := range n.conns {
		c.kill(false)
	}
	if n.stalled {
		n.stalled = false
		close(n.resume)
	}
	n.mu.Unlock()
	n.wg.Wait()
}

func (n *Node) accept() {
	defer n.wg.Done()
	for {
		nc, err := n.ln.Accept()
		if err != nil {
			return // closed
		}
		n.mu.Lock()
		if n.closed {
			n.mu.Unlock()
			nc.Close()
			return
		}
		if n.reject {
			n.stats.rejected++
			n.mu.Unlock()
			reset(nc)
			continue
		}
		c := newConn(n, nc, n.nconns)
		n.nconns++
		n.startups = append(n.startups, nil)
		n.conns[c] = struct{}{}
		n.wg.Add(1)
		n.mu.Unlock()
		go c.serve()
	}
}

// reset closes nc with an RST rather than a FIN, as a crashed or
// firewalled node looks to its peer.
func reset(nc net.Conn) {
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	nc.Close()
}

func (n *Node) removeConn(c *conn) {
	n.mu.Lock()
	delete(n.conns, c)
	n.mu.Unlock()
}

// SetHook installs f to decide the fate of every request read from now on
// (nil removes it). f runs on the connection's reader goroutine with no
// lock held; it must not block for long.
func (n *Node) SetHook(f func(Request) Action) {
	if f == nil {
		n.hook.Store(nil)
		return
	}
	n.hook.Store(&f)
}

// RejectConnections makes the node reset every new connection right after
// accepting it (on true) or accept them again (on false).
func (n *Node) RejectConnections(on bool) {
	n.mu.Lock()
	n.reject = on
	n.mu.Unlock()
}

// DropConnections resets every open connection; requests in flight on them
// are never answered.
func (n *Node) DropConnections() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for c := range n.conns {
		c.kill(true)
	}
}

// Stall makes every connection stop reading: the frame each one reads next
// (or has buffered) is held unhandled until Resume, so once the kernel
// buffers fill the peer's writes block. Delayed answers already scheduled
// are still written.
func (n *Node) Stall() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.stalled {
		n.stalled = true
		n.holding.Store(true)
		n.resume = make(chan struct{})
	}
}

// Resume ends Stall and every connection's Stall fault.
func (n *Node) Resume() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stalled {
		n.stalled = false
		close(n.resume)
	}
	for c := range n.conns {
		if c.stall != nil {
			close(c.stall)
			c.stall = nil
		}
	}
	n.holding.Store(false)
}

// StartupOptions returns the STARTUP options map of every connection
// accepted so far, by connection index (nil for a connection that sent no
// STARTUP yet).
func (n *Node) StartupOptions() []map[string]string {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]map[string]string, len(n.startups))
	copy(out, n.startups)
	return out
}

func (n *Node) setStartup(idx int, opts map[string]string) {
	n.mu.Lock()
	n.startups[idx] = opts
	n.mu.Unlock()
}

// OpenConnections returns how many connections are open now.
func (n *Node) OpenConnections() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.conns)
}

func (n *Node) String() string { return fmt.Sprintf("fakenode %s", n.Addr()) }
