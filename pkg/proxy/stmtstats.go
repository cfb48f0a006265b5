package proxy

// Statement statistics (pkg/stmtstats): which statement each request runs,
// resolved once when it is forwarded, and what its end adds. The hooks are
// in request.go (forward, Admitted, Rejected, OnResponse, OnTimeout,
// failAt, finishAt) and hedge.go (settle, hedgedTimeout); everything else
// is here.

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/cqlgate/cqlgate/pkg/config"
	"github.com/cqlgate/cqlgate/pkg/frame"
	"github.com/cqlgate/cqlgate/pkg/stmtstats"
)

// stmtRef caches a prepared statement's stmtstats entry, so that an EXECUTE
// finds it with one atomic load. It is shared by the copies of a statement
// (reshape).
type stmtRef struct {
	e atomic.Pointer[stmtstats.Entry]
}

// maxBatchStats bounds the statements of a BATCH that make its key.
const maxBatchStats = 32

// What the client got, for the statistics (request.respKind).
const (
	respNone int8 = iota
	respResult
	respError
)

// statementOf returns the entry of the statement req runs, or nil when
// statistics are off or req is not a statement.
func (p *Proxy) statementOf(req *request) *stmtstats.Entry {
	t := p.stmts
	if t == nil {
		return nil
	}
	if req.view.Opcode == frame.OpQuery {
		return req.c.lastQuery.lookup(t, req.query, req.c.keyspace.Load())
	}
	v, f := &req.view, req.buf.B
	switch v.Opcode {
	case frame.OpExecute:
		st := req.st
		if st != nil && st.stats != nil {
			if e := st.stats.e.Load(); e != nil && !e.Evicted() {
				return e
			}
		}
		id := v.ID(f)
		if id == nil {
			return nil
		}
		e := t.Prepared(id, func() (string, string) { return p.describe(id) })
		if st != nil && st.stats != nil {
			st.stats.e.Store(e)
		}
		return e
	case frame.OpBatch:
		if !v.HasParams() {
			return nil
		}
		var buf [maxBatchStats]stmtstats.BatchChild
		children := buf[:0]
		it := v.Children(f)
		for child, ok := it.Next(); ok && len(children) < maxBatchStats; child, ok = it.Next() {
			if child.Kind == frame.BatchChildPrepared {
				children = append(children, stmtstats.BatchChild{ID: child.ID})
			} else {
				children = append(children, stmtstats.BatchChild{Query: child.Query})
			}
		}
		return t.Batch(v.BatchType, *req.c.keyspace.Load(), children, func(id []byte) string {
			q, _ := p.describe(id)
			return q
		})
	}
	return nil
}

// queryMemo is a client connection's last QUERY text and its entry: an
// application that sends one string again and again (a polling query, a
// statement it never prepared) finds it with one comparison instead of a
// hash and a shared map. Only the client's read loop touches it.
type queryMemo struct {
	text     []byte
	keyspace *string
	e        *stmtstats.Entry
}

func (m *queryMemo) lookup(t *stmtstats.Table, q []byte, keyspace *string) *stmtstats.Entry {
	if m.e != nil && keyspace == m.keyspace && !m.e.Evicted() && bytes.Equal(q, m.text) {
		return m.e
	}
	e := t.Query(q, *keyspace)
	m.text = append(m.text[:0], q...)
	m.keyspace, m.e = keyspace, e
	return e
}

// describe returns the text and keyspace of a prepared statement the proxy
// remembers ("" if it does not).
func (p *Proxy) describe(id []byte) (string, string) {
	if st, ok := p.prep.get(id); ok {
		return st.query, st.keyspace
	}
	return "", ""
}

// noteAnswer records what the client is about to get for req's statement:
// the answer's size, its error code or its row count. It must run before
// the answer is handed to the client's writer, which then owns it.
func (r *request) noteAnswer(f []byte) {
	r.respBytes = int32(len(f))
	switch frame.Opcode(f) {
	case frame.OpError:
		r.respKind = respError
		r.respCode, _, _ = frame.ErrorCode(resultBody(f))
	case frame.OpResult:
		r.respKind = respResult
		if n, ok := frame.RowsCount(resultBody(f)); ok {
			r.respRows = n
		}
	}
}

// noteError records an ERROR the proxy answered req with itself, whose
// message is msgLen bytes long.
func (r *request) noteError(code int32, msgLen int) {
	r.respKind = respError
	r.respCode = code
	r.respBytes = int32(frame.HeaderLen + 4 + 2 + msgLen)
}

// recordStatement adds req's end at now to its statement's statistics.
func (r *request) recordStatement(now time.Time) {
	s := stmtstats.Sample{
		Now:      now,
		Latency:  now.Sub(r.start),
		Queued:   r.queued,
		BytesIn:  len(r.buf.B),
		BytesOut: int(r.respBytes),
		Rows:     r.respRows,
		Error:    r.respKind == respError,
		Code:     r.respCode,
		Rejected: r.rejected,
		HedgeWon: r.hedgeWon,
	}
	if r.shared && r.hs != nil {
		s.Hedges = int(r.hs.hedges)
	}
	r.stmt.Record(&s)
	if th := r.c.p.slow.threshold.Load(); th > 0 && int64(s.Latency) >= th {
		r.logSlow(&s)
	}
}

// logSlow writes the slow-statement log line of a request (sampled by
// --slow-statement-sample-rate). Bind values are never logged: only the
// statement's text as the statistics keep it (normalized for QUERY).
func (r *request) logSlow(s *stmtstats.Sample) {
	if rate := math.Float64frombits(r.c.p.slow.sample.Load()); rate < 1 && rand.Float64() >= rate {
		return
	}
	node := ""
	if r.node != nil {
		node = r.node.Addr
	}
	r.c.log.Warn("slow statement",
		zap.String("statement", r.stmt.ID()),
		zap.String("text", r.stmt.Text()),
		zap.String("table", r.stmt.KeyspaceTable()),
		zap.String("node", node),
		zap.Duration("latency", s.Latency),
		zap.Duration("queue_wait", s.Queued),
		zap.Int("hedges", s.Hedges),
		zap.Bool("hedge_won", s.HedgeWon),
		zap.Bool("error", s.Error),
		zap.Int32("error_code", s.Code),
	)
}

// StatementsHandler serves the statement statistics (see
// docs/statements.md):
//
//	GET  /statements?sort=p99|calls|errors|queued|...&limit=N  JSON report
//	POST /statements/reset                                     forget them all
//
// It answers 404 when statistics are off (--statement-stats-entries 0).
func (p *Proxy) StatementsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /statements", p.statementsJSON)
	mux.HandleFunc("POST /statements/reset", func(w http.ResponseWriter, r *http.Request) {
		if p.stmts == nil {
			http.Error(w, "statement statistics are off (--statement-stats-entries 0)", http.StatusNotFound)
			return
		}
		p.stmts.Reset()
		p.log.Info("statement statistics reset", zap.String("from", r.RemoteAddr))
		writeJSON(w, map[string]bool{"reset": true})
	})
	return mux
}

// Statements returns the statement statistics (nil when they are off).
func (p *Proxy) Statements() *stmtstats.Table { return p.stmts }

func writeJSON(w http.ResponseWriter, v any) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// slowLog holds the reloadable settings of the slow-statement log.
type slowLog struct {
	threshold atomic.Int64  // ns; 0: off
	sample    atomic.Uint64 // math.Float64bits of the sampling rate
	top       atomic.Int64  // --statement-metrics-top
}

// initStatements creates the statement statistics and their metrics.
func (p *Proxy) initStatements(cfg config.Config, reg prometheus.Registerer) error {
	p.reloadStatements(cfg)
	if cfg.StatementStatsEntries > 0 {
		p.stmts = stmtstats.New(stmtstats.Config{MaxEntries: cfg.StatementStatsEntries, Classifier: p.classifier})
	}
	return reg.Register(stmtstats.NewCollector(p.stmts, func() int { return int(p.slow.top.Load()) }))
}

// reloadStatements applies the reloadable statement settings.
func (p *Proxy) reloadStatements(cfg config.Config) {
	p.slow.threshold.Store(int64(cfg.SlowStatementThreshold))
	p.slow.sample.Store(math.Float64bits(cfg.SlowStatementSampleRate))
	p.slow.top.Store(int64(cfg.StatementMetricsTop))
}
