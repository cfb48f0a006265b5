package backend

// A role's first login: the client's password is checked by the login of
// the role pool's first connection, which then stays in the pool, rather
// than by a connection of its own closed before the pool opens. A client
// logging in as a role no one is logged in as thus waits for one login to
// Cassandra, not two in a row, and Cassandra checks the password (a bcrypt
// hash with PasswordAuthenticator) once per connection the role keeps.
//
// The other nodes are dialled only once that first login has succeeded: a
// wrong password costs Cassandra one check, as it does on a direct
// connection, not one per node, so a flood of wrong passwords through the
// proxy does not multiply Cassandra's work by the number of nodes.
//
// Nothing is shared with other client connections before the password is
// verified: the role is registered, and its pool listed, only after
// Cassandra accepted the login. A role already known (it has client
// connections or pools) never opens a pool this way, and a new client's
// password for it is checked on its own connection, as before
// (ErrRoleKnown): an open pool never vouches for a password.

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

// roleLogin is a first login of a role under way (Cluster.roleLogins).
type roleLogin struct{ done chan struct{} }

// LoginRole is a client's login as username, whose password no one has
// checked yet, for requests in protocol version: when no client is
// logged in as the role and it has no pools, it logs in to one node that is
// up with username and password and, if Cassandra accepts them, makes that
// connection the first of the role's pool for version (no keyspace), opens
// the pool's other connections in the background and returns the Role,
// acquired for the client connection as AcquireRole does. A refused login
// comes back as a *ServerError with Cassandra's answer, and leaves nothing
// behind. It returns ErrRoleKnown when the role is known already (or a
// first login of it is under way, which it waits for), and when MaxRoles
// roles are in use: the caller then checks the password with CheckLogin
// and calls AcquireRole, which reports the limit.
func (cl *Cluster) LoginRole(ctx context.Context, username, password string, version byte) (*Role, error) {
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
	c, node, err := cl.dialFirst(ctx, nodes, DialConfig{
		Version:      version,
		Timeout:      cl.cfg.ConnectTimeout,
		MaxFrame:     cl.cfg.MaxFrame,
		WriteTimeout: cl.cfg.WriteTimeout,
		TLS:          cl.cfg.TLS,
		Credentials:  creds,
		RequireAuth:  true,
	})
	if err != nil {
		return nil, err
	}
	node.markUp()

	// Cassandra accepted the password: the role and its pool may be
	// shared from now on.
	cl.mu.Lock()
	if cl.ctx.Err() != nil {
		cl.mu.Unlock()
		c.Close()
		return nil, errors.New("backend: cluster closed")
	}
	r, ok := cl.roles[username]
	if !ok {
		// LoginRole counted the roles above, but a client whose login was
		// in the cache may have taken a role since: AcquireRole's check.
		if len(cl.roles) >= cl.cfg.MaxRoles {
			cl.mu.Unlock()
			c.Close()
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
		c.Close()
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
		if n == node {
			p.addNodeWith(n, c, nil)
			adopted = true
		} else {
			p.addNode(n, nil)
		}
	}
	cl.mu.Unlock()
	if !adopted {
		// The node left the topology while the login ran.
		c.Close()
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
		var se *ServerError
		if errors.As(err, &se) || errors.Is(err, ErrAuthNotRequired) || ctx.Err() != nil {
			return nil, nil, err
		}
		errs = append(errs, err)
	}
	return nil, nil, fmt.Errorf("backend: logging in: %w", errors.Join(errs...))
}
