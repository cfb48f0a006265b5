package backend

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cqlgate/cqlgate/internal/fakenode"
	"github.com/cqlgate/cqlgate/pkg/frame"
)

// fakeAuthCluster is a connected Cluster, logged in as "proxy", in front of
// a 3-node fake cluster with PasswordAuthenticator, where alice's password
// is "pw".
func fakeAuthCluster(t *testing.T, cfg Config) (*Cluster, *fakenode.Cluster) {
	t.Helper()
	fcl := fakenode.StartCluster(t, 3, fakenode.Config{Passwords: map[string]string{"proxy": "proxy-pw", "alice": "pw"}})
	cfg.ContactPoints = fcl.Addrs()[:1]
	cfg.HeartbeatInterval = -1
	cfg.Credentials = &Credentials{Username: "proxy", Password: "proxy-pw"}
	cl, err := NewCluster(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	if err := cl.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	cl.mu.Lock()
	up := len(cl.upNodesLocked())
	cl.mu.Unlock()
	if up != 3 {
		t.Fatalf("%d nodes up, want 3", up)
	}
	return cl, fcl
}

// authResponses counts the AUTH_RESPONSEs the fake nodes were sent.
func authResponses(fcl *fakenode.Cluster) int {
	n := 0
	for _, node := range fcl.Nodes {
		n += node.Requests(frame.OpAuthResponse)
	}
	return n
}

// openConns counts the connections open at the fake nodes.
func openConns(fcl *fakenode.Cluster) int {
	n := 0
	for _, node := range fcl.Nodes {
		n += node.OpenConnections()
	}
	return n
}

// roleConns counts the connections of role's pools, by the address of
// the nodes that have any.
func roleConns(cl *Cluster, role string) map[string]int {
	out := map[string]int{}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	for key, e := range cl.pools {
		if key.role != role || e.pool == nil {
			continue
		}
		for _, np := range *e.pool.nodes.Load() {
			if n := np.numConns(); n > 0 {
				out[np.node.Addr] += n
			}
		}
	}
	return out
}

// eventually polls cond until it holds, failing the test after guard.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(guard); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", guard, what)
		}
	}
}

// loginGoroutines returns the stacks of the goroutines of logins to nodes
// (a role's first login's, or a Dial's) still running.
func loginGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		// What the goroutine runs, not who created it: one that has
		// done its work may still be seen on its way out.
		frames, _, _ := strings.Cut(g, "\ncreated by ")
		if strings.Contains(frames, "backend.(*Cluster).startLogin") || strings.Contains(frames, "backend.Dial(") ||
			strings.Contains(frames, "backend.(*NodePool).awaitLogin") {
			out = append(out, g)
		}
	}
	return out
}

// noLoginsLeft fails the test unless no login goroutine is left and the
// fake nodes have want connections open. A login's goroutine has done
// everything once its pendingLogin is done, which the caller waited for,
// but may still be on its way out: it gets 100 ms.
func noLoginsLeft(t *testing.T, fcl *fakenode.Cluster, want int) {
	t.Helper()
	for deadline := time.Now().Add(100 * time.Millisecond); len(loginGoroutines()) > 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if g := loginGoroutines(); len(g) > 0 {
		t.Errorf("%d login goroutines still running:\n%s", len(g), strings.Join(g, "\n\n"))
	}
	eventually(t, "the logins' connections closed at the nodes", func() bool { return openConns(fcl) == want })
}

// A role's first login logs in to every node at once: each node has the
// AUTH_RESPONSE before any of them answers (each node's answer waits
// until all three have it, up to 3 s), and the three connections are the
// role's pool, one per node, with no other login on top.
func TestRoleFirstLoginDialsAllNodesAtOnce(t *testing.T) {
	cl, fcl := fakeAuthCluster(t, Config{})
	base := authResponses(fcl)
	var mu sync.Mutex
	arrived, atRelease := 0, []int{}
	all := make(chan struct{})
	fcl.SetHook(func(_ *fakenode.Node, r fakenode.Request) fakenode.Action {
		if r.Opcode != frame.OpAuthResponse {
			return fakenode.Action{}
		}
		mu.Lock()
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
		atRelease = append(atRelease, arrived)
		mu.Unlock()
		return fakenode.Action{}
	})
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	r, err := cl.LoginRole(ctx, "alice", "pw", frame.V4, LoginAllNodes)
	if err != nil {
		t.Fatalf("LoginRole: %v", err)
	}
	defer r.Release()
	mu.Lock()
	first := atRelease[0]
	mu.Unlock()
	if first != 3 {
		t.Errorf("the first node answered when %d of 3 had the login; want all 3 (logins at once)", first)
	}
	eventually(t, "alice's pool has a connection on every node", func() bool { return len(roleConns(cl, "alice")) == 3 })
	for addr, n := range roleConns(cl, "alice") {
		if n != 1 {
			t.Errorf("alice's pool has %d connections to %s, want 1", n, addr)
		}
	}
	time.Sleep(100 * time.Millisecond) // any login beyond the pool's would show now
	if got := authResponses(fcl) - base; got != 3 {
		t.Errorf("alice's first login cost %d logins, want 3: one per pool connection", got)
	}
	eventually(t, "no login goroutine left with the pool complete", func() bool { return len(loginGoroutines()) == 0 })
}

// With LoginOneNode (the client's address failed a login recently) a
// wrong password costs exactly one login, and a right one opens the pool
// on every node, the first login being one of the pool's.
func TestRoleFirstLoginOneNode(t *testing.T) {
	cl, fcl := fakeAuthCluster(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	for i := range 3 {
		base := authResponses(fcl)
		_, err := cl.LoginRole(ctx, "alice", "wrong", frame.V4, LoginOneNode)
		var se *ServerError
		if !errors.As(err, &se) || se.Code != frame.ErrCodeBadCredentials {
			t.Fatalf("wrong password %d: %v, want Bad credentials", i, err)
		}
		if got := authResponses(fcl) - base; got != 1 {
			t.Errorf("wrong password %d cost %d logins, want 1", i, got)
		}
	}
	base := authResponses(fcl)
	r, err := cl.LoginRole(ctx, "alice", "pw", frame.V4, LoginOneNode)
	if err != nil {
		t.Fatalf("LoginRole: %v", err)
	}
	defer r.Release()
	eventually(t, "alice's pool has a connection on every node", func() bool { return len(roleConns(cl, "alice")) == 3 })
	time.Sleep(100 * time.Millisecond)
	if got := authResponses(fcl) - base; got != 3 {
		t.Errorf("alice's first login cost %d logins, want 3", got)
	}
}

// A refusal that comes first is the answer: the logins still under way
// (two nodes that never answer) are cancelled at once, and LoginRole
// returns only when no login goroutine or connection is left.
func TestRoleFirstLoginRefusedLeavesNothing(t *testing.T) {
	cl, fcl := fakeAuthCluster(t, Config{ConnectTimeout: 20 * time.Second})
	baseConns := openConns(fcl)
	refuser := fcl.Nodes[1]
	fcl.SetHook(func(n *fakenode.Node, r fakenode.Request) fakenode.Action {
		if r.Opcode == frame.OpAuthResponse && n != refuser {
			return fakenode.Action{Fault: fakenode.NoAnswer}
		}
		return fakenode.Action{}
	})
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	start := time.Now()
	_, err := cl.LoginRole(ctx, "alice", "wrong", frame.V4, LoginAllNodes)
	var se *ServerError
	if !errors.As(err, &se) || se.Code != frame.ErrCodeBadCredentials || !strings.Contains(se.Message, "incorrect") {
		t.Fatalf("LoginRole: %v, want Cassandra's Bad credentials", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the refusal took %v: the logins that never answer were waited for", d)
	}
	noLoginsLeft(t, fcl, baseConns)
	if cl.Roles() != 0 || len(roleConns(cl, "alice")) != 0 {
		t.Errorf("a refused login left %d roles and pools %v", cl.Roles(), roleConns(cl, "alice"))
	}
}

// The client's context ending before any node answered ends the login
// with nothing left behind.
func TestRoleFirstLoginCancelled(t *testing.T) {
	cl, fcl := fakeAuthCluster(t, Config{ConnectTimeout: 20 * time.Second})
	baseConns := openConns(fcl)
	fcl.SetHook(func(_ *fakenode.Node, r fakenode.Request) fakenode.Action {
		if r.Opcode == frame.OpAuthResponse {
			return fakenode.Action{Fault: fakenode.NoAnswer}
		}
		return fakenode.Action{}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := cl.LoginRole(ctx, "alice", "pw", frame.V4, LoginAllNodes)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("LoginRole: %v, want the context's deadline", err)
	}
	noLoginsLeft(t, fcl, baseConns)
}

// A login still under way when the client got its answer belongs to its
// node's pool: closing the cluster cancels it, and nothing is left.
func TestRoleFirstLoginPendingClosed(t *testing.T) {
	cl, fcl := fakeAuthCluster(t, Config{ConnectTimeout: 20 * time.Second})
	slow := fcl.Nodes[2]
	fcl.SetHook(func(n *fakenode.Node, r fakenode.Request) fakenode.Action {
		if r.Opcode == frame.OpAuthResponse && n == slow {
			return fakenode.Action{Fault: fakenode.NoAnswer}
		}
		return fakenode.Action{}
	})
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	r, err := cl.LoginRole(ctx, "alice", "pw", frame.V4, LoginAllNodes)
	if err != nil {
		t.Fatalf("LoginRole: %v", err)
	}
	defer r.Release()
	eventually(t, "alice's pool has a connection on the two nodes that answer", func() bool {
		c := roleConns(cl, "alice")
		return c[fcl.Nodes[0].Addr()] == 1 && c[fcl.Nodes[1].Addr()] == 1
	})
	// The login and its NodePool's wait for it (the others' waits end
	// as their connections are adopted).
	eventually(t, "only the pending login's goroutines left", func() bool { return len(loginGoroutines()) == 2 })
	time.Sleep(100 * time.Millisecond)
	if g := loginGoroutines(); len(g) != 2 {
		t.Errorf("%d login goroutines for the node that does not answer, want 2:\n%s", len(g), strings.Join(g, "\n\n"))
	}
	cl.Close()
	eventually(t, "the pending login ended", func() bool { return len(loginGoroutines()) == 0 })
	noLoginsLeft(t, fcl, 0)
}

// Nodes that disagree: the first answer, a success, is the client's; a
// refusal from another node afterwards is a refusal of the pool's login,
// as at any later login: the role's pools are closed and its clients
// told (OnRoleRefused), with Cassandra's answer, and the refused password
// is not tried again.
func TestRoleFirstLoginRefusedAfterSuccess(t *testing.T) {
	refused := make(chan *ServerError, 1)
	cl, fcl := fakeAuthCluster(t, Config{OnRoleRefused: func(_ *Role, se *ServerError) { refused <- se }})
	base := authResponses(fcl)
	late := fcl.Nodes[0]
	fcl.SetHook(func(n *fakenode.Node, r fakenode.Request) fakenode.Action {
		if r.Opcode == frame.OpAuthResponse && n == late {
			return fakenode.Action{Delay: 300 * time.Millisecond, Error: &fakenode.Error{
				Code: frame.ErrCodeBadCredentials, Message: "Provided username alice and/or password are incorrect"}}
		}
		return fakenode.Action{}
	})
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	r, err := cl.LoginRole(ctx, "alice", "pw", frame.V4, LoginAllNodes)
	if err != nil {
		t.Fatalf("LoginRole: %v (the first answer is a success)", err)
	}
	defer r.Release()
	se := waitFor(t, refused, "refusal of the role")
	if se.Code != frame.ErrCodeBadCredentials || r.Refused() == nil {
		t.Errorf("refusal %v, Refused() %v", se, r.Refused())
	}
	eventually(t, "alice's pools closed", func() bool { return len(roleConns(cl, "alice")) == 0 })
	time.Sleep(500 * time.Millisecond) // a login after the refusal would show now
	if got := authResponses(fcl) - base; got != 3 {
		t.Errorf("%d logins, want 3: none after the refusal", got)
	}
	noLoginsLeft(t, fcl, 1) // the control connection
}

// A node that leaves the topology while the role's first login runs is
// not part of the role's pool: its login, still under way when the client
// was answered, is cancelled and its connection closed.
func TestRoleFirstLoginNodeRemovedMeanwhile(t *testing.T) {
	cl, fcl := fakeAuthCluster(t, Config{ConnectTimeout: 20 * time.Second})
	gone := fcl.Nodes[2]
	var once sync.Once
	fcl.SetHook(func(n *fakenode.Node, r fakenode.Request) fakenode.Action {
		if r.Opcode != frame.OpAuthResponse {
			return fakenode.Action{}
		}
		if n == gone {
			return fakenode.Action{Fault: fakenode.NoAnswer}
		}
		// Before the first answer: the topology drops the node, as a
		// refresh that found it decommissioned does.
		once.Do(func() {
			cl.mu.Lock()
			delete(cl.nodes, gone.Addr())
			cl.mu.Unlock()
		})
		return fakenode.Action{}
	})
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	r, err := cl.LoginRole(ctx, "alice", "pw", frame.V4, LoginAllNodes)
	if err != nil {
		t.Fatalf("LoginRole: %v", err)
	}
	defer r.Release()
	eventually(t, "alice's pool on the two nodes left", func() bool { return len(roleConns(cl, "alice")) == 2 })
	if n := roleConns(cl, "alice")[gone.Addr()]; n != 0 {
		t.Errorf("alice's pool has %d connections to the node removed", n)
	}
	eventually(t, "no login goroutine left", func() bool { return len(loginGoroutines()) == 0 })
	eventually(t, "the removed node's login connection closed", func() bool { return gone.OpenConnections() == 0 })
}

// When MaxRoles roles are taken while the first login runs (a client whose
// credentials were in the login cache took the last), the logins are given
// up, every connection closed, and the caller told to go the AcquireRole
// way, which reports the limit.
func TestRoleFirstLoginMaxRolesMeanwhile(t *testing.T) {
	cl, fcl := fakeAuthCluster(t, Config{MaxRoles: 1, ConnectTimeout: 20 * time.Second})
	baseConns := openConns(fcl)
	slow := fcl.Nodes[2]
	var once sync.Once
	fcl.SetHook(func(n *fakenode.Node, r fakenode.Request) fakenode.Action {
		if r.Opcode != frame.OpAuthResponse {
			return fakenode.Action{}
		}
		if n == slow {
			return fakenode.Action{Fault: fakenode.NoAnswer}
		}
		once.Do(func() {
			if _, err := cl.AcquireRole("bob", "bob-pw"); err != nil {
				t.Errorf("AcquireRole(bob): %v", err)
			}
		})
		return fakenode.Action{}
	})
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	if _, err := cl.LoginRole(ctx, "alice", "pw", frame.V4, LoginAllNodes); !errors.Is(err, ErrRoleKnown) {
		t.Fatalf("LoginRole with every role taken meanwhile: %v, want ErrRoleKnown", err)
	}
	noLoginsLeft(t, fcl, baseConns)
	if len(roleConns(cl, "alice")) != 0 {
		t.Errorf("alice has pools: %v", roleConns(cl, "alice"))
	}
}
