package backend

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cqlgate/cqlgate/pkg/frame"
)

// roleCluster is a connected Cluster in front of one fake node.
func roleCluster(t *testing.T, cfg Config) *Cluster {
	t.Helper()
	n := newFakeNode(t, func(r *fakeReq) fakeAction {
		if systemTables(t, r) {
			return fakeHold // answered already
		}
		return fakeVoid
	})
	cfg.ContactPoints = []string{n.Addr()}
	cfg.MaxVersion = frame.V4
	cfg.HeartbeatInterval = -1
	cfg.Credentials = &Credentials{Username: "proxy", Password: "proxy-secret"}
	cl, err := NewCluster(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Pools are keyed by role as well as version and keyspace: each role gets
// its own, shared by all its clients, and the key holds no password.
func TestRolePoolsKeyedByRole(t *testing.T) {
	cl := roleCluster(t, Config{})
	ctx := context.Background()
	a1, err := cl.AcquireRole("alice", "alice-secret")
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := cl.AcquireRole("alice", "alice-secret")
	b, _ := cl.AcquireRole("bob", "bob-secret")
	if a1 != a2 || a1 == b {
		t.Fatalf("AcquireRole: alice %p and %p, bob %p; want one Role per name", a1, a2, b)
	}
	own, err := cl.Pool(ctx, frame.V4, "")
	if err != nil {
		t.Fatal(err)
	}
	pa, err := cl.PoolAs(ctx, a1, frame.V4, "")
	if err != nil {
		t.Fatal(err)
	}
	pa2, _ := cl.PoolAs(ctx, a2, frame.V4, "")
	pb, err := cl.PoolAs(ctx, b, frame.V4, "")
	if err != nil {
		t.Fatal(err)
	}
	if pa != pa2 || pa == pb || pa == own || pb == own {
		t.Fatalf("pools: alice %p/%p, bob %p, proxy %p; want alice's shared and all three distinct", pa, pa2, pb, own)
	}
	if pa.Role() != a1 || own.Role() != nil {
		t.Errorf("Role(): %v and %v", pa.Role(), own.Role())
	}
	if got := pa.credentials(); got == nil || got.Username != "alice" {
		t.Errorf("alice's pool logs in with %v", got)
	}
	cl.mu.Lock()
	keys := fmt.Sprintf("%+v %v", cl.pools, cl.roles)
	cl.mu.Unlock()
	if strings.Contains(keys, "secret") {
		t.Errorf("pool keys or roles print a password: %s", keys)
	}
	// The password lives as long as the role's clients.
	a1.Release()
	if a1.creds.Load() == nil {
		t.Error("alice's password forgotten with a client connection left")
	}
	a2.Release()
	if a1.creds.Load() != nil || pa.canDial() {
		t.Error("alice's password kept after her last client connection")
	}
	if _, err := cl.PoolAs(ctx, a1, frame.V4, "ks"); !errors.Is(err, errRoleGone) {
		t.Errorf("new pool for a role without clients: %v, want errRoleGone", err)
	}
	// Back with a new password: the kept pool logs in with it.
	a3, _ := cl.AcquireRole("alice", "alice-secret-2")
	if a3 != a1 || pa.credentials().Password != "alice-secret-2" {
		t.Errorf("alice back: role %p (was %p), pool password changed: %v", a3, a1, pa.credentials().Password == "alice-secret-2")
	}
}

// A role's pools close once idle for RolePoolIdleTimeout, whatever their
// keyspace, and the role is forgotten with them; the proxy's own ""
// pool stays.
func TestRolePoolIdleClose(t *testing.T) {
	cl := roleCluster(t, Config{RolePoolIdleTimeout: time.Minute, PoolIdleTimeout: time.Hour})
	ctx := context.Background()
	r, _ := cl.AcquireRole("carol", "pw")
	p, err := cl.PoolAs(ctx, r, frame.V4, "")
	if err != nil {
		t.Fatal(err)
	}
	own, _ := cl.Pool(ctx, frame.V4, "")
	p.Hold()
	later := time.Now().Add(2 * time.Minute)
	cl.closeIdlePools(later)
	if got, _ := cl.PoolAs(ctx, r, frame.V4, ""); got != p {
		t.Fatal("a held role pool was closed")
	}
	p.Release()
	r.Release()
	cl.closeIdlePools(time.Now().Add(30 * time.Second))
	if cl.Roles() != 1 || len(cl.readyPools()) != 2 {
		t.Fatalf("before the idle timeout: %d roles, %d pools; want 1 and 2", cl.Roles(), len(cl.readyPools()))
	}
	cl.closeIdlePools(time.Now().Add(2 * time.Minute))
	pools := cl.readyPools()
	if cl.Roles() != 0 || len(pools) != 1 || pools[0] != own {
		t.Fatalf("after the idle timeout: %d roles, pools %v; want 0 roles and the proxy's pool", cl.Roles(), pools)
	}
}

// At most MaxRoles roles at once: one more is refused with
// ErrTooManyRoles, never served otherwise, until a role without clients
// can be closed to make room.
func TestMaxRoles(t *testing.T) {
	cl := roleCluster(t, Config{MaxRoles: 2})
	ctx := context.Background()
	a, _ := cl.AcquireRole("a", "pw")
	b, err := cl.AcquireRole("b", "pw")
	if err != nil {
		t.Fatal(err)
	}
	pa, err := cl.PoolAs(ctx, a, frame.V4, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.AcquireRole("c", "pw"); !errors.Is(err, ErrTooManyRoles) || !strings.Contains(err.Error(), "--max-role-pools") {
		t.Fatalf("third role: %v, want ErrTooManyRoles naming the setting", err)
	}
	if _, err := cl.AcquireRole("a", "pw"); err != nil {
		t.Fatalf("a role in use may have more clients: %v", err)
	}
	a.Release()
	pa.Hold() // a's pool still busy: a cannot be closed yet
	a.Release()
	if _, err := cl.AcquireRole("c", "pw"); !errors.Is(err, ErrTooManyRoles) {
		t.Fatalf("third role while a's pool is held: %v, want ErrTooManyRoles", err)
	}
	pa.Release()
	c, err := cl.AcquireRole("c", "pw")
	if err != nil {
		t.Fatalf("third role once a has neither clients nor busy pools: %v", err)
	}
	if cl.Roles() != 2 {
		t.Errorf("%d roles, want 2 (b and c)", cl.Roles())
	}
	if _, err := cl.PoolAs(ctx, c, frame.V4, ""); err != nil {
		t.Fatal(err)
	}
	b.Release()
	c.Release()
}
