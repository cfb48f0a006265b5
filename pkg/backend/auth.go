package backend

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"

	"github.com/cqlgate/cqlgate/pkg/frame"
	"github.com/cqlgate/cqlgate/pkg/tlsconfig"
)

var (
	// ErrAuthRequired is returned (wrapped) by Dial when a node answers
	// STARTUP with AUTHENTICATE and no credentials are configured.
	ErrAuthRequired = errors.New("node requires authentication but no credentials are configured: set backend_username and backend_password in the config file or $CQLGATE_BACKEND_USERNAME and $CQLGATE_BACKEND_PASSWORD")
	// ErrAuthNotRequired is returned (wrapped) by Dial with
	// DialConfig.RequireAuth, and so by CheckLogin, when a node accepts
	// STARTUP without asking for credentials.
	ErrAuthNotRequired = errors.New("node does not require authentication (its authenticator is AllowAllAuthenticator), so it cannot verify credentials")
)

// Credentials are a username and password for Cassandra's
// PasswordAuthenticator. Their String and GoString methods mask the
// password, so logging a config by accident does not leak it.
type Credentials struct {
	Username string
	Password string
}

func (c Credentials) String() string { return fmt.Sprintf("{%s ******}", c.Username) }

// GoString masks the password under %#v too.
func (c Credentials) GoString() string {
	return fmt.Sprintf("backend.Credentials{Username:%q, Password:\"******\"}", c.Username)
}

// startTLS runs the TLS handshake on nc when cfg.TLS is set and returns the
// connection to use from then on. On error it closes nc.
func startTLS(ctx context.Context, nc net.Conn, cfg DialConfig) (net.Conn, error) {
	if cfg.TLS == nil {
		return nc, nil
	}
	tc := tls.Client(nc, tlsconfig.ForAddr(cfg.TLS, cfg.Addr))
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, fmt.Errorf("tls handshake with %s: %w", cfg.Addr, err)
	}
	return tlsconfig.Conn{Conn: tc}, nil
}

// authenticate answers an AUTHENTICATE (whose body names the node's
// authenticator class) with a SASL PLAIN token, as every driver does for
// PasswordAuthenticator, and expects AUTH_SUCCESS. Wrong credentials come
// back as a *ServerError with code 0x0100 (Bad credentials).
func (c *Conn) authenticate(creds *Credentials, body []byte) error {
	class := authenticatorClass(body)
	if creds == nil {
		return fmt.Errorf("startup with %s (authenticator %s): %w", c.addr, class, ErrAuthRequired)
	}
	resp, err := c.roundTrip(appendAuthResponse(nil, c.version, 0, plainToken(creds.Username, creds.Password)))
	if err != nil {
		return fmt.Errorf("login to %s as %q: %w", c.addr, creds.Username, err)
	}
	switch op := frame.Opcode(resp); op {
	case frame.OpAuthSuccess:
		return nil
	case frame.OpAuthChallenge:
		return fmt.Errorf("login to %s: authenticator %s sent a SASL challenge; only PLAIN (PasswordAuthenticator) is supported", c.addr, class)
	default:
		return fmt.Errorf("login to %s: unexpected %s", c.addr, frame.OpcodeName(op))
	}
}

// authenticatorClass decodes AUTHENTICATE's [string] body, for messages.
func authenticatorClass(body []byte) string {
	if len(body) < 2 {
		return "unknown"
	}
	n := int(binary.BigEndian.Uint16(body))
	if len(body) < 2+n {
		return "unknown"
	}
	return string(body[2 : 2+n])
}

// plainToken is a SASL PLAIN initial response without an authorization
// identity: \0username\0password.
func plainToken(user, pass string) []byte {
	t := make([]byte, 0, 2+len(user)+len(pass))
	t = append(t, 0)
	t = append(t, user...)
	t = append(t, 0)
	return append(t, pass...)
}

// appendAuthResponse appends an AUTH_RESPONSE request whose body is the
// [bytes] token.
func appendAuthResponse(dst []byte, version byte, stream int16, token []byte) []byte {
	body := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(token)), uint32(len(token)))
	return frame.AppendFrame(dst, version, false, 0, stream, frame.OpAuthResponse, append(body, token...))
}

// CheckLogin reports whether Cassandra accepts username and password: it
// opens a connection to a node that is up, logs in with them and closes the
// connection. It returns nil on success; a *ServerError (code 0x0100, Bad
// credentials, with Cassandra's own message) when Cassandra refuses them;
// an error wrapping ErrAuthNotRequired when the node does not check
// credentials at all; any other error when no node could be asked. A node
// that cannot be reached is skipped for the next one, up to three.
//
// The connection uses the cluster's TLS settings and negotiated protocol
// version, and nothing else: no keyspace, no events.
func (cl *Cluster) CheckLogin(ctx context.Context, username, password string) error {
	cl.mu.Lock()
	nodes := cl.upNodesLocked()
	cl.mu.Unlock()
	c, _, err := cl.dialFirst(ctx, nodes, DialConfig{
		Version:     cl.Version(),
		Timeout:     cl.cfg.ConnectTimeout,
		MaxFrame:    cl.cfg.MaxFrame,
		TLS:         cl.cfg.TLS,
		Credentials: &Credentials{Username: username, Password: password},
		RequireAuth: true,
		Instance:    cl.cfg.Instance,
	})
	if err != nil {
		return err
	}
	c.Close()
	return nil
}
