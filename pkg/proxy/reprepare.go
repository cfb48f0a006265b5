package proxy

// Re-preparing: a node that forgot a statement the proxy knows is taught it
// again, and the request is sent again, so the client never sees UNPREPARED
// for what is only a node restart.

import (
	"context"

	"go.uber.org/zap"

	"github.com/cqlgate/cqlgate/pkg/backend"
	"github.com/cqlgate/cqlgate/pkg/frame"
)

// reprepare handles UNPREPARED for a statement prepared through the proxy:
// it prepares it again on the node that forgot it (after a restart, or
// because it was prepared elsewhere) and sends the request again, so the
// client never sees the error. It reports false when the error should go
// to the client as is.
func (r *request) reprepare(conn *backend.Conn, resp *frame.Buf) bool {
	if (r.op != frame.OpExecute && r.op != frame.OpBatch) || r.reprepares >= maxReprepares {
		return false
	}
	if code, _, err := frame.ErrorCode(resultBody(resp.B)); err != nil || code != frame.ErrCodeUnprepared {
		return false
	}
	id, err := frame.UnpreparedID(resultBody(resp.B))
	if err != nil {
		return false
	}
	st, ok := r.c.p.prep.get(id)
	if !ok {
		return false // the driver prepares it again itself
	}
	r.reprepares++
	if r.unprepared != nil {
		r.unprepared.Release()
	}
	r.unprepared = resp
	// Preparing is a round trip: leave the backend read loop.
	go r.prepareAndResend(st, r.node)
	return true
}

func (r *request) prepareAndResend(st *statement, node *backend.Node) {
	c := r.c
	ctx, cancel := context.WithTimeout(c.p.ctx, c.p.cfg.RequestTimeout)
	defer cancel()
	if err := c.p.prepareOn(ctx, st, c.version, node); err != nil {
		c.log.Debug("re-prepare failed", zap.String("node", node.Addr), zap.Error(err))
		resp := r.unprepared
		r.unprepared = nil
		frame.SetStream(resp.B, r.stream)
		c.send(resp)
		r.finish()
		return
	}
	c.p.metrics.reprepares.Inc()
	r.unprepared.Release()
	r.unprepared = nil
	if conn := r.pool.OnNode(node); conn != nil && conn.QueueBy(r.buf.B, r, r.deadline) == nil {
		conn.Flush()
		return
	}
	r.send(nil)
}
