package security

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gocql/gocql"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cqlgate/cqlgate/internal/cassandratest"
	"github.com/cqlgate/cqlgate/internal/proxytest"
	"github.com/cqlgate/cqlgate/pkg/backend"
	"github.com/cqlgate/cqlgate/pkg/config"
	"github.com/cqlgate/cqlgate/pkg/frame"
	"github.com/cqlgate/cqlgate/pkg/proxy"
)

// BenchmarkPoolStartAuth measures how long a proxy takes from New until it
// serves (control connection and first pool connection up, all logged in
// with PasswordAuthenticator) and until its whole pool is open (every node x
// --connections-per-node connections logged in), on 1 and 3 nodes. Opens run
// in parallel, so the time should stay nearly flat as nodes and connections
// grow; what growth remains is Cassandra's bcrypt check of each login
// competing for the machine's cores.
//
// The 3-node cluster (auth, no TLS) is started on 127.0.22.2-4 unless
// CQLGATE_TEST_CASSANDRA_SECURITY3 names running nodes; it takes a minute or
// two, once for all the benchmarks of a run. Run with a fixed count:
//
//	go test -run NONE -bench PoolStartAuth -benchtime 5x ./test/security/
func BenchmarkPoolStartAuth(b *testing.B) {
	single := cassandratest.Require(b, node)
	three := security3.Get(b)
	for _, cl := range []*cassandratest.Cluster{single, three} {
		for _, conns := range []int{1, 4, 8} {
			b.Run(fmt.Sprintf("nodes=%d/conns=%d", len(cl.Addrs), conns), func(b *testing.B) {
				var serving, full, serial, parallel time.Duration
				for range b.N {
					// Baselines under the same conditions: the pool's
					// logins made one after the other, and all at once,
					// without the proxy.
					serial += logins(b, cl, conns, false)
					parallel += logins(b, cl, conns, true)
					s, f := startOnce(b, cl, conns)
					serving += s
					full += f
				}
				ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N) }
				b.ReportMetric(ms(serving), "ms-to-serving")
				b.ReportMetric(ms(full), "ms-to-full-pool")
				b.ReportMetric(ms(serial), "ms-logins-serial")
				b.ReportMetric(ms(parallel), "ms-logins-parallel")
			})
		}
	}
}

// logins opens conns logged-in connections to every node of cl, one after
// the other or all at once, closes them, and returns how long the opening
// took.
func logins(b *testing.B, cl *cassandratest.Cluster, conns int, concurrent bool) time.Duration {
	login := func(addr string) error {
		c, err := backend.Dial(context.Background(), backend.DialConfig{
			Addr:        addr,
			Version:     frame.V5,
			Timeout:     time.Minute,
			Credentials: &backend.Credentials{Username: cl.Username, Password: cl.Password},
		})
		if err == nil {
			c.Close()
		}
		return err
	}
	start := time.Now()
	errs := make(chan error, len(cl.Addrs)*conns)
	for _, addr := range cl.Addrs {
		for range conns {
			if concurrent {
				go func() { errs <- login(addr) }()
			} else {
				errs <- login(addr)
			}
		}
	}
	for range cap(errs) {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start)
}

// startOnce starts a proxy in front of cl with conns connections per node
// and returns the time until it served and until its pool was complete.
func startOnce(b *testing.B, cl *cassandratest.Cluster, conns int) (serving, full time.Duration) {
	cfg := config.Default()
	cfg.Listen = []string{"127.0.0.1:0"}
	cfg.ContactPoints = cl.Addrs[:1]
	cfg.ConnectionsPerNode = conns
	cfg.BackendUsername, cfg.BackendPassword = cl.Username, cl.Password
	reg := prometheus.NewRegistry()
	start := time.Now()
	p, err := proxy.New(cfg, nil, reg)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("Run: %v", err)
		}
	}()
	select {
	case <-p.Serving():
	case err := <-done:
		done <- err
		b.Fatalf("Run: %v", err)
	}
	serving = time.Since(start)
	want := float64(len(cl.Addrs) * conns)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		if openConns(b, reg) >= want {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("pool has %v of %v connections after a minute", openConns(b, reg), want)
		}
	}
	return serving, time.Since(start)
}

// openConns sums cqlgate_backend_connections over the nodes.
func openConns(b *testing.B, reg *prometheus.Registry) float64 {
	mfs, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() == "cqlgate_backend_connections" {
			for _, m := range mf.GetMetric() {
				sum += m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

// BenchmarkRolePoolOpenAuth measures what a role's first login through the
// proxy (--client-auth passthrough, --passthrough-identity role) costs on
// the 3-node auth cluster, against one authenticated connection's
// handshake, as JAVA-692 measured the Java driver's parallel pool creation
// against a single connection. Every login is of a role no one has logged
// in as yet. Cassandra checks the bcrypt hash of the password at every
// login (its credentials cache holds the hash, not the verdict), which is
// nearly all of a handshake's time:
//
//   - ms-handshake: one connection to a node, logged in (TCP, STARTUP,
//     AUTHENTICATE, AUTH_RESPONSE, AUTH_SUCCESS), directly;
//   - ms-direct3: a connection to each of the 3 nodes at once, logged in,
//     directly, until the last is: what opening a role's pool costs
//     without the proxy on this machine, where the 3 nodes' bcrypt checks
//     share its cores;
//   - ms-first-login: the same handshake with the proxy, which opens the
//     role's pool (its connections' logins, to the 3 nodes at once, check
//     the password) and answers AUTH_SUCCESS once the first is up;
//   - ms-login-no-pool: the same with --passthrough-identity proxy, where
//     the login is only the password check;
//   - ms-pool-open: ms-first-login - ms-login-no-pool, what the role's
//     pool adds to a login that opens none;
//   - ms-pool-full: from the start of the first login until the role has
//     its connection on every node (the client still connected): what
//     JAVA-692 compares with one connection's handshake, and what
//     ms-direct3 bounds from below on this machine.
//
// The ratios are of the medians to ms-handshake's. Run with a fixed count:
//
//	go test -run NONE -bench RolePoolOpenAuth -benchtime 10x ./test/security/
func BenchmarkRolePoolOpenAuth(b *testing.B) {
	three := security3.Get(b)
	// Roles first: each iteration logs in as four of them, once each.
	admin, err := session4(three.Addrs[0], func(cc *gocql.ClusterConfig) {
		cc.Authenticator = gocql.PasswordAuthenticator{Username: three.Username, Password: three.Password}
	})
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close()
	kinds := []string{"direct", "direct3", "pool", "nopool"}
	run := time.Now().UnixNano() % 1_000_000
	role := func(kind string, i int) string { return fmt.Sprintf("bench_%s_%d_%d", kind, run, i) }
	for i := range b.N {
		for _, kind := range kinds {
			if err := admin.Query(fmt.Sprintf("CREATE ROLE %s WITH PASSWORD = 'pw' AND LOGIN = true", role(kind, i))).Exec(); err != nil {
				b.Fatal(err)
			}
		}
	}
	defer func() {
		for i := range b.N {
			for _, kind := range kinds {
				_ = admin.Query("DROP ROLE IF EXISTS " + role(kind, i)).Exec()
			}
		}
	}()
	mod := func(identity string) func(*config.Config) {
		return func(c *config.Config) {
			c.ContactPoints = three.Addrs
			c.BackendUsername, c.BackendPassword = three.Username, three.Password
			c.ClientAuth = config.ClientAuthPassthrough
			c.PassthroughIdentity = identity
		}
	}
	withPools := proxytest.Start(b, three.Addrs, mod(config.IdentityRole))
	noPools := proxytest.Start(b, three.Addrs, mod(config.IdentityProxy))
	login := func(addr, user string) time.Duration {
		start := time.Now()
		if a := rawLogin(b, addr, frame.V4, authResponse(frame.V4, "\x00"+user+"\x00pw")); a.Opcode != "AUTH_SUCCESS" {
			b.Fatalf("login as %s at %s: %v", user, addr, a)
		}
		return time.Since(start)
	}
	loginAll := func(user string) time.Duration {
		start := time.Now()
		var wg sync.WaitGroup
		for _, addr := range three.Addrs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				login(addr, user)
			}()
		}
		wg.Wait()
		return time.Since(start)
	}
	time.Sleep(2 * time.Second) // the proxies' own pools open in the background
	var handshake, direct3, first, noPool, full []time.Duration
	b.ResetTimer()
	for i := range b.N {
		handshake = append(handshake, login(three.Addrs[i%len(three.Addrs)], role("direct", i)))
		direct3 = append(direct3, loginAll(role("direct3", i)))
		noPool = append(noPool, login(noPools.Addr, role("nopool", i)))
		before := openConns(b, withPools.Reg)
		start := time.Now()
		// The client stays connected, as a driver does: a role's pool
		// keeps its password, and so connects, only while the role has
		// client connections.
		a, nc := rawLoginOpen(b, withPools.Addr, frame.V4, authResponse(frame.V4, "\x00"+role("pool", i)+"\x00pw"))
		first = append(first, time.Since(start))
		if a.Opcode != "AUTH_SUCCESS" {
			b.Fatalf("login as %s through the proxy: %v", role("pool", i), a)
		}
		for deadline := time.Now().Add(time.Minute); openConns(b, withPools.Reg) < before+float64(len(three.Addrs)); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatalf("the role's pool has %v of %v connections after a minute", openConns(b, withPools.Reg)-before, len(three.Addrs))
			}
		}
		full = append(full, time.Since(start))
		nc.Close()
	}
	b.StopTimer()
	med := func(ds []time.Duration) float64 {
		s := slices.Clone(ds)
		slices.Sort(s)
		return float64(s[len(s)/2].Microseconds()) / 1000
	}
	h, d3, f, n, p := med(handshake), med(direct3), med(first), med(noPool), med(full)
	b.ReportMetric(h, "ms-handshake")
	b.ReportMetric(d3, "ms-direct3")
	b.ReportMetric(f, "ms-first-login")
	b.ReportMetric(n, "ms-login-no-pool")
	b.ReportMetric(f-n, "ms-pool-open")
	b.ReportMetric(p, "ms-pool-full")
	b.ReportMetric(d3/h, "direct3/handshake")
	b.ReportMetric(f/h, "first-login/handshake")
	b.ReportMetric((f-n)/h, "pool-open/handshake")
	b.ReportMetric(p/h, "pool-full/handshake")
	b.Logf("handshakes %v; direct on 3 nodes %v; first logins %v; without pools %v; pool full %v", handshake, direct3, first, noPool, full)
}
