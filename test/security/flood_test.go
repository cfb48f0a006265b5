package security

import (
	"net"
	"sync"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/cqlgate/cqlgate/internal/cassandratest"
	"github.com/cqlgate/cqlgate/pkg/config"
	"github.com/cqlgate/cqlgate/pkg/frame"
)

// TestHandshakeFloodDoesNotLockOutClients: thousands of idle sockets and a
// stream of wrong passwords, from the application's own address, while the
// application (gocql with the right credentials) connects and queries. It
// must get in and be answered within its timeouts: idle sockets lose their
// slots to newer connections and to --handshake-timeout, wrong passwords
// are rate-limited per address without asking Cassandra, and credentials
// already verified pass regardless.
func TestHandshakeFloodDoesNotLockOutClients(t *testing.T) {
	const idle, wrong = 2000, 300
	n := cassandratest.Require(t, node)
	p := startProxy(t, func(c *config.Config) {
		passthrough(c)
		c.MaxClientConnections = 1000 // fewer than the idle sockets
		c.HandshakeTimeout = 30 * time.Second
	})
	// The application has logged in once before (its pool's first
	// connection): its credentials are verified.
	s, err := session4(p.Addr, func(cc *gocql.ClusterConfig) {
		cc.Authenticator = gocql.PasswordAuthenticator{Username: n.Username, Password: n.Password}
	})
	if err != nil {
		t.Fatalf("first login: %v", err)
	}
	s.Close()

	var wg sync.WaitGroup
	stop := make(chan struct{})
	var socks []net.Conn
	var mu sync.Mutex
	wg.Add(1)
	go func() { // idle sockets
		defer wg.Done()
		for range idle {
			nc, err := net.DialTimeout("tcp", p.Addr, 2*time.Second)
			if err != nil {
				continue
			}
			mu.Lock()
			socks = append(socks, nc)
			mu.Unlock()
		}
	}()
	for g := range 10 {
		wg.Add(1)
		go func() { // wrong passwords, as fast as they are answered
			defer wg.Done()
			for i := g; i < wrong; i += 10 {
				select {
				case <-stop:
					return
				default:
				}
				wrongLogin(p.Addr)
			}
		}()
	}
	defer func() {
		close(stop)
		wg.Wait()
		for _, nc := range socks {
			nc.Close()
		}
	}()

	// The application's address is over its failed-login limit.
	deadline := time.Now().Add(20 * time.Second)
	for counter(t, p.Reg, "cqlgate_auth_logins_total", "rate_limited") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no login rate-limited after 20 s of wrong passwords")
		}
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	s, err = session4(p.Addr, func(cc *gocql.ClusterConfig) {
		cc.Authenticator = gocql.PasswordAuthenticator{Username: n.Username, Password: n.Password}
		cc.ConnectTimeout = 5 * time.Second
		cc.Timeout = 5 * time.Second
	})
	if err != nil {
		t.Fatalf("the application during the flood: %v", err)
	}
	defer s.Close()
	var v string
	if err := s.Query("SELECT release_version FROM system.local").Scan(&v); err != nil {
		t.Fatalf("query during the flood: %v", err)
	}
	t.Logf("connected and answered in %s during the flood; rejected connections %v, rate-limited logins %v",
		time.Since(start).Round(time.Millisecond),
		counter(t, p.Reg, "cqlgate_client_rejected_connections_total", "handshake_evicted"),
		counter(t, p.Reg, "cqlgate_auth_logins_total", "rate_limited"))
}

// wrongLogin logs in with a wrong password over raw frames and returns once
// it is answered (or the connection fails).
func wrongLogin(addr string) {
	nc, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
	r, w := frame.NewReader(nc, 1<<20), frame.NewWriter(nc)
	if w.WriteFrame(frame.AppendStartup(nil, frame.V4, 0, map[string]string{"CQL_VERSION": "3.0.0"})) != nil || w.Flush() != nil {
		return
	}
	if b, err := r.ReadFrame(); err != nil {
		return
	} else {
		b.Release()
	}
	if w.WriteFrame(authResponse(frame.V4, "\x00cassandra\x00wrong")) != nil || w.Flush() != nil {
		return
	}
	if b, err := r.ReadFrame(); err == nil {
		b.Release()
	}
}
