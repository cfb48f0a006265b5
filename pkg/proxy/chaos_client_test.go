package proxy_test

// The chaos test's client and fault schedule: raw frames over one
// connection to the proxy, many requests pipelined on distinct stream ids,
// and the fake nodes' per-request faults drawn from the seed.

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cqlgate/cqlgate/internal/fakenode"
	"github.com/cqlgate/cqlgate/pkg/frame"
)

// chaosReq is one client request and what became of it.
type chaosReq struct {
	stream     int16
	frame      []byte
	desc       string
	idempotent bool
	// texts are the statement texts whose executions the nodes count for
	// this request alone (non-idempotent requests use texts no other
	// request uses, so a count above one is a duplicate execution).
	texts []string

	// Guarded by chaosConn.mu.
	sentAt     time.Time
	answers    int
	answerOp   byte
	answerCode int32
	answerMsg  string
}

// chaosConn is a raw-frame client connection to the proxy. Every request
// gets a stream id of its own (never reused within a seed), so a second
// answer for an id is a duplicate however late it comes.
type chaosConn struct {
	nc      net.Conn
	rd      *frame.Reader
	w       *frame.Writer
	version byte
	margin  time.Duration // request timeout plus slack: the latest acceptable answer

	mu       sync.Mutex
	reqs     map[int16]*chaosReq
	problems []string
	readErr  error
	window   chan struct{} // one token per request in flight
	answered chan struct{} // a token per first answer
	done     chan struct{} // closed when the reader ends
}

// dialChaos connects, sends STARTUP (switching to v5 segments after READY)
// and returns a connection ready for synchronous setup calls (rt).
func dialChaos(addr string, version byte) (*chaosConn, error) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &chaosConn{nc: nc, rd: frame.NewReader(nc, 1<<20), w: frame.NewWriter(nc), version: version,
		reqs: map[int16]*chaosReq{}, answered: make(chan struct{}, 1<<12), done: make(chan struct{})}
	resp, err := c.rt(frame.AppendStartup(nil, version, 0, map[string]string{"CQL_VERSION": "3.0.0"}))
	if err != nil {
		nc.Close()
		return nil, err
	}
	if frame.Opcode(resp) != frame.OpReady {
		nc.Close()
		return nil, fmt.Errorf("STARTUP answered %s", frame.OpcodeName(frame.Opcode(resp)))
	}
	if version >= frame.V5 {
		c.rd.EnableSegments(frame.CompressionNone)
		c.w.EnableSegments(frame.CompressionNone)
	}
	return c, nil
}

// rt sends f and returns the answer on its stream; setup only, before
// the reader goroutine runs.
func (c *chaosConn) rt(f []byte) ([]byte, error) {
	_ = c.nc.SetDeadline(time.Now().Add(10 * time.Second))
	defer c.nc.SetDeadline(time.Time{})
	if err := c.w.WriteFrame(f); err != nil {
		return nil, err
	}
	if err := c.w.Flush(); err != nil {
		return nil, err
	}
	for {
		b, err := c.rd.ReadFrame()
		if err != nil {
			return nil, err
		}
		out := append([]byte(nil), b.B...)
		b.Release()
		if frame.Stream(out) == frame.Stream(f) {
			return out, nil
		}
	}
}

// prepare prepares q (in no keyspace: texts are qualified) and returns
// the id and, for v5, the result metadata id.
//
// The proxy prepares on every node, with faults off yet, but on a loaded
// machine under -race that can take longer than a short --request-timeout:
// a timeout is tried again, as a driver would, a few times.
func (c *chaosConn) prepare(q string) (id, metaID []byte, err error) {
	for attempt := 1; ; attempt++ {
		resp, err := c.rt(frame.AppendPrepare(nil, c.version, 1, q, ""))
		if err != nil {
			return nil, nil, err
		}
		m, err := frame.ParsePrepared(c.version, frame.Body(resp))
		if err == nil {
			return m.ID, m.ResultMetadataID, nil
		}
		code, msg, _ := frame.ErrorCode(frame.Body(resp))
		retry := code == frame.ErrCodeServer && strings.Contains(msg, "within the request timeout")
		if code == frame.ErrCodeOverloaded {
			// A limit that starts below one request in flight (fleet
			// mode) with no queue refuses until it has grown: back off
			// and try again, as a driver does.
			retry = attempt < 50
			time.Sleep(20 * time.Millisecond)
		} else if attempt >= 5 {
			retry = false
		}
		if !retry {
			return nil, nil, fmt.Errorf("PREPARE %q (attempt %d): %v (0x%04x %s)", q, attempt, err, code, msg)
		}
	}
}

// startReader reads answers until the connection closes, checking that
// each stream is answered once and in time.
func (c *chaosConn) startReader() {
	go func() {
		defer close(c.done)
		for {
			b, err := c.rd.ReadFrame()
			if err != nil {
				c.mu.Lock()
				c.readErr = err
				c.mu.Unlock()
				return
			}
			c.onAnswer(b.B)
			b.Release()
		}
	}()
}

func (c *chaosConn) onAnswer(f []byte) {
	now := time.Now()
	s := frame.Stream(f)
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.reqs[s]
	if r == nil {
		c.problems = append(c.problems, fmt.Sprintf("an answer (%s) on stream %d, which carries no request", describe(f), s))
		return
	}
	r.answers++
	if r.answers > 1 {
		c.problems = append(c.problems, fmt.Sprintf("stream %d (%s) answered %d times; this time %s, first %s 0x%04x %s",
			s, r.desc, r.answers, describe(f), frame.OpcodeName(r.answerOp), r.answerCode, r.answerMsg))
		return
	}
	r.answerOp = frame.Opcode(f)
	if r.answerOp == frame.OpError {
		r.answerCode, r.answerMsg, _ = frame.ErrorCode(frame.Body(f))
	}
	if late := now.Sub(r.sentAt); late > c.margin {
		c.problems = append(c.problems, fmt.Sprintf("stream %d (%s) answered %s after it was sent, past the request timeout plus slack (%s): %s",
			s, r.desc, late.Round(time.Millisecond), c.margin, describe(f)))
	}
	<-c.window
	c.answered <- struct{}{}
}

// send writes r (queued until flush). It waits for room in the window, at
// most until giveUp; false means the window never opened.
func (c *chaosConn) send(r *chaosReq, giveUp time.Time) (bool, error) {
	select {
	case c.window <- struct{}{}:
	default:
		// Full: what is written must go out before waiting for answers.
		if err := c.w.Flush(); err != nil {
			return false, err
		}
		select {
		case c.window <- struct{}{}:
		case <-time.After(time.Until(giveUp)):
			return false, nil
		}
	}
	c.mu.Lock()
	c.reqs[r.stream] = r
	r.sentAt = time.Now()
	c.mu.Unlock()
	frame.SetStream(r.frame, r.stream)
	return true, c.w.WriteFrame(r.frame)
}

// Body encoders for what pkg/frame has no Append helper for.

func appendShortBytes(b, v []byte) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(v)))
	return append(b, v...)
}

func appendValues(b []byte, vals [][]byte) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(vals)))
	for _, v := range vals {
		b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
		b = append(b, v...)
	}
	return b
}

// appendFlags writes query flags: a byte up to v4, an int from v5.
func appendFlags(b []byte, version byte, flags byte) []byte {
	if version >= frame.V5 {
		return binary.BigEndian.AppendUint32(b, uint32(flags))
	}
	return append(b, flags)
}

const consistencyOne = 0x0001

// appendExecute builds an EXECUTE of id with vals at ONE.
func appendExecute(version byte, id, metaID []byte, vals [][]byte) []byte {
	b := appendShortBytes(nil, id)
	if version >= frame.V5 {
		b = appendShortBytes(b, metaID)
	}
	b = binary.BigEndian.AppendUint16(b, consistencyOne)
	b = appendFlags(b, version, 0x01) // values
	b = appendValues(b, vals)
	return frame.AppendFrame(nil, version, false, 0, 0, frame.OpExecute, b)
}

// batchChild is a QUERY text (id nil) or a prepared id with values.
type batchChild struct {
	query string
	id    []byte
	vals  [][]byte
}

// appendBatch builds a BATCH of type typ (0 logged, 1 unlogged, 2 counter).
func appendBatch(version, typ byte, children []batchChild) []byte {
	b := []byte{typ}
	b = binary.BigEndian.AppendUint16(b, uint16(len(children)))
	for _, ch := range children {
		if ch.id == nil {
			b = append(b, 0)
			b = binary.BigEndian.AppendUint32(b, uint32(len(ch.query)))
			b = append(b, ch.query...)
		} else {
			b = append(b, 1)
			b = appendShortBytes(b, ch.id)
		}
		b = appendValues(b, ch.vals)
	}
	b = binary.BigEndian.AppendUint16(b, consistencyOne)
	b = appendFlags(b, version, 0)
	return frame.AppendFrame(nil, version, false, 0, 0, frame.OpBatch, b)
}

// faultPlan is one node's fault schedule: the action for the i-th request
// the node reads (modulo its length). The arrival order depends on timing;
// the schedule itself depends on the seed only.
type faultPlan struct {
	actions []fakenode.Action
	names   []string
}

// newFaultPlan draws n actions; rate is the share that are faults.
func newFaultPlan(rng *rand.Rand, n int, rate float64, timeout time.Duration) faultPlan {
	var p faultPlan
	for range n {
		a, name := drawFault(rng, rate, timeout)
		p.actions = append(p.actions, a)
		p.names = append(p.names, name)
	}
	return p
}

func drawFault(rng *rand.Rand, rate float64, timeout time.Duration) (fakenode.Action, string) {
	ms := func(lo, hi int) time.Duration { return time.Duration(lo+rng.IntN(hi-lo+1)) * time.Millisecond }
	if rng.Float64() >= rate {
		if rng.IntN(4) == 0 {
			return fakenode.Action{Delay: ms(0, 3)}, "answer"
		}
		return fakenode.Action{}, "answer"
	}
	switch rng.IntN(14) {
	case 0, 1:
		// Slower than the hedge delay: hedges fire and race the primary.
		return fakenode.Action{Delay: ms(4, 40)}, "slow"
	case 2:
		// Answered after the proxy timed the request out: an orphan's
		// late answer must be swallowed.
		return fakenode.Action{Delay: timeout + ms(20, 150)}, "late"
	case 3:
		return fakenode.Action{Fault: fakenode.NoAnswer}, "no answer"
	case 4:
		return fakenode.Action{Fault: fakenode.Reset, Delay: ms(0, 5)}, "reset"
	case 5:
		return fakenode.Action{Fault: fakenode.ResetAfterExecute, Delay: ms(0, 10)}, "reset after execute"
	case 6:
		return fakenode.Action{Fault: fakenode.HalfAnswer, Delay: ms(0, 5)}, "half answer"
	case 7, 8:
		return fakenode.Action{Error: fakenode.Overloaded(), Delay: ms(0, 5)}, "overloaded"
	case 9:
		return fakenode.Action{Error: fakenode.IsBootstrapping(), Delay: ms(0, 5)}, "bootstrapping"
	case 10:
		// The hook fills in the EXECUTE's id (UNPREPARED names it).
		return fakenode.Action{Error: &fakenode.Error{}, Delay: ms(0, 5)}, "unprepared"
	case 11:
		return fakenode.Action{Error: fakenode.ServerError("chaos"), Executed: rng.IntN(2) == 0, Delay: ms(0, 5)}, "server error"
	case 12:
		if rng.IntN(2) == 0 {
			return fakenode.Action{Error: fakenode.ReadTimeout(consistencyOne, 0, 1, false), Delay: ms(0, 10)}, "read timeout"
		}
		return fakenode.Action{Error: fakenode.WriteTimeout(consistencyOne, 0, 1, "SIMPLE"), Executed: true, Delay: ms(0, 10)}, "write timeout"
	default:
		return fakenode.Action{Fault: fakenode.Stall}, "stall"
	}
}

// hook returns the cluster hook that applies the plans to the test's
// requests (QUERY, PREPARE, EXECUTE, BATCH on the ks keyspace), leaving
// the proxy's control connection and heartbeats alone.
func chaosHook(nodes []*fakenode.Node, plans []faultPlan, tally *faultTally) func(*fakenode.Node, fakenode.Request) fakenode.Action {
	return func(n *fakenode.Node, r fakenode.Request) fakenode.Action {
		switch r.Opcode {
		case frame.OpQuery, frame.OpPrepare:
			if !strings.Contains(r.Query, "ks.") {
				return fakenode.Action{}
			}
		case frame.OpExecute, frame.OpBatch:
		default:
			return fakenode.Action{}
		}
		i := 0
		for i < len(nodes) && nodes[i] != n {
			i++
		}
		if i == len(nodes) {
			return fakenode.Action{}
		}
		p := plans[i]
		k := (r.Seq - 1) % len(p.actions)
		a := p.actions[k]
		if a.Error != nil && a.Error.Code == 0 && a.Error.Message == "" {
			if r.Opcode != frame.OpExecute {
				return fakenode.Action{}
			}
			a.Error = fakenode.Unprepared(r.PreparedID)
		}
		tally.add(p.names[k], fmt.Sprintf("node %d conn %d seq %d %s stream %d %.40q: %s",
			i, r.Conn, r.Seq, frame.OpcodeName(r.Opcode), r.Stream, r.Query, p.names[k]))
		return a
	}
}

// faultTally counts the actions applied, by name, for -v runs: it shows
// what a seed exercised.
type faultTally struct {
	mu    sync.Mutex
	m     map[string]int
	start time.Time
	trace []string // every request the hook saw, for a failing seed's log
}

func (t *faultTally) add(name, line string) {
	t.mu.Lock()
	if t.m == nil {
		t.m = map[string]int{}
	}
	t.m[name]++
	t.trace = append(t.trace, fmt.Sprintf("%7.1fms %s", float64(time.Since(t.start).Microseconds())/1000, line))
	t.mu.Unlock()
}

func (t *faultTally) Trace() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.trace, "\n")
}

func (t *faultTally) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return fmt.Sprint(t.m)
}

// chaosWorkload is a seed's requests, in sending order.
type chaosWorkload struct {
	reqs []*chaosReq
}

// newWorkload prepares the statements it needs (faults are off yet), warms
// up the hedge delay's per-node classes of the shared ones, and draws the
// requests.
func newWorkload(t *testing.T, c *chaosConn, rng *rand.Rand, seed uint64, nNodes int) *chaosWorkload {
	t.Helper()
	must := func(id, meta []byte, err error) ([]byte, []byte) {
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		return id, meta
	}
	const selectQ = "SELECT k, v FROM ks.kv WHERE k = ?"
	const insertQ = "INSERT INTO ks.kv (k, v) VALUES (?, ?)"
	selID, selMeta := must(c.prepare(selectQ))
	insID, insMeta := must(c.prepare(insertQ))
	// A statement is hedged only once a node answered it (its latency
	// class exists): a few runs reach every node.
	for i := range 4 * nNodes {
		for _, stmt := range []struct {
			query string
			args  [][]byte
		}{
			{selectQ, [][]byte{fakenode.Int(int32(i))}},
			{insertQ, [][]byte{fakenode.Int(int32(i)), fakenode.Text("warm")}},
		} {
			// UNPREPARED can come back (when the statement is not on that
			// node yet and re-preparing it there does not finish within
			// --request-timeout on a loaded machine, the proxy relays the
			// node's answer, as a node would): prepare again, as a driver
			// does.
			var resp []byte
			var err error
			for try, overloaded := 0, 0; try < 3; try++ {
				id, meta := selID, selMeta
				if stmt.query == insertQ {
					id, meta = insID, insMeta
				}
				f := appendExecute(c.version, id, meta, stmt.args)
				frame.SetStream(f, 2)
				resp, err = c.rt(f)
				if err != nil || frame.Opcode(resp) != frame.OpError {
					break
				}
				if code, _, _ := frame.ErrorCode(frame.Body(resp)); code == frame.ErrCodeOverloaded && overloaded < 50 {
					// See prepare: back off, the same statement again.
					overloaded++
					try--
					time.Sleep(20 * time.Millisecond)
					continue
				}
				t.Logf("seed %d: warm-up EXECUTE answered %s; preparing again", seed, describe(resp))
				if stmt.query == insertQ {
					insID, insMeta = must(c.prepare(insertQ))
				} else {
					selID, selMeta = must(c.prepare(selectQ))
				}
			}
			if err != nil || frame.Opcode(resp) != frame.OpResult {
				t.Fatalf("seed %d: warm-up EXECUTE: %v %s", seed, err, describe(resp))
			}
		}
	}

	n := 20 + rng.IntN(41)
	w := &chaosWorkload{}
	for i := range n {
		k := int32(1000 + i) // distinct per request: texts and values never repeat
		r := &chaosReq{stream: int16(100 + i), idempotent: true}
		switch rng.IntN(12) {
		case 0:
			r.desc = "QUERY SELECT"
			r.frame = frame.AppendQuery(nil, c.version, 0, "SELECT k, v FROM ks.kv", consistencyOne, 0)
		case 1:
			r.desc = "QUERY INSERT"
			r.frame = frame.AppendQuery(nil, c.version, 0, fmt.Sprintf("INSERT INTO ks.kv (k, v) VALUES (%d, 'q')", k), consistencyOne, 0)
		case 2, 3, 4:
			r.desc = "EXECUTE SELECT"
			r.frame = appendExecute(c.version, selID, selMeta, [][]byte{fakenode.Int(k)})
		case 5, 6, 7:
			r.desc = "EXECUTE INSERT"
			r.frame = appendExecute(c.version, insID, insMeta, [][]byte{fakenode.Int(k), fakenode.Text("e")})
		case 8:
			r.desc, r.idempotent = "QUERY counter UPDATE", false
			q := fmt.Sprintf("UPDATE ks.c SET n = n + 1 WHERE k = %d", k)
			r.texts = []string{q}
			r.frame = frame.AppendQuery(nil, c.version, 0, q, consistencyOne, 0)
		case 9:
			r.desc, r.idempotent = "QUERY INSERT IF NOT EXISTS", false
			q := fmt.Sprintf("INSERT INTO ks.kv (k, v) VALUES (%d, 'x') IF NOT EXISTS", k)
			r.texts = []string{q}
			r.frame = frame.AppendQuery(nil, c.version, 0, q, consistencyOne, 0)
		case 10:
			// A statement of its own, so the nodes' count is this
			// request's alone.
			r.desc, r.idempotent = "EXECUTE counter UPDATE", false
			q := fmt.Sprintf("UPDATE ks.c SET n = n + %d WHERE k = ?", k)
			id, meta := must(c.prepare(q))
			r.texts = []string{q}
			r.frame = appendExecute(c.version, id, meta, [][]byte{fakenode.Int(k)})
		default:
			if rng.IntN(2) == 0 {
				r.desc = "logged BATCH of INSERTs"
				r.frame = appendBatch(c.version, 0, []batchChild{
					{id: insID, vals: [][]byte{fakenode.Int(k), fakenode.Text("b")}},
					{query: fmt.Sprintf("INSERT INTO ks.kv (k, v) VALUES (%d, 'b')", k+5000)},
				})
				break
			}
			r.desc, r.idempotent = "counter BATCH", false
			q1 := fmt.Sprintf("UPDATE ks.c SET n = n + 1 WHERE k = %d", k)
			q2 := fmt.Sprintf("UPDATE ks.c SET n = n + 2 WHERE k = %d", k)
			r.texts = []string{q1, q2}
			r.frame = appendBatch(c.version, 2, []batchChild{{query: q1}, {query: q2}})
		}
		w.reqs = append(w.reqs, r)
	}
	c.window = make(chan struct{}, 4+rng.IntN(13))
	return w
}
