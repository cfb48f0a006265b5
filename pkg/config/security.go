package config

import (
	"net"
	"net/netip"
	"os"
	"reflect"
	"strings"
)

// Client authentication modes (--client-auth).
const (
	ClientAuthNone        = "none"
	ClientAuthPassthrough = "passthrough"
)

// Identities a passthrough client's requests run as (--passthrough-identity).
const (
	// IdentityRole runs them as the client's own role.
	IdentityRole = "role"
	// IdentityProxy runs them as --backend-username.
	IdentityProxy = "proxy"
)

// validateSecurity checks the authentication and TLS settings and
// lower-cases ClientAuth.
func (c *Config) validateSecurity(p *problems) {
	c.ClientAuth = strings.ToLower(c.ClientAuth)
	switch c.ClientAuth {
	case ClientAuthNone:
		// Without client authentication whoever reaches the proxy acts as
		// its backend user: only processes on this host may.
		for _, a := range c.Listen {
			if host, _, err := net.SplitHostPort(a); err == nil && !isLoopback(host) {
				p.add("ClientAuth", "none is only allowed when every --listen address is loopback, and %s is not: anyone who reaches it would use Cassandra as the proxy's user; use --client-auth passthrough", a)
				break
			}
		}
	case ClientAuthPassthrough:
		if c.BackendUsername == "" {
			p.add("ClientAuth", "passthrough needs the proxy's own login, for its control connection (and the clients' requests with --passthrough-identity proxy): set backend_username and backend_password in the config file or $CQLGATE_BACKEND_USERNAME and $CQLGATE_BACKEND_PASSWORD")
		}
	default:
		p.add("ClientAuth", "must be none or passthrough, got %q", c.ClientAuth)
	}
	c.PassthroughIdentity = strings.ToLower(c.PassthroughIdentity)
	if c.PassthroughIdentity != IdentityRole && c.PassthroughIdentity != IdentityProxy {
		p.add("PassthroughIdentity", "must be role or proxy, got %q", c.PassthroughIdentity)
	}
	if c.AuthCacheTTL < 0 {
		p.add("AuthCacheTTL", "must not be negative (0 disables the cache), got %v", c.AuthCacheTTL)
	}
	if (c.BackendUsername == "") != (c.BackendPassword == "") {
		if c.BackendUsername == "" {
			p.add("BackendUsername", "required when a backend password is set")
		} else {
			p.add("BackendPassword", "required with --backend-username (set it in the config file or $CQLGATE_BACKEND_PASSWORD)")
		}
	}

	p.pair("TLSCertFile", c.TLSCertFile, "TLSKeyFile", c.TLSKeyFile)
	if c.TLSClientCAFile != "" && c.TLSCertFile == "" {
		p.add("TLSClientCAFile", "needs --tls-cert-file and --tls-key-file: mutual TLS is TLS")
	}
	p.pair("BackendTLSCertFile", c.BackendTLSCertFile, "BackendTLSKeyFile", c.BackendTLSKeyFile)
	if !c.BackendTLS {
		for _, name := range []string{"BackendTLSCAFile", "BackendTLSServerName", "BackendTLSCertFile", "BackendTLSKeyFile"} {
			if v := p.fieldValue(c, name); v != "" {
				p.add(name, "has no effect without --backend-tls")
			}
		}
		if c.BackendTLSInsecureSkipVerify {
			p.add("BackendTLSInsecureSkipVerify", "has no effect without --backend-tls")
		}
	} else if c.BackendTLSInsecureSkipVerify && (c.BackendTLSCAFile != "" || c.BackendTLSServerName != "") {
		p.add("BackendTLSInsecureSkipVerify", "conflicts with --backend-tls-ca-file and --backend-tls-server-name, which it would ignore")
	}
	for _, name := range []string{"TLSCertFile", "TLSKeyFile", "TLSClientCAFile", "BackendTLSCAFile", "BackendTLSCertFile", "BackendTLSKeyFile"} {
		if f := p.fieldValue(c, name); f != "" {
			if _, err := os.Stat(f); err != nil {
				p.add(name, "%v", err)
			}
		}
	}
}

// pair reports a file given without its companion (certificate and key).
func (p *problems) pair(a, av, b, bv string) {
	switch {
	case av != "" && bv == "":
		p.add(b, "required with --%s", p.s.fields[p.s.byName[a]].Flag)
	case av == "" && bv != "":
		p.add(a, "required with --%s", p.s.fields[p.s.byName[b]].Flag)
	}
}

// fieldValue returns the value of c's string field name.
func (p *problems) fieldValue(c *Config, name string) string {
	return reflect.ValueOf(c).Elem().Field(p.s.fields[p.s.byName[name]].index).String()
}

// isLoopback reports whether a listen host only accepts connections from
// this host: a loopback IP address or "localhost".
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	return err == nil && ip.Unmap().IsLoopback()
}
