package backend

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/cqlgate/cqlgate/pkg/frame"
	"github.com/cqlgate/cqlgate/pkg/token"
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
	// WriteTimeout bounds every write to a node (default
	// DefaultWriteTimeout; negative: none): a node that stops reading fails
	// its connection instead of blocking everyone sending on it.
	WriteTimeout time.Duration
	// MaxVersion is the highest protocol version tried (default 5).
	MaxVersion byte
	// PoolIdleTimeout closes a keyspace's pool (one opened for clients
	// that USE it) once no client connection has held it for this long and
	// nothing is in flight on it; it is opened again on the next USE. The
	// pools without a keyspace are kept. 0 keeps every pool.
	PoolIdleTimeout time.Duration
	// RolePoolIdleTimeout closes a role's pool (see AcquireRole) once no
	// client connection has held it for this long and nothing is in
	// flight on it, whatever its keyspace (default 1m).
	RolePoolIdleTimeout time.Duration
	// MaxRoles bounds the roles with pools or client connections at once
	// (default 64).
	MaxRoles int
	// OnRoleRefused, if set, is called once when Cassandra refuses a role's
	// login to one of its pools, after every pool of the role was closed,
	// with Cassandra's answer. It must not block for long.
	OnRoleRefused func(*Role, *ServerError)
	Log           *zap.Logger
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
	// Instance names this proxy among the others connected to the same
	// nodes: every connection sends it in STARTUP (InstanceOption), and a
	// node's list of clients then tells how many proxies it serves
	// (Cluster.Fleet). Empty: a random one, drawn by NewCluster.
	Instance string
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
	if cfg.Instance == "" {
		cfg.Instance = newInstance()
	}
	if cfg.RolePoolIdleTimeout <= 0 {
		cfg.RolePoolIdleTimeout = time.Minute
	}
	if cfg.MaxRoles <= 0 {
		cfg.MaxRoles = 64
	}
}

// Cluster discovers the nodes through a control connection and owns the
// pools. Its methods are safe for concurrent use.
type Cluster struct {
	cfg     Config
	log     *zap.Logger
	metrics *metrics

	ctx    context.Context
	cancel context.CancelFunc

	mu    sync.Mutex
	nodes map[string]*Node // by Addr; ids are 0..len-1 at most, see freeIDLocked
	// notifyMu serializes OnNodes calls.
	notifyMu sync.Mutex
	pools    map[poolKey]*poolEntry
	// roles are the client roles with pools or client connections, by
	// name (see AcquireRole).
	roles map[string]*Role
	// roleLogins are the first logins of roles under way (LoginRole).
	roleLogins map[string]*roleLogin
	control    *Conn
	version    byte
	local      Local
	// supported is the control node's answer to OPTIONS.
	supported map[string][]string
	refresh   chan struct{}
	// topology is the replica placement, replaced on every topology or
	// keyspace change.
	topology atomic.Pointer[token.Topology]
	// retiring are connections replaced for too many orphans, closed once
	// only orphans are left on them.
	retiring []*Conn
	// background counts the upkeep and refresher goroutines, which Close
	// waits for.
	background sync.WaitGroup
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
		cfg:        cfg,
		log:        cfg.Log,
		ctx:        ctx,
		cancel:     cancel,
		nodes:      map[string]*Node{},
		pools:      map[poolKey]*poolEntry{},
		roles:      map[string]*Role{},
		roleLogins: map[string]*roleLogin{},
		refresh:    make(chan struct{}, 1),
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
	cl.background.Add(2)
	go cl.upkeep()
	go cl.refresher()
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

// Close closes every pool and the control connection.
func (cl *Cluster) Close() {
	cl.cancel()
	cl.mu.Lock()
	pools := cl.pools
	cl.pools = map[poolKey]*poolEntry{}
	ctrl := cl.control
	retiring := cl.retiring
	cl.retiring = nil
	for _, r := range cl.roles {
		r.creds.Store(nil) // no password outlives the cluster
	}
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
	// A refresh in progress ends soon: its context is cancelled. It may
	// have connected a new control connection meanwhile.
	cl.background.Wait()
	cl.mu.Lock()
	ctrl = cl.control
	cl.mu.Unlock()
	if ctrl != nil {
		ctrl.Close()
	}
}
