package proxy

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"

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
	if rej := c.p.auth.LoginFrom(ctx, token, sourceHost(c.nc)); rej != nil {
		c.log.Debug("client login refused", zap.Error(rej))
		return frame.AppendError(nil, version, stream, rej.Code, rej.Message), false
	}
	if out := c.becomeRole(version, stream, token); out != nil {
		return out, false
	}
	return auth.AppendAuthSuccess(nil, version, stream), true
}
