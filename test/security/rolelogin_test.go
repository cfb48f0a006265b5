package security

import (
	"strings"
	"testing"
	"time"

	"github.com/cqlgate/cqlgate/internal/cassandratest"
	"github.com/cqlgate/cqlgate/pkg/config"
	"github.com/cqlgate/cqlgate/pkg/frame"
)

// TestRoleFirstLogin: a role's first login through the proxy is checked by
// the login of its pool's first connection, which stays in the pool. A
// wrong password gets Cassandra's answer and leaves no connection behind;
// once the role's pool is open, it never vouches for a new client's
// password, which is refused as directly, without harm to the role's
// clients.
func TestRoleFirstLogin(t *testing.T) {
	n := cassandratest.Require(t, node)
	const role = "first_login"
	rolesSetup(t, map[string][]string{role: {"SELECT ON KEYSPACE roles_ks1"}})
	p := startProxy(t, func(c *config.Config) {
		passthrough(c)
		c.LoginFailuresPerSecond = 0 // two wrong passwords in a row, answered as Cassandra does
	})
	admin := adminSession(t)
	// atNode counts the role's connections at the node.
	atNode := func() int {
		iter := admin.Query("SELECT username FROM system_views.clients").Iter()
		var user string
		count := 0
		for iter.Scan(&user) {
			if user == role {
				count++
			}
		}
		if err := iter.Close(); err != nil {
			t.Fatal(err)
		}
		return count
	}
	const sel = "SELECT v FROM roles_ks1.t WHERE k = 1"
	wrong := authResponse(frame.V4, "\x00"+role+"\x00not-the-password")
	direct := rawLogin(t, n.Addrs[0], frame.V4, wrong)
	if direct.Opcode != "ERROR" {
		t.Fatalf("direct login with a wrong password: %v", direct)
	}

	// First login, wrong password: Cassandra's answer, nothing kept.
	if a := rawLogin(t, p.Addr, frame.V4, wrong); a != direct {
		t.Errorf("first login with a wrong password: proxied %v, direct %v", a, direct)
	}
	time.Sleep(200 * time.Millisecond)
	if c := atNode(); c != 0 {
		t.Errorf("%d connections of %s at the node after a refused login, want 0", c, role)
	}

	// First login, right password: the connection that checked it serves.
	first, refused := rawSession(t, p.Addr, role, "pw-"+role)
	if first == nil {
		t.Fatalf("first login: %v", refused)
	}
	if a := first.query(sel); !strings.HasPrefix(a, "RESULT") {
		t.Fatalf("query after the first login: %s", a)
	}
	if c := atNode(); c != 1 {
		t.Errorf("%d connections of %s at the node, want 1 (its pool's, which checked the password)", c, role)
	}

	// The role's pool is open: a wrong password is still refused as
	// directly, and the role's client goes on.
	if a := rawLogin(t, p.Addr, frame.V4, wrong); a != direct {
		t.Errorf("wrong password with the role's pool open: proxied %v, direct %v", a, direct)
	}
	if a := first.query(sel); !strings.HasPrefix(a, "RESULT") {
		t.Errorf("the first client's query after another's refused login: %s", a)
	}
	second, refused := rawSession(t, p.Addr, role, "pw-"+role)
	if second == nil {
		t.Fatalf("second login with the right password: %v", refused)
	}
	if a := second.query(sel); !strings.HasPrefix(a, "RESULT") {
		t.Errorf("query of the second client: %s", a)
	}
	if c := atNode(); c != 1 {
		t.Errorf("%d connections of %s at the node with two clients, want 1 (one pool)", c, role)
	}
}
