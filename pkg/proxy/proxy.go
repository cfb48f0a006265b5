// Package proxy is the client-facing side of cqlgate: it accepts CQL
// connections from unmodified drivers, answers the handshake and the system
// tables itself so that drivers see only the proxy, and forwards every other
// request to a Cassandra node over shared, multiplexed connections.
//
// It ties the leaf packages together (frame, backend, limiter,
// speculative, systables, auth) and must not re-implement them: wire
// format, connections, admission and hedge timing live there. Who may touch
// a request when is written once, on the request type in request.go.
package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/cqlgate/cqlgate/pkg/auth"
	"github.com/cqlgate/cqlgate/pkg/backend"
	"github.com/cqlgate/cqlgate/pkg/config"
	"github.com/cqlgate/cqlgate/pkg/frame"
	"github.com/cqlgate/cqlgate/pkg/idempotency"
	"github.com/cqlgate/cqlgate/pkg/limiter"
	"github.com/cqlgate/cqlgate/pkg/rules"
	"github.com/cqlgate/cqlgate/pkg/stmtstats"
	"github.com/cqlgate/cqlgate/pkg/systables"
)

// Proxy serves CQL clients on one or more listen addresses. Create it with
// New and start it with Run.
type Proxy struct {
	cfg     config.Config
	log     *zap.Logger
	cluster *backend.Cluster
	limiter *limiter.Limiter
	metrics *metrics
	// overloadedMsgs: see overloadedMessage.
	overloadedMsgs overloadedMessages
	flows          atomic.Uint64 // client connection ids, the limiter's flows
	prep           *preparedCache

	endpoints []*endpoint
	ready     atomic.Bool
	// draining is set when shutdown begins: new requests get OVERLOADED
	// while those in flight finish.
	draining atomic.Bool
	// reloadMu serializes Reload; live is the configuration it last
	// applied (p.cfg stays the one the proxy started with).
	reloadMu   sync.Mutex
	live       config.Config
	hedging    *hedging
	classifier *idempotency.Classifier
	// stmts is the statement statistics (nil: off); slow the reloadable
	// slow-statement log settings. See stmtstats.go.
	stmts *stmtstats.Table
	slow  slowLog
	// rules are the --rules-file caps (rules.go).
	rules rules.Manager
	// nodeTable tells routing which nodes are up and local.
	nodeTable atomic.Pointer[nodeTable]
	// maxClients is --max-client-connections (0: no limit); reloadable.
	maxClients atomic.Int64
	// clientWriteLimit is --client-write-buffer-bytes; reloadable.
	clientWriteLimit atomic.Int64
	// buffered counts the bytes of request frames held (read, not yet
	// answered) and of answers not yet written, all clients together;
	// bufferLimit is --max-buffered-bytes (reloadable). See admitBytes.
	buffered, bufferLimit atomic.Int64
	// keyspaceWeights maps --keyspace-weights keyspaces to the limiter's
	// priority classes, 	// and --role-weights roles; replaced on reload.
	keyspaceWeights atomic.Pointer[config.KeyspaceWeights]
	roleSeries      *roleSeries
	serving         chan struct{}   // closed once listening
	ctx             context.Context // the Run context; cancelled at shutdown

	mu      sync.Mutex
	clients map[*client]struct{}
	wg      sync.WaitGroup // client goroutines
	// pending are the clients still in their handshake, by arrival, and
	// pendingBySrc their count per source address; under mu. See
	// handshakes.go. maxPending and maxPendingPerAddr are the reloadable
	// --max-pending-handshakes[-per-address].
	pending                       map[*client]pendingHandshake
	pendingBySrc                  map[string]int
	pendingSeq                    uint64
	maxPending, maxPendingPerAddr atomic.Int64

	// systemStatements maps prepared ids of system table queries to the
	// table; nil until a driver prepares one.
	systemStatements atomic.Pointer[map[string]systables.Table]
	sysMu            sync.Mutex

	// lastLocal is what the proxy last learnt of the real system.local,
	// for the system.peers rows it makes up (see noteLocal). schemaChanged
	// asks trackSchemaVersion to read the schema version again.
	lastLocal     atomic.Pointer[systables.LocalInfo]
	schemaChanged chan struct{}

	// serverTLS is the client-facing TLS configuration; nil serves plain
	// CQL. auth checks client logins; nil with --client-auth none.
	serverTLS *tls.Config
	auth      *auth.Passthrough
}

// endpoint is one listen address and the node identity it presents.
type endpoint struct {
	addr     string
	ln       net.Listener
	rewriter *systables.Rewriter
}

// New validates cfg and prepares a Proxy; nothing is dialled or bound yet.
func New(cfg config.Config, log *zap.Logger, reg prometheus.Registerer) (_ *Proxy, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// What is built so far, undone in reverse (as Serve does) if New fails.
	var undo []func()
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()
	if log == nil {
		log = zap.NewNop()
	}
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	p := &Proxy{
		cfg:           cfg,
		log:           log,
		clients:       map[*client]struct{}{},
		pending:       map[*client]pendingHandshake{},
		pendingBySrc:  map[string]int{},
		ctx:           context.Background(),
		serving:       make(chan struct{}),
		schemaChanged: make(chan struct{}, 1),
	}
	p.live = cfg
	p.metrics = newMetrics(reg, p)
	p.roleSeries = newRoleSeries(reg, cfg.MaxRoleSeries)
	kw, err := config.ParseWeights(cfg.KeyspaceWeights, cfg.RoleWeights)
	if err != nil {
		return nil, fmt.Errorf("--keyspace-weights, --role-weights: %w", err)
	}
	p.keyspaceWeights.Store(&kw)
	p.maxClients.Store(int64(cfg.MaxClientConnections))
	p.clientWriteLimit.Store(int64(cfg.ClientWriteBufferBytes))
	p.maxPending.Store(int64(cfg.MaxPendingHandshakes))
	p.maxPendingPerAddr.Store(int64(cfg.MaxPendingHandshakesPerAddress))
	p.bufferLimit.Store(int64(cfg.MaxBufferedBytes))
	cache, err := newPreparedCache(cfg.PreparedCacheEntries)
	if err != nil {
		return nil, err
	}
	p.prep = cache
	lim, err := limiter.New(limiterConfig(cfg), nil, reg)
	if err != nil {
		return nil, fmt.Errorf("limiter: %w", err)
	}
	p.limiter = lim
	undo = append(undo, lim.Close)
	// Label the limiter's per-node series like the backend's: by address.
	lim.SetNodeName(func(id limiter.NodeID) string {
		if p.cluster != nil {
			for _, n := range p.cluster.Nodes() {
				if n.ID == int(id) {
					return n.Addr
				}
			}
		}
		return strconv.Itoa(int(id))
	})
	overrides, err := idempotency.ParseOverrides(cfg.SpeculativeIdempotent)
	if err == nil {
		p.classifier = idempotency.NewClassifier(overrides)
		p.hedging, err = newHedging(cfg, reg)
	}
	if err != nil {
		return nil, fmt.Errorf("speculative execution: %w", err)
	}
	undo = append(undo, p.hedging.stop)
	if err := p.initStatements(cfg, reg); err != nil {
		return nil, err
	}
	defs, err := loadRules(cfg)
	if err != nil {
		return nil, fmt.Errorf("--rules-file: %w", err)
	}
	p.applyRules(defs)
	if err := reg.Register(rules.NewCollector(&p.rules)); err != nil {
		return nil, err
	}
	addrMap, err := config.ParseAddressMap(cfg.AddressMap)
	if err != nil {
		return nil, fmt.Errorf("--address-map: %w", err)
	}
	backendTLS, creds, err := backendSecurity(cfg)
	if err != nil {
		return nil, err
	}
	cl, err := backend.NewCluster(backend.Config{
		TLS:                backendTLS,
		Credentials:        creds,
		ContactPoints:      cfg.ContactPoints,
		AddressMap:         addrMap,
		MaxOrphans:         cfg.MaxOrphansPerConnection,
		ConnectionsPerNode: cfg.ConnectionsPerNode,
		ConnectTimeout:     cfg.ConnectTimeout,
		HeartbeatInterval:  heartbeat(cfg.HeartbeatInterval),
		PoolIdleTimeout:    poolIdleTimeout(cfg),
		// Role pools too outlive the requests a leaving client queued.
		RolePoolIdleTimeout: max(cfg.RolePoolIdleTimeout, cfg.RequestTimeout),
		MaxRoles:            cfg.MaxRolePools,
		OnRoleRefused:       p.roleRefused,
		ReconnectBaseDelay:  cfg.ReconnectBaseDelay,
		ReconnectMaxDelay:   cfg.ReconnectMaxDelay,
		MaxFrame:            max(cfg.MaxFrameBytes, 256<<20),
		RequestTimeout:      cfg.RequestTimeout,
		MaxVersion:          byte(cfg.ProtocolVersionMax),
		Log:                 log.Named("backend"),
		OnSchemaChange:      p.broadcastSchemaChange,
		OnNodes:             p.setLimiterNodes,
	}, reg)
	if err != nil {
		return nil, err
	}
	p.cluster = cl
	undo = append(undo, cl.Close)
	if err := p.initClientSecurity(reg); err != nil {
		return nil, err
	}
	return p, nil
}

// limiterConfig maps the proxy's settings to the limiter's.
func limiterConfig(cfg config.Config) limiter.Config {
	lc := limiter.Config{
		GlobalLimit: cfg.GlobalLimit,
		NodeLimit:   cfg.NodeLimit,
		Adaptive:    cfg.LimitMode == "adaptive" || cfg.LimitMode == "fleet",
		Floor:       cfg.LimitFloor,
		NodePoll:    cfg.LimitNodePoll,
		MinLimit:    cfg.LimitMin,
		MaxLimit:    cfg.LimitMax,
		Tolerance:   cfg.LimitTolerance,
		QueueLength: cfg.QueueLength,
		MaxWait:     cfg.QueueMaxWait,
		QueueTarget: cfg.QueueTarget,
	}
	if cfg.LimitNodePoll == 0 {
		lc.NodePoll = -1 // the limiter's "never"
	}
	if cfg.LimitMode == "fleet" {
		lc.Law = limiter.LawFleet
		// --limit-tolerance's default is the gradient law's; the fleet
		// law's dead zone is its own.
		if cfg.LimitTolerance == limiter.DefaultTolerance {
			lc.Tolerance = 0
		}
	}
	if kw, err := config.ParseWeights(cfg.KeyspaceWeights, cfg.RoleWeights); err == nil && len(kw.Weights) > 1 {
		lc.ClassWeights = kw.Weights
	}
	if cfg.QueueLength == 0 {
		lc.QueueLength = -1 // the limiter's "no queue"
	}
	if cfg.QueueTarget == 0 {
		// Half the max wait, not the limiter's quarter: a driver flooding
		// the proxy closed-loop (50,000 goroutines) keeps a queue standing
		// for as long as it runs, and should see latency, not errors, while
		// the waits stay well inside its timeout.
		lc.QueueTarget = cfg.QueueMaxWait / 2
	}
	return lc
}

// setLimiterNodes admits requests only to nodes that are up.
func (p *Proxy) setLimiterNodes(up []*backend.Node) {
	p.setNodeTable(up)
	ids := make([]limiter.NodeID, len(up))
	for i, n := range up {
		ids[i] = limiter.NodeID(n.ID)
	}
	if err := p.limiter.SetNodes(ids); err != nil {
		p.log.Error("limiter rejected the node set", zap.Error(err))
	}
}

// heartbeat maps the config's "0 disables" to the backend's "negative disables".
// poolIdleTimeout is --keyspace-pool-idle-timeout, but never less than
// --request-timeout: a request that a client queued before it switched
// keyspace or left may still wait for a permit on the pool it released,
// and a request's whole life fits in the request timeout.
func poolIdleTimeout(cfg config.Config) time.Duration {
	if cfg.KeyspacePoolIdleTimeout <= 0 {
		return 0
	}
	return max(cfg.KeyspacePoolIdleTimeout, cfg.RequestTimeout)
}

func heartbeat(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// Ready returns nil while the proxy accepts clients and reaches Cassandra.
func (p *Proxy) Ready() error {
	if !p.ready.Load() {
		return errors.New("not serving yet")
	}
	for _, n := range p.cluster.Nodes() {
		if n.Up() {
			return nil
		}
	}
	return errors.New("no Cassandra node is reachable")
}

// Addrs returns the bound listen addresses (useful with port 0).
func (p *Proxy) Addrs() []net.Addr {
	var out []net.Addr
	for _, e := range p.endpoints {
		if e.ln != nil {
			out = append(out, e.ln.Addr())
		}
	}
	return out
}

// Serving is closed once the proxy listens and answers clients; Addrs is
// valid from then on.
func (p *Proxy) Serving() <-chan struct{} { return p.serving }

// Run connects to the cluster, binds the listen addresses and serves until
// ctx is done; then it stops accepting, lets in-flight requests finish (up
// to the request timeout), closes every connection and returns nil.
func (p *Proxy) Run(ctx context.Context) error {
	defer p.limiter.Close() // on every path; the drain below closes it first
	defer p.hedging.stop()
	p.ctx = ctx
	if err := p.cluster.Connect(ctx); err != nil {
		return fmt.Errorf("connect to cluster: %w", err)
	}
	defer p.cluster.Close()
	// Open the pool most clients will use before accepting them, so the
	// first client does not pay for it.
	if _, err := p.cluster.Pool(ctx, p.maxVersion(), ""); err != nil {
		return fmt.Errorf("connect to cluster: %w", err)
	}
	if err := p.listen(); err != nil {
		return err
	}
	local := p.cluster.LocalInfo()
	p.noteLocal(systables.LocalInfo{ReleaseVersion: local.ReleaseVersion, DataCenter: local.DataCenter,
		Rack: local.Rack, Partitioner: local.Partitioner, ClusterName: local.ClusterName})
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.trackSchemaVersion(ctx)
	}()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.pollNodeLoad(ctx)
	}()
	// Rule queues expire until the requests have drained, after ctx.
	sweepCtx, stopSweep := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSweep()
	go p.sweepRules(sweepCtx)
	var acceptors sync.WaitGroup
	for _, e := range p.endpoints {
		acceptors.Add(1)
		go func() {
			defer acceptors.Done()
			p.accept(ctx, e)
		}()
	}
	p.ready.Store(true)
	p.log.Info("serving", zap.Strings("listen", p.cfg.Listen), zap.Uint8("protocol_version_max", p.maxVersion()))
	close(p.serving)
	<-ctx.Done()
	p.ready.Store(false)
	p.draining.Store(true)
	for _, e := range p.endpoints {
		e.ln.Close()
	}
	acceptors.Wait()
	p.drain(p.cfg.DrainTimeout)
	p.limiter.Close()
	p.wg.Wait()
	p.log.Info("stopped")
	return nil
}

// listen binds every listen address and builds the identity each presents:
// with N addresses the proxy looks like N nodes splitting the ring evenly.
func (p *Proxy) listen() error {
	local := p.cluster.LocalInfo()
	tokens := systables.RingTokens(len(p.cfg.Listen))
	nodes := make([]systables.Node, len(p.cfg.Listen))
	for i, addr := range p.cfg.Listen {
		host, portStr, err := net.SplitHostPort(addr)
		if err != nil {
			return fmt.Errorf("listen address %q: %w", addr, err)
		}
		port, _ := strconv.Atoi(portStr)
		adv := host
		if p.cfg.AdvertiseAddress != "" && len(p.cfg.Listen) == 1 {
			adv = p.cfg.AdvertiseAddress
		}
		ip := net.ParseIP(adv)
		if ip == nil {
			return fmt.Errorf("listen address %q: advertise address %q is not an IP address", addr, adv)
		}
		dc := p.cfg.DataCenter
		if dc == "" {
			dc = local.DataCenter
		}
		hostID := systables.HostID(local.ClusterName + "/" + addr)
		if p.cfg.HostID != "" && i == 0 {
			hostID, err = parseUUID(p.cfg.HostID)
			if err != nil {
				return fmt.Errorf("--host-id: %w", err)
			}
		}
		nodes[i] = systables.Node{
			HostID:     hostID,
			Address:    ip,
			Port:       port,
			DataCenter: dc,
			Rack:       local.Rack,
			Tokens:     []string{tokens[i]},
		}
	}
	for i, addr := range p.cfg.Listen {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			for _, e := range p.endpoints {
				e.ln.Close()
			}
			return fmt.Errorf("listen on %s: %w", addr, err)
		}
		if nodes[i].Port == 0 { // port 0: report the port we got
			nodes[i].Port = ln.Addr().(*net.TCPAddr).Port
		}
		peers := make([]systables.Node, 0, len(nodes)-1)
		for j := range nodes {
			if j != i {
				peers = append(peers, nodes[j])
			}
		}
		p.endpoints = append(p.endpoints, &endpoint{
			addr:     addr,
			ln:       ln,
			rewriter: &systables.Rewriter{Local: nodes[i], Peers: peers},
		})
	}
	return nil
}

func (p *Proxy) accept(ctx context.Context, e *endpoint) {
	var delay time.Duration
	for {
		nc, err := e.ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: back off and retry,
			// as net/http does.
			if delay == 0 {
				delay = 5 * time.Millisecond
			} else if delay < time.Second {
				delay *= 2
			}
			p.log.Warn("accept failed", zap.String("listen", e.addr), zap.Error(err), zap.Duration("retry_in", delay))
			time.Sleep(delay)
			continue
		}
		delay = 0
		nc = p.wrapTLS(nc)
		c := newClient(p, e, nc)
		p.mu.Lock()
		victims, ok := p.admitLocked(c, sourceHost(nc))
		if !ok {
			p.wg.Add(1)
			p.mu.Unlock()
			limit := p.maxClients.Load()
			p.metrics.connsRejected.WithLabelValues(rejectMaxConnections).Inc()
			go func() {
				defer p.wg.Done()
				refuse(nc, fmt.Sprintf("cqlgate: too many client connections (--max-client-connections %d)", limit))
			}()
			continue
		}
		p.clients[c] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		p.evict(victims)
		p.metrics.clientConns.Inc()
		p.metrics.clientConnsTotal.Inc()
		go func() {
			defer p.wg.Done()
			c.serve()
			p.mu.Lock()
			delete(p.clients, c)
			p.mu.Unlock()
			p.metrics.clientConns.Dec()
		}()
	}
}

// refuse answers a connection over the limit: its first message gets
// OVERLOADED on its own stream, in its own protocol version, so the driver
// reports why and tries another node; then the connection closes.
func refuse(nc net.Conn, msg string) {
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(time.Second))
	var hdr [frame.HeaderLen]byte
	if _, err := io.ReadFull(nc, hdr[:]); err != nil {
		return
	}
	h := frame.ParseHeader(hdr[:])
	v := h.Version
	if v < frame.V3 || v > frame.V5 {
		v = frame.V4
	}
	nc.Write(frame.AppendError(nil, v, h.Stream, frame.ErrCodeOverloaded, msg))
}

// drain waits until no client has a request in flight, or timeout, then
// closes every client connection once the answers queued for it are
// written (each client is given at least drainFlushMin for them).
func (p *Proxy) drain(timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		busy := false
		p.mu.Lock()
		for c := range p.clients {
			if c.inflight.Load() > 0 {
				busy = true
				break
			}
		}
		p.mu.Unlock()
		if !busy {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if least := time.Now().Add(drainFlushMin); deadline.Before(least) {
		deadline = least
	}
	p.mu.Lock()
	clients := make([]*client, 0, len(p.clients))
	for c := range p.clients {
		clients = append(clients, c)
	}
	p.mu.Unlock()
	// At once: a client that does not read must not hold up the others.
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.closeFlushed(errors.New("proxy shutting down"), deadline)
		}()
	}
	wg.Wait()
}

// drainFlushMin is the least time a client is given, at shutdown, to read
// the answers already queued for it, even when the wait for the requests
// in flight used up --drain-timeout.
const drainFlushMin = time.Second

// maxVersion is the highest protocol version offered to clients: the
// configured maximum, lowered to what the cluster speaks.
func (p *Proxy) maxVersion() byte {
	v := byte(p.cfg.ProtocolVersionMax)
	if cv := p.cluster.Version(); cv != 0 && cv < v {
		v = cv
	}
	return v
}

// Reload applies the settings of next that may change while running (those
// marked reloadable in pkg/config) without dropping a connection or a
// request, and reports the flags of changed settings that need a restart,
// which are ignored.
func (p *Proxy) Reload(next config.Config) (restart []string, err error) {
	if err := next.Validate(); err != nil {
		return nil, err
	}
	p.reloadMu.Lock()
	defer p.reloadMu.Unlock()
	cur := p.live
	_, restart = cur.Diff(next)
	kw, err := config.ParseWeights(next.KeyspaceWeights, next.RoleWeights)
	if err != nil {
		return restart, fmt.Errorf("--keyspace-weights, --role-weights: %w", err)
	}
	// Read again whether or not its name changed: SIGHUP is how an edited
	// file is applied.
	defs, err := loadRules(next)
	if err != nil {
		return restart, fmt.Errorf("--rules-file: %w", err)
	}
	if err := p.limiter.Reconfigure(limiterConfig(next)); err != nil {
		return restart, fmt.Errorf("limiter: %w", err)
	}
	p.keyspaceWeights.Store(&kw)
	p.maxClients.Store(int64(next.MaxClientConnections))
	p.clientWriteLimit.Store(int64(next.ClientWriteBufferBytes))
	p.maxPending.Store(int64(next.MaxPendingHandshakes))
	p.maxPendingPerAddr.Store(int64(next.MaxPendingHandshakesPerAddress))
	p.bufferLimit.Store(int64(next.MaxBufferedBytes))
	p.hedging.maxExtra.Store(int32(next.SpeculativeMaxExecutions))
	p.reloadStatements(next)
	p.applyRules(defs)
	p.live = next
	return restart, nil
}
