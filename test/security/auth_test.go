package security

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/cqlgate/cqlgate/internal/cassandratest"
	"github.com/cqlgate/cqlgate/internal/proxytest"
	"github.com/cqlgate/cqlgate/pkg/backend"
	"github.com/cqlgate/cqlgate/pkg/config"
	"github.com/cqlgate/cqlgate/pkg/frame"
)

func passthrough(c *config.Config) { c.ClientAuth = config.ClientAuthPassthrough }

// TestPassthroughLoginAsCassandra logs in through the proxy with right,
// wrong and no credentials on v4 and v5 and expects exactly the outcome, and
// the error text, a direct connection to Cassandra gets.
func TestPassthroughLoginAsCassandra(t *testing.T) {
	n := cassandratest.Require(t, node)
	p := startProxy(t, passthrough)
	cases := []struct {
		name, user, pass string
		wantErr          string // "" for success
	}{
		{"right credentials", n.Username, n.Password, ""},
		{"wrong password", n.Username, "not-the-password", "Provided username cassandra and/or password are incorrect"},
		{"unknown user", "nobody", "x", "Provided username nobody and/or password are incorrect"},
		{"no credentials", "", "", `authentication required (using "org.apache.cassandra.auth.PasswordAuthenticator")`},
	}
	for _, d := range drivers {
		for _, tc := range cases {
			t.Run(d.name+"/"+tc.name, func(t *testing.T) {
				direct := d.connect(n.Addrs[0], tc.user, tc.pass, nil)
				proxied := d.connect(p.Addr, tc.user, tc.pass, nil)
				if tc.wantErr == "" {
					if direct != nil || proxied != nil {
						t.Fatalf("direct: %v; proxied: %v; want both to succeed", direct, proxied)
					}
					return
				}
				if proxied == nil || !strings.Contains(proxied.Error(), tc.wantErr) {
					t.Fatalf("proxied: got %v, want an error containing %q", proxied, tc.wantErr)
				}
				if got, want := withoutAddrs(proxied, p.Addr), withoutAddrs(direct, n.Addrs[0]); got != want {
					t.Errorf("proxied error\n  %s\nwant the direct one\n  %s", got, want)
				}
			})
		}
	}
}

// TestPassthroughAnswersLikeCassandra drives the login by hand and compares
// the proxy's answers with Cassandra's, message for message, including
// malformed SASL PLAIN tokens and a request sent before logging in.
func TestPassthroughAnswersLikeCassandra(t *testing.T) {
	n := cassandratest.Require(t, node)
	p := startProxy(t, func(c *config.Config) {
		passthrough(c)
		// Message for message like Cassandra, which has no limit on failed
		// logins (TestHandshakeFloodDoesNotLockOutClients tests the limit).
		c.LoginFailuresPerSecond = 0
	})
	cases := []struct {
		name string
		next func(v byte) []byte
	}{
		{"right", func(v byte) []byte { return authResponse(v, "\x00cassandra\x00cassandra") }},
		{"authzid", func(v byte) []byte { return authResponse(v, "someone\x00cassandra\x00cassandra") }},
		{"wrong password", func(v byte) []byte { return authResponse(v, "\x00cassandra\x00nope") }},
		{"no password", func(v byte) []byte { return authResponse(v, "\x00cassandra\x00") }},
		{"no separator", func(v byte) []byte { return authResponse(v, "cassandra") }},
		{"no user", func(v byte) []byte { return authResponse(v, "cassandra\x00cassandra") }},
		{"empty user", func(v byte) []byte { return authResponse(v, "\x00\x00cassandra") }},
		{"three NULs", func(v byte) []byte { return authResponse(v, "\x00\x00\x00cassandra") }},
		{"query first", func(v byte) []byte {
			return frame.AppendQuery(nil, v, 1, "SELECT release_version FROM system.local", 1, 0)
		}},
	}
	for _, v := range []byte{frame.V3, frame.V4, frame.V5} {
		for _, tc := range cases {
			t.Run(fmt.Sprintf("v%d/%s", v, tc.name), func(t *testing.T) {
				want := rawLogin(t, n.Addrs[0], v, tc.next(v))
				got := rawLogin(t, p.Addr, v, tc.next(v))
				if got != want {
					t.Errorf("proxy answered %v, Cassandra %v", got, want)
				}
			})
		}
	}
}

// TestAuthorizationIsTheProxyUsers shows what the README documents of
// --passthrough-identity proxy: a client logs in as itself, but its
// requests run as the proxy's backend user, so a role without any GRANT
// reads a table through the proxy that it cannot read directly.
func TestAuthorizationIsTheProxyUsers(t *testing.T) {
	n := cassandratest.Require(t, node)
	admin, err := session4(n.Addrs[0], func(cc *gocql.ClusterConfig) {
		cc.Authenticator = gocql.PasswordAuthenticator{Username: n.Username, Password: n.Password}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	for _, q := range []string{
		"CREATE ROLE IF NOT EXISTS sec_nogrants WITH PASSWORD = 'pw-nogrants' AND LOGIN = true",
		"CREATE KEYSPACE IF NOT EXISTS sec_ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
		"CREATE TABLE IF NOT EXISTS sec_ks.t (k int PRIMARY KEY, v text)",
		"INSERT INTO sec_ks.t (k, v) VALUES (1, 'one')",
	} {
		if err := admin.Query(q).Exec(); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	read := func(addr string) error {
		s, err := session4(addr, func(cc *gocql.ClusterConfig) {
			cc.Authenticator = gocql.PasswordAuthenticator{Username: "sec_nogrants", Password: "pw-nogrants"}
		})
		if err != nil {
			return err
		}
		defer s.Close()
		var v string
		return s.Query("SELECT v FROM sec_ks.t WHERE k = 1").Scan(&v)
	}
	// A role just created may take a moment to be usable for logins.
	var direct error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if direct = read(n.Addrs[0]); direct != nil && strings.Contains(direct.Error(), "has no SELECT permission") {
			break
		}
	}
	if direct == nil || !strings.Contains(direct.Error(), "has no SELECT permission") {
		t.Fatalf("direct read as sec_nogrants: %v, want Unauthorized", direct)
	}
	p := startProxy(t, func(c *config.Config) {
		passthrough(c)
		c.PassthroughIdentity = config.IdentityProxy
	})
	if err := read(p.Addr); err != nil {
		t.Fatalf("read through the proxy as sec_nogrants: %v, want it to run as the proxy's user", err)
	}
}

// TestAuthCache logs in twice with the same credentials: within the TTL the
// second login does not reach Cassandra; with caching off it does.
func TestAuthCache(t *testing.T) {
	n := cassandratest.Require(t, node)
	for _, tc := range []struct {
		name string
		ttl  time.Duration
	}{{"ttl 1m", time.Minute}, {"ttl 0", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			p := startProxy(t, func(c *config.Config) {
				passthrough(c)
				c.AuthCacheTTL = tc.ttl
			})
			login := func() {
				t.Helper()
				if err := drivers[0].connect(p.Addr, n.Username, n.Password, nil); err != nil {
					t.Fatal(err)
				}
			}
			checks := func() float64 {
				return counter(t, p.Reg, "cqlgate_auth_verifications_total", "success")
			}
			login()
			first := checks()
			if first < 1 {
				t.Fatalf("verifications after the first login: %v, want at least 1", first)
			}
			login()
			second := checks()
			hits := counter(t, p.Reg, "cqlgate_auth_cache_hits_total", "")
			if tc.ttl > 0 && (second != first || hits < 1) {
				t.Errorf("second login within the TTL: verifications %v -> %v, cache hits %v; want no new verification", first, second, hits)
			}
			if tc.ttl == 0 && (second <= first || hits != 0) {
				t.Errorf("second login with caching off: verifications %v -> %v, cache hits %v; want a new verification", first, second, hits)
			}
			if bad := counter(t, p.Reg, "cqlgate_auth_logins_total", "bad_credentials"); bad != 0 {
				t.Errorf("bad_credentials logins = %v, want 0", bad)
			}
		})
	}
}

// TestBackendAuth: the proxy logs in with its own credentials; wrong ones
// and missing ones stop it with a clear error that never shows the
// password.
func TestBackendAuth(t *testing.T) {
	n := cassandratest.Require(t, node)
	t.Run("right", func(t *testing.T) {
		p := startProxy(t, nil)
		if err := drivers[0].connect(p.Addr, "", "", nil); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("wrong password", func(t *testing.T) {
		const secret = "wrong-secret-4711"
		logs, err := proxyRunError(t, func(c *config.Config) {
			c.BackendUsername, c.BackendPassword = n.Username, secret
		})
		var se *backend.ServerError
		if !errors.As(err, &se) || se.Code != frame.ErrCodeBadCredentials ||
			!strings.Contains(err.Error(), "Provided username cassandra and/or password are incorrect") {
			t.Errorf("Run: %v, want Cassandra's Bad credentials error", err)
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(logs, secret) {
			t.Errorf("the password shows in the error or the log:\n%v\n%s", err, logs)
		}
	})
	t.Run("no credentials", func(t *testing.T) {
		_, err := proxyRunError(t, func(c *config.Config) {})
		if !errors.Is(err, backend.ErrAuthRequired) || !strings.Contains(err.Error(), "CQLGATE_BACKEND_PASSWORD") ||
			!strings.Contains(err.Error(), "org.apache.cassandra.auth.PasswordAuthenticator") {
			t.Errorf("Run: %v, want ErrAuthRequired naming the authenticator and the settings", err)
		}
	})
}

// TestPassthroughRefusesWhenNothingChecksCredentials: a Cassandra with
// AllowAllAuthenticator cannot vouch for credentials, so passthrough refuses
// every login rather than let anyone in. A proxy with --client-auth none
// stands in for such a node: it answers STARTUP with READY.
func TestPassthroughRefusesWhenNothingChecksCredentials(t *testing.T) {
	n := cassandratest.Require(t, node)
	open := startProxy(t, nil)
	p := proxytest.Start(t, []string{open.Addr}, func(c *config.Config) {
		passthrough(c)
		c.BackendUsername, c.BackendPassword = "unused", "unused"
	})
	err := drivers[0].connect(p.Addr, n.Username, n.Password, nil)
	if err == nil || !strings.Contains(err.Error(), "Unable to perform authentication") {
		t.Fatalf("login through a proxy whose backend checks nothing: %v, want it refused", err)
	}
	if got := counter(t, p.Reg, "cqlgate_auth_logins_total", "error"); got < 1 {
		t.Errorf("error logins = %v, want at least 1", got)
	}
	if !strings.Contains(p.Logs.String(), "does not require authentication") {
		t.Errorf("the log does not say why:\n%s", p.Logs)
	}
}
