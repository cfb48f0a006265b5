package proxy_test

// Hot-path benchmarks. Cassandra is far too noisy to see a few
// microseconds of proxy CPU, so these drive the proxy against an
// in-process fake node (internal/fakenode, which serves the benchmark's
// query from a precomputed answer) and compare with the same client
// talking to the node directly. The difference in process CPU per request is the proxy's cost.
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

	"github.com/cqlgate/cqlgate/internal/fakenode"
	"github.com/cqlgate/cqlgate/internal/proxytest"
	"github.com/cqlgate/cqlgate/pkg/config"
	"github.com/cqlgate/cqlgate/pkg/frame"
)

// benchNode starts a fake node answering the benchmark's query with one
// precomputed 100-byte row; the proxy's topology queries get a one-node
// cluster.
func benchNode(tb testing.TB) *fakenode.Node {
	n := fakenode.Start(tb, fakenode.Config{})
	n.SetTable("ks.kv", []fakenode.Column{fakenode.Key("k", datatype.Int), fakenode.Col("v", datatype.Blob)},
		[][]byte{fakenode.Int(1), bytes.Repeat([]byte{'x'}, 100)})
	return n
}

// runPipelined keeps `depth` QUERY requests in flight on each of `conns`
// connections, like a driver with many concurrent callers, until b.N
// answers have come back.
func runPipelined(b *testing.B, addr string, version byte, conns, depth int) {
	b.Helper()
	cs := dialPipelined(b, addr, version, conns)
	if err := cs.run(max(b.N/conns, 1), depth); err != nil {
		b.Fatal(err)
	}
}

// pipelinedConns are client connections past STARTUP, ready to pipeline.
type pipelinedConns struct {
	version byte
	rds     []*frame.Reader
	ws      []*frame.Writer
}

func dialPipelined(b *testing.B, addr string, version byte, conns int) *pipelinedConns {
	b.Helper()
	cs := &pipelinedConns{version: version}
	for i := 0; i < conns; i++ {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { nc.Close() })
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
		cs.rds, cs.ws = append(cs.rds, rd), append(cs.ws, w)
	}
	return cs
}

// run sends per requests on each connection at once, depth in flight on
// each, and waits for their answers.
func (cs *pipelinedConns) run(per, depth int) error {
	var wg sync.WaitGroup
	errc := make(chan error, len(cs.rds))
	for i := range cs.rds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errc <- pipeline(cs.rds[i], cs.ws[i], cs.version, per, depth)
		}()
	}
	wg.Wait()
	close(errc)
	var errs []error
	for err := range errc {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
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
// pipelined client talking to the fake node directly and through the proxy;
// proxy cost = proxied - direct; "nostats" is proxied with statement
// statistics off (--statement-stats-entries 0), for their cost. In the "shed" case the proxy admits one
// request at a time and has no queue, so nearly every request is answered
// OVERLOADED by the proxy itself: the cost of a rejection under overload.
func BenchmarkForward(b *testing.B) {
	for _, v := range []byte{frame.V4, frame.V5} {
		for _, mode := range []string{"direct", "proxied", "nostats", "queued", "queued40", "shed"} {
			b.Run(fmtName(v, mode), func(b *testing.B) {
				n := benchNode(b)
				defer n.Close()
				addr := n.Addr()
				switch mode {
				case "proxied":
					p := proxytest.Start(b, []string{addr}, nil)
					defer p.Stop()
					addr = p.Addr
				case "nostats":
					p := proxytest.Start(b, []string{addr}, func(cfg *config.Config) {
						cfg.StatementStatsEntries = 0
					})
					defer p.Stop()
					addr = p.Addr
				case "queued":
					// 128 in flight against a limit of 16: nearly every
					// request waits in the limiter's queue and is sent by
					// whoever frees a permit (request.Admitted).
					p := proxytest.Start(b, []string{addr}, func(cfg *config.Config) {
						cfg.LimitMode, cfg.NodeLimit = "fixed", 16
					})
					defer p.Stop()
					addr = p.Addr
				case "queued40":
					// 128 in flight against a limit of 40: the fleet law's
					// limit before it reaches a lone sidecar's demand
					// (limiter.fleet.raised). The node's answers come in
					// smaller bursts, and each admits a queued request.
					p := proxytest.Start(b, []string{addr}, func(cfg *config.Config) {
						cfg.LimitMode, cfg.NodeLimit = "fixed", 40
					})
					defer p.Stop()
					addr = p.Addr
				case "shed":
					p := proxytest.Start(b, []string{addr}, func(cfg *config.Config) {
						cfg.LimitMode, cfg.NodeLimit = "fixed", 1
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
