package proxy

// USE and REGISTER: the two requests that change a client connection's
// state rather than ask Cassandra something.

import (
	"errors"

	"go.uber.org/zap"

	"github.com/cqlgate/cqlgate/pkg/backend"
	"github.com/cqlgate/cqlgate/pkg/frame"
)

// register records the events a client wants. Only SCHEMA_CHANGE is ever
// sent: the proxy's own topology does not change, and node events would
// name Cassandra nodes the client must not see.
func (c *client) register(req *request, body []byte) {
	events, err := frame.ReadStringList(body)
	if err != nil {
		c.reject(req, frame.ErrCodeProtocol, "Invalid REGISTER message: "+err.Error())
		return
	}
	for _, e := range events {
		switch e {
		case "SCHEMA_CHANGE":
			c.schemaEvents.Store(true)
		case "TOPOLOGY_CHANGE", "STATUS_CHANGE":
		default:
			c.reject(req, frame.ErrCodeProtocol, "Invalid value '"+e+"' for Event.Type")
			return
		}
	}
	c.answer(req, frame.AppendReady(nil, c.version, req.view.Stream))
}

// use switches the client to the pool whose connections have ks as their
// keyspace, so its unqualified table names resolve as on a direct
// connection while backend connections stay shared. The USE itself is then
// forwarded, so the client gets Cassandra's own answer; the pool is the
// client's role's (roles.go); the switch takes
// effect when that answer arrives (see OnResponse).
func (c *client) use(req *request, ks string) {
	c.flushBackends() // opening a pool may take a while
	pool, err := c.poolFor(c.p.ctx, c.version, ks)
	if err != nil {
		var se *backend.ServerError
		if errors.As(err, &se) {
			// Cassandra refused the USE (e.g. no such keyspace): relay it.
			c.answer(req, frame.AppendFrame(nil, c.version, true, 0, req.view.Stream, frame.OpError, se.Body))
			return
		}
		c.log.Warn("cannot open pool for keyspace", zap.String("keyspace", ks), zap.Error(err))
		c.reject(req, frame.ErrCodeServer, "cqlgate: no Cassandra node available")
		return
	}
	req.pool = pool
	req.useKeyspace = ks
	c.forward(req)
}
