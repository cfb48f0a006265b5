package backend

// The control connection: the one connection per cluster that reads the
// topology and receives Cassandra's events.

import (
	"context"
	"errors"
	"fmt"
	"net"

	"go.uber.org/zap"

	"github.com/cqlgate/cqlgate/pkg/frame"
)

// connectControl dials candidates in order until one accepts, trying
// protocol versions from MaxVersion down, then loads the topology.
func (cl *Cluster) connectControl(ctx context.Context, candidates []string) error {
	var errs []error
	for _, addr := range candidates {
		for v := cl.cfg.MaxVersion; v >= frame.MinVersion; v-- {
			c, err := Dial(ctx, DialConfig{
				Addr:         addr,
				Version:      v,
				Events:       []string{"TOPOLOGY_CHANGE", "STATUS_CHANGE", "SCHEMA_CHANGE"},
				OnEvent:      cl.onEvent,
				Timeout:      cl.cfg.ConnectTimeout,
				MaxFrame:     cl.cfg.MaxFrame,
				WriteTimeout: cl.cfg.WriteTimeout,
				TLS:          cl.cfg.TLS,
				Credentials:  cl.cfg.Credentials,
				Instance:     cl.cfg.Instance,
			})
			if err != nil {
				errs = append(errs, err)
				var se *ServerError
				if errors.As(err, &se) && se.Code == frame.ErrCodeProtocol {
					continue // try an older protocol version
				}
				break
			}
			c.Start(func(_ *Conn, err error) {
				if cl.ctx.Err() == nil {
					cl.log.Warn("control connection lost", zap.String("node", addr), zap.Error(err))
					cl.requestRefresh()
				}
			})
			cl.mu.Lock()
			old := cl.control
			cl.control = c
			cl.version = v
			cl.mu.Unlock()
			if old != nil {
				old.Close()
			}
			if b, err := c.Request(ctx, frame.AppendOptions(nil, v, 0)); err == nil {
				if m, err := frame.ReadStringMultimap(frame.Body(b.B)); err == nil {
					cl.mu.Lock()
					cl.supported = m
					cl.mu.Unlock()
				}
				b.Release()
			}
			if err := cl.loadTopology(ctx); err != nil {
				c.Close()
				errs = append(errs, err)
				break
			}
			cl.log.Info("control connection ready", zap.String("node", addr), zap.Uint8("protocol_version", v))
			return nil
		}
	}
	return fmt.Errorf("backend: no contact point accepted a control connection: %w", errors.Join(errs...))
}

// onEvent runs on the control connection's read loop.
func (cl *Cluster) onEvent(b *frame.Buf) {
	typ, err := frame.EventType(frame.Body(b.B))
	if err != nil {
		b.Release()
		return
	}
	switch typ {
	case "SCHEMA_CHANGE":
		if target, err := schemaChangeTarget(frame.Body(b.B)); err == nil && target == "KEYSPACE" {
			cl.requestRefresh() // replication may have changed
		}
		if cl.cfg.OnSchemaChange != nil {
			cl.cfg.OnSchemaChange(b)
			return
		}
	case "STATUS_CHANGE":
		// Act on DOWN at once (a draining node answers everything with
		// OVERLOADED for seconds before it closes its connections); UP is
		// confirmed by reconnecting.
		if change, addr, err := parseStatusChange(frame.Body(b.B)); err == nil {
			if n := cl.nodeByAdvertised(addr); n != nil {
				if change == "DOWN" {
					cl.log.Info("node reported down", zap.String("node", n.Addr))
					n.markDown(nil)
				} else {
					n.markUp()
				}
			}
		}
		cl.requestRefresh()
	case "TOPOLOGY_CHANGE":
		cl.requestRefresh()
	}
	b.Release()
}

// schemaChangeTarget returns the target (KEYSPACE, TABLE, ...) of a
// SCHEMA_CHANGE event body: <type><change_type><target>...
func schemaChangeTarget(body []byte) (string, error) {
	rest := body
	var s string
	for i := 0; i < 3; i++ {
		if len(rest) < 2 {
			return "", errors.New("short SCHEMA_CHANGE event")
		}
		n := int(rest[0])<<8 | int(rest[1])
		if len(rest) < 2+n {
			return "", errors.New("short SCHEMA_CHANGE event")
		}
		s, rest = string(rest[2:2+n]), rest[2+n:]
	}
	return s, nil
}

// translate applies the address map to an advertised host:port: an entry
// for the host:port wins over one for the host alone.
func (cl *Cluster) translate(addr string) string {
	if len(cl.cfg.AddressMap) == 0 {
		return addr
	}
	if mapped, ok := cl.cfg.AddressMap[addr]; ok {
		return mapped
	}
	if host, _, err := net.SplitHostPort(addr); err == nil {
		if mapped, ok := cl.cfg.AddressMap[host]; ok {
			return mapped
		}
	}
	return addr
}

// nodeByAdvertised finds the node an event names by the address it
// advertises (before AddressMap).
func (cl *Cluster) nodeByAdvertised(addr string) *Node {
	addr = cl.translate(addr)
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if n, ok := cl.nodes[addr]; ok {
		return n
	}
	// Events carry the node's broadcast (storage) address and port; match
	// on the host alone, as nodes on distinct hosts share one CQL port.
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil
	}
	var found *Node
	for a, n := range cl.nodes {
		if h, _, err := net.SplitHostPort(a); err == nil && h == host {
			if found != nil {
				return nil // ambiguous
			}
			found = n
		}
	}
	return found
}

func (cl *Cluster) requestRefresh() {
	select {
	case cl.refresh <- struct{}{}:
	default:
	}
}
