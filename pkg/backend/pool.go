package backend

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Pool holds connections to every known node for one protocol version and
// one keyspace (the keyspace made current with USE on each connection, ""
// for none). Requests from clients that have not chosen a keyspace, and
// EXECUTEs of fully prepared statements, go to the "" pool of their version.
type Pool struct {
	cl       *Cluster
	version  byte
	keyspace string
	// role is the client role whose credentials its connections log in
	// with; nil for the proxy's own (Config.Credentials).
	role *Role

	mu     sync.Mutex // guards changes to nodes
	nodes  atomic.Pointer[[]*NodePool]
	rr     atomic.Uint32
	closed bool

	// holders counts the client connections that send through the pool;
	// lastUsed (unix ns) is when it was last handed out or let go. A
	// keyspace pool nobody holds is closed once idle (Config.PoolIdleTimeout).
	holders  atomic.Int32
	lastUsed atomic.Int64
}

// NodePool is a Pool's connections to one node.
type NodePool struct {
	pool  *Pool
	node  *Node
	conns atomic.Pointer[[]*Conn]

	mu       sync.Mutex
	failures int  // consecutive failed dials, for backoff
	closed   bool // node removed or pool closed
	wake     chan struct{}
}

// Version returns the pool's protocol version.
func (p *Pool) Version() byte { return p.version }

// Keyspace returns the keyspace the pool's connections use.
func (p *Pool) Keyspace() string { return p.keyspace }

// Role returns the role the pool's connections are logged in as, nil for
// the proxy's own user.
func (p *Pool) Role() *Role { return p.role }

// Hold marks the pool as in use by one more client connection, which sends
// through it until it calls Release: a held pool is never closed as idle.
func (p *Pool) Hold() { p.holders.Add(1) }

// Release undoes one Hold. The pool's idle time starts now, so the holder's
// last requests finish long before the pool can be closed.
func (p *Pool) Release() {
	p.lastUsed.Store(time.Now().UnixNano())
	p.holders.Add(-1)
}

// idleSince reports whether nobody holds the pool, nothing is in flight on
// it and it has not been handed out or released since before t.
func (p *Pool) idleSince(t time.Time) bool {
	if p.holders.Load() > 0 || p.lastUsed.Load() > t.UnixNano() {
		return false
	}
	for _, np := range *p.nodes.Load() {
		if cs := np.conns.Load(); cs != nil {
			for _, c := range *cs {
				if c.liveRequests() > 0 {
					return false
				}
			}
		}
	}
	return true
}

// Pick returns the connection with the fewest requests in flight on the
// least-loaded node that has one, skipping avoid (may be nil). Ties rotate so
// idle nodes share the load. It returns nil when no node has a connection.
func (p *Pool) Pick(avoid *Node) (*Conn, *NodePool) {
	nps := *p.nodes.Load()
	n := uint32(len(nps))
	if n == 0 {
		return nil, nil
	}
	start := p.rr.Add(1)
	var best, fallback *Conn
	var bestNP, fallbackNP *NodePool
	bestLoad, fallbackLoad := math.MaxInt, math.MaxInt
	for i := uint32(0); i < n; i++ {
		np := nps[(start+i)%n]
		if np.node == avoid {
			continue
		}
		c, load := np.leastLoaded()
		if c == nil {
			continue
		}
		if !np.node.Up() {
			// Reported down but still connected (e.g. draining): only
			// if no node that is up has a connection.
			if load < fallbackLoad {
				fallback, fallbackNP, fallbackLoad = c, np, load
			}
			continue
		}
		if load < bestLoad {
			best, bestNP, bestLoad = c, np, load
		}
	}
	if best == nil {
		return fallback, fallbackNP
	}
	return best, bestNP
}

// OnNode returns the pool's least-loaded connection to node, or nil.
func (p *Pool) OnNode(node *Node) *Conn {
	for _, np := range *p.nodes.Load() {
		if np.node == node {
			c, _ := np.leastLoaded()
			return c
		}
	}
	return nil
}

// OnNodeID returns the pool's least-loaded connection to the node with id,
// and that node; nil when the pool has no connection to it.
func (p *Pool) OnNodeID(id int) (*Conn, *Node) {
	for _, np := range *p.nodes.Load() {
		if np.node.ID == id {
			c, _ := np.leastLoaded()
			if c == nil {
				return nil, nil
			}
			return c, np.node
		}
	}
	return nil, nil
}

// Each calls fn with one connection per node that has one, except avoid.
func (p *Pool) Each(avoid *Node, fn func(*Conn)) {
	for _, np := range *p.nodes.Load() {
		if np.node == avoid {
			continue
		}
		if c, _ := np.leastLoaded(); c != nil {
			fn(c)
		}
	}
}

// Node returns the node this NodePool connects to.
func (np *NodePool) Node() *Node { return np.node }

// leastLoaded returns the open connection with the fewest requests in flight
// and the node's total in flight. A connection that has died is skipped:
// its requests are being failed, so its count falls towards zero and it
// would look like the best choice until the pool drops it (in onClose).
func (np *NodePool) leastLoaded() (*Conn, int) {
	cs := np.conns.Load()
	if cs == nil {
		return nil, 0
	}
	var best *Conn
	total, bestLoad := 0, math.MaxInt
	for _, c := range *cs {
		if c.Dead() {
			continue
		}
		l := c.InFlight()
		total += l
		if l < bestLoad {
			best, bestLoad = c, l
		}
	}
	return best, total
}

func (np *NodePool) inFlight() int {
	_, n := np.leastLoaded()
	return n
}

func (np *NodePool) numConns() int {
	cs := np.conns.Load()
	if cs == nil {
		return 0
	}
	return len(*cs)
}

// add publishes a new connection (copy on write: readers never lock).
func (np *NodePool) add(c *Conn) bool {
	np.mu.Lock()
	defer np.mu.Unlock()
	if np.closed {
		return false
	}
	var next []*Conn
	if cs := np.conns.Load(); cs != nil {
		next = append(next, *cs...)
	}
	next = append(next, c)
	np.conns.Store(&next)
	return true
}

func (np *NodePool) remove(c *Conn) {
	np.mu.Lock()
	defer np.mu.Unlock()
	cs := np.conns.Load()
	if cs == nil {
		return
	}
	next := make([]*Conn, 0, len(*cs))
	for _, x := range *cs {
		if x != c {
			next = append(next, x)
		}
	}
	np.conns.Store(&next)
}

// maintain keeps the NodePool at its target number of connections for as
// long as it is open: it dials in parallel and, after failures, waits with
// exponential backoff and jitter (or until woken because the node came up).
// The first round's outcome is reported on first.
//
// pending, when not nil, is a login to the node started for the pool
// before it existed (a role's first login, see LoginRole): its outcome is
// the first round's, and nothing else is dialled until it is known.
func (np *NodePool) maintain(ctx context.Context, first chan<- error, pending *pendingLogin) {
	cl := np.pool.cl
	target := cl.cfg.ConnectionsPerNode
	for {
		if np.isClosed() || ctx.Err() != nil {
			if first != nil {
				first <- errors.New("backend: pool closed")
			}
			if pending != nil {
				pending.discard()
			}
			return
		}
		missing := target - np.numConns()
		if pending != nil {
			ok := np.awaitLogin(pending)
			pending = nil
			if ok || np.isClosed() {
				continue // on to the connections still missing at once, or out
			}
			missing = 0 // as after a failed round: back off first
		}
		if !np.pool.canDial() {
			// A role pool whose role has no client connection left: its
			// password is forgotten, so it cannot log in. AcquireRole
			// wakes it when a client of the role logs in again.
			missing = 0
			if first != nil {
				first <- errRoleGone
				first = nil
			}
		}
		if missing > 0 {
			errs := make(chan error, missing)
			for i := 0; i < missing; i++ {
				go func() { errs <- np.dialOne(ctx) }()
			}
			var firstErr error
			ok := 0
			for i := 0; i < missing; i++ {
				if err := <-errs; err != nil {
					if firstErr == nil {
						firstErr = err
					}
					continue
				}
				ok++
				if first != nil {
					// The pool is usable with one connection: a client
					// waiting for it need not wait for every login.
					np.node.markUp()
					first <- nil
					first = nil
				}
			}
			np.roundEnded(ok, firstErr)
			if ok > 0 {
				firstErr = nil
			}
			if first != nil {
				first <- firstErr
				first = nil
			}
		}
		var wait time.Duration
		if np.numConns() < target && np.pool.canDial() {
			wait = backoff(cl.cfg.ReconnectBaseDelay, cl.cfg.ReconnectMaxDelay, np.failuresNow())
		} else {
			wait = time.Hour // only a closing connection or a node event wakes us
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-np.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// roundEnded records the outcome of a round of dials to the node: ok
// connections made, and the first error if any.
func (np *NodePool) roundEnded(ok int, firstErr error) {
	cl := np.pool.cl
	np.mu.Lock()
	if ok > 0 || np.numConns() > 0 {
		np.failures = 0
	} else {
		np.failures++
	}
	np.mu.Unlock()
	var se *ServerError
	switch {
	case ok > 0:
		np.node.markUp()
	case errors.As(firstErr, &se):
		// Cassandra answered (e.g. USE of a keyspace that does
		// not exist): the node is fine, the pool is not.
	case np.numConns() == 0 && !cl.connected(np.node):
		np.node.markDown(firstErr)
		cl.log.Debug("connect to node failed", zap.String("node", np.node.Addr), zap.Error(firstErr))
	}
}

func (np *NodePool) isClosed() bool {
	np.mu.Lock()
	defer np.mu.Unlock()
	return np.closed
}

func (np *NodePool) failuresNow() int {
	np.mu.Lock()
	defer np.mu.Unlock()
	return np.failures
}

// kick wakes the maintenance loop, e.g. after a connection closed.
func (np *NodePool) kick() {
	select {
	case np.wake <- struct{}{}:
	default:
	}
}

func (np *NodePool) close() {
	np.mu.Lock()
	np.closed = true
	cs := np.conns.Load()
	np.mu.Unlock()
	np.kick()
	if cs != nil {
		for _, c := range *cs {
			c.Close()
		}
	}
}

func (np *NodePool) dialOne(ctx context.Context) error {
	cl := np.pool.cl
	c, err := Dial(ctx, DialConfig{
		Addr:         np.node.Addr,
		Version:      np.pool.version,
		Keyspace:     np.pool.keyspace,
		Timeout:      cl.cfg.ConnectTimeout,
		MaxFrame:     cl.cfg.MaxFrame,
		WriteTimeout: cl.cfg.WriteTimeout,
		TLS:          cl.cfg.TLS,
		Credentials:  np.pool.credentials(),
		Instance:     cl.cfg.Instance,
	})
	if err != nil {
		np.pool.loginFailed(err)
		return err
	}
	return np.adopt(c)
}

// adopt makes c, dialled for the pool, one of its connections and starts
// it; it closes c if the NodePool is closed.
func (np *NodePool) adopt(c *Conn) error {
	cl := np.pool.cl
	if !np.add(c) {
		c.Close()
		return errors.New("backend: pool closed")
	}
	cl.metrics.connects.Inc()
	c.Start(func(c *Conn, err error) {
		np.remove(c)
		if !errors.Is(err, ErrConnClosed) {
			cl.log.Info("backend connection closed", zap.String("node", np.node.Addr), zap.Error(err))
		}
		np.kick()
	})
	return nil
}

// backoff returns the delay before reconnect attempt n (n >= 1): base*2^(n-1)
// capped at max, with full jitter over the upper half so a fleet of proxies
// does not reconnect in lockstep.
func backoff(base, max time.Duration, n int) time.Duration {
	if n <= 0 {
		return base
	}
	d := base
	for i := 1; i < n && d < max; i++ {
		d *= 2
	}
	if d > max {
		d = max
	}
	half := d / 2
	return half + time.Duration(rand.Int64N(int64(half)+1))
}
