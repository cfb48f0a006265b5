package backend

// Role pools: with --passthrough-identity role, the requests of a client
// that logged in as role R travel on connections logged in as R, so
// Cassandra applies R's GRANTs and writes R in its audit log. Such pools
// are keyed by role as well as by version and keyspace, and shared by every
// client connection of the role, which keeps the multiplexing: a role costs
// ConnectionsPerNode connections per node and pool, however many clients
// it has.
//
// A role's password is kept in memory, in its Role, only while the role
// has client connections (AcquireRole to Release): its pools need it to
// reconnect. It is never part of a pool key, a log line, a metric or an
// error. Without it an idle role pool does not reconnect; it is closed
// after Config.RolePoolIdleTimeout, and the role forgotten with it.

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/cqlgate/cqlgate/pkg/frame"
)

var (
	// ErrTooManyRoles is returned by AcquireRole when Config.MaxRoles
	// roles hold pools or client connections already.
	ErrTooManyRoles = errors.New("too many roles have connections to Cassandra through this proxy at once")
	// errRoleGone fails a role pool that cannot log in because its role
	// has no client connection left, so no password.
	errRoleGone = errors.New("backend: the role has no client connection left")
)

// Role is a client role that pools log in as. The proxy gets one per client
// connection from AcquireRole and gives it back with Release.
type Role struct {
	cl   *Cluster
	name string
	// creds is nil once the role's last client connection is gone.
	creds atomic.Pointer[Credentials]
	// Under cl.mu: the client connections holding the role, and the
	// refusal that closed its pools (nil while it may log in).
	clients int
	refused *ServerError
}

// Name returns the role's name (its login username).
func (r *Role) Name() string { return r.name }

// Refused returns Cassandra's refusal of the role's login that closed its
// pools, nil if there was none since the role's last AcquireRole (and for
// a nil Role, the proxy's own user).
func (r *Role) Refused() *ServerError {
	if r == nil {
		return nil
	}
	r.cl.mu.Lock()
	defer r.cl.mu.Unlock()
	return r.refused
}

// describe names the role in error messages; nothing for the proxy's user.
func (r *Role) describe() string {
	if r == nil {
		return ""
	}
	return fmt.Sprintf(", role %q", r.name)
}

// usableLocked returns why the role's pools may not be opened, nil if they
// may; cl.mu is held.
func (r *Role) usableLocked() error {
	if r.refused != nil {
		return r.refused
	}
	if r.clients == 0 {
		return errRoleGone
	}
	return nil
}

// AcquireRole returns the Role named username for one more client
// connection, whose login Cassandra has just accepted with password: the
// role's pools log in with it from now on (a changed password replaces the
// old one). A role whose login was refused is given another chance with it.
// When MaxRoles roles are in use, the roles without client connections are
// closed to make room; if none is, it fails with ErrTooManyRoles.
func (cl *Cluster) AcquireRole(username, password string) (*Role, error) {
	var evicted []*Pool
	cl.mu.Lock()
	r, ok := cl.roles[username]
	if !ok {
		if len(cl.roles) >= cl.cfg.MaxRoles {
			evicted = cl.evictRolesLocked()
		}
		if len(cl.roles) >= cl.cfg.MaxRoles {
			cl.mu.Unlock()
			closePools(evicted)
			return nil, fmt.Errorf("%w (at most %d; see --max-role-pools)", ErrTooManyRoles, cl.cfg.MaxRoles)
		}
		r = &Role{cl: cl, name: username}
		cl.roles[username] = r
	}
	r.clients++
	r.refused = nil
	wasGone := r.creds.Load() == nil
	r.creds.Store(&Credentials{Username: username, Password: password})
	var wake []*Pool
	if wasGone {
		wake = cl.rolePoolsLocked(r, false)
	}
	cl.mu.Unlock()
	closePools(evicted)
	// Pools kept while the role had no clients could not reconnect.
	for _, p := range wake {
		for _, np := range *p.nodes.Load() {
			np.kick()
		}
	}
	return r, nil
}

// Release gives back what AcquireRole handed out. With the role's last
// client connection gone, its password is forgotten.
func (r *Role) Release() {
	cl := r.cl
	cl.mu.Lock()
	defer cl.mu.Unlock()
	r.clients--
	if r.clients <= 0 {
		r.clients = 0
		r.creds.Store(nil)
	}
}

// Roles returns how many roles hold pools or client connections.
func (cl *Cluster) Roles() int {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return len(cl.roles)
}

// credentials are what the pool's connections log in with.
func (p *Pool) credentials() *Credentials {
	if p.role == nil {
		return p.cl.cfg.Credentials
	}
	return p.role.creds.Load()
}

// canDial reports whether the pool has credentials to open connections.
func (p *Pool) canDial() bool { return p.role == nil || p.role.creds.Load() != nil }

// loginFailed closes every pool of the pool's role when Cassandra refused
// its login (password changed, role dropped or no longer allowed to log
// in): the role's clients must learn it, as they would on a direct
// connection, rather than be served on the connections still open.
func (p *Pool) loginFailed(err error) {
	var se *ServerError
	if p.role == nil || !errors.As(err, &se) || se.Code != frame.ErrCodeBadCredentials {
		return
	}
	cl, r := p.cl, p.role
	cl.mu.Lock()
	if r.refused != nil {
		cl.mu.Unlock()
		return
	}
	r.refused = se
	pools := cl.rolePoolsLocked(r, true)
	cl.mu.Unlock()
	// Cassandra's message names the role, never the password.
	cl.log.Warn("Cassandra refused a role's login: closing its connections and its clients'",
		zap.String("role", r.name), zap.Int("pools", len(pools)), zap.String("error", se.Message))
	closePools(pools)
	if cl.cfg.OnRoleRefused != nil {
		cl.cfg.OnRoleRefused(r, se)
	}
}

// rolePoolsLocked returns r's ready pools, and takes them out of cl.pools
// when remove is set; cl.mu is held.
func (cl *Cluster) rolePoolsLocked(r *Role, remove bool) []*Pool {
	var pools []*Pool
	for key, e := range cl.pools {
		if key.role != r.name || e.pool == nil {
			continue
		}
		pools = append(pools, e.pool)
		if remove {
			delete(cl.pools, key)
		}
	}
	return pools
}

// evictRolesLocked forgets the roles without client connections whose
// pools have nothing in flight, and returns those pools for closing;
// cl.mu is held.
func (cl *Cluster) evictRolesLocked() []*Pool {
	now := time.Now()
	var out []*Pool
	for name, r := range cl.roles {
		if r.clients > 0 {
			continue
		}
		busy := false
		for key, e := range cl.pools {
			if key.role == name && (e.pool == nil || !e.pool.idleSince(now)) {
				busy = true
				break
			}
		}
		if busy {
			continue
		}
		out = append(out, cl.rolePoolsLocked(r, true)...)
		delete(cl.roles, name)
	}
	return out
}

// forgetIdleRolesLocked drops the roles that have neither client
// connections nor pools; cl.mu is held.
func (cl *Cluster) forgetIdleRolesLocked() {
	for name, r := range cl.roles {
		if r.clients > 0 {
			continue
		}
		used := false
		for key := range cl.pools {
			if key.role == name {
				used = true
				break
			}
		}
		if !used {
			delete(cl.roles, name)
		}
	}
}

func closePools(pools []*Pool) {
	for _, p := range pools {
		p.close()
	}
}
