package security

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cqlgate/cqlgate/internal/cassandratest"
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
// two. Run with a fixed count:
//
//	go test -run NONE -bench PoolStartAuth -benchtime 5x ./test/security/
func BenchmarkPoolStartAuth(b *testing.B) {
	single := cassandratest.Require(b, node)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	three, stop, err := cassandratest.Shared(ctx, "security3", cassandratest.Options{Addresses: clusterAddrs, Auth: true})
	cancel()
	if err != nil {
		b.Fatal(err)
	}
	defer stop()
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
