package proxy_test

// Tests of the request state machine (request.go, hedge.go) against fake
// nodes: each one fails on the code before the fix it names.

import (
	"encoding/binary"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/datastax/go-cassandra-native-protocol/datatype"

	"github.com/cqlgate/cqlgate/internal/fakenode"
	"github.com/cqlgate/cqlgate/internal/promtest"
	"github.com/cqlgate/cqlgate/internal/proxytest"
	"github.com/cqlgate/cqlgate/pkg/config"
	"github.com/cqlgate/cqlgate/pkg/frame"
)

// rawConn is a client connection that speaks frames, so that a test sees
// every answer the proxy sends, on which stream, and nothing is retried or
// hidden by a driver.
type rawConn struct {
	tb      testing.TB
	version byte
	nc      net.Conn
	rd      *frame.Reader
	w       *frame.Writer
}

// dialRaw connects to addr and sends STARTUP in version (segments on v5).
func dialRaw(tb testing.TB, addr string, version byte) *rawConn {
	tb.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { nc.Close() })
	c := &rawConn{tb: tb, version: version, nc: nc, rd: frame.NewReader(nc, 1<<20), w: frame.NewWriter(nc)}
	if resp := c.roundTrip(frame.AppendStartup(nil, version, 0, map[string]string{"CQL_VERSION": "3.0.0"})); frame.Opcode(resp) != frame.OpReady {
		tb.Fatalf("STARTUP v%d: %s", version, describe(resp))
	}
	if version >= frame.V5 {
		c.rd.EnableSegments(frame.CompressionNone)
		c.w.EnableSegments(frame.CompressionNone)
	}
	return c
}

func (c *rawConn) send(f []byte) {
	c.tb.Helper()
	if err := c.w.WriteFrame(f); err != nil {
		c.tb.Fatal(err)
	}
	if err := c.w.Flush(); err != nil {
		c.tb.Fatal(err)
	}
}

// read returns the next frame the proxy sends, failing the test after 10 s.
func (c *rawConn) read() []byte {
	c.tb.Helper()
	_ = c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := c.rd.ReadFrame()
	if err != nil {
		c.tb.Fatalf("reading an answer: %v", err)
	}
	out := append([]byte(nil), b.B...)
	b.Release()
	return out
}

// roundTrip sends f and returns its answer, which must be the next frame:
// requests are sent one at a time, so an answer on another stream is an
// answer too many.
func (c *rawConn) roundTrip(f []byte) []byte {
	c.tb.Helper()
	c.send(f)
	resp := c.read()
	if frame.Stream(resp) != frame.Stream(f) {
		c.tb.Fatalf("sent stream %d, got an answer on stream %d first: %s", frame.Stream(f), frame.Stream(resp), describe(resp))
	}
	return resp
}

// prepare prepares q and returns its PREPARED metadata.
func (c *rawConn) prepare(stream int16, q string) *frame.PreparedMeta {
	c.tb.Helper()
	resp := c.roundTrip(frame.AppendPrepare(nil, c.version, stream, q, ""))
	meta, err := frame.ParsePrepared(c.version, frame.Body(resp))
	if frame.Opcode(resp) != frame.OpResult || err != nil {
		c.tb.Fatalf("PREPARE %q: %s (%v)", q, describe(resp), err)
	}
	return meta
}

// execute builds an EXECUTE of id (with the v5 result metadata id metaID)
// at consistency ONE, binding values.
func execute(version byte, stream int16, id, metaID []byte, skipMetadata bool, values ...[]byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(len(id)))
	b = append(b, id...)
	if version >= frame.V5 {
		b = binary.BigEndian.AppendUint16(b, uint16(len(metaID)))
		b = append(b, metaID...)
	}
	b = binary.BigEndian.AppendUint16(b, 0x0001)
	var flags uint32
	if len(values) > 0 {
		flags |= frame.QueryFlagValues
	}
	if skipMetadata {
		flags |= frame.QueryFlagSkipMetadata
	}
	if version >= frame.V5 {
		b = binary.BigEndian.AppendUint32(b, flags)
	} else {
		b = append(b, byte(flags))
	}
	if len(values) > 0 {
		b = binary.BigEndian.AppendUint16(b, uint16(len(values)))
		for _, v := range values {
			b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
			b = append(b, v...)
		}
	}
	return frame.AppendFrame(nil, version, false, 0, stream, frame.OpExecute, b)
}

// describe names an answer for failure messages: its opcode, and an
// error's code and message.
func describe(f []byte) string {
	if len(f) < frame.HeaderLen {
		return "short frame"
	}
	s := frame.OpcodeName(frame.Opcode(f)) + " on stream " + strconv.Itoa(int(frame.Stream(f)))
	if frame.Opcode(f) == frame.OpError {
		if body, err := frame.MessageBody(f); err == nil {
			code, msg, _ := frame.ErrorCode(body)
			s += " 0x" + strconv.FormatInt(int64(code), 16) + " " + msg
		}
	}
	return s
}

// errorCode returns the code of an ERROR answer, failing on any other.
func errorCode(tb testing.TB, f []byte) int32 {
	tb.Helper()
	if frame.Opcode(f) != frame.OpError {
		tb.Fatalf("want an ERROR, got %s", describe(f))
	}
	body, _ := frame.MessageBody(f)
	code, _, err := frame.ErrorCode(body)
	if err != nil {
		tb.Fatalf("ERROR answer: %v", err)
	}
	return code
}

// metricValue returns the value of the sample line of metric (name and
// labels, as in the text format), or -1 if it is absent.
func metricValue(tb testing.TB, p *proxytest.Proxy, metric string) float64 {
	tb.Helper()
	for _, l := range strings.Split(promtest.Text(tb, p.Reg), "\n") {
		if v, ok := strings.CutPrefix(l, metric+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				tb.Fatalf("metric %s: %v", l, err)
			}
			return f
		}
	}
	return -1
}

// metricSum returns the sum of every sample of the metric name.
func metricSum(tb testing.TB, p *proxytest.Proxy, name string) float64 {
	tb.Helper()
	sum := 0.0
	for _, l := range strings.Split(promtest.Text(tb, p.Reg), "\n") {
		if !strings.HasPrefix(l, name+" ") && !strings.HasPrefix(l, name+"{") {
			continue
		}
		f, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
		if err != nil {
			tb.Fatalf("metric %s: %v", l, err)
		}
		sum += f
	}
	return sum
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waitNodesUp waits until the proxy reports every node of cl up.
func waitNodesUp(tb testing.TB, p *proxytest.Proxy, cl *fakenode.Cluster) {
	tb.Helper()
	for _, addr := range cl.Addrs() {
		waitFor(tb, "node "+addr+" up", func() bool {
			return metricValue(tb, p, `cqlgate_backend_node_up{node="`+addr+`"}`) == 1
		})
	}
}

// waitPoolsConnected waits until the proxy has a pool connection to every
// node of cl: a node is up for the proxy (its control connection sees it)
// before the pool's dial to it has finished.
func waitPoolsConnected(tb testing.TB, p *proxytest.Proxy, cl *fakenode.Cluster) {
	tb.Helper()
	for _, addr := range cl.Addrs() {
		waitFor(tb, "a pool connection to "+addr, func() bool {
			return metricValue(tb, p, `cqlgate_backend_connections{node="`+addr+`"}`) >= 1
		})
	}
}

// poolKiller makes the proxy's v4 connections fail while its v5 ones (the
// proxy's own pool, opened at start in the highest version) stay up: every
// v4 frame a node reads once it is on resets its connection, new ones'
// STARTUP included. The nodes stay up for the proxy, which still has a
// pool connected to each, while a v4 client's pool has no connection.
type poolKiller struct{ on atomic.Bool }

func (k *poolKiller) hook(_ *fakenode.Node, r fakenode.Request) fakenode.Action {
	if k.on.Load() && r.Version == frame.V4 {
		return fakenode.Action{Fault: fakenode.Reset}
	}
	return fakenode.Action{}
}

var kvCols = []fakenode.Column{fakenode.Key("k", datatype.Int), fakenode.Col("v", datatype.Varchar)}

// TestHedgeTimerDisarmedWhenQueueingFails: a hedge timer armed before the
// request is queued is disarmed when no connection takes the request. Before
// the fix, failAt pooled the request with its timer armed, and when it fired
// Hedge dereferenced the pooled request's nil client on the scheduler
// goroutine: the process crashed.
func TestHedgeTimerDisarmedWhenQueueingFails(t *testing.T) {
	const delay = 20 * time.Millisecond
	cl := fakenode.StartCluster(t, 2, fakenode.Config{})
	cl.SetTable("ks.kv", kvCols, [][]byte{fakenode.Int(1), fakenode.Text("one")})
	var kill poolKiller
	cl.SetHook(kill.hook)
	p := proxytest.Start(t, cl.Addrs(), func(c *config.Config) {
		c.SpeculativeMaxExecutions = 1
		c.SpeculativeDelay = delay
		c.ConnectionsPerNode = 1
	})
	waitNodesUp(t, p, cl)

	c := dialRaw(t, p.Addr, frame.V4)
	const q = "SELECT * FROM ks.kv WHERE k = ?"
	meta := c.prepare(1, q)
	// One success gives the statement a latency class: from then on its
	// EXECUTEs arm a hedge timer.
	if resp := c.roundTrip(execute(4, 2, meta.ID, nil, false, fakenode.Int(1))); frame.Opcode(resp) != frame.OpResult {
		t.Fatalf("first EXECUTE: %s", describe(resp))
	}

	// Both v4 connections are reset by the next EXECUTE (sent to one node,
	// then retried on the other), and cannot be opened again.
	kill.on.Store(true)
	errorCode(t, c.roundTrip(execute(4, 3, meta.ID, nil, false, fakenode.Int(1))))
	waitNodesUp(t, p, cl)
	skipped := metricSum(t, p, "cqlgate_speculative_skipped_total")

	// Armed, then no connection takes it: one error answer.
	resp := c.roundTrip(execute(4, 4, meta.ID, nil, false, fakenode.Int(1)))
	if code := errorCode(t, resp); code != frame.ErrCodeServer {
		t.Fatalf("EXECUTE with no connection: %s, want a SERVER_ERROR", describe(resp))
	}
	if got := metricSum(t, p, "cqlgate_speculative_skipped_total"); got != skipped {
		t.Fatalf("the request was not armed (hedges skipped went from %v to %v): the test tests nothing", skipped, got)
	}
	// Past the hedge delay, once the scheduler has dropped or fired every
	// timer: nothing crashed, no hedge went out, and the next answer on
	// the connection is the next request's.
	waitFor(t, "the hedge timers to fire or be dropped", func() bool {
		return metricValue(t, p, "cqlgate_speculative_timers_pending") == 0
	})
	if resp := c.roundTrip(frame.AppendOptions(nil, 4, 5)); frame.Opcode(resp) != frame.OpSupported {
		t.Fatalf("OPTIONS: %s", describe(resp))
	}
	if got := metricValue(t, p, "cqlgate_speculative_executions_total"); got != 0 {
		t.Errorf("%v hedges sent for requests that were never queued", got)
	}
}

// TestUnsentRequestsReleasedAsDropped: a request no connection took goes
// back to the limiter as Dropped. Before the fix it went back as a Success
// with the few microseconds it took to fail: with the adaptive limit, a
// burst of them filled a sample window (100 samples) by itself, which then
// closed and doubled the node's slow-start limit, as if the node had
// answered them all. The node's limit must not move on requests it never
// saw.
func TestUnsentRequestsReleasedAsDropped(t *testing.T) {
	cl := fakenode.StartCluster(t, 1, fakenode.Config{})
	cl.SetTable("ks.kv", kvCols, [][]byte{fakenode.Int(1), fakenode.Text("one")})
	var kill poolKiller
	cl.SetHook(kill.hook)
	p := proxytest.Start(t, cl.Addrs(), func(c *config.Config) {
		c.SpeculativeMaxExecutions = 0
		c.ConnectionsPerNode = 1
		c.LimitMode = "adaptive"
		c.LimitMin = 2 // slow start from 2: one request in flight is half of it
	})
	waitNodesUp(t, p, cl)
	node := cl.Addrs()[0]
	limit := `cqlgate_limiter_limit{node="` + node + `"}`
	changes := `cqlgate_limiter_limit_changes_total{node="` + node + `"}`

	c := dialRaw(t, p.Addr, frame.V4)
	const q = "SELECT * FROM ks.kv"
	if resp := c.roundTrip(frame.AppendQuery(nil, 4, 1, q, 0x0001, 0)); frame.Opcode(resp) != frame.OpResult {
		t.Fatalf("QUERY: %s", describe(resp))
	}
	// The v4 connection is reset by the next request and cannot be
	// opened again; the v5 pool keeps the node up.
	kill.on.Store(true)
	errorCode(t, c.roundTrip(frame.AppendQuery(nil, 4, 1, q, 0x0001, 0)))
	waitNodesUp(t, p, cl)
	if got := metricValue(t, p, limit); got != 2 {
		t.Fatalf("%s = %v before the burst, want 2", limit, got)
	}
	before := metricValue(t, p, changes)

	// A burst of requests no connection takes: each gets a permit and
	// its error at once.
	const burst = 400
	for i := 0; i < burst; i += 100 {
		for s := range 100 {
			if err := c.w.WriteFrame(frame.AppendQuery(nil, 4, int16(s+2), q, 0x0001, 0)); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.w.Flush(); err != nil {
			t.Fatal(err)
		}
		for range 100 {
			if resp := c.read(); errorCode(t, resp) != frame.ErrCodeServer {
				t.Fatalf("request with no connection: %s, want a SERVER_ERROR", describe(resp))
			}
		}
	}
	// A window full of samples closes within its 100 ms and a sweep
	// (10 ms); give it ten times that.
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		if got := metricValue(t, p, changes); got != before {
			t.Fatalf("the node's adaptive limit changed (%s %v -> %v, %s = %v) on %d requests that never reached it: their permits were released as successes, not as Dropped",
				changes, before, got, limit, metricValue(t, p, limit), burst)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// hangFirst makes the first EXECUTE a node reads once it is on go
// unanswered (NoAnswer) or answered after delay; the others are answered
// at once.
type hangFirst struct {
	on    atomic.Bool
	done  atomic.Bool
	delay time.Duration // 0: never answered
}

func (h *hangFirst) hook(_ *fakenode.Node, r fakenode.Request) fakenode.Action {
	if r.Opcode != frame.OpExecute || !h.on.Load() || !h.done.CompareAndSwap(false, true) {
		return fakenode.Action{}
	}
	if h.delay == 0 {
		return fakenode.Action{Fault: fakenode.NoAnswer}
	}
	return fakenode.Action{Delay: h.delay}
}

// TestNoHedgePastDeadline: a hedge timer that fires past the request's
// deadline sends nothing (reason deadline); the client gets its timeout.
// Request expiry runs once a second, so a timer set just past the deadline
// fires before the timeout is answered: before the fix a hedge was sent
// then, and the client got rows after its deadline had passed.
func TestNoHedgePastDeadline(t *testing.T) {
	const timeout = 200 * time.Millisecond
	cl := fakenode.StartCluster(t, 2, fakenode.Config{})
	cl.SetTable("ks.kv", kvCols, [][]byte{fakenode.Int(1), fakenode.Text("one")})
	var hang hangFirst
	cl.SetHook(hang.hook)
	p := proxytest.Start(t, cl.Addrs(), func(c *config.Config) {
		c.SpeculativeMaxExecutions = 1
		c.SpeculativeDelay = timeout + 2*time.Millisecond
		c.SpeculativeBudget = 1
		c.RequestTimeout = timeout
	})
	waitNodesUp(t, p, cl)
	c := dialRaw(t, p.Addr, frame.V4)
	meta := c.prepare(1, "SELECT * FROM ks.kv WHERE k = ?")
	if resp := c.roundTrip(execute(4, 2, meta.ID, nil, false, fakenode.Int(1))); frame.Opcode(resp) != frame.OpResult {
		t.Fatalf("first EXECUTE: %s", describe(resp))
	}
	hang.on.Store(true)
	resp := c.roundTrip(execute(4, 3, meta.ID, nil, false, fakenode.Int(1)))
	if frame.Opcode(resp) != frame.OpError || !strings.Contains(describe(resp), "request timeout") {
		t.Errorf("EXECUTE whose node never answers: %s, want the proxy's timeout error", describe(resp))
	}
	if got := metricValue(t, p, "cqlgate_speculative_executions_total"); got != 0 {
		t.Errorf("%v hedges sent past the request's deadline", got)
	}
	// Skipped for the deadline, unless request expiry happened to run
	// in the 2 ms between the deadline and the timer.
	t.Logf("skipped for the deadline: %v", metricValue(t, p, `cqlgate_speculative_skipped_total{reason="deadline"}`))
}

// TestHedgedPrimaryLatencyRecorded: the latency of a hedged request's
// primary attempt, answered after its hedge, is a sample of the hedge
// delay's percentile. Before the fix only the hedge's latency was: slow
// primaries were left out and the delay drifted low.
func TestHedgedPrimaryLatencyRecorded(t *testing.T) {
	cl := fakenode.StartCluster(t, 2, fakenode.Config{})
	cl.SetTable("ks.kv", kvCols, [][]byte{fakenode.Int(1), fakenode.Text("one")})
	hang := hangFirst{delay: 100 * time.Millisecond}
	cl.SetHook(hang.hook)
	p := proxytest.Start(t, cl.Addrs(), func(c *config.Config) {
		c.SpeculativeMaxExecutions = 1
		// Adaptive (samples are kept), pinned to 20 ms.
		c.SpeculativeDelay = 0
		c.SpeculativeDelayMin = 20 * time.Millisecond
		c.SpeculativeDelayMax = 20 * time.Millisecond
		c.SpeculativeBudget = 1
	})
	waitNodesUp(t, p, cl)
	c := dialRaw(t, p.Addr, frame.V4)
	meta := c.prepare(1, "SELECT * FROM ks.kv WHERE k = ?")
	// The adaptive delay is known once a node has 100 samples (the
	// EXECUTEs are spread over both nodes) and its cached value was
	// refreshed (every 100 ms): until an EXECUTE is armed, it is counted
	// as warming up.
	const warming = `cqlgate_speculative_skipped_total{reason="warming_up"}`
	for i := 0; ; i++ {
		w := metricValue(t, p, warming)
		if resp := c.roundTrip(execute(4, 2, meta.ID, nil, false, fakenode.Int(1))); frame.Opcode(resp) != frame.OpResult {
			t.Fatalf("warm-up EXECUTE: %s", describe(resp))
		}
		if i >= 200 && metricValue(t, p, warming) == w {
			break // armed
		}
		if i > 10000 {
			t.Fatal("the hedge delay is still warming up after 10000 EXECUTEs")
		}
	}
	const samples = `cqlgate_speculative_delay_samples{class="ks.kv"}`
	const answers = "cqlgate_backend_request_duration_seconds_count"
	warm := metricValue(t, p, samples)
	before := metricSum(t, p, answers)

	hang.on.Store(true)
	if resp := c.roundTrip(execute(4, 3, meta.ID, nil, false, fakenode.Int(1))); frame.Opcode(resp) != frame.OpResult {
		t.Fatalf("hedged EXECUTE: %s", describe(resp))
	}
	if got := metricValue(t, p, "cqlgate_speculative_wins_total"); got != 1 {
		t.Fatalf("cqlgate_speculative_wins_total = %v, want 1: the hedge did not answer first\n%s", got, grepLines(promtest.Text(t, p.Reg), "cqlgate_speculative"))
	}
	// The primary's late answer arrives: both attempts' latencies are
	// samples.
	waitFor(t, "the slow primary's answer", func() bool { return metricSum(t, p, answers) == before+2 })
	deadline := time.Now().Add(time.Second)
	for metricValue(t, p, samples) != warm+2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := metricValue(t, p, samples); got != warm+2 {
		t.Errorf("%s = %v, want %v: the warm-up's, the hedge's and the hedged primary's", samples, got, warm+2)
	}
}
