package security

// Each client runs as its own Cassandra role (--client-auth passthrough,
// --passthrough-identity role): through the proxy a role gets exactly the
// answers and Unauthorized errors it gets on a direct connection, step by
// step, and many client connections of a role share a few backend
// connections logged in as it.

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocql/gocql"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cqlgate/cqlgate/internal/cassandratest"
	"github.com/cqlgate/cqlgate/internal/promtest"
	"github.com/cqlgate/cqlgate/pkg/frame"
)

// rolesSetup creates keyspaces roles_ks1 (table t, row 1) and roles_ks2 and
// the given roles, each with its password "pw-NAME" and its GRANTs, and
// waits until each can log in.
func rolesSetup(t *testing.T, grants map[string][]string) {
	t.Helper()
	n := cassandratest.Require(t, node)
	admin := adminSession(t)
	stmts := []string{
		"CREATE KEYSPACE IF NOT EXISTS roles_ks1 WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
		"CREATE KEYSPACE IF NOT EXISTS roles_ks2 WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
		// Recreated: a run on a proxy without roles may have altered it.
		"DROP TABLE IF EXISTS roles_ks1.t",
		"CREATE TABLE roles_ks1.t (k int PRIMARY KEY, v text)",
		"CREATE TABLE IF NOT EXISTS roles_ks2.t (k int PRIMARY KEY, v text)",
		// Created only when a role could write what it may not (a run on a
		// proxy without roles): the driver tests' DDL steps.
		"DROP TABLE IF EXISTS roles_ks1.ddl",
		"DROP TABLE IF EXISTS roles_ks1.ddl_py",
		"DROP TABLE IF EXISTS roles_ks1.ddl_java",
		"INSERT INTO roles_ks1.t (k, v) VALUES (1, 'one')",
		"INSERT INTO roles_ks2.t (k, v) VALUES (1, 'uno')",
	}
	for role, gs := range grants {
		stmts = append(stmts, "DROP ROLE IF EXISTS "+role,
			fmt.Sprintf("CREATE ROLE %s WITH PASSWORD = 'pw-%s' AND LOGIN = true", role, role))
		for _, g := range gs {
			stmts = append(stmts, fmt.Sprintf("GRANT %s TO %s", g, role))
		}
	}
	for _, q := range stmts {
		if err := admin.Query(q).Exec(); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for role := range grants {
		var got rawAnswer
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			if got = rawLogin(t, n.Addrs[0], frame.V4, authResponse(frame.V4, "\x00"+role+"\x00pw-"+role)); got.Opcode == "AUTH_SUCCESS" {
				break
			}
		}
		if got.Opcode != "AUTH_SUCCESS" {
			t.Fatalf("login as %s: %v", role, got)
		}
	}
}

func adminSession(t *testing.T) *gocql.Session {
	t.Helper()
	n := cassandratest.Require(t, node)
	s, err := session4(n.Addrs[0], func(cc *gocql.ClusterConfig) {
		cc.Authenticator = gocql.PasswordAuthenticator{Username: n.Username, Password: n.Password}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// rawConn is a hand-driven v4 connection logged in as a role: each
// request is one QUERY, so the test controls the opcode exactly.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	r  *frame.Reader
	w  *frame.Writer
}

// rawSession logs in to addr as user and returns the connection, or the
// answer that refused the login.
func rawSession(t *testing.T, addr, user, pass string) (*rawConn, rawAnswer) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	c := &rawConn{t: t, nc: nc, r: frame.NewReader(nc, 1<<24), w: frame.NewWriter(nc)}
	if a, _ := c.roundTrip(frame.AppendStartup(nil, frame.V4, 1, map[string]string{"CQL_VERSION": "3.0.0"})); a.Opcode != "AUTHENTICATE" {
		t.Fatalf("STARTUP: %v", a)
	}
	a, _ := c.roundTrip(authResponse(frame.V4, "\x00"+user+"\x00"+pass))
	if a.Opcode != "AUTH_SUCCESS" {
		return nil, a
	}
	return c, a
}

// roundTrip sends f and reads the answer; the answer's body is returned
// for RESULTs. A closed connection reads as opcode "EOF".
func (c *rawConn) roundTrip(f []byte) (rawAnswer, []byte) {
	c.t.Helper()
	_ = c.nc.SetDeadline(time.Now().Add(15 * time.Second))
	if err := c.w.WriteFrame(f); err != nil {
		return rawAnswer{Opcode: "EOF"}, nil
	}
	if err := c.w.Flush(); err != nil {
		return rawAnswer{Opcode: "EOF"}, nil
	}
	b, err := c.r.ReadFrame()
	if err != nil {
		return rawAnswer{Opcode: "EOF"}, nil
	}
	defer b.Release()
	a := rawAnswer{Opcode: frame.OpcodeName(frame.Opcode(b.B))}
	if frame.Opcode(b.B) == frame.OpError {
		a.Code, a.Message, _ = frame.ErrorCode(frame.Body(b.B))
	}
	return a, append([]byte(nil), frame.Body(b.B)...)
}

// query runs q as a QUERY and describes the outcome: the error, or the
// RESULT's body, which must match byte for byte.
func (c *rawConn) query(q string) string {
	c.t.Helper()
	a, body := c.roundTrip(frame.AppendQuery(nil, frame.V4, 1, q, 1, 0))
	if a.Opcode == "RESULT" {
		return fmt.Sprintf("RESULT %x", body)
	}
	return a.String()
}

// gocqlSteps runs the prepared and batched steps with gocql, which
// prepares every DML statement (PREPARE, then EXECUTE) and sends BATCH.
func gocqlSteps(t *testing.T, addr, user string, keyspace string) []string {
	t.Helper()
	s, err := session4(addr, func(cc *gocql.ClusterConfig) {
		cc.Authenticator = gocql.PasswordAuthenticator{Username: user, Password: "pw-" + user}
		cc.Keyspace = keyspace
		cc.RetryPolicy = &gocql.SimpleRetryPolicy{NumRetries: 0}
	})
	if err != nil {
		return []string{"session: " + withoutAddrs(err, addr)}
	}
	defer s.Close()
	out := func(step string, err error) string { return step + ": " + withoutAddrs(err, addr) }
	var v string
	steps := []string{
		out("prepared select ks1", s.Query("SELECT v FROM roles_ks1.t WHERE k = ?", 1).Scan(&v)) + " " + v,
		out("prepared select ks2", s.Query("SELECT v FROM roles_ks2.t WHERE k = ?", 1).Scan(&v)),
		out("prepared insert ks1", s.Query("INSERT INTO roles_ks1.t (k, v) VALUES (?, ?)", 2, "two").Exec()),
		out("prepared insert ks2", s.Query("INSERT INTO roles_ks2.t (k, v) VALUES (?, ?)", 2, "dos").Exec()),
	}
	b := s.NewBatch(gocql.LoggedBatch)
	b.Query("INSERT INTO roles_ks1.t (k, v) VALUES (?, ?)", 3, "three")
	b.Query("INSERT INTO roles_ks1.t (k, v) VALUES (?, ?)", 4, "four")
	steps = append(steps, out("batch ks1", s.ExecuteBatch(b)))
	if keyspace != "" {
		steps = append(steps,
			out("USEd select", s.Query("SELECT v FROM t WHERE k = ?", 1).Scan(&v))+" "+v,
			out("USEd insert", s.Query("INSERT INTO t (k, v) VALUES (?, ?)", 5, "five").Exec()))
	}
	return steps
}

// rawSteps runs the QUERY, USE and DDL steps.
func rawSteps(t *testing.T, addr, user string) []string {
	t.Helper()
	c, refused := rawSession(t, addr, user, "pw-"+user)
	if c == nil {
		return []string{"login: " + refused.String()}
	}
	var out []string
	for _, q := range []string{
		"SELECT v FROM roles_ks1.t WHERE k = 1",
		"SELECT v FROM roles_ks2.t WHERE k = 1",
		"INSERT INTO roles_ks1.t (k, v) VALUES (6, 'six')",
		"UPDATE roles_ks2.t SET v = 'seis' WHERE k = 6",
		"BEGIN BATCH INSERT INTO roles_ks1.t (k, v) VALUES (7, 'seven'); INSERT INTO roles_ks1.t (k, v) VALUES (8, 'eight') APPLY BATCH",
		"CREATE TABLE roles_ks1.ddl (k int PRIMARY KEY)",
		"ALTER TABLE roles_ks1.t ADD extra text",
		"TRUNCATE roles_ks2.t",
		"GRANT SELECT ON KEYSPACE roles_ks2 TO " + user,
		"USE roles_ks2",
		"SELECT v FROM t WHERE k = 1",
		"USE roles_ks1",
		"SELECT v FROM t WHERE k = 1",
		"DELETE FROM t WHERE k = 6",
	} {
		out = append(out, q+": "+c.query(q))
	}
	return out
}

// TestRolesAuthorizedAsThemselves: reader (SELECT on roles_ks1) and writer
// (SELECT and MODIFY on roles_ks1) get through the proxy exactly what they
// get directly, for QUERY, PREPARE/EXECUTE, BATCH, USE and DDL. Before
// roles, every request ran as the proxy's superuser: reader's INSERT
// succeeded through the proxy.
func TestRolesAuthorizedAsThemselves(t *testing.T) {
	n := cassandratest.Require(t, node)
	rolesSetup(t, map[string][]string{
		"reader": {"SELECT ON KEYSPACE roles_ks1"},
		"writer": {"SELECT ON KEYSPACE roles_ks1", "MODIFY ON KEYSPACE roles_ks1"},
	})
	p := startProxy(t, passthrough)
	admin := adminSession(t)
	for _, role := range []string{"reader", "writer"} {
		t.Run(role, func(t *testing.T) {
			compare := func(what string, direct, proxied []string) {
				t.Helper()
				if len(direct) != len(proxied) {
					t.Fatalf("%s: %d steps directly, %d through the proxy", what, len(direct), len(proxied))
				}
				for i := range direct {
					if direct[i] != proxied[i] {
						t.Errorf("%s step %d:\n  proxied %s\n  direct  %s", what, i, proxied[i], direct[i])
					} else {
						t.Logf("%s: %s", what, direct[i])
					}
				}
			}
			// Each run starts from the same rows: writer's steps change them.
			reset := func() {
				t.Helper()
				for _, q := range []string{"TRUNCATE roles_ks1.t", "INSERT INTO roles_ks1.t (k, v) VALUES (1, 'one')"} {
					if err := admin.Query(q).Exec(); err != nil {
						t.Fatal(err)
					}
				}
			}
			run := func(steps func(addr string) []string) (direct, proxied []string) {
				reset()
				direct = steps(n.Addrs[0])
				reset()
				return direct, steps(p.Addr)
			}
			d, pr := run(func(addr string) []string { return rawSteps(t, addr, role) })
			compare("QUERY", d, pr)
			d, pr = run(func(addr string) []string { return gocqlSteps(t, addr, role, "") })
			compare("gocql", d, pr)
			d, pr = run(func(addr string) []string { return gocqlSteps(t, addr, role, "roles_ks1") })
			compare("gocql USE", d, pr)
		})
	}
	if got := counter(t, p.Reg, "cqlgate_role_requests_total", "reader"); got < 10 {
		t.Errorf("cqlgate_role_requests_total{role=reader} = %v, want the reader's requests", got)
	}
}

// TestRoleRevoke: a REVOKE takes effect through the proxy as on a direct
// connection, within Cassandra's permissions_validity (2 s by default):
// the proxy caches no permission of its own.
func TestRoleRevoke(t *testing.T) {
	n := cassandratest.Require(t, node)
	rolesSetup(t, map[string][]string{"revokee": {"SELECT ON KEYSPACE roles_ks1", "MODIFY ON KEYSPACE roles_ks1"}})
	p := startProxy(t, passthrough)
	direct, _ := rawSession(t, n.Addrs[0], "revokee", "pw-revokee")
	proxied, _ := rawSession(t, p.Addr, "revokee", "pw-revokee")
	if direct == nil || proxied == nil {
		t.Fatal("login as revokee failed")
	}
	const ins = "INSERT INTO roles_ks1.t (k, v) VALUES (9, 'nine')"
	if d, pr := direct.query(ins), proxied.query(ins); d != pr || !strings.HasPrefix(d, "RESULT") {
		t.Fatalf("before REVOKE: direct %s, proxied %s", d, pr)
	}
	if err := adminSession(t).Query("REVOKE MODIFY ON KEYSPACE roles_ks1 FROM revokee").Exec(); err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	var directAt, proxiedAt time.Duration
	for time.Since(revoked) < 15*time.Second && (directAt == 0 || proxiedAt == 0) {
		if directAt == 0 && strings.Contains(direct.query(ins), "has no MODIFY permission") {
			directAt = time.Since(revoked)
		}
		if proxiedAt == 0 && strings.Contains(proxied.query(ins), "has no MODIFY permission") {
			proxiedAt = time.Since(revoked)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("REVOKE took effect after %v directly, %v through the proxy", directAt, proxiedAt)
	if directAt == 0 || proxiedAt == 0 {
		t.Fatalf("REVOKE not in effect after 15s: direct %v, proxied %v", directAt, proxiedAt)
	}
	if proxiedAt > directAt+time.Second {
		t.Errorf("through the proxy the REVOKE took %v, directly %v", proxiedAt, directAt)
	}
}

// TestRolePasswordChangeAndDrop: once Cassandra refuses a role's login
// (password changed, role dropped), the proxy closes that role's pools and
// client connections the next time one of its pools has to log in, and
// the clients get Cassandra's own error; logins with the old password are
// refused as directly, with the new one accepted.
func TestRolePasswordChangeAndDrop(t *testing.T) {
	n := cassandratest.Require(t, node)
	rolesSetup(t, map[string][]string{
		"pwchange": {"SELECT ON KEYSPACE roles_ks1"},
		"dropped":  {"SELECT ON KEYSPACE roles_ks1"},
	})
	p := startProxy(t, passthrough)
	admin := adminSession(t)
	const sel = "SELECT v FROM roles_ks1.t WHERE k = 1"
	for _, tc := range []struct{ role, change, newPass string }{
		{"pwchange", "ALTER ROLE pwchange WITH PASSWORD = 'pw-new'", "pw-new"},
		{"dropped", "DROP ROLE dropped", ""},
	} {
		t.Run(tc.role, func(t *testing.T) {
			direct, _ := rawSession(t, n.Addrs[0], tc.role, "pw-"+tc.role)
			proxied, _ := rawSession(t, p.Addr, tc.role, "pw-"+tc.role)
			other, _ := rawSession(t, p.Addr, tc.role, "pw-"+tc.role)
			if direct == nil || proxied == nil || other == nil {
				t.Fatal("login failed")
			}
			if err := admin.Query(tc.change).Exec(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2500 * time.Millisecond) // roles_validity, credentials_validity: 2 s
			// Connections open already stay logged in, at Cassandra as
			// through the proxy.
			d, pr := direct.query(sel), proxied.query(sel)
			t.Logf("existing connections after %q: direct %s, proxied %s", tc.change, d, pr)
			if d != pr {
				t.Errorf("existing connection: proxied %s, direct %s", pr, d)
			}
			// A new pool (USE of a keyspace the role has none for) must
			// log in: Cassandra refuses, the client gets its answer...
			wantLogin := rawLogin(t, n.Addrs[0], frame.V4, authResponse(frame.V4, "\x00"+tc.role+"\x00pw-"+tc.role))
			got := proxied.query("USE roles_ks1")
			if got != wantLogin.String() {
				t.Errorf("USE after %q: proxied %s, want Cassandra's %s", tc.change, got, wantLogin)
			}
			// ...and every client connection of the role is closed; until
			// it is, its requests get the same answer.
			for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				a := other.query(sel)
				if a == "EOF" {
					break
				}
				if a != wantLogin.String() || time.Now().After(deadline) {
					t.Errorf("another client connection of the role after the refusal: %s, want %s, then closed", a, wantLogin)
					break
				}
			}
			// Logins with the old password: refused as directly, even
			// though the proxy's login cache (1m) accepted them before.
			if a := rawLogin(t, p.Addr, frame.V4, authResponse(frame.V4, "\x00"+tc.role+"\x00pw-"+tc.role)); a != wantLogin {
				t.Errorf("login with the old password: proxied %v, direct %v", a, wantLogin)
			}
			if tc.newPass != "" {
				c, refused := rawSession(t, p.Addr, tc.role, tc.newPass)
				if c == nil {
					t.Fatalf("login with the new password: %v", refused)
				}
				if a := c.query(sel); !strings.HasPrefix(a, "RESULT") {
					t.Errorf("query with the new password: %s", a)
				}
			}
		})
	}
	if !strings.Contains(p.Logs.String(), "Cassandra refused a role's login") {
		t.Errorf("the log does not say why the role's connections closed:\n%s", p.Logs)
	}
	if strings.Contains(p.Logs.String(), "pw-") {
		t.Errorf("a password shows in the log:\n%s", p.Logs)
	}
}

// TestRolePoolsAreShared: many client connections of two roles use a few
// backend connections, logged in as each role, counted by the node itself
// (system_views.clients) and by the proxy (cqlgate_backend_connections).
func TestRolePoolsAreShared(t *testing.T) {
	n := cassandratest.Require(t, node)
	rolesSetup(t, map[string][]string{
		"many_a": {"SELECT ON KEYSPACE roles_ks1"},
		"many_b": {"SELECT ON KEYSPACE roles_ks1"},
	})
	p := startProxy(t, passthrough)
	// $CQLGATE_TEST_ROLE_SESSIONS raises it (500 takes about 20 s more).
	perRole := 50
	if v, err := strconv.Atoi(os.Getenv("CQLGATE_TEST_ROLE_SESSIONS")); err == nil && v > 0 {
		perRole = v
	}
	var mu sync.Mutex
	var sessions []*gocql.Session
	var wg sync.WaitGroup
	errs := make(chan error, 2*perRole+1)
	sem := make(chan struct{}, 16)
	for _, role := range []string{"many_a", "many_b"} {
		for i := 0; i < perRole; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				s, err := session4(p.Addr, func(cc *gocql.ClusterConfig) {
					cc.Authenticator = gocql.PasswordAuthenticator{Username: role, Password: "pw-" + role}
				})
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				sessions = append(sessions, s)
				mu.Unlock()
				var v string
				if err := s.Query("SELECT v FROM roles_ks1.t WHERE k = 1").Scan(&v); err != nil {
					errs <- err
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	defer func() {
		for _, s := range sessions {
			s.Close()
		}
	}()
	for err := range errs {
		t.Fatal(err)
	}
	clients := gauge(t, p.Reg, "cqlgate_client_connections", "")
	backend := gauge(t, p.Reg, "cqlgate_backend_connections", n.Addrs[0])
	byUser := map[string]int{}
	iter := adminSession(t).Query("SELECT username FROM system_views.clients").Iter()
	var user string
	for iter.Scan(&user) {
		byUser[user]++
	}
	if err := iter.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d sessions per role, %v client connections to the proxy; cqlgate_backend_connections{node} = %v; system_views.clients by username: %v",
		perRole, clients, backend, byUser)
	for _, role := range []string{"many_a", "many_b"} {
		if byUser[role] < 1 || byUser[role] > 2 {
			t.Errorf("%s has %d connections at the node, want 1 (one pool, one connection per node)", role, byUser[role])
		}
	}
	if backend > 6 {
		t.Errorf("the proxy holds %v pool connections to the node, want a handful", backend)
	}
}

// gauge returns the value of the gauge name with the given label value
// ("" for an unlabelled gauge).
func gauge(t testing.TB, reg prometheus.Gatherer, name, label string) float64 {
	t.Helper()
	return promtest.Get(t, reg, name, label)
}
