package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gocql2 "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/apache/cassandra-gocql-driver/v2/lz4"
	"github.com/gocql/gocql"

	"github.com/cqlgate/cqlgate/pkg/config"
	"github.com/cqlgate/cqlgate/pkg/frame"
)

// sniffDialer dials TCP and watches what the driver writes until its
// STARTUP, recording the STARTUP's protocol version and COMPRESSION option,
// and counts the bytes the driver reads.
type sniffDialer struct {
	mu       sync.Mutex
	startups []string // "v<version>/<compression>"
	read     atomic.Int64
}

func (d *sniffDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var nd net.Dialer
	nc, err := nd.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &sniffConn{Conn: nc, d: d}, nil
}

func (d *sniffDialer) seen() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.startups...)
}

type sniffConn struct {
	net.Conn
	d    *sniffDialer
	done bool // STARTUP seen: from then on frames may be segments or compressed
}

func (c *sniffConn) Write(b []byte) (int, error) {
	// Before STARTUP every frame is a plain v3+ frame and drivers write
	// whole frames.
	for p := b; !c.done && len(p) >= frame.HeaderLen; {
		h := frame.ParseHeader(p)
		if h.Length < 0 || len(p) < frame.HeaderLen+int(h.Length) {
			break
		}
		if h.Opcode == frame.OpStartup {
			opts, _ := frame.ReadStringMap(p[frame.HeaderLen : frame.HeaderLen+int(h.Length)])
			c.d.mu.Lock()
			c.d.startups = append(c.d.startups, fmt.Sprintf("v%d/%s", h.Version, strings.ToLower(opts["COMPRESSION"])))
			c.d.mu.Unlock()
			c.done = true
		}
		p = p[frame.HeaderLen+int(h.Length):]
	}
	return c.Conn.Write(b)
}

func (c *sniffConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.d.read.Add(int64(n))
	return n, err
}

// session is the part of a driver session the protocol test uses; both
// drivers implement it through small adapters.
type session interface {
	exec(q string, args ...any) error
	scanBlob(q string, args ...any) ([]byte, error)
	// pagedKeys runs q with the page size and returns the int column of
	// every row.
	pagedKeys(q string, pageSize int) ([]int, error)
}

type gocqlSession struct{ s *gocql.Session }

func (g gocqlSession) exec(q string, args ...any) error { return g.s.Query(q, args...).Exec() }
func (g gocqlSession) scanBlob(q string, args ...any) ([]byte, error) {
	var b []byte
	err := g.s.Query(q, args...).Scan(&b)
	return b, err
}
func (g gocqlSession) pagedKeys(q string, pageSize int) ([]int, error) {
	iter := g.s.Query(q).PageSize(pageSize).Iter()
	var out []int
	var k int
	for iter.Scan(&k) {
		out = append(out, k)
	}
	return out, iter.Close()
}

type gocql2Session struct{ s *gocql2.Session }

func (g gocql2Session) exec(q string, args ...any) error { return g.s.Query(q, args...).Exec() }
func (g gocql2Session) scanBlob(q string, args ...any) ([]byte, error) {
	var b []byte
	err := g.s.Query(q, args...).Scan(&b)
	return b, err
}
func (g gocql2Session) pagedKeys(q string, pageSize int) ([]int, error) {
	iter := g.s.Query(q).PageSize(pageSize).Iter()
	var out []int
	var k int
	for iter.Scan(&k) {
		out = append(out, k)
	}
	return out, iter.Close()
}

// TestProtocolVersionsAndCompression runs the same workload (1 MiB values,
// compressible and not, and paging) through gocql on protocol v3, v4 and
// v4 with snappy, and through cassandra-gocql-driver/v2 on its default
// (v5) and v5 with lz4, checking on the wire what each session negotiated
// and, with compression, that large responses do travel compressed.
func TestProtocolVersionsAndCompression(t *testing.T) {
	const rows, pageSize = 1000, 50
	c := singleCluster.Get(t)
	p := startProxy(t, c.Addrs, nil)
	admin := proxySession(t, p, nil)
	recreateKeyspace(t, admin, "it_proto", 1,
		"CREATE TABLE it_proto.blobs (k text PRIMARY KEY, b blob)",
		"CREATE TABLE it_proto.wide (p int, c int, PRIMARY KEY (p, c))")
	for start := 0; start < rows; start += 100 {
		b := admin.NewBatch(gocql.UnloggedBatch)
		for c := start; c < start+100; c++ {
			b.Query("INSERT INTO it_proto.wide (p, c) VALUES (0, ?)", c)
		}
		if err := admin.ExecuteBatch(b); err != nil {
			t.Fatal(err)
		}
	}

	cases := []struct {
		name       string
		open       func(t *testing.T, d *sniffDialer) session
		wantHello  string // the STARTUP every connection must send
		compressed bool
	}{
		{"gocql/v3", func(t *testing.T, d *sniffDialer) session {
			return gocqlSession{proxySession(t, p, func(cc *gocql.ClusterConfig) { cc.ProtoVersion = 3; cc.Dialer = d })}
		}, "v3/", false},
		{"gocql/v4", func(t *testing.T, d *sniffDialer) session {
			return gocqlSession{proxySession(t, p, func(cc *gocql.ClusterConfig) { cc.ProtoVersion = 4; cc.Dialer = d })}
		}, "v4/", false},
		{"gocql/v4+snappy", func(t *testing.T, d *sniffDialer) session {
			return gocqlSession{proxySession(t, p, func(cc *gocql.ClusterConfig) {
				cc.ProtoVersion = 4
				cc.Compressor = gocql.SnappyCompressor{}
				cc.Dialer = d
			})}
		}, "v4/snappy", true},
		{"gocql2/default", func(t *testing.T, d *sniffDialer) session {
			return gocql2Session{newSession2(t, p.Addr, func(cc *gocql2.ClusterConfig) { cc.Dialer = d })}
		}, "v5/", false},
		{"gocql2/lz4", func(t *testing.T, d *sniffDialer) session {
			return gocql2Session{newSession2(t, p.Addr, func(cc *gocql2.ClusterConfig) {
				cc.Compressor = lz4.LZ4Compressor{}
				cc.Dialer = d
			})}
		}, "v5/lz4", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := &sniffDialer{}
			s := tc.open(t, d)
			hellos := d.seen()
			if len(hellos) == 0 {
				t.Fatalf("no STARTUP seen on the wire")
			}
			for _, h := range hellos {
				if h != tc.wantHello {
					t.Fatalf("STARTUPs on the wire: %v, want every one %q", hellos, tc.wantHello)
				}
			}

			random := make([]byte, 1<<20)
			if _, err := rand.Read(random); err != nil {
				t.Fatal(err)
			}
			compressible := bytes.Repeat([]byte("cqlgate compresses this "), (1<<20)/24+1)[:1<<20]
			for i, want := range [][]byte{random, compressible} {
				key := fmt.Sprintf("%s-%d", tc.name, i)
				if err := s.exec("INSERT INTO it_proto.blobs (k, b) VALUES (?, ?)", key, want); err != nil {
					t.Fatalf("insert 1 MiB blob %s: %v", key, err)
				}
				before := d.read.Load()
				got, err := s.scanBlob("SELECT b FROM it_proto.blobs WHERE k = ?", key)
				if err != nil {
					t.Fatalf("read 1 MiB blob %s: %v", key, err)
				}
				wire := d.read.Load() - before
				if !bytes.Equal(got, want) {
					t.Fatalf("blob %s: got %d bytes, not byte-identical to the %d written", key, len(got), len(want))
				}
				if i == 1 {
					if tc.compressed && wire > 256<<10 {
						t.Errorf("reading a compressible 1 MiB blob took %d bytes on the wire, want it compressed (< 256 KiB)", wire)
					}
					if !tc.compressed && wire < 1<<20 {
						t.Errorf("reading a 1 MiB blob took only %d bytes on the wire without compression", wire)
					}
				}
			}

			keys, err := s.pagedKeys("SELECT c FROM it_proto.wide WHERE p = 0", pageSize)
			if err != nil {
				t.Fatalf("paging: %v", err)
			}
			if len(keys) != rows {
				t.Fatalf("paging: got %d rows, want %d", len(keys), rows)
			}
			for i, k := range keys {
				if k != i {
					t.Fatalf("paging: row %d has c=%d, want %d (rows lost, repeated or reordered)", i, k, i)
				}
			}
		})
	}
}

// newSession2 opens a cassandra-gocql-driver/v2 session to addr with
// default settings changed only by mod; it is closed at the end of the test.
func newSession2(t testing.TB, addr string, mod func(*gocql2.ClusterConfig)) *gocql2.Session {
	t.Helper()
	cc := gocql2.NewCluster(addr)
	if mod != nil {
		mod(cc)
	}
	s, err := cc.CreateSession()
	if err != nil {
		t.Fatalf("cassandra-gocql-driver/v2 session to %s: %v", addr, err)
	}
	t.Cleanup(s.Close)
	return s
}

// expectError reads the answer on stream and checks it is an ERROR with
// code whose message contains msg.
func expectError(t *testing.T, r *rawConn, stream int16, code int32, msg string) {
	t.Helper()
	f := r.await(stream, 10*time.Second)
	gotCode, gotMsg, ok := errorOf(f)
	if !ok || gotCode != code || !strings.Contains(gotMsg, msg) {
		t.Fatalf("v%d: got %s, want ERROR 0x%04x containing %q on stream %d", r.version, describe(f), code, msg, stream)
	}
}

// expectWorking checks the connection still answers a query.
func expectWorking(t *testing.T, r *rawConn, stream int16) {
	t.Helper()
	resp := r.query(stream, "SELECT release_version FROM system.local")
	rs, err := decodeRows(resp)
	if err != nil || len(rs.rows) != 1 {
		t.Fatalf("v%d: query after the bad frame: got %s (%v), want one row", r.version, describe(resp), err)
	}
}

// TestMalformedInput feeds the proxy broken and unexpected frames over raw
// sockets: each gets Cassandra's answer, the connection stays usable when
// the byte stream is still in sync, and nothing a client does breaks the
// proxy for others.
func TestMalformedInput(t *testing.T) {
	const maxFrame = 65536 // the smallest limit config allows
	c := singleCluster.Get(t)
	p := startProxy(t, c.Addrs, func(cfg *config.Config) { cfg.MaxFrameBytes = maxFrame })

	for _, v := range []byte{4, 5} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) { testMalformedFrames(t, p, v, maxFrame) })
	}
	t.Run("BadStartup", func(t *testing.T) { testBadStartup(t, p) })
	t.Run("UnsupportedVersion", func(t *testing.T) { testUnsupportedVersion(t, p) })
	t.Run("TruncatedFramesThenDisconnect", func(t *testing.T) { testTruncatedFramesThenDisconnect(t, p) })
}

// testMalformedFrames sends each kind of bad frame on a started connection
// of protocol version v, a connection of its own for each (so that one that
// falls out of sync does not fail the next), and checks the ERROR on the
// bad frame's stream and that a query on the same connection then works.
func testMalformedFrames(t *testing.T, p *testProxy, v byte, maxFrame int) {
	started := func(t *testing.T) *rawConn {
		t.Helper()
		r := dialRaw(t, p.Addr, v)
		r.startup(nil)
		return r
	}
	const selectVersion = "SELECT release_version FROM system.local"
	for _, tc := range []struct {
		name   string
		frame  []byte // the bad frame
		stream int16  // where its ERROR comes
		msg    string // what the ERROR's message contains
		next   int16  // the stream of the query after it
	}{
		{"UnknownOpcode", frame.AppendFrame(nil, v, false, 0, 5, 0x42, nil), 5, "", 6},
		{"ResponseOpcodeAsRequest", frame.AppendFrame(nil, v, false, 0, 7, frame.OpResult, []byte{0, 0, 0, 1}), 7, "", 8},
		// Over the size limit, body and all.
		{"OversizedFrame", frame.AppendQuery(nil, v, 9, "SELECT * FROM system.local WHERE key = '"+strings.Repeat("x", maxFrame)+"'", consistencyOne, 0), 9, "exceeds", 10},
		// Of another protocol version than the connection's.
		{"OtherVersion", frame.AppendQuery(nil, v-1, 11, selectVersion, consistencyOne, 0), 11, "", 12},
		// A negative stream id (reserved for events).
		{"NegativeStream", frame.AppendQuery(nil, v, -5, selectVersion, consistencyOne, 0), -5, "", 13},
		{"SecondStartup", frame.AppendStartup(nil, v, 14, map[string]string{"CQL_VERSION": "3.0.0"}), 14, "", 15},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := started(t)
			if err := r.send(tc.frame); err != nil {
				t.Fatal(err)
			}
			expectError(t, r, tc.stream, frame.ErrCodeProtocol, tc.msg)
			expectWorking(t, r, tc.next)
		})
	}

	t.Run("HighestStreamID", func(t *testing.T) {
		expectWorking(t, started(t), 32767)
	})

	t.Run("OptionsAfterStartup", func(t *testing.T) {
		// OPTIONS is answered at any time.
		r := started(t)
		if resp := r.roundTrip(frame.AppendOptions(nil, v, 16)); frame.Opcode(resp) != frame.OpSupported {
			t.Fatalf("OPTIONS after STARTUP: got %s, want SUPPORTED", describe(resp))
		} else if m, err := frame.ReadStringMultimap(frame.Body(resp)); err != nil || len(m["CQL_VERSION"]) == 0 || len(m["PROTOCOL_VERSIONS"]) == 0 {
			t.Errorf("OPTIONS after STARTUP: SUPPORTED %v (%v), want CQL_VERSION and PROTOCOL_VERSIONS", m, err)
		}
	})
}

// testBadStartup: requests before STARTUP and bad STARTUPs get errors, and
// a proper STARTUP on the same connection then works.
func testBadStartup(t *testing.T, p *testProxy) {
	r := dialRaw(t, p.Addr, 4)
	// A request before STARTUP.
	if err := r.send(frame.AppendQuery(nil, 4, 1, "SELECT release_version FROM system.local", consistencyOne, 0)); err != nil {
		t.Fatal(err)
	}
	expectError(t, r, 1, frame.ErrCodeProtocol, "")
	// STARTUP without CQL_VERSION, or with an unknown compression.
	if err := r.send(frame.AppendStartup(nil, 4, 2, map[string]string{"DRIVER_NAME": "x"})); err != nil {
		t.Fatal(err)
	}
	expectError(t, r, 2, frame.ErrCodeProtocol, "CQL_VERSION")
	if err := r.send(frame.AppendStartup(nil, 4, 3, map[string]string{"CQL_VERSION": "3.0.0", "COMPRESSION": "zstd-9000"})); err != nil {
		t.Fatal(err)
	}
	expectError(t, r, 3, frame.ErrCodeProtocol, "")
	// A proper STARTUP on the same connection then works.
	r.startup(nil)
	expectWorking(t, r, 4)
}

// testUnsupportedVersion: a client of a version the proxy does not speak
// gets a PROTOCOL_ERROR it can read.
func testUnsupportedVersion(t *testing.T, p *testProxy) {
	t.Run("v6", func(t *testing.T) {
		r := dialRaw(t, p.Addr, 6)
		if err := r.send(frame.AppendOptions(nil, 6, 0)); err != nil {
			t.Fatal(err)
		}
		f, err := r.readFrame(10 * time.Second)
		if err != nil {
			t.Fatalf("v6 OPTIONS: no answer: %v", err)
		}
		code, msg, ok := errorOf(f)
		if !ok || code != frame.ErrCodeProtocol || !strings.Contains(msg, "Invalid or unsupported protocol version") {
			t.Fatalf("v6 OPTIONS: got %s, want PROTOCOL_ERROR \"Invalid or unsupported protocol version...\"", describe(f))
		}
	})

	t.Run("v1", func(t *testing.T) {
		// A v1 client (8-byte header) gets the error in its own format.
		nc, err := net.DialTimeout("tcp", p.Addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		if _, err := nc.Write([]byte{0x01, 0, 7, frame.OpOptions, 0, 0, 0, 0}); err != nil {
			t.Fatal(err)
		}
		_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		hdr := make([]byte, 8)
		if _, err := io.ReadFull(nc, hdr); err != nil {
			t.Fatalf("v1 OPTIONS: no answer: %v", err)
		}
		if hdr[0] != 0x81 || hdr[2] != 7 || hdr[3] != frame.OpError {
			t.Fatalf("v1 OPTIONS: answer header %x, want version 0x81, stream 7, opcode ERROR", hdr)
		}
		body := make([]byte, binary.BigEndian.Uint32(hdr[4:]))
		if _, err := io.ReadFull(nc, body); err != nil {
			t.Fatal(err)
		}
		if code, msg, err := frame.ErrorCode(body); err != nil || code != frame.ErrCodeProtocol || !strings.Contains(msg, "Invalid or unsupported protocol version") {
			t.Fatalf("v1 OPTIONS: got ERROR 0x%04x %q (%v), want PROTOCOL_ERROR about the version", code, msg, err)
		}
	})
}

// testTruncatedFramesThenDisconnect: clients that leave halfway through a
// frame, or with requests still in flight, cost the proxy nothing: their
// connections and backend streams are freed and a new session works.
func testTruncatedFramesThenDisconnect(t *testing.T, p *testProxy) {
	// The earlier subtests' connections were closed by their cleanups.
	waitFor(t, 10*time.Second, "client connections from the earlier subtests to close", func() (bool, string) {
		n := metricSum(t, p.Reg, "cqlgate_client_connections")
		return n == 0, fmt.Sprintf("cqlgate_client_connections = %v", n)
	})
	accepted := metricSum(t, p.Reg, "cqlgate_client_connections_total")
	halves := [][]byte{
		// half a header, before STARTUP
		{0x04, 0x00, 0x00},
		// a header announcing 1000 body bytes, and 10 of them
		append(frame.AppendFrame(nil, 4, false, 0, 1, frame.OpOptions, nil)[:5], 0, 0, 0x03, 0xe8, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10),
	}
	for i, half := range halves {
		r := dialRaw(t, p.Addr, 4)
		if i > 0 {
			r.startup(nil)
		}
		if _, err := r.nc.Write(half); err != nil {
			t.Fatal(err)
		}
		r.nc.Close()
	}
	// After STARTUP, half a frame inside a v5 segment stream.
	r5 := dialRaw(t, p.Addr, 5)
	r5.startup(nil)
	full := frame.AppendQuery(nil, 5, 1, "SELECT release_version FROM system.local", consistencyOne, 0)
	var seg bytes.Buffer
	w := frame.NewWriter(&seg)
	w.EnableSegments(frame.CompressionNone)
	if err := w.WriteFrame(full); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := r5.nc.Write(seg.Bytes()[:seg.Len()/2]); err != nil {
		t.Fatal(err)
	}
	r5.nc.Close()

	// A client that pipelines requests and leaves without reading the
	// answers.
	gone := dialRaw(t, p.Addr, 4)
	gone.startup(nil)
	var burst []byte
	for i := 0; i < 200; i++ {
		burst = frame.AppendQuery(burst, 4, int16(i), "SELECT * FROM system_schema.columns", consistencyOne, 0)
	}
	if _, err := gone.nc.Write(burst); err != nil {
		t.Fatal(err)
	}
	gone.nc.Close()

	waitFor(t, 10*time.Second, "the proxy to accept and then drop the 4 broken connections", func() (bool, string) {
		n := metricSum(t, p.Reg, "cqlgate_client_connections")
		total := metricSum(t, p.Reg, "cqlgate_client_connections_total")
		return n == 0 && total >= accepted+4, fmt.Sprintf("cqlgate_client_connections = %v (want 0), %v accepted since (want 4)", n, total-accepted)
	})
	waitFor(t, 20*time.Second, "the abandoned requests' backend streams to be freed", func() (bool, string) {
		n := metricSum(t, p.Reg, "cqlgate_backend_in_flight_requests")
		return n == 0, fmt.Sprintf("cqlgate_backend_in_flight_requests = %v", n)
	})
	// A new session works.
	s := proxySession(t, p, nil)
	var rv string
	if err := s.Query("SELECT release_version FROM system.local").Scan(&rv); err != nil || rv == "" {
		t.Fatalf("new session after broken clients: got (%q, %v)", rv, err)
	}
}

// TestRequestsWithCustomPayload: a request may carry a custom payload
// (flag 0x04, drivers expose it) between its header and its message. The
// proxy reads every kind of request past it: USE switches the keyspace,
// queries of system tables are still rewritten, PREPARE and EXECUTE work.
func TestRequestsWithCustomPayload(t *testing.T) {
	c := singleCluster.Get(t)
	p := startProxy(t, c.Addrs, nil)
	admin := proxySession(t, p, nil)
	recreateKeyspace(t, admin, "it_payload", 1, "CREATE TABLE it_payload.t (k int PRIMARY KEY, v int)")
	mustExec(t, admin, "INSERT INTO it_payload.t (k, v) VALUES (1, 10)")
	proxyHost, _, err := net.SplitHostPort(p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	// A [bytes map] of two entries: one the proxy reads, one it does not.
	payload := []byte{0, 2}
	for _, kv := range [][2]string{{"cqlgate-idempotent", "true"}, {"app", "x"}} {
		payload = binary.BigEndian.AppendUint16(payload, uint16(len(kv[0])))
		payload = append(payload, kv[0]...)
		payload = binary.BigEndian.AppendUint32(payload, uint32(len(kv[1])))
		payload = append(payload, kv[1]...)
	}
	for _, v := range []byte{4, 5} {
		r := dialRaw(t, p.Addr, v)
		r.startup(nil)
		// with moves request f's message behind the payload.
		with := func(f []byte) []byte {
			h := frame.ParseHeader(f)
			return frame.AppendFrame(nil, v, false, h.Flags|frame.FlagCustomPayload, h.Stream, h.Opcode, append(append([]byte(nil), payload...), frame.Body(f)...))
		}
		query := func(q string) []byte { return r.roundTrip(with(frame.AppendQuery(nil, v, 1, q, consistencyOne, 0))) }

		if ks, err := frame.SetKeyspaceName(resultBodyOf(t, query("USE it_payload"))); err != nil || ks != "it_payload" {
			t.Fatalf("v%d USE with a payload: keyspace %q, %v", v, ks, err)
		}
		rs, err := decodeRows(query("SELECT v FROM t WHERE k = 1"))
		if err != nil || len(rs.rows) != 1 || binary.BigEndian.Uint32(rs.rows[0][0]) != 10 {
			t.Fatalf("v%d unqualified SELECT with a payload: %+v, %v; want v = 10", v, rs.rows, err)
		}
		rs, err = decodeRows(query("SELECT rpc_address FROM system.local"))
		if err != nil || len(rs.rows) != 1 || net.IP(rs.rows[0][0]).String() != proxyHost {
			t.Fatalf("v%d system.local with a payload: %+v, %v; want rpc_address %s, the proxy's", v, rs.rows, err, proxyHost)
		}
		id, meta, err := prepared(r.roundTrip(with(frame.AppendPrepare(nil, v, 1, "SELECT v FROM t WHERE k = 1", ""))), v)
		if err != nil {
			t.Fatalf("v%d PREPARE with a payload: %v", v, err)
		}
		rs, err = decodeRows(r.roundTrip(with(appendExecute(nil, v, 1, id, meta, consistencyOne, nil))))
		if err != nil || len(rs.rows) != 1 {
			t.Fatalf("v%d EXECUTE with a payload: %+v, %v", v, rs.rows, err)
		}
		// A payload that claims more than the frame holds is a protocol error.
		bad := frame.AppendFrame(nil, v, false, frame.FlagCustomPayload, 1, frame.OpQuery, []byte{0, 9, 0, 1})
		if code, msg, ok := errorOf(r.roundTrip(bad)); !ok || code != frame.ErrCodeProtocol {
			t.Fatalf("v%d truncated payload: got code %#x %q, want PROTOCOL_ERROR", v, code, msg)
		}
	}
}
