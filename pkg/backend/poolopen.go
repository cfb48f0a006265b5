package backend

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Opening pools and keeping their node lists the cluster's.

// poolKey names a pool. role is the name of the role it logs in as, ""
// for the proxy's own user; never a password, which lives in the Role only.
type poolKey struct {
	version  byte
	keyspace string
	role     string
}

type poolEntry struct {
	pool  *Pool
	ready chan struct{}
	err   error
}

// Pool returns the proxy's own pool (logged in as Config.Credentials) for
// version and keyspace; see PoolAs.
func (cl *Cluster) Pool(ctx context.Context, version byte, keyspace string) (*Pool, error) {
	return cl.PoolAs(ctx, nil, version, keyspace)
}

// PoolAs returns the pool for role (nil: the proxy's own user), version and
// keyspace, creating and connecting it on first use: every node is dialled
// at once, and creation returns once one connection is up, or with the
// first error when every node failed (a *ServerError when Cassandra
// refused, e.g. USE of a keyspace that does not exist, or the role's
// login). Failed pools are not kept.
func (cl *Cluster) PoolAs(ctx context.Context, role *Role, version byte, keyspace string) (*Pool, error) {
	key := poolKey{version: version, keyspace: keyspace}
	if role != nil {
		key.role = role.name
	}
	cl.mu.Lock()
	if role != nil {
		if err := role.usableLocked(); err != nil {
			cl.mu.Unlock()
			return nil, err
		}
	}
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
		pool, err := cl.newPool(ctx, role, version, keyspace, nodes)
		cl.mu.Lock()
		if err == nil && cl.pools[key] != e {
			// The role's pools were closed (its login was refused) while
			// this one connected: it must not live on unlisted.
			pool.close()
			pool, err = nil, role.usableLocked()
			if err == nil {
				err = errRoleGone
			}
		}
		e.pool, e.err = pool, err
		var gone []*NodePool
		if err != nil {
			if cl.pools[key] == e {
				delete(cl.pools, key)
			}
		} else {
			pool.lastUsed.Store(time.Now().UnixNano())
			// The nodes were read before connecting: a topology change
			// since then has passed this pool by.
			gone = pool.syncNodesLocked()
		}
		cl.mu.Unlock()
		closeNodePools(gone)
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

func (cl *Cluster) newPool(ctx context.Context, role *Role, version byte, keyspace string, nodes []*Node) (*Pool, error) {
	p := &Pool{cl: cl, version: version, keyspace: keyspace, role: role}
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
	return nil, fmt.Errorf("backend: no node accepted a connection (version %d, keyspace %q%s): %w", version, keyspace, role.describe(), firstErr)
}

// addNode adds a NodePool for n and starts keeping it connected.
func (p *Pool) addNode(n *Node, first chan<- error) {
	p.addNodeWith(n, nil, nil, first)
}

// addNodeWith is addNode for a NodePool whose first connection, c, is
// dialled already, or is being dialled (pending); both nil: neither.
func (p *Pool) addNodeWith(n *Node, c *Conn, pending *pendingLogin, first chan<- error) {
	np := p.newNodePool(n)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		if c != nil {
			c.Close()
		}
		if pending != nil {
			// Not under the caller's locks: the login ends as soon as
			// it is cancelled.
			go pending.discard()
		}
		if first != nil {
			first <- errors.New("backend: pool closed")
		}
		return
	}
	next := append(append([]*NodePool{}, *p.nodes.Load()...), np)
	p.nodes.Store(&next)
	p.mu.Unlock()
	if c != nil {
		// Before maintain starts, so that it counts c and dials only the
		// connections missing.
		_ = np.adopt(c)
	}
	go np.maintain(p.cl.ctx, first, pending)
}

func (p *Pool) newNodePool(n *Node) *NodePool {
	return &NodePool{pool: p, node: n, wake: make(chan struct{}, 1)}
}

// syncNodesLocked makes p's node list the cluster's: a NodePool for every
// node of cl.nodes without one, none for a node no longer there, and each
// node once. cl.mu is held. The cluster's node set and the node lists of
// its listed pools change together under it, so a pool listed while the
// topology changed can neither miss the change nor get a node twice. It
// returns the NodePools taken out, to close once cl.mu is released.
func (p *Pool) syncNodesLocked() []*NodePool {
	nodes := p.cl.nodes
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	cur := *p.nodes.Load()
	next := make([]*NodePool, 0, len(nodes))
	have := make(map[*Node]bool, len(cur))
	var gone, added []*NodePool
	for _, np := range cur {
		if nodes[np.node.Addr] == np.node && !have[np.node] {
			have[np.node] = true
			next = append(next, np)
		} else {
			gone = append(gone, np)
		}
	}
	for _, n := range nodes {
		if !have[n] {
			np := p.newNodePool(n)
			next = append(next, np)
			added = append(added, np)
		}
	}
	if len(gone) > 0 || len(added) > 0 {
		p.nodes.Store(&next)
	}
	p.mu.Unlock()
	for _, np := range added {
		go np.maintain(p.cl.ctx, nil, nil)
	}
	return gone
}

func closeNodePools(nps []*NodePool) {
	for _, np := range nps {
		np.close()
	}
}

func (p *Pool) close() {
	p.mu.Lock()
	p.closed = true
	nps := *p.nodes.Load()
	p.mu.Unlock()
	closeNodePools(nps)
}
