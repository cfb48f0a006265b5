package proxy

// Re-preparing: a node that forgot a statement the proxy knows is taught it
// again, and the request is sent again, so the client never sees UNPREPARED
// for what is only a node restart. When the statement's columns changed
// (ALTER TABLE, DROP and CREATE), the client sees UNPREPARED as on a direct
// connection, so that its driver learns the new columns.

import (
	"bytes"
	"context"

	"go.uber.org/zap"

	"github.com/cqlgate/cqlgate/pkg/backend"
	"github.com/cqlgate/cqlgate/pkg/frame"
)

// reprepare handles UNPREPARED for a statement prepared through the proxy:
// it prepares it again on the node that forgot it (after a restart, or
// because it was prepared elsewhere) and sends the request again, so the
// client never sees the error. It reports false when the error should go
// to the client as is: the statement is unknown to the proxy, or its
// columns are known to have changed (see statement.mayHideUnprepared).
func (r *request) reprepare(conn *backend.Conn, resp *frame.Buf) bool {
	if (r.view.Opcode != frame.OpExecute && r.view.Opcode != frame.OpBatch) || r.reprepares >= maxReprepares {
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
	if !ok || st.reshaped {
		return false // the driver prepares it again itself
	}
	r.reprepares++
	if r.unprepared != nil {
		r.unprepared.Release()
	}
	r.unprepared = resp
	// Preparing is a round trip: leave the backend read loop.
	go r.prepareAndResend(id, st, r.node)
	return true
}

// prepareAndResend prepares st (id) on node and sends the request there
// again if the statement kept its shape; else the client gets the
// UNPREPARED answer kept in r.unprepared.
func (r *request) prepareAndResend(id []byte, st *statement, node *backend.Node) {
	c := r.c
	ctx, cancel := context.WithTimeout(c.p.ctx, c.p.cfg.RequestTimeout)
	defer cancel()
	// As the role whose request met UNPREPARED: the statement is global
	// at Cassandra, the right to prepare it there is the role's.
	meta, err := c.p.prepareOn(ctx, st, c.version, c.who.role.Load(), node)
	if err != nil {
		c.log.Debug("re-prepare failed", zap.String("node", node.Addr), zap.Error(err))
		r.passUnprepared()
		return
	}
	if !st.mayHideUnprepared(meta.Shape) || !r.holdsResultMetadata(meta) {
		c.p.prep.add(id, st.reshape(meta.Shape))
		c.p.metrics.reshaped.Inc()
		r.passUnprepared()
		return
	}
	c.p.metrics.reprepares.Inc()
	r.unprepared.Release()
	r.unprepared = nil
	if conn := r.pool.OnNode(node); conn != nil && conn.QueueBy(r.buf.B, r, r.deadline) == nil {
		conn.Flush()
		return
	}
	r.resend(nil)
}

// holdsResultMetadata reports whether a v5 EXECUTE names the result
// metadata id the node now gives its statement: the rows' shape the client
// expects. Earlier versions and BATCH carry none (true).
func (r *request) holdsResultMetadata(meta *frame.PreparedMeta) bool {
	if r.c.version < frame.V5 || r.view.Opcode != frame.OpExecute {
		return true
	}
	id := r.view.ResultMetadataID(r.buf.B)
	return id != nil && bytes.Equal(id, meta.ResultMetadataID)
}

// passUnprepared answers the client with the UNPREPARED answer the node
// gave, so its driver prepares the statement again itself.
func (r *request) passUnprepared() {
	resp := r.unprepared
	r.unprepared = nil
	frame.SetStream(resp.B, r.view.Stream)
	r.c.send(resp)
	r.finish()
}
