package proxy

// Speculative execution (hedging). An EXECUTE of a prepared statement the
// proxy found idempotent arms a timer when it is sent; if no answer has come
// when it fires, a copy goes to another replica. The first success is the
// client's answer; an error waits for the other attempts, in case one
// succeeds; late answers are read and dropped, which frees their stream ids.
//
// Requests that are not hedged pay only the timer's arming and disarming
// (two atomic operations and an append) and a latency sample. Once a timer
// has fired the request becomes shared between its attempts: from then on
// its outcome is decided under hmu and by the atomics below, and it is
// never returned to the request pool, because the scheduler may still hold
// it.

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cqlgate/cqlgate/pkg/backend"
	"github.com/cqlgate/cqlgate/pkg/config"
	"github.com/cqlgate/cqlgate/pkg/frame"
	"github.com/cqlgate/cqlgate/pkg/limiter"
	"github.com/cqlgate/cqlgate/pkg/speculative"
)

// maxTrackedNodes bounds the nodes whose latency is tracked per statement.
// Node ids stay below the cluster's size (removed nodes' ids are reused), so
// this is a bound on cluster size, not on node churn: in larger clusters
// the nodes with higher ids are not hedged from.
const maxTrackedNodes = 64

// hedging is the proxy's speculative execution machinery.
type hedging struct {
	maxExtra atomic.Int32 // --speculative-max-executions; 0: off
	sched    *speculative.Scheduler
	delay    *speculative.Delay
	budget   *speculative.Budget
	tokens   atomic.Uint64

	started, won, wasted prometheus.Counter
	skipped              map[string]prometheus.Counter
}

// Reasons a request is not hedged, as metric labels.
const (
	skipBudget        = "budget"
	skipDeadline      = "deadline"
	skipPaused        = "paused"
	skipNoPermit      = "no_permit"
	skipNoReplica     = "no_replica"
	skipNotIdempotent = "not_idempotent"
	skipWarmingUp     = "warming_up"
)

func newHedging(cfg config.Config, reg prometheus.Registerer) (*hedging, error) {
	h := &hedging{}
	h.maxExtra.Store(int32(cfg.SpeculativeMaxExecutions))
	var err error
	if h.sched, err = speculative.NewScheduler(speculative.SchedulerConfig{}, nil); err != nil {
		return nil, err
	}
	h.delay, err = speculative.NewDelay(speculative.DelayConfig{
		Constant:   cfg.SpeculativeDelay,
		Percentile: cfg.SpeculativePercentile,
		Floor:      cfg.SpeculativeDelayMin,
		Cap:        cfg.SpeculativeDelayMax,
		// A class is a statement on one node, about 3 KiB: 4096 of them
		// bound the memory at 13 MiB; the least recently used go first.
		MaxClasses: 4096,
	}, nil)
	if err == nil {
		h.budget, err = speculative.NewBudget(speculative.BudgetConfig{Ratio: cfg.SpeculativeBudget}, nil)
	}
	if err != nil {
		h.sched.Stop()
		return nil, err
	}
	h.started = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "cqlgate_speculative_executions_total",
		Help: "Hedges sent: extra copies of a slow idempotent request sent to another replica.",
	})
	h.won = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "cqlgate_speculative_wins_total",
		Help: "Hedges whose answer was the one the client got.",
	})
	h.wasted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "cqlgate_speculative_wasted_total",
		Help: "Hedges whose answer was dropped because another attempt answered first.",
	})
	skipped := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cqlgate_speculative_skipped_total",
		Help: "Requests not hedged, by reason: not_idempotent (EXECUTE of a statement that may not run twice), warming_up (too few latency samples yet), budget (--speculative-budget spent), deadline (the timer fired past the request's deadline), paused (the limiter is rejecting), no_permit (no free limiter slot on another replica), no_replica (no other replica connected).",
	}, []string{"reason"})
	h.skipped = map[string]prometheus.Counter{}
	for _, r := range []string{skipBudget, skipDeadline, skipPaused, skipNoPermit, skipNoReplica, skipNotIdempotent, skipWarmingUp} {
		h.skipped[r] = skipped.WithLabelValues(r)
	}
	// Delay per class (keyspace.table), samples, budget and timers.
	internals := speculative.NewCollector(h.delay, h.budget, h.sched)
	if err := registerAll(reg, h.started, h.won, h.wasted, skipped, internals); err != nil {
		h.sched.Stop()
		return nil, err
	}
	return h, nil
}

func registerAll(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

func (h *hedging) stop() { h.sched.Stop() }

// stmtHedge is a statement's latency classes, one per node, created as
// nodes answer it.
type stmtHedge struct {
	key     uint64
	label   string
	mu      sync.Mutex
	classes atomic.Pointer[[]speculative.Class] // by node id
}

func newStmtHedge(id []byte, label string) *stmtHedge {
	var key uint64
	for i, b := range id {
		key ^= uint64(b) << (8 * (i % 8))
	}
	return &stmtHedge{key: key &^ (0xffff << 48), label: label}
}

// class returns the statement's latency class on node id.
func (sh *stmtHedge) class(h *hedging, id int) (speculative.Class, bool) {
	if id < 0 || id >= maxTrackedNodes {
		return speculative.Class{}, false
	}
	if cs := sh.classes.Load(); cs != nil && id < len(*cs) && (*cs)[id] != (speculative.Class{}) && !h.delay.Stale((*cs)[id]) {
		return (*cs)[id], true
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	var next []speculative.Class
	if cs := sh.classes.Load(); cs != nil {
		next = append(next, *cs...)
	}
	for len(next) <= id {
		next = append(next, speculative.Class{})
	}
	next[id] = h.delay.Class(sh.key|uint64(id)<<48, sh.label)
	sh.classes.Store(&next)
	return next[id], true
}

// delayFor returns the hedge delay of a statement: the fastest node's
// percentile, so that one slow node cannot stretch it. ok is false while no
// node has enough samples.
func (sh *stmtHedge) delayFor(h *hedging, now time.Time) (time.Duration, bool) {
	cs := sh.classes.Load()
	if cs == nil {
		return 0, false
	}
	best, found := time.Duration(0), false
	for _, c := range *cs {
		if c == (speculative.Class{}) {
			continue
		}
		if d, ok := h.delay.Get(c, now); ok && (!found || d < best) {
			best, found = d, true
		}
	}
	return best, found
}

// hedgeState is a request's hedging state. It is allocated the first time
// a request is armed and kept when the request is pooled, so that its
// timer's generations keep counting up (stale wheel entries never match a
// later arming).
type hedgeState struct {
	timer speculative.Timer
	token uint64 // of the current arming; guarded by mu once armed

	mu          sync.Mutex
	primaryDone bool       // the primary attempt ended
	hedges      int8       // hedges sent
	held        *frame.Buf // an error answer kept while others may succeed
	cands       [maxReplicas]limiter.NodeID

	replied     atomic.Bool  // the client has its answer
	timedOut    atomic.Bool  // the deadline passed with attempts in flight
	outstanding atomic.Int32 // attempts in flight, the primary included
	primaryNode atomic.Int32 // node id the primary went to; -1 before
}

// armHedge decides whether req may be hedged and, if so, arms its timer.
// It runs before the request is queued to its node.
func (c *client) armHedge(req *request) {
	h := c.p.hedging
	if h.maxExtra.Load() == 0 || req.view.Opcode != frame.OpExecute || req.st == nil {
		return
	}
	if nt := c.p.nodeTable.Load(); nt == nil || nt.upCount < 2 || (req.cands != nil && len(req.cands) < 2) {
		h.skipped[skipNoReplica].Inc() // no timer for a hedge with nowhere to go
		return
	}
	if !req.idempotent() {
		h.skipped[skipNotIdempotent].Inc()
		return
	}
	now := time.Now()
	d, ok := req.st.hedge.delayFor(h, now)
	if !ok {
		h.skipped[skipWarmingUp].Inc()
		return
	}
	if req.st.write && !req.st.ownTimestamp && !addTimestamp(req, now) {
		return
	}
	h.budget.RecordRequest(now)
	hs := req.hs
	if hs == nil {
		hs = &hedgeState{}
		req.hs = hs
	}
	hs.token = h.tokens.Add(1)
	hs.primaryDone, hs.hedges, hs.held = false, 0, nil
	hs.replied.Store(false)
	hs.timedOut.Store(false)
	hs.outstanding.Store(1)
	hs.primaryNode.Store(-1)
	req.armed = h.sched.Arm(&hs.timer, now.Add(d), req, hs.token)
}

// addTimestamp gives a write without a client timestamp one, so that every
// copy of it writes identical cells. It reports false if the request cannot
// be given one (it is then not hedged).
func addTimestamp(req *request, now time.Time) bool {
	v := &req.view
	if !v.HasParams() {
		return false
	}
	if v.HasTimestamp() {
		return true
	}
	b := frame.GetBuf(len(req.buf.B) + 8)
	out, _, err := v.WithTimestamp(b.B[:0], req.buf.B, now.UnixMicro())
	if err != nil {
		b.Release()
		return false
	}
	b.B = out
	req.buf.Release()
	req.buf = b
	return true
}

// Hedge runs on the scheduler's goroutine when req's timer fires: unless
// the answer is in, it sends a copy of the request to another replica.
func (r *request) Hedge(token uint64) {
	hs := r.hs
	hs.mu.Lock()
	if hs.primaryDone || hs.token != token || hs.replied.Load() {
		hs.mu.Unlock()
		return
	}
	h := r.c.p.hedging
	now := time.Now()
	reason := ""
	var permit limiter.Permit
	var conn *backend.Conn
	var node *backend.Node
	others := r.otherReplicas()
	switch {
	case now.UnixNano() >= r.deadline:
		reason = skipDeadline // the client has, or is about to get, its timeout
	case others == nil:
		reason = skipNoReplica
	case h.budget.Paused(now):
		reason = skipPaused
	case !h.budget.TryHedge(now):
		reason = skipBudget
	default:
		p, ok := r.c.p.limiter.TryAcquire(others)
		if !ok {
			reason = skipNoPermit
			break
		}
		if conn, node = r.pool.OnNodeID(int(p.Node())); conn == nil {
			permit = p
			reason = skipNoReplica
			break
		}
		permit = p
	}
	if reason != "" {
		hs.mu.Unlock()
		// Released outside hs.mu: a release admits queued requests,
		// whose sending takes connection locks, and request expiry takes
		// a connection's lock and then hs.mu.
		permit.Release(limiter.Dropped, 0)
		h.skipped[reason].Inc()
		return
	}
	a := &attempt{r: r, node: node, permit: permit, sent: now}
	// The primary's stream id (bytes 2-3) may be rewritten right now by
	// the connection it is queued on: copy around it.
	a.buf = frame.GetBuf(len(r.buf.B))
	copy(a.buf.B[:2], r.buf.B[:2])
	copy(a.buf.B[4:], r.buf.B[4:])
	hs.outstanding.Add(1)
	hs.hedges++
	again := int32(hs.hedges) < h.maxExtra.Load()
	hs.mu.Unlock()
	h.started.Inc()
	r.c.p.metrics.request(r.view.Opcode)

	if err := conn.QueueBy(a.buf.B, a, r.deadline); err != nil {
		a.permit.Release(limiter.Dropped, 0)
		a.buf.Release()
		r.settle(nil, nil, a)
		return
	}
	conn.Kick()
	if again {
		if d, ok := r.st.hedge.delayFor(h, now); ok {
			hs.mu.Lock()
			if !hs.replied.Load() && !hs.primaryDone {
				hs.token = h.tokens.Add(1)
				h.sched.Arm(&hs.timer, now.Add(d), r, hs.token)
			}
			hs.mu.Unlock()
		}
	}
}

// otherReplicas returns the candidates for a hedge: the request's replicas
// (or every node that is up) but the primary's. Called with hs.mu held.
func (r *request) otherReplicas() []limiter.NodeID {
	tried := int(r.hs.primaryNode.Load())
	nt := r.c.p.nodeTable.Load()
	dst := r.hs.cands[:0]
	if r.cands != nil {
		for _, id := range r.cands {
			if int(id) != tried {
				dst = append(dst, id)
			}
		}
	} else if nt != nil {
		for id, up := range nt.up {
			if up && id != tried && len(dst) < maxReplicas {
				dst = append(dst, limiter.NodeID(id))
			}
		}
	}
	if len(dst) == 0 {
		return nil
	}
	return dst
}

// attempt is one hedge: a copy of the request in flight to another node.
type attempt struct {
	r      *request
	buf    *frame.Buf
	node   *backend.Node
	permit limiter.Permit
	sent   time.Time
}

func (a *attempt) OnResponse(conn *backend.Conn, resp *frame.Buf) {
	now := conn.ReadAt()
	d := now.Sub(a.sent)
	a.permit.Release(a.r.hs.outcome(resp.B), d)
	a.r.c.p.metrics.observeBackend(a.node.ID, a.node.Addr, d)
	a.r.recordLatency(resp.B, a.node.ID, d, now)
	a.buf.Release()
	a.r.settle(conn, resp, a)
}

func (a *attempt) OnFailure(_ *backend.Conn, _ error, _ bool) {
	a.permit.Release(limiter.Failure, time.Since(a.sent))
	a.buf.Release()
	a.r.settle(nil, nil, a)
}

func (a *attempt) OnTimeout(*backend.Conn) { a.r.hedgedTimeout() }

// recordLatency feeds a successful answer's latency on node id to the
// statement's hedge delay.
func (r *request) recordLatency(resp []byte, id int, d time.Duration, now time.Time) {
	if r.st == nil || frame.Opcode(resp) == frame.OpError {
		return
	}
	if cl, ok := r.st.hedge.class(r.c.p.hedging, id); ok {
		r.c.p.hedging.delay.Record(cl, d, now)
	}
}

// primaryAnswered ends the primary attempt of an armed request: it is
// called by OnResponse, OnFailure (resp nil) and failAt (conn nil, resp the
// proxy's own error). It reports false when no hedge was sent: the caller
// then goes on as for any request, and the request is no longer armed.
func (r *request) primaryAnswered(conn *backend.Conn, resp *frame.Buf) bool {
	hs := r.hs
	// After a hedge, Hedge re-arms the timer for the next one, so a timer
	// disarmed in time does not mean no hedge is out. hs.hedges is read
	// without hs.mu: it was written before the arming that Disarm stopped,
	// and the timer's atomic state orders the two.
	if r.c.p.hedging.sched.Disarm(&hs.timer) && hs.hedges == 0 {
		r.armed = false
		return false
	}
	// The timer fired: the scheduler may still call Hedge on this request,
	// and an attempt may still answer; it must therefore never be reused.
	r.shared = true
	hs.mu.Lock()
	hs.primaryDone = true
	hedged := hs.hedges > 0
	replied := hs.replied.Load()
	hs.mu.Unlock()
	if !hedged {
		if replied && resp != nil {
			// Answered at the deadline already (hedgedTimeout).
			resp.Release()
			r.finish()
			return true
		}
		// Hedge saw primaryDone, or will: nothing else will answer.
		r.armed = false
		return false
	}
	// Release the primary's own permit now, with its own latency; the
	// request lives on until every hedge has answered.
	if !r.sent.IsZero() {
		now := time.Now()
		d := now.Sub(r.sent)
		o := limiter.Failure
		if conn != nil && resp != nil {
			o = hs.outcome(resp.B)
			r.c.p.metrics.observeBackend(r.node.ID, r.node.Addr, d)
			// Hedged or not, its latency belongs in the delay's
			// percentile: leaving slow primaries out drifts it low.
			r.recordLatency(resp.B, r.node.ID, d, now)
		}
		r.permit.Release(o, d)
		r.permit = limiter.Permit{}
		r.sent = time.Time{}
	}
	r.settle(conn, resp, nil)
	return true
}

// settle records one attempt's end (resp nil: it failed or was never
// sent). The first success answers the client; errors are held back while
// another attempt may still succeed, and the last attempt to end answers
// with the error kept if nobody succeeded. from is the hedge, or nil for
// the primary.
func (r *request) settle(conn *backend.Conn, resp *frame.Buf, from *attempt) {
	c := r.c
	hs := r.hs
	if resp != nil && frame.Opcode(resp.B) != frame.OpError && hs.replied.CompareAndSwap(false, true) {
		if from != nil {
			c.p.hedging.won.Inc()
			r.hedgeWon = true
		}
		if r.stmt != nil {
			r.noteAnswer(resp.B)
		}
		frame.SetStream(resp.B, r.view.Stream)
		if conn != nil {
			c.sendFrom(conn, resp)
		} else {
			c.send(resp)
		}
		resp = nil
	} else if resp != nil {
		if from != nil && hs.replied.Load() {
			c.p.hedging.wasted.Inc()
		}
		hs.mu.Lock()
		if hs.held == nil && !hs.replied.Load() {
			hs.held, resp = resp, nil
		}
		hs.mu.Unlock()
		if resp != nil {
			resp.Release()
		}
	} else if from != nil && hs.replied.Load() {
		c.p.hedging.wasted.Inc()
	}
	if hs.outstanding.Add(-1) > 0 {
		return
	}
	// Every attempt has ended.
	hs.mu.Lock()
	held := hs.held
	hs.held = nil
	hs.mu.Unlock()
	if hs.replied.CompareAndSwap(false, true) {
		if held != nil {
			if r.stmt != nil {
				r.noteAnswer(held.B)
			}
			frame.SetStream(held.B, r.view.Stream)
			c.send(held)
			held = nil
		} else {
			c.p.metrics.proxyError(frame.ErrCodeServer)
			r.respKind, r.respCode, r.respBytes = respError, frame.ErrCodeServer, 120 // about the message below
			c.sendError(r.view.Stream, frame.ErrCodeServer, "cqlgate: the connections to Cassandra were lost before any response; the request may or may not have been executed")
		}
	}
	if held != nil {
		held.Release()
	}
	r.finish()
}

// outcome is what an attempt's answer tells the limiter: a success that
// came after the request's deadline was no success for the client, and says
// the node was too slow.
func (hs *hedgeState) outcome(resp []byte) limiter.Outcome {
	if hs.timedOut.Load() {
		return limiter.Timeout
	}
	return outcomeOf(resp)
}

// hedgedTimeout answers the client at the deadline of a hedged request;
// its attempts stay in flight as orphans until they end.
func (r *request) hedgedTimeout() {
	r.hs.timedOut.Store(true)
	if r.hs.replied.CompareAndSwap(false, true) {
		r.c.p.metrics.timeouts.Inc()
		r.c.p.metrics.proxyError(frame.ErrCodeServer)
		msg := timeoutMessage(r.c.p.cfg.RequestTimeout)
		r.noteError(frame.ErrCodeServer, len(msg))
		r.c.sendError(r.view.Stream, frame.ErrCodeServer, msg)
	}
}
