package proxy

// This file is the hot path, top to bottom: read a frame, decide what it
// is, pick a node, forward it, and route the answer back to the client's
// stream. Everything that is not a plain forward (system tables, USE,
// PREPARE bookkeeping, re-prepare) branches off here and is kept short.

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cqlgate/cqlgate/pkg/backend"
	"github.com/cqlgate/cqlgate/pkg/frame"
	"github.com/cqlgate/cqlgate/pkg/limiter"
	"github.com/cqlgate/cqlgate/pkg/rules"
	"github.com/cqlgate/cqlgate/pkg/stmtstats"
	"github.com/cqlgate/cqlgate/pkg/systables"
)

// maxReprepares bounds re-prepare rounds for one request: a BATCH may name
// several statements a restarted node has forgotten.
const maxReprepares = 8

// maxRetries bounds how often one request is sent again to another node
// (after a connection died before writing it, or an answer proving it did
// not run).
const maxRetries = 2

// request is one client request on its way through the proxy. It is the
// backend.Handler for its own answer, so forwarding allocates nothing.
//
// Who may touch a request, and when. It has one owner at a time, and each
// hand-off goes through a lock or a channel that orders it:
//
//  1. The client's read loop builds it (handle), routes it and, when a
//     permit is free, queues it on a backend connection (forward,
//     dispatch).
//  2. A request matching a rule (rules.go) first needs the rule's permit;
//     without a free one it waits in the rule's queue, and whoever
//     releases one calls RuleAdmitted (which goes on to the limiter), or the
//     rule sweeper RuleRejected. Without a free node permit it waits in
//     the limiter's queue. Whoever frees
//     room (a goroutine releasing another request's permit, usually a
//     backend read loop) calls Admitted, or the limiter's sweeper calls
//     Rejected. A backend read loop gets AdmittedVia instead: the request
//     is queued on its connection at once (3), and only the wake-up of
//     that connection's writer waits for the end of the loop's burst.
//  3. Once queued on a connection, that connection owns it: its read loop
//     calls OnResponse or OnFailure exactly once, and the upkeep loop may
//     call OnTimeout before that, under the connection's lock.
//  4. A resend (OnFailure's retry, resendNotExecuted, reprepare) hands it
//     to another connection (3 again), or to a goroutine of its own that
//     waits for a re-prepare or for schema agreement and then owns it.
//  5. An armed hedge timer shares it with the scheduler's goroutine
//     (Hedge): from the moment the timer fires, its fate is decided under
//     hs.mu, and it is never pooled again (shared).
//
// Every path ends in finishAt, the one exit: the limiter and the rule get
// their permits back, the histograms their sample, the pools the frame and the request.
type request struct {
	c   *client
	buf *frame.Buf // the request frame; its stream id is rewritten per send
	// view is buf read once (frame.ParseRequest): its opcode, the client's
	// stream id, where its statement id, values and parameters are.
	// Routing, idempotency, timestamping and statistics read it instead of
	// parsing the frame again; whoever rewrites buf keeps it true.
	view  frame.Request
	pool  *backend.Pool
	node  *backend.Node // where it was last sent
	start time.Time
	// deadline (unix nanoseconds) is start plus the request timeout: the
	// time queued for a permit counts against it.
	deadline int64

	table       systables.Table // system table query answered for the proxy
	useKeyspace string          // USE: the keyspace it switches to
	prepQuery   string          // PREPARE: the statement...
	prepKS      string          // ...and the keyspace it is prepared in
	retries     int8
	reprepares  int8
	unprepared  *frame.Buf // the UNPREPARED answer, kept while re-preparing
	timedOut    bool       // the client got a timeout error already

	// Routing: the prepared statement an EXECUTE or BATCH runs (nil if
	// unknown), the replicas it may go to (nil: any node), and buffers for
	// both so that routing allocates nothing.
	st      *statement
	cands   []limiter.NodeID
	candBuf [maxReplicas]limiter.NodeID
	vals    [4][]byte // partition-key components; more grow (rare)
	idem    int8      // idemUnknown until idempotent() decides

	// Hedging: hs is allocated on first arming and survives pooling;
	// armed is set when this request's timer was armed; shared once the
	// timer fired, after which the request is never pooled again.
	hs     *hedgeState
	armed  bool
	shared bool

	permit       limiter.Permit  // the zero Permit for requests the limiter skips
	rule         rules.Permit    // the permit of the rule it matches (rules.go)
	admittedLate bool            // admitted from the limiter's queue (Admitted)
	held         int32           // bytes counted in Proxy.buffered for it
	sent         time.Time       // when it was queued to Cassandra
	written      time.Time       // when the connection's writer took it (set with the answer)
	arrived      time.Time       // when the answer's bytes arrived (set with the answer)
	outcome      limiter.Outcome // what to tell the limiter at the end
	answered     bool            // Cassandra's answer arrived (for the latency histogram)

	// Statement statistics (stmtstats.go): the statement's entry (nil:
	// none or off), the time queued for a permit, and what the client got,
	// noted before the answer is handed to its writer.
	stmt      *stmtstats.Entry
	query     []byte // a QUERY's text, in buf
	queued    time.Duration
	respKind  int8
	rejected  bool // OVERLOADED from the limiter
	hedgeWon  bool // a hedge's answer was the client's
	respCode  int32
	respRows  int32
	respBytes int32
}

var requestPool = sync.Pool{New: func() any { return new(request) }}

// readLoop reads requests until the connection ends. Requests are queued
// on backend connections as they are read and written out only when no
// more input is buffered, so a client that pipelines many requests has them
// forwarded in one syscall per backend connection.
func (c *client) readLoop() {
	for {
		b, err := c.r.ReadFrame()
		if err != nil {
			c.flushBackends()
			if c.answerReadError(err) {
				continue
			}
			c.close(err)
			return
		}
		c.handle(b)
		if c.r.Buffered() == 0 {
			c.flushBackends()
			c.flushOwn()
		}
	}
}

// flushBackends writes what this client queued on backend connections.
func (c *client) flushBackends() {
	for i, conn := range c.dirty {
		conn.Flush()
		c.dirty[i] = nil
	}
	c.dirty = c.dirty[:0]
}

// handle takes ownership of one request frame.
func (c *client) handle(b *frame.Buf) {
	view, err := frame.ParseRequest(b.B)
	h := view.Header // set even when the message is malformed
	if h.Version != c.version {
		c.protocolError(b, h.Stream, fmt.Sprintf("Invalid message version. Got %d but previous messages on this connection had version %d", h.Version, c.version))
		return
	}
	if h.Stream < 0 {
		c.protocolError(b, h.Stream, fmt.Sprintf("Invalid stream id %d: negative ids are reserved for server events", h.Stream))
		return
	}
	req := requestPool.Get().(*request)
	*req = request{c: c, buf: b, view: view, pool: c.pool.Load()}
	if err != nil {
		c.reject(req, frame.ErrCodeProtocol, "Invalid "+frame.OpcodeName(h.Opcode)+" message: "+err.Error())
		return
	}
	v := &req.view

	switch h.Opcode {
	case frame.OpQuery:
		q := v.Text(b.B)
		req.query = q // for the statement statistics, a USE's too
		if t := systables.Classify(q, *c.keyspace.Load()); t != systables.TableNone {
			req.table = t
		} else if ks, ok := systables.ParseUse(q); ok {
			c.use(req, ks)
			return
		}
	case frame.OpPrepare:
		q := v.Text(b.B)
		req.prepQuery = string(q)
		if req.prepKS = string(v.Keyspace(b.B)); req.prepKS == "" {
			req.prepKS = *c.keyspace.Load()
		}
		req.table = systables.Classify(q, req.prepKS)
	case frame.OpExecute:
		if sys := c.p.systemStatements.Load(); sys != nil {
			if req.table = (*sys)[string(v.ID(b.B))]; req.table != systables.TableNone {
				// The rewrite needs the column names.
				v.ClearSkipMetadata(b.B)
			}
		}
	case frame.OpBatch:
	case frame.OpOptions:
		c.answer(req, frame.AppendSupported(nil, c.version, h.Stream, c.p.supported()))
		return
	case frame.OpRegister:
		c.register(req, v.Body(b.B))
		return
	case frame.OpStartup:
		c.reject(req, frame.ErrCodeProtocol, "Unexpected message STARTUP, the connection is already initialized")
		return
	default:
		c.reject(req, frame.ErrCodeProtocol, "Unknown or unexpected opcode "+frame.OpcodeName(h.Opcode))
		return
	}
	c.forward(req)
}

// forward sends req to Cassandra once the limiter admits it. A free permit
// is taken right here, so the request joins this read burst's batch; else
// the request waits in the limiter's queue and is sent by Admitted, or
// answered OVERLOADED by Rejected. System-table queries skip the limiter.
func (c *client) forward(req *request) {
	if c.p.draining.Load() {
		c.who.overloaded()
		c.reject(req, frame.ErrCodeOverloaded, "cqlgate: the proxy is shutting down; send new requests to another node")
		return
	}
	if !c.p.admitBytes(req) {
		c.who.overloaded()
		c.reject(req, frame.ErrCodeOverloaded, "cqlgate: too many bytes of requests and answers buffered (--max-buffered-bytes)")
		return
	}
	c.inflight.Add(1)
	// When the request's bytes arrived: the client's wait includes the
	// time it sat behind the rest of its burst.
	req.start = c.in.At()
	req.deadline = req.start.UnixNano() + int64(c.p.cfg.RequestTimeout)
	c.p.metrics.request(req.view.Opcode)
	if c.who.requests != nil {
		c.who.requests.Inc()
	}
	if req.table == systables.TableNone {
		c.route(req)
		req.stmt = c.p.statementOf(req)
		if !c.admitRule(req) {
			return // queued for its rule's permit, or refused
		}
		p, ok := c.p.limiter.TryAcquire(req.cands)
		if !ok {
			// The queue's wait starts now, not when the burst arrived: its
			// target is about the limiter's queue, not the read loop's.
			c.p.limiter.AcquireAt(req, c.flow, c.p.priorityClass(req), req.cands, time.Unix(0, req.deadline), time.Now())
			return
		}
		req.permit = p
		c.armHedge(req)
	}
	// Sent now, not when the burst arrived: the backend latency, which the
	// adaptive limit reads, is Cassandra's, not the read loop's.
	if conn := req.dispatch(time.Now()); conn != nil && !slices.Contains(c.dirty, conn) {
		c.dirty = append(c.dirty, conn)
	}
}

// admitBytes counts req's frame in the bytes the proxy holds, unless that
// would go past --max-buffered-bytes. Answers are always taken (their
// requests ran), so the budget is kept by turning new requests away while
// answers drain: it bounds memory whatever the clients send or fail to
// read, where --queue-length and --client-write-buffer-bytes bound one
// count or one client each.
func (p *Proxy) admitBytes(req *request) bool {
	n := int64(len(req.buf.B))
	if p.buffered.Add(n) > p.bufferLimit.Load() {
		p.buffered.Add(-n)
		return false
	}
	req.held = int32(n)
	return true
}

// priorityClass returns the admission queue's priority class for req: its
// login role's when --role-weights lists it (so that one role cannot starve
// another, whatever keyspaces they share), else from the keyspace it works
// in: a prepared statement's table's (route found it), else the client's
// current one. It runs only when the request has to queue.
func (p *Proxy) priorityClass(req *request) int {
	kw := p.keyspaceWeights.Load()
	if cl, ok := kw.RoleClass[req.c.who.name]; ok {
		return cl
	}
	if len(kw.Class) == 0 {
		return 0
	}
	ks := *req.c.keyspace.Load()
	if st := req.st; st != nil && st.routeKS != "" {
		ks = st.routeKS // the keyspace of the statement's table
	}
	return kw.Class[ks]
}

// Admitted sends a request the limiter let through after queueing it, at
// now; it may run on any goroutine.
func (r *request) Admitted(p limiter.Permit, now time.Time) {
	if conn := r.admitted(p, now); conn != nil {
		conn.Kick()
	}
}

// AdmittedVia is Admitted on the read loop of the backend connection via,
// which handed out another request's answer (finishVia): its write waits
// for the end of that loop's burst and shares a syscall with the others
// the burst admitted, instead of waking the connection's writer each.
func (r *request) AdmittedVia(p limiter.Permit, now time.Time, via any) {
	conn := r.admitted(p, now)
	if conn == nil {
		return
	}
	if rl, ok := via.(*backend.Conn); ok {
		rl.Defer(conn)
		return
	}
	conn.Kick()
}

// admitted is Admitted up to the write: the connection to flush, or nil.
func (r *request) admitted(p limiter.Permit, now time.Time) *backend.Conn {
	r.permit = p
	r.admittedLate = true
	if now.IsZero() {
		now = time.Now()
	}
	r.queued = now.Sub(r.start)
	r.c.armHedge(r)
	return r.dispatch(now)
}

// Rejected answers a request the limiter would not admit with OVERLOADED,
// naming the limit that was hit, unless its client is gone.
func (r *request) Rejected(reason limiter.Reason) {
	if reason.Kind == limiter.Cancelled {
		r.finish()
		return
	}
	p := r.c.p
	now := time.Now()
	p.metrics.rejected.Inc()
	r.c.who.overloaded()
	p.metrics.rejectLatency.Observe(now.Sub(r.start).Seconds())
	// Hedges would only add load now.
	p.hedging.budget.Pause(now.Add(time.Second))
	r.rejected = true
	r.failAt(frame.ErrCodeOverloaded, p.overloadedMessage(reason), now)
}

// overloadedMessages caches the OVERLOADED message of each limiter.Kind
// with the limit it last named, so that shedding thousands of requests a
// second does not format the same string for each.
type overloadedMessages [16]atomic.Pointer[overloadedMessage]

type overloadedMessage struct {
	reason limiter.Reason
	text   string
}

func (p *Proxy) overloadedMessage(reason limiter.Reason) string {
	if int(reason.Kind) >= len(p.overloadedMsgs) {
		return "cqlgate: " + reason.String()
	}
	slot := &p.overloadedMsgs[reason.Kind]
	if m := slot.Load(); m != nil && m.reason == reason {
		return m.text
	}
	m := &overloadedMessage{reason: reason, text: "cqlgate: " + reason.String()}
	slot.Store(m)
	return m.text
}

// resend sends the request on the least-loaded node other than avoid (when
// there is another) and flushes; it is the path for requests sent again
// from other goroutines than the client's read loop.
func (r *request) resend(avoid *backend.Node) {
	if conn := r.dispatchAvoiding(avoid); conn != nil {
		conn.Flush()
	}
}

// dispatch queues the request, sent now, on the node its permit names, or on
// the least-loaded node when it has no permit or that node has no
// connection in the request's pool.
func (r *request) dispatch(now time.Time) *backend.Conn {
	r.sent = now
	if r.permit != (limiter.Permit{}) {
		if conn, node := r.pool.OnNodeID(int(r.permit.Node())); conn != nil {
			r.node = node
			if r.armed {
				r.hs.primaryNode.Store(int32(node.ID))
			}
			if conn.QueueBy(r.buf.B, r, r.deadline) == nil {
				return conn
			}
		}
	}
	return r.dispatchAvoiding(nil)
}

// dispatchAvoiding picks the least-loaded node (other than avoid, when there
// is one) and queues the request there, returning the connection to flush;
// if no connection can take it, the client gets an error on its stream and
// the result is nil.
func (r *request) dispatchAvoiding(avoid *backend.Node) *backend.Conn {
	for attempt := 0; attempt < 3; attempt++ {
		conn, np := r.pool.Pick(avoid)
		if conn == nil && avoid != nil {
			conn, np = r.pool.Pick(nil)
		}
		if conn == nil {
			if se := r.pool.Role().Refused(); se != nil {
				// The role's pools closed because Cassandra refused its
				// login: its answer, while the client's connection closes.
				r.failUnsent(se.Code, se.Message)
				return nil
			}
			r.failUnsent(frame.ErrCodeServer, "cqlgate: no Cassandra node is available")
			return nil
		}
		r.node = np.Node()
		if r.armed {
			r.hs.primaryNode.Store(int32(r.node.ID))
		}
		// A request sent again elsewhere takes its permit along when that
		// node has room, so the node limits count it where it is; else it
		// stays counted against its first node.
		r.permit, _ = r.permit.Move(limiter.NodeID(r.node.ID))
		err := conn.QueueBy(r.buf.B, r, r.deadline)
		if err == nil {
			return conn
		}
		if errors.Is(err, backend.ErrNoStreams) && attempt == 2 {
			r.failUnsent(frame.ErrCodeOverloaded, "cqlgate: every stream id of every Cassandra connection is in use")
			return nil
		}
		avoid = r.node
	}
	r.failUnsent(frame.ErrCodeServer, "cqlgate: no Cassandra connection accepted the request")
	return nil
}

// OnResponse routes Cassandra's answer back to the client's stream. It runs
// on the backend connection's read loop and must not block.
func (r *request) OnResponse(conn *backend.Conn, resp *frame.Buf) {
	if r.armed && r.primaryAnswered(conn, resp) {
		return
	}
	c := r.c
	r.answered = true
	r.written = conn.WrittenAt()
	r.arrived = conn.ArrivedAt()
	if r.timedOut {
		// The client was answered at the deadline; now the stream is free.
		resp.Release()
		r.outcome = limiter.Timeout
		r.finish()
		return
	}
	r.outcome = outcomeOf(resp.B)
	switch frame.Opcode(resp.B) {
	case frame.OpError:
		if r.reprepare(conn, resp) || r.resendNotExecuted(resp) {
			return
		}
	case frame.OpResult:
		switch {
		case r.table != systables.TableNone && r.view.Opcode == frame.OpPrepare:
			if id, err := frame.PreparedID(resultBody(resp.B)); err == nil {
				c.p.rememberSystemStatement(id, r.table)
				// Like any statement: prepared on the other nodes too, and
				// again on a node that forgot it.
				c.p.remember(id, r.prepQuery, r.prepKS, c.version, c.who.role.Load(), r.node, resultBody(resp.B))
			}
		case r.table != systables.TableNone:
			resp = c.rewriteSystem(r.table, resp)
		case r.useKeyspace != "":
			if ks, err := frame.SetKeyspaceName(resultBody(resp.B)); err == nil {
				c.keyspace.Store(&ks)
				c.setPool(r.pool)
			}
		case r.prepQuery != "":
			if id, err := frame.PreparedID(resultBody(resp.B)); err == nil {
				c.p.remember(id, r.prepQuery, r.prepKS, c.version, c.who.role.Load(), r.node, resultBody(resp.B))
			}
		default:
			if kind, err := frame.ResultKind(resultBody(resp.B)); err == nil && kind == frame.ResultSchemaChange {
				// Polling takes a while: leave the backend read loop.
				go r.answerAfterSchemaAgreement(resp)
				return
			}
		}
	}
	if r.stmt != nil {
		r.noteAnswer(resp.B)
	}
	// The rule's permit goes back before the client has its answer: a
	// client sending one request at a time must find it free for the next
	// (finishAt, after the answer, would be too late with no rule queue).
	at := conn.ReadAt()
	r.rule.Release(at)
	frame.SetStream(resp.B, r.view.Stream)
	c.sendFrom(conn, resp)
	r.finishVia(at, conn)
}

// fail answers the client with an error the proxy generated.
func (r *request) fail(code int32, msg string) { r.failAt(code, msg, time.Now()) }

// failAt is fail for a caller that has read the clock already. A request
// whose hedge timer is armed ends its primary attempt first: if a hedge is
// out, the error waits for it like any error answer.
func (r *request) failAt(code int32, msg string, now time.Time) {
	if r.armed {
		f := frame.AppendError(nil, r.c.version, r.view.Stream, code, msg)
		b := frame.GetBuf(len(f))
		copy(b.B, f)
		if r.primaryAnswered(nil, b) {
			return
		}
		b.Release()
	}
	r.c.p.metrics.proxyError(code)
	r.noteError(code, len(msg))
	r.rule.Release(now) // before the answer, as in OnResponse
	r.c.sendError(r.view.Stream, code, msg)
	r.finishAt(now)
}

func (r *request) finish() { r.finishAt(time.Now()) }

// backendLatency is the limiter's sample of a request sent at r.sent and
// ended at now: from the write to the backend when the answer told when
// that was, so that the proxy's own queue before its writer (which grows
// when the proxy is short of CPU) is not read as Cassandra's latency.
func (r *request) backendLatency(now time.Time) time.Duration {
	from := r.sent
	if r.written.After(from) {
		from = r.written
	}
	// And to when the answer arrived, when the kernel said: the time it
	// then waited for this proxy to read it is the proxy's, not the node's.
	if r.arrived.After(from) && r.arrived.Before(now) {
		now = r.arrived
	}
	return now.Sub(from)
}

// finishAt ends the request at now: the limiter, the histograms and the
// pools get back what it held.
func (r *request) finishAt(now time.Time) { r.finishVia(now, nil) }

// finishVia is finishAt on the read loop of the backend connection rl (nil:
// elsewhere), which the request the freed permit admits can leave its
// write to (AdmittedVia).
func (r *request) finishVia(now time.Time, rl *backend.Conn) {
	c := r.c
	c.p.metrics.requestDuration.Observe(now.Sub(r.start).Seconds())
	if r.stmt != nil {
		r.recordStatement(now)
	}
	if r.sent.IsZero() {
		r.permit.Release(limiter.Dropped, 0)
	} else {
		d := now.Sub(r.sent)
		var via any
		if rl != nil {
			via = rl // not a typed nil: AdmittedVia would take it
		}
		r.permit.ReleaseVia(r.outcome, r.backendLatency(now), via)
		if r.answered {
			c.p.metrics.observeBackend(r.node.ID, r.node.Addr, d)
			if r.st != nil && r.outcome == limiter.Success {
				if cl, ok := r.st.hedge.class(c.p.hedging, r.node.ID); ok {
					c.p.hedging.delay.Record(cl, d, now)
				}
			}
		}
	}
	// After the node permit, so that a request the rule admits next finds
	// the node's room too; the answering paths gave it back already
	// (Release zeroes r.rule: it goes back once).
	r.rule.Release(now)
	c.inflight.Add(-1)
	c.p.buffered.Add(-int64(r.held))
	r.buf.Release()
	if r.unprepared != nil {
		r.unprepared.Release()
	}
	if r.shared {
		return // the hedge scheduler may still hold it
	}
	hs := r.hs
	*r = request{hs: hs}
	requestPool.Put(r)
}

// answer replies to a request the proxy handles itself.
func (c *client) answer(req *request, f []byte) {
	b := frame.GetBuf(len(f))
	copy(b.B, f)
	c.send(b)
	req.buf.Release()
	*req = request{}
	requestPool.Put(req)
}

// reject answers a request the proxy refuses with an ERROR.
func (c *client) reject(req *request, code int32, msg string) {
	c.p.metrics.proxyError(code)
	c.answer(req, frame.AppendError(nil, c.version, req.view.Stream, code, msg))
}

func (c *client) protocolError(b *frame.Buf, stream int16, msg string) {
	b.Release()
	c.p.metrics.proxyError(frame.ErrCodeProtocol)
	c.sendError(stream, frame.ErrCodeProtocol, msg)
}

// outcomeOf classifies an answer for the limiter: overload and timeouts
// push the node's limit down, other errors say nothing about its capacity.
// Of the RESULTs, only rows and void answer a statement's work: a PREPARE's
// and a USE's come from the node's caches in a fraction of a read's time,
// a schema change's waits for the cluster, and none is a latency sample.
func outcomeOf(f []byte) limiter.Outcome {
	if frame.Opcode(f) != frame.OpError {
		if k, err := frame.ResultKind(resultBody(f)); err == nil && k != frame.ResultRows && k != frame.ResultVoid {
			return limiter.Unsampled
		}
		return limiter.Success
	}
	code, _, _ := frame.ErrorCode(resultBody(f))
	switch code {
	case frame.ErrCodeOverloaded:
		return limiter.Overloaded
	case frame.ErrCodeReadTimeout, frame.ErrCodeWriteTimeout:
		return limiter.Timeout
	}
	return limiter.Failure
}

// resultBody returns the RESULT message inside a response frame, past the
// tracing id, warnings and custom payload that header flags announce; nil
// if the frame is malformed.
func resultBody(f []byte) []byte {
	b, err := frame.MessageBody(f)
	if err != nil {
		return nil
	}
	return b
}
