package security

import (
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cqlgate/cqlgate/internal/cassandratest"
	"github.com/cqlgate/cqlgate/pkg/config"
	"github.com/cqlgate/cqlgate/pkg/frame"
)

// tlsListener serves clients over TLS with the proxy's certificate.
func tlsListener(c *config.Config) {
	c.TLSCertFile, c.TLSKeyFile = certs.file("proxy.pem"), certs.file("proxy.key")
}

func mustClientTLS(t *testing.T, ca, serverName, cert string) *tls.Config {
	t.Helper()
	tc, err := certs.clientTLS(ca, serverName, cert)
	if err != nil {
		t.Fatal(err)
	}
	return tc
}

// handshake dials addr with TLS and exchanges OPTIONS/SUPPORTED, so that a
// refusal the server only sends after the handshake (TLS 1.3 client
// certificates) surfaces too.
func handshake(addr string, tc *tls.Config) error {
	conn, err := tls.Dial("tcp", addr, tc)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	w, r := frame.NewWriter(conn), frame.NewReader(conn, 1<<20)
	if err := w.WriteFrame(frame.AppendOptions(nil, frame.V4, 0)); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	b, err := r.ReadFrame()
	if err != nil {
		return err
	}
	defer b.Release()
	if op := frame.Opcode(b.B); op != frame.OpSupported {
		return errors.New("OPTIONS answered with " + frame.OpcodeName(op))
	}
	return nil
}

// TestClientTLS: drivers reach the proxy over TLS on v4 and v5, together
// with a passthrough login; clients that do not trust its certificate, or
// expect another name, or speak plain CQL, do not get through.
func TestClientTLS(t *testing.T) {
	n := cassandratest.Require(t, node)
	p := startProxy(t, func(c *config.Config) {
		tlsListener(c)
		passthrough(c)
	})
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			if err := d.connect(p.Addr, n.Username, n.Password, mustClientTLS(t, "ca.pem", "proxy.test", "")); err != nil {
				t.Fatalf("TLS session: %v", err)
			}
			// The certificate's IP SAN is checked when no name is given.
			if err := d.connect(p.Addr, n.Username, n.Password, mustClientTLS(t, "ca.pem", "", "")); err != nil {
				t.Fatalf("TLS session verifying the IP address: %v", err)
			}
		})
	}
	for _, tc := range []struct {
		name string
		cfg  *tls.Config
		want string
	}{
		{"untrusted certificate", mustClientTLS(t, "rogue-ca.pem", "proxy.test", ""), "certificate signed by unknown authority"},
		{"wrong server name", mustClientTLS(t, "ca.pem", "other.test", ""), "certificate is valid for proxy.test, not other.test"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := handshake(p.Addr, tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	t.Run("plain client", func(t *testing.T) {
		if err := drivers[0].connect(p.Addr, n.Username, n.Password, nil); err == nil {
			t.Fatal("a plain CQL session got through a TLS listener")
		}
	})
}

// TestClientMutualTLS: with a client CA, only clients presenting a
// certificate it signed get in.
func TestClientMutualTLS(t *testing.T) {
	p := startProxy(t, func(c *config.Config) {
		tlsListener(c)
		c.TLSClientCAFile = certs.file("ca.pem")
	})
	for _, d := range drivers {
		t.Run(d.name+"/with client certificate", func(t *testing.T) {
			if err := d.connect(p.Addr, "", "", mustClientTLS(t, "ca.pem", "proxy.test", "client")); err != nil {
				t.Fatal(err)
			}
		})
	}
	for _, tc := range []struct {
		name string
		cfg  *tls.Config
		want string
	}{
		// TLS 1.3: the server checks the client's certificate after the
		// client's handshake completed, and its alert may lose the race
		// with our first write.
		{"no client certificate", mustClientTLS(t, "ca.pem", "proxy.test", ""), "certificate required|connection reset by peer"},
		{"client certificate of another CA", mustClientTLS(t, "ca.pem", "proxy.test", "rogue"), "unknown certificate authority|connection reset by peer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := handshake(p.Addr, tc.cfg); err == nil || !containsAny(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// backendTLS connects to the node over TLS, trusting ca.pem and presenting
// the client certificate the node requires.
func backendTLS(c *config.Config) {
	c.BackendTLS = true
	c.BackendTLSCAFile = certs.file("ca.pem")
	c.BackendTLSCertFile, c.BackendTLSKeyFile = certs.file("client.pem"), certs.file("client.key")
}

// TestBackendTLS: the proxy reaches a Cassandra with client encryption over
// TLS (the node confirms it in system_views.clients), and refuses a node it
// cannot authenticate.
func TestBackendTLS(t *testing.T) {
	n := cassandratest.Require(t, node)
	for _, tc := range []struct {
		name string
		mod  func(*config.Config)
	}{
		{"node checked by IP address", backendTLS},
		{"node checked by name", func(c *config.Config) {
			backendTLS(c)
			c.BackendTLSServerName = "cassandra.test"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startProxy(t, tc.mod)
			s, err := session4(p.Addr, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			// Every connection of the proxy's user is the proxy's: all
			// must be encrypted.
			iter := s.Query("SELECT username, ssl_enabled, ssl_protocol FROM system_views.clients").Iter()
			var user, proto string
			var ssl bool
			encrypted := 0
			for iter.Scan(&user, &ssl, &proto) {
				if user != n.Username {
					continue
				}
				if !ssl {
					t.Errorf("a connection of %s is not encrypted", user)
				}
				encrypted++
			}
			if err := iter.Close(); err != nil {
				t.Fatal(err)
			}
			if encrypted < 2 { // the control connection and a pool's
				t.Errorf("%d encrypted connections of the proxy's user, want at least 2", encrypted)
			}
		})
	}
	for _, tc := range []struct {
		name string
		mod  func(*config.Config)
		want string
	}{
		{"wrong CA", func(c *config.Config) {
			backendTLS(c)
			c.BackendTLSCAFile = certs.file("rogue-ca.pem")
		}, "certificate signed by unknown authority"},
		{"wrong server name", func(c *config.Config) {
			backendTLS(c)
			c.BackendTLSServerName = "wrong.test"
		}, "certificate is valid for cassandra.test, not wrong.test"},
		{"no client certificate", func(c *config.Config) {
			backendTLS(c)
			c.BackendTLSCertFile, c.BackendTLSKeyFile = "", ""
		}, "certificate required|connection reset by peer"}, // TLS 1.3: the node checks after the handshake
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := proxyRunError(t, func(c *config.Config) {
				c.BackendUsername, c.BackendPassword = n.Username, n.Password
				tc.mod(c)
			})
			if !containsAny(err.Error(), tc.want) {
				t.Fatalf("Run: %v, want an error containing %q", err, tc.want)
			}
			t.Logf("Run: %v", err)
		})
	}
}

// TestTLSEverywhere combines TLS on both sides with a passthrough login on
// v4 and v5.
func TestTLSEverywhere(t *testing.T) {
	n := cassandratest.Require(t, node)
	p := startProxy(t, func(c *config.Config) {
		tlsListener(c)
		passthrough(c)
		backendTLS(c)
	})
	for _, d := range drivers {
		if err := d.connect(p.Addr, n.Username, n.Password, mustClientTLS(t, "ca.pem", "proxy.test", "")); err != nil {
			t.Errorf("%s: %v", d.name, err)
		}
		if err := d.connect(p.Addr, n.Username, "wrong", mustClientTLS(t, "ca.pem", "proxy.test", "")); err == nil ||
			!strings.Contains(err.Error(), "Provided username cassandra and/or password are incorrect") {
			t.Errorf("%s with a wrong password: %v", d.name, err)
		}
	}
}

// containsAny reports whether s contains one of the |-separated substrings
// of alternatives.
func containsAny(s, alternatives string) bool {
	for _, a := range strings.Split(alternatives, "|") {
		if strings.Contains(s, a) {
			return true
		}
	}
	return false
}
