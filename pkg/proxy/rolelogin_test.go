package proxy_test

import (
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/cqlgate/cqlgate/internal/fakenode"
	"github.com/cqlgate/cqlgate/internal/proxytest"
	"github.com/cqlgate/cqlgate/pkg/config"
	"github.com/cqlgate/cqlgate/pkg/frame"
)

// authLogin logs in to addr as user with pass (protocol v4) and returns
// the answer to the AUTH_RESPONSE: its opcode and, for an ERROR, its code
// and message.
func authLogin(t *testing.T, addr, user, pass string) (op byte, code int32, msg string) {
	t.Helper()
	c := dialRawAuth(t, addr)
	token := "\x00" + user + "\x00" + pass
	body := binary.BigEndian.AppendUint32(nil, uint32(len(token)))
	resp := c.roundTrip(frame.AppendFrame(nil, frame.V4, false, 0, 1, frame.OpAuthResponse, append(body, token...)))
	op = frame.Opcode(resp)
	if op == frame.OpError {
		code, msg, _ = frame.ErrorCode(frame.Body(resp))
	}
	return op, code, msg
}

// dialRawAuth connects to addr and sends STARTUP, which must be answered
// with AUTHENTICATE.
func dialRawAuth(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	c := &rawConn{tb: t, version: frame.V4, nc: nc, rd: frame.NewReader(nc, 1<<20), w: frame.NewWriter(nc)}
	if resp := c.roundTrip(frame.AppendStartup(nil, frame.V4, 0, map[string]string{"CQL_VERSION": "3.0.0"})); frame.Opcode(resp) != frame.OpAuthenticate {
		t.Fatalf("STARTUP: %s, want AUTHENTICATE", describe(resp))
	}
	return c
}

// logins is how many AUTH_RESPONSEs the nodes of cl were sent.
func logins(cl *fakenode.Cluster) int {
	n := 0
	for _, node := range cl.Nodes {
		n += node.Requests(frame.OpAuthResponse)
	}
	return n
}

// settledLogins waits until the logins the nodes of cl were sent stop
// growing for 300 ms and returns their number.
func settledLogins(t *testing.T, cl *fakenode.Cluster) int {
	t.Helper()
	n := logins(cl)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		time.Sleep(300 * time.Millisecond)
		m := logins(cl)
		if m == n {
			return n
		}
		n = m
	}
	t.Fatalf("logins still growing after 10 s (%d)", n)
	return n
}

// loginsAfter waits until the nodes of cl were sent at least want logins
// (at most 10 s), then 300 ms more for any beyond, and returns how many
// they were sent.
func loginsAfter(t *testing.T, cl *fakenode.Cluster, want int) int {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); logins(cl) < want && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	return logins(cl)
}

// TestRoleFirstLoginIsThePoolsLogin: with --passthrough-identity role, a
// role's first login is checked by the logins of its pool's connections,
// which stay in the pool: Cassandra sees one login per connection the role
// keeps (3 nodes, one connection each), not a check of its own on top. A
// wrong password opens nothing; from an address without a recent failure
// it may cost one login per node (they go out at once), and once the
// address has failed, one login, as on a direct connection. A role whose
// pool is open does not vouch for a new client's password, which is
// checked on its own.
func TestRoleFirstLoginIsThePoolsLogin(t *testing.T) {
	cl := fakenode.StartCluster(t, 3, fakenode.Config{Passwords: map[string]string{
		"cassandra": "cassandra", "alice": "pw", "bob": "pw",
	}})
	p := proxytest.Start(t, cl.Addrs()[:1], func(c *config.Config) {
		c.BackendUsername, c.BackendPassword = "cassandra", "cassandra"
		c.ClientAuth = config.ClientAuthPassthrough
		c.PassthroughIdentity = config.IdentityRole
		c.ConnectionsPerNode = 1
	})
	// A client's STARTUP opens the proxy's own pool for its version;
	// that is not what is counted here.
	dialRawAuth(t, p.Addr)
	base := settledLogins(t, cl)
	conns := func() int {
		n := 0
		for _, node := range cl.Nodes {
			n += node.OpenConnections()
		}
		return n
	}
	baseConns := conns()

	// A first login with a wrong password from an address that has not
	// failed yet: at most one login per node, Cassandra's answer, and no
	// pool left behind. Then the address has failed: the next wrong
	// password costs one login.
	for i, most := range []int{len(cl.Nodes), 1} {
		if op, code, msg := authLogin(t, p.Addr, "bob", "wrong"); op != frame.OpError || code != frame.ErrCodeBadCredentials ||
			msg != "Provided username bob and/or password are incorrect" {
			t.Fatalf("bob with a wrong password (%d): %s 0x%04x %q, want Cassandra's Bad credentials", i, frame.OpcodeName(op), code, msg)
		}
		if got := loginsAfter(t, cl, base+1) - base; got < 1 || got > most {
			t.Errorf("wrong password %d cost %d logins to Cassandra, want 1 to %d", i, got, most)
		}
		eventually(t, "the refused login's connections closed", func() bool { return conns() == baseConns })
		base = logins(cl)
	}

	// alice's first login: one login per node, the first being the check.
	if op, _, msg := authLogin(t, p.Addr, "alice", "pw"); op != frame.OpAuthSuccess {
		t.Fatalf("alice: %s %q, want AUTH_SUCCESS", frame.OpcodeName(op), msg)
	}
	if got := loginsAfter(t, cl, base+len(cl.Nodes)) - base; got != len(cl.Nodes) {
		t.Errorf("alice's first login cost %d logins to Cassandra, want %d: one per connection of her pool", got, len(cl.Nodes))
	}
	if got := conns() - baseConns; got != len(cl.Nodes) {
		t.Errorf("alice's pool has %d connections, want %d", got, len(cl.Nodes))
	}
	base = logins(cl)

	// alice's pool is open: a wrong password is still checked, and refused.
	if op, code, msg := authLogin(t, p.Addr, "alice", "wrong"); op != frame.OpError || code != frame.ErrCodeBadCredentials ||
		msg != "Provided username alice and/or password are incorrect" {
		t.Fatalf("alice with a wrong password: %s 0x%04x %q, want Cassandra's Bad credentials", frame.OpcodeName(op), code, msg)
	}
	if got := loginsAfter(t, cl, base+1) - base; got != 1 {
		t.Errorf("a wrong password of a role in use cost %d logins to Cassandra, want 1 (its own check)", got)
	}
	// The refusal left alice's pool alone, and her right password works.
	if got := conns() - baseConns; got != len(cl.Nodes) {
		t.Errorf("alice's pool has %d connections after a refused login, want %d", got, len(cl.Nodes))
	}
	if op, _, msg := authLogin(t, p.Addr, "alice", "pw"); op != frame.OpAuthSuccess {
		t.Fatalf("alice again: %s %q, want AUTH_SUCCESS", frame.OpcodeName(op), msg)
	}
}

// eventually polls cond until it holds, failing the test after 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10 s: %s", what)
		}
	}
}

// TestRoleFirstLoginAtOnce: a role's first login through the proxy, from
// an address without a failed login, logs in to the 3 nodes at once: every
// node has its AUTH_RESPONSE before any of them answers (each answer waits
// until all three arrived, at most 3 s), so the role's pool is complete
// after about one handshake, as a driver's pool opened in parallel. The
// client is answered, and the pool has one connection per node, opened by
// those three logins and no others.
func TestRoleFirstLoginAtOnce(t *testing.T) {
	cl := fakenode.StartCluster(t, 3, fakenode.Config{Passwords: map[string]string{
		"cassandra": "cassandra", "alice": "pw",
	}})
	p := proxytest.Start(t, cl.Addrs()[:1], func(c *config.Config) {
		c.BackendUsername, c.BackendPassword = "cassandra", "cassandra"
		c.ClientAuth = config.ClientAuthPassthrough
		c.PassthroughIdentity = config.IdentityRole
		c.ConnectionsPerNode = 1
	})
	client := dialRawAuth(t, p.Addr) // opens the proxy's own pool
	base := settledLogins(t, cl)
	var mu sync.Mutex
	arrived, firstRelease := 0, 0
	nodes := map[*fakenode.Node]int{}
	all := make(chan struct{})
	cl.SetHook(func(n *fakenode.Node, r fakenode.Request) fakenode.Action {
		if r.Opcode != frame.OpAuthResponse {
			return fakenode.Action{}
		}
		mu.Lock()
		nodes[n]++
		arrived++
		if arrived == 3 {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
		case <-time.After(3 * time.Second):
		}
		mu.Lock()
		if firstRelease == 0 {
			firstRelease = arrived
		}
		mu.Unlock()
		return fakenode.Action{}
	})
	token := "\x00alice\x00pw"
	body := binary.BigEndian.AppendUint32(nil, uint32(len(token)))
	if resp := client.roundTrip(frame.AppendFrame(nil, frame.V4, false, 0, 1, frame.OpAuthResponse, append(body, token...))); frame.Opcode(resp) != frame.OpAuthSuccess {
		t.Fatalf("alice: %s, want AUTH_SUCCESS", describe(resp))
	}
	mu.Lock()
	first := firstRelease
	mu.Unlock()
	if first != 3 {
		t.Errorf("the first node answered when %d of the 3 had alice's login; want all 3 (logins at once)", first)
	}
	if got := loginsAfter(t, cl, base+3) - base; got != 3 {
		t.Errorf("alice's first login cost %d logins to Cassandra, want 3: one per connection of her pool", got)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, n := range cl.Nodes {
		if nodes[n] != 1 {
			t.Errorf("%s had %d of alice's logins, want 1", n, nodes[n])
		}
	}
}
