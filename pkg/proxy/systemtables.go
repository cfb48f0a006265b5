package proxy

// System tables: answers about system.local and system.peers are rewritten
// so drivers see the proxy as the whole cluster.

import (
	"go.uber.org/zap"

	"github.com/cqlgate/cqlgate/pkg/frame"
	"github.com/cqlgate/cqlgate/pkg/systables"
)

// rewriteSystem turns Cassandra's answer about system.local or
// system.peers(_v2) into the proxy's own, so drivers see only the proxy. If
// that fails the client gets an error rather than node addresses.
func (c *client) rewriteSystem(t systables.Table, resp *frame.Buf) *frame.Buf {
	body := resultBody(resp.B)
	var out []byte
	var err error
	if t == systables.TableLocal {
		if info, perr := systables.ParseLocal(c.version, body); perr == nil {
			c.p.noteLocal(info)
		}
		out, err = c.ep.rewriter.RewriteLocal(c.version, body)
	} else {
		var info systables.LocalInfo
		if li := c.p.lastLocal.Load(); li != nil {
			info = *li
		}
		out, err = c.ep.rewriter.RewritePeers(c.version, body, info.SchemaVersion, info.ReleaseVersion)
	}
	stream := frame.Stream(resp.B)
	resp.Release()
	if err != nil {
		c.log.Warn("cannot rewrite system table result", zap.Error(err))
		c.p.metrics.proxyError(frame.ErrCodeServer)
		f := frame.AppendError(nil, c.version, stream, frame.ErrCodeServer, "cqlgate: cannot rewrite system table result")
		b := frame.GetBuf(len(f))
		copy(b.B, f)
		return b
	}
	// Tracing ids, warnings and custom payloads are dropped with the
	// original body: they described the node, not the proxy.
	b := frame.GetBuf(frame.HeaderLen + len(out))
	frame.PutHeader(b.B, frame.Header{Version: c.version, Response: true, Stream: stream, Opcode: frame.OpResult, Length: int32(len(out))})
	copy(frame.Body(b.B), out)
	return b
}
