package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/cqlgate/cqlgate/pkg/auth"
	"github.com/cqlgate/cqlgate/pkg/backend"
	"github.com/cqlgate/cqlgate/pkg/config"
	"github.com/cqlgate/cqlgate/pkg/frame"
	"github.com/cqlgate/cqlgate/pkg/tlsconfig"
)

// backendSecurity returns the TLS configuration and credentials of the
// connections to Cassandra (each nil when not configured).
func backendSecurity(cfg config.Config) (*tls.Config, *backend.Credentials, error) {
	var creds *backend.Credentials
	if cfg.BackendUsername != "" {
		creds = &backend.Credentials{Username: cfg.BackendUsername, Password: cfg.BackendPassword}
	}
	if !cfg.BackendTLS {
		return nil, creds, nil
	}
	tc, err := tlsconfig.Client(tlsconfig.ClientFiles{
		CAFile:             cfg.BackendTLSCAFile,
		ServerName:         cfg.BackendTLSServerName,
		CertFile:           cfg.BackendTLSCertFile,
		KeyFile:            cfg.BackendTLSKeyFile,
		InsecureSkipVerify: cfg.BackendTLSInsecureSkipVerify,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("--backend-tls: %w", err)
	}
	return tc, creds, nil
}

// initClientSecurity sets up the client-facing TLS listener configuration
// and, with --client-auth passthrough, the login checker; p.cluster must be
// set.
func (p *Proxy) initClientSecurity(reg prometheus.Registerer) error {
	if p.cfg.TLSCertFile != "" {
		tc, err := tlsconfig.Server(tlsconfig.ServerFiles{
			CertFile:     p.cfg.TLSCertFile,
			KeyFile:      p.cfg.TLSKeyFile,
			ClientCAFile: p.cfg.TLSClientCAFile,
		})
		if err != nil {
			return fmt.Errorf("--tls-cert-file: %w", err)
		}
		p.serverTLS = tc
	}
	if p.cfg.ClientAuth == config.ClientAuthPassthrough {
		a, err := auth.NewPassthrough(auth.Config{
			Checker:           p.cluster,
			CacheTTL:          p.cfg.AuthCacheTTL,
			Timeout:           2 * p.cfg.ConnectTimeout,
			Log:               p.log.Named("auth"),
			FailuresPerSecond: p.cfg.LoginFailuresPerSecond,
			FailureBurst:      p.cfg.LoginFailureBurst,
		}, reg)
		if err != nil {
			return err
		}
		p.auth = a
	}
	return nil
}

// wrapTLS returns nc as a server-side TLS connection when the listener uses
// TLS; the handshake runs on the client's goroutine (startTLS).
func (p *Proxy) wrapTLS(nc net.Conn) net.Conn {
	if p.serverTLS == nil {
		return nc
	}
	return tlsconfig.Conn{Conn: tls.Server(nc, p.serverTLS)}
}

// startTLS runs the TLS handshake of a TLS client connection, within the
// connection's handshake deadline; for a plain connection it does nothing.
func (c *client) startTLS() error {
	tc, ok := c.nc.(tlsconfig.Conn)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithDeadline(c.p.ctx, c.handshakeDeadline)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		c.log.Debug("client TLS handshake failed", zap.Error(err))
		return fmt.Errorf("tls handshake: %w", err)
	}
	return nil
}

// login answers a client's AUTH_RESPONSE in passthrough mode: AUTH_SUCCESS
// when Cassandra accepts the credentials, otherwise the ERROR Cassandra
// gave. It reports whether the client is logged in.
func (c *client) login(version byte, stream int16, body []byte) ([]byte, bool) {
	token, err := auth.ParseAuthResponse(body)
	if err != nil {
		return frame.AppendError(nil, version, stream, frame.ErrCodeProtocol, "Invalid AUTH_RESPONSE message: "+err.Error()), false
	}
	ctx, cancel := context.WithDeadline(c.p.ctx, c.handshakeDeadline)
	defer cancel()
	var opened *roleOpen
	var check auth.CheckFunc
	src := sourceHost(c.nc)
	if c.p.cfg.PassthroughIdentity == config.IdentityRole {
		opened = &roleOpen{cl: c.p.cluster, version: version, spread: backend.LoginAllNodes}
		if c.p.auth.FailedRecently(src) {
			// A wrong password from this address again, maybe: one
			// check at Cassandra, not one per node.
			opened.spread = backend.LoginOneNode
		}
		check = opened.check
	}
	rej := c.p.auth.LoginVia(ctx, token, src, check)
	var role *backend.Role
	if opened != nil {
		role = opened.take()
	}
	if rej != nil {
		if role != nil {
			role.Release()
		}
		c.log.Debug("client login refused", zap.Error(rej))
		return frame.AppendError(nil, version, stream, rej.Code, rej.Message), false
	}
	if out := c.becomeRole(version, stream, token, role); out != nil {
		return out, false
	}
	return auth.AppendAuthSuccess(nil, version, stream), true
}

// roleOpen checks a client's password, with --passthrough-identity role,
// by the logins of its role's pool when the role has none yet
// (backend.Cluster.LoginRole), so that a role's first login waits for one
// login to Cassandra rather than a check and then the pool's; for a role
// in use already it checks it on a connection of its own, and an open pool
// never vouches for a password. spread is LoginOneNode when the client's
// address failed a login recently (auth.Passthrough.FailedRecently), so
// that a flood of wrong passwords costs Cassandra one check per attempt,
// not one per node.
type roleOpen struct {
	cl      *backend.Cluster
	version byte
	spread  backend.LoginNodes

	mu sync.Mutex
	// role is the role LoginRole acquired, until take; taken is set by
	// take: a check that ends after it (the client went away while the
	// check, shared with other logins, went on) lets go of its role.
	role  *backend.Role
	taken bool
}

func (o *roleOpen) check(ctx context.Context, user, pass string) error {
	r, err := o.cl.LoginRole(ctx, user, pass, o.version, o.spread)
	if errors.Is(err, backend.ErrRoleKnown) {
		return o.cl.CheckLogin(ctx, user, pass)
	}
	if err != nil {
		return err
	}
	o.mu.Lock()
	taken := o.taken
	if !taken {
		o.role = r
	}
	o.mu.Unlock()
	if taken {
		r.Release()
	}
	return nil
}

// take returns the role the check acquired, nil if it did not run or
// acquired none, and makes a check still running let go of its own.
func (o *roleOpen) take() *backend.Role {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.taken = true
	r := o.role
	o.role = nil
	return r
}
