package proxy_test

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/cqlgate/cqlgate/internal/fakenode"
	"github.com/cqlgate/cqlgate/internal/promtest"
	"github.com/cqlgate/cqlgate/internal/proxytest"
	"github.com/cqlgate/cqlgate/pkg/config"
	"github.com/cqlgate/cqlgate/pkg/frame"
)

// dialFrom opens a TCP connection to addr from the loopback address src
// ("" for any).
func dialFrom(t *testing.T, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second}
	if src != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(src)}
	}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s from %s: %v", addr, src, err)
	}
	t.Cleanup(func() { nc.Close() })
	return nc
}

// closedByPeer reports whether the proxy closed nc within wait.
func closedByPeer(nc net.Conn, wait time.Duration) bool {
	_ = nc.SetReadDeadline(time.Now().Add(wait))
	var b [1]byte
	_, err := nc.Read(b[:])
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return err != nil // EOF or reset
}

// A socket that never sends its STARTUP is closed after --handshake-timeout
// instead of holding a connection slot forever.
func TestIdleSocketClosedAfterHandshakeTimeout(t *testing.T) {
	node := fakenode.Start(t, fakenode.Config{})
	p := proxytest.Start(t, []string{node.Addr()}, func(cfg *config.Config) {
		cfg.HandshakeTimeout = 300 * time.Millisecond
	})
	idle := dialFrom(t, "", p.Addr)
	if !closedByPeer(idle, 10*time.Second) {
		t.Fatal("an idle socket still open 10 s after a 300 ms handshake timeout")
	}
	if got := promtest.Value(t, p.Reg, "cqlgate_client_rejected_connections_total"); got != 1 {
		t.Errorf("rejected connections = %v; want 1 (handshake_timeout)", got)
	}
}

// Idle sockets that fill every connection slot do not keep a well-behaved
// client out: its connection closes the oldest pending handshake, and it
// is served.
func TestHandshakeFloodDoesNotLockOutClients(t *testing.T) {
	node := fakenode.Start(t, fakenode.Config{})
	p := proxytest.Start(t, []string{node.Addr()}, func(cfg *config.Config) {
		cfg.MaxClientConnections = 50
		cfg.HandshakeTimeout = time.Minute // the flood stays for the whole test
	})
	for range 200 {
		dialFrom(t, "", p.Addr)
	}
	c := dialClient(t, p.Addr) // STARTUP, READY
	c.send(1, "SELECT * FROM system.local")
	c.flush()
	if code, msg := c.errorOn(1); code != -1 {
		t.Fatalf("a client after 200 idle sockets: error 0x%04x %s; want an answer", code, msg)
	}
}

// One address flooding handshakes evicts its own oldest pending ones, not
// those of other addresses (--max-pending-handshakes-per-address).
func TestHandshakeFloodFromOneAddressSparesOthers(t *testing.T) {
	node := fakenode.Start(t, fakenode.Config{})
	p := proxytest.Start(t, []string{node.Addr()}, func(cfg *config.Config) {
		cfg.MaxPendingHandshakes = 30
		cfg.MaxPendingHandshakesPerAddress = 10
		cfg.HandshakeTimeout = time.Minute
	})
	var others []net.Conn
	for range 5 {
		others = append(others, dialFrom(t, "127.0.0.3", p.Addr))
	}
	waitUntil(t, func() bool { return promtest.Value(t, p.Reg, "cqlgate_client_connections") >= 5 }, "the proxy to accept the first five")
	var flood []net.Conn
	for range 100 {
		flood = append(flood, dialFrom(t, "127.0.0.2", p.Addr))
	}
	// The flood's own oldest go: 90 of 100.
	waitUntil(t, func() bool {
		return promtest.Value(t, p.Reg, "cqlgate_client_rejected_connections_total") >= 90
	}, "the flood's oldest handshakes to be evicted")
	for i, nc := range others {
		if closedByPeer(nc, 50*time.Millisecond) {
			t.Errorf("pending handshake %d from another address was closed by a flood from 127.0.0.2", i)
		}
	}
	// Each of the five can still complete its handshake.
	for i, nc := range others {
		_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
		w, rd := frame.NewWriter(nc), frame.NewReader(nc, 1<<20)
		if err := w.WriteFrame(frame.AppendStartup(nil, frame.V4, 0, map[string]string{"CQL_VERSION": "3.0.0"})); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		b, err := rd.ReadFrame()
		if err != nil {
			if errors.Is(err, io.EOF) {
				t.Fatalf("connection %d closed before READY", i)
			}
			t.Fatalf("connection %d: %v", i, err)
		}
		if op := frame.Opcode(b.B); op != frame.OpReady {
			t.Errorf("connection %d: %s; want READY", i, frame.OpcodeName(op))
		}
		b.Release()
	}
	_ = flood
}

// A connection counts as served from the moment its READY is on the wire:
// a client that opens its next connection as soon as READY arrives must not
// find the previous one still pending, or the new connection evicts it as
// a stalled handshake and is served past --max-client-connections.
func TestReadyConnectionIsNotEvictedByTheNext(t *testing.T) {
	node := fakenode.Start(t, fakenode.Config{})
	p := proxytest.Start(t, []string{node.Addr()}, func(cfg *config.Config) {
		cfg.MaxClientConnections = 1
	})
	for i := range 200 {
		first := dialRaw(t, p.Addr, frame.V4)
		over, err := net.Dial("tcp", p.Addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = over.SetDeadline(time.Now().Add(10 * time.Second))
		w, rd := frame.NewWriter(over), frame.NewReader(over, 1<<20)
		if err := w.WriteFrame(frame.AppendOptions(nil, frame.V4, 7)); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		b, err := rd.ReadFrame()
		if err != nil {
			t.Fatalf("round %d: the connection over the limit: %v", i, err)
		}
		if code := errorCode(t, b.B); code != frame.ErrCodeOverloaded {
			t.Fatalf("round %d: the connection over the limit got %s; want OVERLOADED", i, describe(b.B))
		}
		b.Release()
		over.Close()
		first.nc.Close()
		waitFor(t, "the served connection to close", func() bool {
			return metricValue(t, p, "cqlgate_client_connections") == 0
		})
	}
}
