package proxy

// Roles: with --client-auth passthrough, who Cassandra sees run a client's
// requests. With --passthrough-identity role (the default) it is the role
// the client logged in as: its requests, and everything the proxy does on
// their behalf (preparing on other nodes, re-preparing, USE, paging,
// hedges, re-sends), travel on backend pools logged in as that role, which
// every client connection of the role shares. The proxy's own user
// (--backend-username) keeps the control connection: topology, schema
// versions and schema agreement waits.
//
// System-table queries a client sends go on the client's pool like any
// request: every role may read system.local and system.peers in Cassandra,
// so nothing is refused that a direct connection allows, and a client's
// request never borrows the proxy's rights.
//
// Per role too, with either identity: the admission queue's priority class
// (--role-weights) and the cqlgate_role_* series (--max-role-series).

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/cqlgate/cqlgate/pkg/auth"
	"github.com/cqlgate/cqlgate/pkg/backend"
	"github.com/cqlgate/cqlgate/pkg/config"
	"github.com/cqlgate/cqlgate/pkg/frame"
)

// identity is who a client connection logged in as, and what that role's
// requests are counted under.
type identity struct {
	// name is the role the client logged in as; "" without a login. Set
	// during the handshake, before any request is read.
	name string
	// role is the role its pools log in as; nil runs it as the proxy's
	// own user. Atomic: roleRefused reads it from another goroutine.
	role atomic.Pointer[backend.Role]
	// requests and rejected are the role's series; nil without a login.
	requests, rejected prometheus.Counter
}

// overloaded counts a request of the client's role answered OVERLOADED by
// the proxy.
func (id *identity) overloaded() {
	if id.rejected != nil {
		id.rejected.Inc()
	}
}

// poolFor returns the pool the client's requests for version and keyspace
// go to: its role's, or the proxy's own.
func (c *client) poolFor(ctx context.Context, version byte, keyspace string) (*backend.Pool, error) {
	return c.p.cluster.PoolAs(ctx, c.who.role.Load(), version, keyspace)
}

// becomeRole runs after Cassandra accepted a client's login: it notes the
// role for the limiter and the metrics and, with --passthrough-identity
// role, takes the role (opening its pool if it has none) so that the
// client's requests run as it; role is the role acquired already, by the
// login that opened its pool, nil if none was. It returns the ERROR to
// answer the AUTH_RESPONSE with when that fails, nil on success: a client
// never runs as the proxy's user because its role could not be had.
func (c *client) becomeRole(version byte, stream int16, token []byte, role *backend.Role) []byte {
	user, pass, _ := auth.ParsePlain(token) // Login parsed it already
	c.who.name = user
	c.who.requests, c.who.rejected = c.p.roleSeries.counters(user)
	if c.p.cfg.PassthroughIdentity != config.IdentityRole {
		return nil
	}
	if role == nil {
		var err error
		if role, err = c.p.cluster.AcquireRole(user, pass); err != nil {
			c.log.Warn("client login refused", zap.String("role", user), zap.Error(err))
			return frame.AppendError(nil, version, stream, frame.ErrCodeBadCredentials, "cqlgate: "+err.Error())
		}
	}
	if _, err := c.p.cluster.PoolAs(c.p.ctx, role, version, ""); err != nil {
		role.Release()
		var se *backend.ServerError
		if errors.As(err, &se) {
			// Cassandra refused the role's pool its login (the password
			// changed since a cached check): its very answer.
			return frame.AppendError(nil, version, stream, se.Code, se.Message)
		}
		c.log.Warn("cannot open the role's pool", zap.String("role", user), zap.Error(err))
		return frame.AppendError(nil, version, stream, frame.ErrCodeBadCredentials,
			"Unable to perform authentication: cqlgate could not connect to Cassandra as this role")
	}
	// Under c.mu, which close takes before it lets go of the role: a
	// connection closed meanwhile (drain) must not keep the role held.
	c.mu.Lock()
	closed := c.closed
	if !closed {
		c.who.role.Store(role)
	}
	c.mu.Unlock()
	if closed {
		role.Release()
	}
	return nil
}

// releaseRole gives back the client's role when the connection closes; the
// role's password is forgotten with its last client connection.
func (c *client) releaseRole() {
	if r := c.who.role.Swap(nil); r != nil {
		r.Release()
	}
}

// roleRefused closes the client connections of a role whose backend login
// Cassandra refused (password changed, role dropped): its pools are closed
// already, and the drivers, reconnecting, get Cassandra's answer at login,
// as on a direct connection.
func (p *Proxy) roleRefused(r *backend.Role, se *backend.ServerError) {
	var gone []*client
	p.mu.Lock()
	for c := range p.clients {
		if c.who.role.Load() == r {
			gone = append(gone, c)
		}
	}
	p.mu.Unlock()
	p.log.Warn("closing the client connections of a role Cassandra no longer accepts",
		zap.String("role", r.Name()), zap.Int("connections", len(gone)), zap.String("error", se.Message))
	err := fmt.Errorf("role %q: %w", r.Name(), se)
	for _, c := range gone {
		go c.closeAfterAnswers(err)
	}
}

// closeAfterAnswers closes the connection once the answers on their way to
// the client are written, within a second: the request whose new pool met
// the refusal is answered with Cassandra's error just after the pools
// close (its goroutine learns of it after the dialler that called
// roleRefused), and the client must get that answer before the connection
// ends.
func (c *client) closeAfterAnswers(err error) {
	time.Sleep(50 * time.Millisecond)
	for deadline := time.Now().Add(time.Second); c.inflight.Load() > 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	c.closeFlushed(err, time.Now().Add(time.Second))
}

// roleSeries hands out the per-role request and rejection counters. The
// first max roles seen get a series of their own, later ones share "other",
// so a churn of roles cannot grow /metrics without bound.
type roleSeries struct {
	max                int
	requests, rejected *prometheus.CounterVec

	mu    sync.Mutex
	named map[string]struct{}
}

// otherRoles is the role label of the roles beyond --max-role-series.
const otherRoles = "other"

func newRoleSeries(reg prometheus.Registerer, max int) *roleSeries {
	s := &roleSeries{
		max: max,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cqlgate_role_requests_total",
			Help: "Requests forwarded to Cassandra, by the role the client logged in as (--client-auth passthrough); roles beyond --max-role-series are counted as role=\"other\".",
		}, []string{"role"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cqlgate_role_overloaded_rejections_total",
			Help: "Requests the proxy answered OVERLOADED (limiter queue, --max-buffered-bytes, shutdown), by the role the client logged in as; roles beyond --max-role-series are counted as role=\"other\".",
		}, []string{"role"}),
		named: map[string]struct{}{},
	}
	reg.MustRegister(s.requests, s.rejected)
	return s
}

// counters returns role's series.
func (s *roleSeries) counters(role string) (requests, rejected prometheus.Counter) {
	label := otherRoles
	s.mu.Lock()
	if _, ok := s.named[role]; ok || len(s.named) < s.max {
		s.named[role] = struct{}{}
		label = role
	}
	s.mu.Unlock()
	return s.requests.WithLabelValues(label), s.rejected.WithLabelValues(label)
}
