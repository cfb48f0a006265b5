package proxy

// Schema changes: a DDL's answer waits for schema agreement, SCHEMA_CHANGE
// events reach registered clients, and the schema version the proxy reports
// follows the cluster's.

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/cqlgate/cqlgate/pkg/frame"
	"github.com/cqlgate/cqlgate/pkg/systables"
)

// schemaAgreementTimeout is how long a DDL's answer waits for the nodes to
// agree on the schema: the Java driver's default.
const schemaAgreementTimeout = 10 * time.Second

// answerAfterSchemaAgreement holds a DDL's answer until every node has the
// new schema, so the client's next request finds its table on whichever node
// serves it. On timeout the answer goes out anyway, as drivers do.
func (r *request) answerAfterSchemaAgreement(resp *frame.Buf) {
	c := r.c
	ctx, cancel := context.WithTimeout(c.p.ctx, schemaAgreementTimeout)
	defer cancel()
	if v, err := c.p.cluster.WaitSchemaAgreement(ctx); err != nil {
		c.log.Warn("no schema agreement among Cassandra nodes; answering the DDL anyway", zap.Error(err))
	} else {
		// Before the answer: the driver checks agreement right after it,
		// and the proxy's peers rows must show the new version too.
		c.p.noteLocal(systables.LocalInfo{SchemaVersion: v})
	}
	frame.SetStream(resp.B, r.view.Stream)
	c.send(resp)
	r.finish()
}

// broadcastSchemaChange forwards a SCHEMA_CHANGE event from the control
// connection to every client that registered for it. The event body is the
// same in v3, v4 and v5 except that v3 has no FUNCTION or AGGREGATE target:
// v3 clients get "keyspace updated" instead, as Cassandra sends them.
func (p *Proxy) broadcastSchemaChange(ev *frame.Buf) {
	defer ev.Release()
	select {
	case p.schemaChanged <- struct{}{}:
	default:
	}
	body := frame.Body(ev.B)
	var v3body []byte
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.clients {
		if !c.schemaEvents.Load() {
			continue
		}
		b := body
		if c.version == frame.V3 {
			if v3body == nil {
				v3body = v3SchemaChange(body)
			}
			b = v3body
		}
		f := frame.GetBuf(frame.HeaderLen + len(b))
		frame.PutHeader(f.B, frame.Header{Version: c.version, Response: true, Stream: frame.EventStream, Opcode: frame.OpEvent, Length: int32(len(b))})
		copy(frame.Body(f.B), b)
		c.send(f)
	}
}

// noteLocal merges what the proxy learnt of the real system.local into
// lastLocal: a partial SELECT (drivers check schema agreement with SELECT
// schema_version FROM system.local) fills only the columns it read.
func (p *Proxy) noteLocal(info systables.LocalInfo) {
	for {
		old := p.lastLocal.Load()
		merged := info
		if old != nil {
			merged = *old
			if info.SchemaVersion != ([16]byte{}) {
				merged.SchemaVersion = info.SchemaVersion
			}
			for _, f := range []struct {
				dst *string
				src string
			}{
				{&merged.ReleaseVersion, info.ReleaseVersion}, {&merged.DataCenter, info.DataCenter},
				{&merged.Rack, info.Rack}, {&merged.Partitioner, info.Partitioner}, {&merged.ClusterName, info.ClusterName},
			} {
				if f.src != "" {
					*f.dst = f.src
				}
			}
		}
		if p.lastLocal.CompareAndSwap(old, &merged) {
			return
		}
	}
}

// trackSchemaVersion keeps the schema version of the proxy's made-up
// system.peers rows current: once at start, and after every schema change
// Cassandra announces, once the nodes agree. Otherwise a driver that checks
// agreement (local and peers versions equal) would wait in vain whenever no
// client had read system.local since. A reading that lands just after a
// newer one is corrected by the next event.
func (p *Proxy) trackSchemaVersion(ctx context.Context) {
	for {
		actx, cancel := context.WithTimeout(ctx, schemaAgreementTimeout)
		v, err := p.cluster.WaitSchemaAgreement(actx)
		cancel()
		if err == nil {
			p.noteLocal(systables.LocalInfo{SchemaVersion: v})
		} else if ctx.Err() == nil {
			p.log.Debug("cannot read the schema version", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-p.schemaChanged:
		}
	}
}

// v3SchemaChange rewrites a FUNCTION or AGGREGATE schema change event body
// ([string SCHEMA_CHANGE][string change][string target][string keyspace]...)
// as KEYSPACE UPDATED of that keyspace; other bodies are returned as is.
func v3SchemaChange(body []byte) []byte {
	var fields []string
	rest := body
	for i := 0; i < 4; i++ {
		if len(rest) < 2 {
			return body
		}
		n := int(rest[0])<<8 | int(rest[1])
		if len(rest) < 2+n {
			return body
		}
		fields = append(fields, string(rest[2:2+n]))
		rest = rest[2+n:]
	}
	if fields[2] != "FUNCTION" && fields[2] != "AGGREGATE" {
		return body
	}
	var out []byte
	for _, f := range []string{fields[0], "UPDATED", "KEYSPACE", fields[3]} {
		out = append(out, byte(len(f)>>8), byte(len(f)))
		out = append(out, f...)
	}
	return out
}

func parseUUID(s string) ([16]byte, error) {
	var id [16]byte
	hex := make([]byte, 0, 32)
	for i := 0; i < len(s); i++ {
		if s[i] != '-' {
			hex = append(hex, s[i])
		}
	}
	if len(hex) != 32 {
		return id, fmt.Errorf("%q is not a UUID", s)
	}
	for i := 0; i < 16; i++ {
		v, err := strconv.ParseUint(string(hex[2*i:2*i+2]), 16, 8)
		if err != nil {
			return id, fmt.Errorf("%q is not a UUID", s)
		}
		id[i] = byte(v)
	}
	return id, nil
}
