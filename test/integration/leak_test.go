package integration

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/gocql/gocql"
	"go.uber.org/goleak"

	"github.com/cqlgate/cqlgate/pkg/frame"
)

// TestNoGoroutineLeaks stops a proxy that has served drivers of every
// protocol version, per-keyspace pools, prepared statements, event
// subscribers and clients stuck mid-frame, and checks that Run returns,
// that it closed the clients still connected, and that none of its
// goroutines is left.
func TestNoGoroutineLeaks(t *testing.T) {
	c := singleCluster.Get(t)
	// Drivers' and earlier tests' goroutines are not the proxy's.
	ignore := goleak.IgnoreCurrent()

	p := startProxy(t, c.Addrs, nil)
	admin := newSession(t, []string{p.Addr}, nil)
	recreateKeyspace(t, admin, "it_leak", 1, "CREATE TABLE it_leak.kv (k int PRIMARY KEY, v text)")
	for _, v := range []int{3, 4} {
		s := newSession(t, []string{p.Addr}, func(cc *gocql.ClusterConfig) {
			cc.ProtoVersion = v
			cc.Keyspace = "it_leak"
		})
		for i := 0; i < 20; i++ {
			mustExec(t, s, "INSERT INTO kv (k, v) VALUES (?, ?)", i, "x")
		}
		s.Close()
	}
	s2 := newSession2(t, p.Addr, nil)
	if err := s2.Query("SELECT v FROM it_leak.kv WHERE k = ?", 1).Exec(); err != nil {
		t.Fatal(err)
	}
	s2.Close()
	admin.Close()

	// Clients still connected at shutdown: idle after USE, registered
	// for events, and one stuck in the middle of a frame.
	var open []*rawConn
	for _, v := range []byte{4, 5} {
		r := dialRaw(t, p.Addr, v)
		r.startup(nil)
		if resp := r.query(1, "USE it_leak"); frame.Opcode(resp) != frame.OpResult {
			t.Fatalf("v%d USE: %s", v, describe(resp))
		}
		if resp := r.roundTrip(frame.AppendRegister(nil, v, 2, []string{"SCHEMA_CHANGE"})); frame.Opcode(resp) != frame.OpReady {
			t.Fatalf("v%d REGISTER: %s", v, describe(resp))
		}
		open = append(open, r)
	}
	stuck := dialRaw(t, p.Addr, 4)
	stuck.startup(nil)
	if _, err := stuck.nc.Write(frame.AppendQuery(nil, 4, 1, "SELECT * FROM system.local", consistencyOne, 0)[:12]); err != nil {
		t.Fatal(err)
	}
	open = append(open, stuck)

	began := time.Now()
	p.Stop() // cancels Run's context and fails the test unless Run returns
	t.Logf("proxy stopped in %s", time.Since(began).Round(time.Millisecond))

	for i, r := range open {
		f, err := r.readFrame(5 * time.Second)
		var ne net.Error
		switch {
		case err == nil:
			t.Errorf("client %d: got %s after shutdown, want the connection closed", i, describe(f))
		case errors.As(err, &ne) && ne.Timeout():
			t.Errorf("client %d: connection still open 5s after the proxy stopped", i)
		}
	}
	if err := goleak.Find(ignore); err != nil {
		t.Errorf("goroutines left after the proxy stopped: %v", err)
	}
	if _, err := net.DialTimeout("tcp", p.Addr, time.Second); err == nil {
		t.Errorf("the proxy still accepts connections on %s after stopping", p.Addr)
	}
}
