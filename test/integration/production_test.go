package integration

// Production limits on one node: connection limit, slow clients, drain,
// deadlines that include queueing, and live reload.

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/cqlgate/cqlgate/internal/faultinject"
	"github.com/cqlgate/cqlgate/pkg/config"
	"github.com/cqlgate/cqlgate/pkg/frame"
)

// TestConnectionLimitAnswersOverloaded: a connection over
// --max-client-connections gets OVERLOADED in answer to its first message,
// on its stream and in its version, and is closed; a reload raises the limit
// without touching the connections already open.
func TestConnectionLimitAnswersOverloaded(t *testing.T) {
	c := singleCluster.Get(t)
	var cfg config.Config
	p := startProxy(t, c.Addrs, func(cc *config.Config) {
		cc.MaxClientConnections = 2
		cfg = *cc
	})
	first := dialRaw(t, p.Addr, 4)
	first.startup(nil)
	second := dialRaw(t, p.Addr, 5)
	second.startup(nil)

	for _, v := range []byte{3, 4, 5} {
		over := dialRaw(t, p.Addr, v)
		resp := over.roundTrip(frame.AppendOptions(nil, v, 7))
		code, msg, ok := errorOf(resp)
		if !ok || code != frame.ErrCodeOverloaded || !strings.Contains(msg, "--max-client-connections 2") || frame.Version(resp) != v {
			t.Fatalf("v%d connection over the limit: got %s; want OVERLOADED naming the limit", v, describe(resp))
		}
		if _, err := over.readFrame(5 * time.Second); !errors.Is(err, io.EOF) && !isClosed(err) {
			t.Errorf("v%d connection over the limit: after the error got %v; want the connection closed", v, err)
		}
	}
	if got := metricSeries(t, p.Reg, "cqlgate_client_rejected_connections_total")["reason=max_connections"]; got != 3 {
		t.Errorf("cqlgate_client_rejected_connections_total{reason=max_connections} = %v; want 3", got)
	}

	cfg.MaxClientConnections = 3
	if restart, err := p.Reload(cfg); err != nil || len(restart) != 0 {
		t.Fatalf("Reload = %v, %v", restart, err)
	}
	third := dialRaw(t, p.Addr, 4)
	third.startup(nil)
	for i, rc := range []*rawConn{first, second, third} {
		if rs := rc.mustRows("SELECT release_version FROM system.local"); len(rs.rows) != 1 {
			t.Errorf("connection %d: %d rows", i, len(rs.rows))
		}
	}
}

func isClosed(err error) bool {
	var ne net.Error
	return err != nil && (errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "reset") || (errors.As(err, &ne) && !ne.Timeout()))
}

// TestClientThatStopsReadingIsCutOff: a client that sends requests but does
// not read the answers is disconnected once they exceed
// --client-write-buffer-bytes, and another client on the same backend
// connection is served throughout.
func TestClientThatStopsReadingIsCutOff(t *testing.T) {
	c := singleCluster.Get(t)
	direct := newSession(t, c.Addrs, nil)
	recreateKeyspace(t, direct, "it_slow", 1, "CREATE TABLE it_slow.blobs (k int PRIMARY KEY, v blob)")
	mustExec(t, direct, "INSERT INTO it_slow.blobs (k, v) VALUES (1, ?)", make([]byte, 256<<10))

	p := startProxy(t, c.Addrs, func(cc *config.Config) { cc.ClientWriteBufferBytes = 1 << 20 })
	stuck := dialRaw(t, p.Addr, 4)
	stuck.startup(nil)
	healthy := proxySession(t, p, nil)

	// 200 answers of 256 KiB: far more than loopback socket buffers (a few
	// MiB) and the 1 MiB allowance hold.
	for i := int16(1); i <= 200; i++ {
		if err := stuck.send(frame.AppendQuery(nil, 4, i, "SELECT v FROM it_slow.blobs WHERE k = 1", consistencyOne, 0)); err != nil {
			break // already cut off
		}
	}
	waitFor(t, 30*time.Second, "the stuck client to be cut off", func() (bool, string) {
		n := metricSum(t, p.Reg, "cqlgate_client_write_buffer_overflows_total")
		var k int
		if err := healthy.Query("SELECT k FROM it_slow.blobs WHERE k = 1").Scan(&k); err != nil {
			t.Fatalf("the other client failed while one client was stuck: %v", err)
		}
		return n == 1, fmt.Sprintf("cqlgate_client_write_buffer_overflows_total = %v", n)
	})
	// The stuck client's socket ends once it reads what was in flight.
	stuck.nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, err := io.Copy(io.Discard, stuck.nc)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Errorf("the stuck client's connection was not closed: %v", err)
	}
}

// TestQueueTimeCountsTowardTheDeadline: a request that waited for a permit
// has only the rest of --request-timeout left at Cassandra. With one
// request at a time and a node 700 ms away, the second of two concurrent
// requests waits ~700 ms and would need ~700 ms more: over its 1 s budget,
// it gets the proxy's timeout error instead of an answer at ~1.4 s.
func TestQueueTimeCountsTowardTheDeadline(t *testing.T) {
	c := singleCluster.Get(t)
	slow := faultinject.New(t, "127.0.0.1:0", c.Addrs[0])
	p := startProxy(t, []string{slow.Addr}, func(cc *config.Config) {
		cc.LimitMode, cc.NodeLimit = "fixed", 1
		cc.RequestTimeout = time.Second
		cc.HeartbeatInterval = 0
	})
	if err := slow.Latency(700*time.Millisecond, 0); err != nil {
		t.Fatal(err)
	}
	rc := dialRaw(t, p.Addr, 4)
	rc.startup(nil)
	start := time.Now()
	for _, s := range []int16{1, 2} {
		if err := rc.send(frame.AppendQuery(nil, 4, s, "SELECT keyspace_name FROM system_schema.keyspaces", consistencyOne, 0)); err != nil {
			t.Fatal(err)
		}
	}
	answers := map[int16][]byte{}
	for len(answers) < 2 {
		f, err := rc.readFrame(10 * time.Second)
		if err != nil {
			t.Fatalf("after %v: %v (answers so far %d)", time.Since(start), err, len(answers))
		}
		answers[frame.Stream(f)] = f
	}
	code, msg, ok := errorOf(answers[2])
	if !ok || code != frame.ErrCodeServer || !strings.Contains(msg, "request timeout") {
		t.Errorf("the queued request got %s; want the proxy's timeout error", describe(answers[2]))
	}
	slow.Clear()
}

// TestDrainFinishesInFlightAndRefusesNew: on shutdown the proxy stops
// accepting, answers new requests on open connections with OVERLOADED (so
// drivers move on), and lets the requests in flight finish.
func TestDrainFinishesInFlightAndRefusesNew(t *testing.T) {
	c := singleCluster.Get(t)
	slow := faultinject.New(t, "127.0.0.1:0", c.Addrs[0])
	p := startProxy(t, []string{slow.Addr}, func(cc *config.Config) {
		cc.DrainTimeout = 10 * time.Second
		cc.HeartbeatInterval = 0
	})
	busy := dialRaw(t, p.Addr, 4)
	busy.startup(nil)
	idle := dialRaw(t, p.Addr, 4)
	idle.startup(nil)
	if err := slow.Latency(1500*time.Millisecond, 0); err != nil {
		t.Fatal(err)
	}
	if err := busy.send(frame.AppendQuery(nil, 4, 1, "SELECT keyspace_name FROM system_schema.keyspaces", consistencyOne, 0)); err != nil {
		t.Fatal(err)
	}
	// Not cqlgate_backend_in_flight_requests: the control connection's
	// queries, slowed too, count there.
	waitFor(t, 5*time.Second, "the slow request to be in flight", func() (bool, string) {
		n := metricSum(t, p.Reg, "cqlgate_limiter_global_in_flight")
		return n >= 1, fmt.Sprintf("in flight %v", n)
	})
	stopped := make(chan struct{})
	go func() { p.Stop(); close(stopped) }()
	waitFor(t, 5*time.Second, "the proxy to stop accepting", func() (bool, string) {
		nc, err := net.DialTimeout("tcp", p.Addr, time.Second)
		if err == nil {
			nc.Close()
		}
		return err != nil, "still accepting"
	})
	resp := idle.query(9, "SELECT host_id FROM system.peers")
	if code, msg, ok := errorOf(resp); !ok || code != frame.ErrCodeOverloaded || !strings.Contains(msg, "shutting down") {
		t.Errorf("a new request while draining got %s; want OVERLOADED", describe(resp))
	}
	if resp := busy.await(1, 10*time.Second); frame.Opcode(resp) != frame.OpResult {
		t.Errorf("the request in flight at shutdown got %s; want its result", describe(resp))
	}
	<-stopped
}

// TestStreamIDReusedWhileInFlight: a client that sends a second request on
// a stream id whose first request is still in flight gets both answers on
// that stream, as from Cassandra itself (the proxy maps each to its own
// backend stream), and the connection goes on.
func TestStreamIDReusedWhileInFlight(t *testing.T) {
	c := singleCluster.Get(t)
	p := startProxy(t, c.Addrs, nil)
	rc := dialRaw(t, p.Addr, 4)
	rc.startup(nil)
	for i := 0; i < 2; i++ {
		if err := rc.send(frame.AppendQuery(nil, 4, 5, "SELECT keyspace_name FROM system_schema.keyspaces", consistencyOne, 0)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 2; i++ {
		if f := rc.await(5, 10*time.Second); frame.Opcode(f) != frame.OpResult {
			t.Errorf("answer %d on the reused stream: %s", i+1, describe(f))
		}
	}
	if rs := rc.mustRows("SELECT release_version FROM system.local"); len(rs.rows) != 1 {
		t.Errorf("the connection does not go on: %d rows", len(rs.rows))
	}
}
