package proxy

// When Cassandra does not answer as asked: a request past its deadline, a
// connection lost with requests on it, a node that says it did not run the
// request, and a request no connection would take. Each decides whether the
// request may be sent again, and otherwise answers the client once.

import (
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/cqlgate/cqlgate/pkg/backend"
	"github.com/cqlgate/cqlgate/pkg/frame"
	"github.com/cqlgate/cqlgate/pkg/limiter"
)

// failUnsent answers a request that no connection took with an error. It
// never reached Cassandra this time, so its latency says nothing of a node:
// the limiter gets it back as Dropped, not as a fast success.
//
// A request admitted from the queue fails on a goroutine of its own:
// Admitted runs inside the limiter's Release of another request, and
// releasing this one's permit there would admit the next queued request
// inside it, whose failure would do the same: recursion as deep as the
// queue whenever no node takes requests.
func (r *request) failUnsent(code int32, msg string) {
	r.sent = time.Time{}
	r.outcome = limiter.Dropped
	if r.admittedLate {
		go r.fail(code, msg)
		return
	}
	r.fail(code, msg)
}

// resendNotExecuted sends a request again, to another node, when Cassandra
// answered OVERLOADED or IS_BOOTSTRAPPING: both mean the request did not
// run, so this is safe whatever the statement does. A node that says it is
// shutting down is avoided from now on (it keeps its connections open and
// answers everything this way for seconds). With no other node to try, the
// answer goes to the client.
func (r *request) resendNotExecuted(resp *frame.Buf) bool {
	if r.retries >= maxRetries {
		return false
	}
	code, msg, err := frame.ErrorCode(resultBody(resp.B))
	if err != nil || (code != frame.ErrCodeOverloaded && code != frame.ErrCodeIsBootstrapping) {
		return false
	}
	if strings.Contains(msg, "shutting down") {
		r.c.p.cluster.MarkDown(r.node)
	}
	conn, np := r.pool.Pick(r.node)
	if conn == nil {
		return false
	}
	// Set before it is queued: from then on the new connection owns the
	// request, and may fail it at once on its own goroutine.
	p := r.c.p
	prev := r.node
	r.retries++
	r.node = np.Node()
	if conn.QueueBy(r.buf.B, r, r.deadline) != nil {
		r.retries--
		r.node = prev
		return false
	}
	resp.Release()
	p.metrics.retries.Inc() // not r.c: r may be finished and pooled by now
	conn.Kick()             // a read loop never writes to another node's socket
	return true
}

// OnTimeout answers the client when Cassandra has not answered within the
// request timeout. The request stays alive as an orphan until its backend
// stream is freed (OnResponse or OnFailure then just recycle it).
func (r *request) OnTimeout(*backend.Conn) {
	if r.armed {
		hs := r.hs
		// Decided under hs.mu, where Hedge decides to send: either a hedge
		// is out and hedgedTimeout answers once for every attempt, or none
		// will be sent and the answer is this one.
		hs.mu.Lock()
		hedged := hs.hedges > 0
		answered := !hedged && !hs.replied.CompareAndSwap(false, true)
		hs.mu.Unlock()
		if hedged {
			r.hedgedTimeout()
			return
		}
		if answered {
			return
		}
	}
	r.timedOut = true
	r.c.p.metrics.timeouts.Inc()
	r.c.p.metrics.proxyError(frame.ErrCodeServer)
	msg := timeoutMessage(r.c.p.cfg.RequestTimeout)
	r.noteError(frame.ErrCodeServer, len(msg))
	r.c.sendError(r.view.Stream, frame.ErrCodeServer, msg)
}

// timeoutMessage is the error message of a request past --request-timeout.
func timeoutMessage(d time.Duration) string {
	return fmt.Sprintf("cqlgate: no answer from Cassandra within the request timeout (%s)", d)
}

// OnFailure runs when the connection carrying the request died. A request
// that never left the proxy is sent again elsewhere; one that may have
// reached Cassandra is answered with an error, because it may have run.
func (r *request) OnFailure(conn *backend.Conn, err error, sent bool) {
	if r.armed && r.primaryAnswered(conn, nil) {
		return
	}
	if r.timedOut {
		r.outcome = limiter.Timeout
		r.finish()
		return
	}
	r.outcome = limiter.Failure
	// Sent again elsewhere when it never left the proxy, or when running
	// it twice is harmless (once: a statement that kills nodes should not
	// kill them all).
	if r.retries < maxRetries && (!sent || (r.retries == 0 && r.idempotent())) {
		r.retries++
		r.c.p.metrics.retries.Inc()
		r.resend(r.node)
		return
	}
	r.c.log.Debug("backend connection lost with request in flight", zap.String("node", conn.Addr()), zap.Error(err))
	r.fail(frame.ErrCodeServer, "cqlgate: the connection to Cassandra was lost before the response; the request may or may not have been executed")
}
