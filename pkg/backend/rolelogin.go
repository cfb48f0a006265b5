package backend

// A role's first login: the client's password is checked by the logins of
// the role pool's connections, which then stay in the pool, rather than by
// a connection of its own closed before the pool opens. Cassandra checks
// the password (a bcrypt hash with PasswordAuthenticator) once per
// connection the role keeps, and never on top of those.
//
// With LoginAllNodes (what the proxy asks for unless the client's address
// failed a login recently) every node that is up is dialled at once, each
// connection logging in with the client's credentials, as a driver opens
// its pool (JAVA-692): the client is answered at the first node's answer,
// and the role's pool is complete after about one handshake, not two in a
// row. The first answer is the verdict, as the node a driver first reaches
// decides its login: AUTH_SUCCESS registers the role with that connection
// as its pool's first, and the logins still under way become the first
// connections of their nodes' pools as they succeed; a refusal (Cassandra's
// ERROR) cancels the others and closes what they opened before the client
// hears it. Nodes may disagree for a moment (a role just created or a
// password just changed, not yet seen by every node's auth cache): a
// refusal that comes after the verdict is a refusal of the pool's login
// like any later one (Pool.loginFailed: the role's pools and clients are
// closed with Cassandra's answer), and a success after a refusal is
// discarded with the other logins.
//
// The price is Cassandra's work for a wrong password: a refused first
// login may have cost a bcrypt check on every node that got the
// AUTH_RESPONSE before the refusal cancelled its login. With LoginOneNode
// (the proxy asks for it when the client's source address failed a login
// within the last minute, auth.Passthrough.FailedRecently) the login goes
// to one node and the others are dialled only once it succeeded: a flood
// of wrong passwords from one address costs Cassandra one check per
// attempt after its first failure, as on direct connections, and the
// per-address failure limit bounds those.
//
// Nothing is shared with other client connections before the password is
// verified: the role is registered, and its pool listed, only after
// Cassandra accepted the login. A role already known (it has client
// connections or pools) never opens a pool this way, and a new client's
// password for it is checked on its own connection, as before
// (ErrRoleKnown): an open pool never vouches for a password.
//
// No goroutine or connection outlives a login that fails: LoginRole
// returns a refusal, an error or its context's end only after every login
// it started has ended and its connection, if any, is closed. After a
// success, each login still under way belongs to its node's pool
// (NodePool.awaitLogin), which cancels it when it closes (role refused,
// node removed, cluster closed).

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// ErrRoleKnown is returned by LoginRole when the role already has client
// connections or pools (or its first login is under way): the caller
// checks the password on a connection of its own and then calls
// AcquireRole.
var ErrRoleKnown = errors.New("backend: the role is in use already; check the password separately")

// LoginNodes says which nodes a role's first login (LoginRole) goes to.
type LoginNodes int

const (
	// LoginAllNodes logs in to every node that is up at once: the role's
	// pool is complete after one handshake, but a wrong password may cost
	// Cassandra one check per node.
	LoginAllNodes LoginNodes = iota
	// LoginOneNode logs in to one node and dials the others only once it
	// accepted: a wrong password costs Cassandra one check.
	LoginOneNode
)

// roleLogin is a first login of a role under way (Cluster.roleLogins).
type roleLogin struct{ done chan struct{} }

// LoginRole is a client's login as username, whose password no one has
// checked yet, for requests in protocol version: when no client is
// logged in as the role and it has no pools, it logs in to the nodes that
// are up (all at once, or one with LoginOneNode) with username and
// password and, if Cassandra accepts them, makes the connections the
// first of the role's pool for version (no keyspace) and returns the Role,
// acquired for the client connection as AcquireRole does; the pool's other
// connections open in the background. A refused login comes back as a
// *ServerError with Cassandra's answer, and leaves nothing behind. It
// returns ErrRoleKnown when the role is known already (or a first login of
// it is under way, which it waits for), and when MaxRoles roles are in
// use: the caller then checks the password with CheckLogin and calls
// AcquireRole, which reports the limit.
func (cl *Cluster) LoginRole(ctx context.Context, username, password string, version byte, spread LoginNodes) (*Role, error) {
	cl.mu.Lock()
	if _, known := cl.roles[username]; known || len(cl.roles) >= cl.cfg.MaxRoles {
		cl.mu.Unlock()
		return nil, ErrRoleKnown
	}
	if rl := cl.roleLogins[username]; rl != nil {
		cl.mu.Unlock()
		// Whatever it gives, this login is checked on its own: the
		// password may differ.
		select {
		case <-rl.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return nil, ErrRoleKnown
	}
	rl := &roleLogin{done: make(chan struct{})}
	cl.roleLogins[username] = rl
	nodes := cl.upNodesLocked()
	cl.mu.Unlock()
	defer func() {
		cl.mu.Lock()
		delete(cl.roleLogins, username)
		cl.mu.Unlock()
		close(rl.done)
	}()

	creds := &Credentials{Username: username, Password: password}
	cfg := DialConfig{
		Version:      version,
		Timeout:      cl.cfg.ConnectTimeout,
		MaxFrame:     cl.cfg.MaxFrame,
		WriteTimeout: cl.cfg.WriteTimeout,
		TLS:          cl.cfg.TLS,
		Credentials:  creds,
		RequireAuth:  true,
		Instance:     cl.cfg.Instance,
	}
	var c *Conn
	var node *Node
	var pending map[*Node]*pendingLogin
	var err error
	if spread == LoginOneNode || len(nodes) < 2 {
		c, node, err = cl.dialFirst(ctx, nodes, cfg)
	} else {
		c, node, pending, err = cl.dialAll(ctx, nodes, cfg)
	}
	if err != nil {
		return nil, err
	}
	node.markUp()
	// discard gives up the logins of a pool that will not be made.
	discard := func() {
		c.Close()
		for _, pl := range pending {
			pl.discard()
		}
	}

	// Cassandra accepted the password: the role and its pool may be
	// shared from now on.
	cl.mu.Lock()
	if cl.ctx.Err() != nil {
		cl.mu.Unlock()
		discard()
		return nil, errors.New("backend: cluster closed")
	}
	r, ok := cl.roles[username]
	if !ok {
		// LoginRole counted the roles above, but a client whose login was
		// in the cache may have taken a role since: AcquireRole's check.
		if len(cl.roles) >= cl.cfg.MaxRoles {
			cl.mu.Unlock()
			discard()
			return nil, ErrRoleKnown
		}
		r = &Role{cl: cl, name: username}
		cl.roles[username] = r
	}
	r.clients++
	r.refused = nil
	r.creds.Store(creds)
	key := poolKey{version: version, role: username}
	if _, ok := cl.pools[key]; ok {
		// A client whose login was in the cache opened the pool meanwhile.
		cl.mu.Unlock()
		discard()
		return r, nil
	}
	p := &Pool{cl: cl, version: version, role: r}
	empty := []*NodePool{}
	p.nodes.Store(&empty)
	p.lastUsed.Store(time.Now().UnixNano())
	ready := make(chan struct{})
	close(ready)
	cl.pools[key] = &poolEntry{pool: p, ready: ready}
	// Under cl.mu, so that a topology change, which updates the listed
	// pools, sees the pool with all its nodes or not at all.
	adopted := false
	for _, n := range cl.nodes {
		switch pl := pending[n]; {
		case n == node:
			p.addNodeWith(n, c, nil, nil)
			adopted = true
		case pl != nil:
			p.addNodeWith(n, nil, pl, nil)
			delete(pending, n)
		default:
			p.addNode(n, nil)
		}
	}
	cl.mu.Unlock()
	if !adopted {
		// The node left the topology while the login ran.
		c.Close()
	}
	for _, pl := range pending {
		pl.discard() // so did these nodes
	}
	return r, nil
}

// upNodesLocked returns the nodes that are up, in random order, so that
// logins spread over the nodes as drivers spread theirs; cl.mu is held.
func (cl *Cluster) upNodesLocked() []*Node {
	var up []*Node
	for _, n := range cl.nodes {
		if n.Up() {
			up = append(up, n)
		}
	}
	rand.Shuffle(len(up), func(i, j int) { up[i], up[j] = up[j], up[i] })
	return up
}

// dialFirst dials the first of nodes that answers, with cfg (its Addr
// set per node): a node that cannot be reached is skipped for the next
// one, up to three; Cassandra's answer (a *ServerError) ends the search.
func (cl *Cluster) dialFirst(ctx context.Context, nodes []*Node, cfg DialConfig) (*Conn, *Node, error) {
	if len(nodes) == 0 {
		return nil, nil, errors.New("backend: no Cassandra node is up to log in to")
	}
	var errs []error
	for _, n := range nodes[:min(3, len(nodes))] {
		cfg.Addr = n.Addr
		c, err := Dial(ctx, cfg)
		if err == nil {
			return c, n, nil
		}
		if isVerdict(err) || ctx.Err() != nil {
			return nil, nil, err
		}
		errs = append(errs, err)
	}
	return nil, nil, fmt.Errorf("backend: logging in: %w", errors.Join(errs...))
}

// isVerdict reports whether err is a node's answer to a login (Cassandra
// refused it, or checks no password), which ends a login's search for a
// node; any other error is the node's, and another node may answer.
func isVerdict(err error) bool {
	var se *ServerError
	return errors.As(err, &se) || errors.Is(err, ErrAuthNotRequired)
}

// dialAll dials every one of nodes at once with cfg (its Addr set per
// node) and returns the first connection up and its node, with the logins
// still under way by node, which the caller owns. A node's answer that
// comes first (isVerdict), ctx's end, or every node failing ends it with
// an error, once every login has ended and its connection is closed.
func (cl *Cluster) dialAll(ctx context.Context, nodes []*Node, cfg DialConfig) (*Conn, *Node, map[*Node]*pendingLogin, error) {
	arrived := make(chan *pendingLogin, len(nodes))
	pending := make(map[*Node]*pendingLogin, len(nodes))
	for _, n := range nodes {
		pending[n] = cl.startLogin(n, cfg, arrived)
	}
	discardAll := func() {
		for _, pl := range pending {
			pl.discard()
		}
	}
	var errs []error
	for range nodes {
		select {
		case pl := <-arrived:
			delete(pending, pl.node)
			if pl.err == nil {
				return pl.c, pl.node, pending, nil
			}
			if isVerdict(pl.err) {
				discardAll()
				return nil, nil, nil, pl.err
			}
			errs = append(errs, pl.err)
		case <-ctx.Done():
			discardAll()
			return nil, nil, nil, ctx.Err()
		}
	}
	if cl.ctx.Err() != nil {
		return nil, nil, nil, errors.New("backend: cluster closed")
	}
	return nil, nil, nil, fmt.Errorf("backend: logging in: %w", errors.Join(errs...))
}

// pendingLogin is a login to one node under way, started by dialAll.
type pendingLogin struct {
	node   *Node
	cancel context.CancelFunc
	// done is closed once c or err is set.
	done chan struct{}
	c    *Conn
	err  error
}

// startLogin dials node with cfg on a goroutine of its own, under the
// cluster's context (the caller's may end before the login does, which
// then belongs to a pool), and sends the login on arrived when it ends.
func (cl *Cluster) startLogin(node *Node, cfg DialConfig, arrived chan<- *pendingLogin) *pendingLogin {
	ctx, cancel := context.WithCancel(cl.ctx)
	pl := &pendingLogin{node: node, cancel: cancel, done: make(chan struct{})}
	cfg.Addr = node.Addr
	go func() {
		pl.c, pl.err = Dial(ctx, cfg)
		cancel()
		arrived <- pl // buffered for every login
		close(pl.done)
	}()
	return pl
}

// discard cancels the login and closes its connection, if it made one, once
// it has ended.
func (pl *pendingLogin) discard() {
	pl.cancel()
	<-pl.done
	if pl.c != nil {
		pl.c.Close()
	}
}

// awaitLogin waits for pl, the login to the NodePool's node started before
// its pool existed, makes its connection the NodePool's first and reports
// whether it did. Closing the NodePool cancels the login. Cassandra's
// refusal is the pool's, as at any later login (Pool.loginFailed).
func (np *NodePool) awaitLogin(pl *pendingLogin) bool {
	for waiting := true; waiting; {
		select {
		case <-pl.done:
			waiting = false
		case <-np.wake:
			if np.isClosed() {
				pl.cancel()
			}
		}
	}
	if pl.err != nil {
		if !np.isClosed() {
			np.pool.loginFailed(pl.err)
			np.roundEnded(0, pl.err)
		}
		return false
	}
	if err := np.adopt(pl.c); err != nil {
		return false
	}
	np.roundEnded(1, nil)
	return true
}
