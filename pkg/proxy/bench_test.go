package proxy_test

// Hot-path benchmarks. Cassandra is far too noisy to see a few
// microseconds of proxy CPU, so these drive the proxy against a minimal
// in-process CQL responder (answers only what the proxy and the benchmark
// client send) and compare with the same client talking to the responder
// directly. The difference in process CPU per request is the proxy's cost.
// Correctness is tested against real Cassandra elsewhere; this is a scale.

import (
	"bytes"
	"errors"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/datastax/go-cassandra-native-protocol/datatype"
	"github.com/datastax/go-cassandra-native-protocol/message"
	"github.com/datastax/go-cassandra-native-protocol/primitive"

	"github.com/cqlgate/cqlgate/internal/proxytest"
	"github.com/cqlgate/cqlgate/pkg/config"
	"github.com/cqlgate/cqlgate/pkg/frame"
)

// responder is a stand-in CQL node for benchmarks.
type responder struct {
	ln       net.Listener
	local    []byte // RESULT body for system.local
	empty    []byte // RESULT body with no rows, for peers
	row      []byte // RESULT body for everything else
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    []net.Conn
	shutdown bool
}

func encodeResult(tb testing.TB, version byte, m message.Message) []byte {
	tb.Helper()
	var codec message.Codec
	for _, c := range message.DefaultMessageCodecs {
		if c.GetOpCode() == primitive.OpCodeResult {
			codec = c
		}
	}
	var buf bytes.Buffer
	if err := codec.Encode(m, &buf, primitive.ProtocolVersion(version)); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

func newResponder(tb testing.TB, version byte) *responder {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	col := func(name string, t datatype.DataType) *message.ColumnMetadata {
		return &message.ColumnMetadata{Keyspace: "system", Table: "local", Name: name, Type: t}
	}
	setOf := func(ss ...string) []byte {
		b := []byte{0, 0, 0, byte(len(ss))}
		for _, s := range ss {
			b = append(b, 0, 0, 0, byte(len(s)))
			b = append(b, s...)
		}
		return b
	}
	hostID := bytes.Repeat([]byte{7}, 16)
	r := &responder{ln: ln}
	r.local = encodeResult(tb, version, &message.RowsResult{
		Metadata: &message.RowsMetadata{ColumnCount: 9, Columns: []*message.ColumnMetadata{
			col("key", datatype.Varchar), col("cluster_name", datatype.Varchar), col("data_center", datatype.Varchar),
			col("rack", datatype.Varchar), col("host_id", datatype.Uuid), col("partitioner", datatype.Varchar),
			col("release_version", datatype.Varchar), col("schema_version", datatype.Uuid),
			col("tokens", datatype.NewSet(datatype.Varchar)),
		}},
		Data: message.RowSet{{[]byte("local"), []byte("bench"), []byte("dc1"), []byte("r1"), hostID,
			[]byte("org.apache.cassandra.dht.Murmur3Partitioner"), []byte("5.0.4"), hostID, setOf("0")}},
	})
	r.empty = encodeResult(tb, version, &message.RowsResult{
		Metadata: &message.RowsMetadata{ColumnCount: 1, Columns: []*message.ColumnMetadata{col("peer", datatype.Inet)}},
	})
	r.row = encodeResult(tb, version, &message.RowsResult{
		Metadata: &message.RowsMetadata{ColumnCount: 1, Columns: []*message.ColumnMetadata{{Keyspace: "ks", Table: "kv", Name: "v", Type: datatype.Blob}}},
		Data:     message.RowSet{{bytes.Repeat([]byte{'x'}, 100)}},
	})
	r.wg.Add(1)
	go r.accept()
	return r
}

func (r *responder) addr() string { return r.ln.Addr().String() }

func (r *responder) close() {
	r.mu.Lock()
	r.shutdown = true
	for _, c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.ln.Close()
	r.wg.Wait()
}

func (r *responder) accept() {
	defer r.wg.Done()
	for {
		nc, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.mu.Lock()
		if r.shutdown {
			r.mu.Unlock()
			nc.Close()
			return
		}
		r.conns = append(r.conns, nc)
		r.mu.Unlock()
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.serve(nc)
		}()
	}
}

// serve answers one connection; like Cassandra it writes answers as they
// are ready and flushes when its input runs dry.
func (r *responder) serve(nc net.Conn) {
	defer nc.Close()
	rd := frame.NewReader(nc, 1<<20)
	w := frame.NewWriter(nc)
	var out []byte
	for {
		b, err := rd.ReadFrame()
		if err != nil {
			return
		}
		h := frame.ParseHeader(b.B)
		body := frame.Body(b.B)
		out = out[:0]
		switch h.Opcode {
		case frame.OpStartup, frame.OpRegister:
			out = frame.AppendReady(out, h.Version, h.Stream)
		case frame.OpOptions:
			out = frame.AppendSupported(out, h.Version, h.Stream, map[string][]string{"CQL_VERSION": {"3.4.7"}})
		case frame.OpQuery:
			q, _ := frame.QueryString(body)
			res := r.row
			switch {
			case bytes.Contains(q, []byte("system.local")):
				res = r.local
			case bytes.Contains(q, []byte("system.peers")):
				res = r.empty
			}
			out = frame.AppendFrame(out, h.Version, true, 0, h.Stream, frame.OpResult, res)
		default:
			out = frame.AppendFrame(out, h.Version, true, 0, h.Stream, frame.OpResult, r.row)
		}
		b.Release()
		if err := w.WriteFrame(out); err != nil {
			return
		}
		if h.Opcode == frame.OpStartup && h.Version >= frame.V5 {
			if err := w.Flush(); err != nil {
				return
			}
			rd.EnableSegments(frame.CompressionNone)
			w.EnableSegments(frame.CompressionNone)
		}
		if rd.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return
			}
		}
	}
}

// pipelinedClient keeps `depth` QUERY requests in flight on one connection,
// like a driver with many concurrent callers.
func runPipelined(b *testing.B, addr string, version byte, conns, depth int) {
	b.Helper()
	var wg sync.WaitGroup
	per := b.N / conns
	if per == 0 {
		per = 1
	}
	errs := make(chan error, conns)
	for i := 0; i < conns; i++ {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		defer nc.Close()
		rd := frame.NewReader(nc, 1<<20)
		w := frame.NewWriter(nc)
		if err := w.WriteFrame(frame.AppendStartup(nil, version, 0, map[string]string{"CQL_VERSION": "3.0.0"})); err != nil {
			b.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			b.Fatal(err)
		}
		resp, err := rd.ReadFrame()
		if err != nil {
			b.Fatal(err)
		}
		resp.Release()
		if version >= frame.V5 {
			rd.EnableSegments(frame.CompressionNone)
			w.EnableSegments(frame.CompressionNone)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- pipeline(rd, w, version, per, depth)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
}

func pipeline(rd *frame.Reader, w *frame.Writer, version byte, n, depth int) error {
	q := frame.AppendQuery(nil, version, 0, "SELECT v FROM ks.kv WHERE k = 1", 0x0001, 0)
	sent, got := 0, 0
	for got < n {
		for sent < n && sent-got < depth {
			frame.SetStream(q, int16(sent%depth))
			if err := w.WriteFrame(q); err != nil {
				return err
			}
			sent++
		}
		if err := w.Flush(); err != nil {
			return err
		}
		// Read what has arrived, at least one.
		for {
			resp, err := rd.ReadFrame()
			if err != nil {
				return err
			}
			op := frame.Opcode(resp.B)
			var code int32
			if op == frame.OpError {
				code, _, _ = frame.ErrorCode(frame.Body(resp.B))
			}
			resp.Release()
			if op != frame.OpResult && code != frame.ErrCodeOverloaded {
				return errors.New("unexpected answer " + frame.OpcodeName(op))
			}
			got++
			if rd.Buffered() == 0 || got == n {
				break
			}
		}
	}
	return nil
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkForward reports process CPU per request (cpu-ns/op) for a
// pipelined client talking to the responder directly and through the proxy;
// proxy cost = proxied - direct. In the "shed" case the proxy admits one
// request at a time and has no queue, so nearly every request is answered
// OVERLOADED by the proxy itself: the cost of a rejection under overload.
func BenchmarkForward(b *testing.B) {
	for _, v := range []byte{frame.V4, frame.V5} {
		for _, mode := range []string{"direct", "proxied", "shed"} {
			b.Run(fmtName(v, mode), func(b *testing.B) {
				r := newResponder(b, v)
				defer r.close()
				addr := r.addr()
				switch mode {
				case "proxied":
					p := proxytest.Start(b, []string{addr}, nil)
					defer p.Stop()
					addr = p.Addr
				case "shed":
					p := proxytest.Start(b, []string{addr}, func(cfg *config.Config) {
						cfg.NodeLimit = 1
						cfg.QueueLength = 0
					})
					defer p.Stop()
					addr = p.Addr
				}
				b.ReportAllocs()
				b.ResetTimer()
				start := cpuTime()
				runPipelined(b, addr, v, 2, 64)
				b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

func fmtName(v byte, mode string) string { return "v" + string('0'+v) + "/" + mode }
