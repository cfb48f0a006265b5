package fakenode

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/datastax/go-cassandra-native-protocol/message"

	"github.com/cqlgate/cqlgate/pkg/frame"
)

// voidBody is the RESULT Void body.
var voidBody = []byte{0, 0, 0, 1}

// respond appends the normal answer to a request to dst and counts the
// executions it implies.
func (c *conn) respond(dst []byte, h frame.Header, body []byte) []byte {
	v, s := h.Version, h.Stream
	protoErr := func(err error) []byte {
		return frame.AppendError(dst, v, s, frame.ErrCodeProtocol, fmt.Sprintf("fakenode: %s: %v", frame.OpcodeName(h.Opcode), err))
	}
	errFrame := func(e *Error) []byte {
		return frame.AppendErrorBody(dst, v, s, e.Code, e.Message, e.Extra)
	}
	result := func(b []byte) []byte { return frame.AppendFrame(dst, v, true, 0, s, frame.OpResult, b) }
	if h.Response {
		return protoErr(fmt.Errorf("a response frame sent to a server"))
	}
	switch h.Opcode {
	case frame.OpOptions:
		return frame.AppendSupported(dst, v, s, c.n.cfg.Supported)
	case frame.OpStartup:
		opts, err := frame.ReadStringMap(body)
		if err != nil {
			return protoErr(err)
		}
		c.n.setStartup(c.idx, opts)
		if comp := opts["COMPRESSION"]; comp != "" {
			return protoErr(fmt.Errorf("unsupported compression %q", comp))
		}
		if c.n.cfg.Passwords != nil {
			class := "org.apache.cassandra.auth.PasswordAuthenticator"
			b := binary.BigEndian.AppendUint16(nil, uint16(len(class)))
			return frame.AppendFrame(dst, v, true, 0, s, frame.OpAuthenticate, append(b, class...))
		}
		return frame.AppendReady(dst, v, s)
	case frame.OpAuthResponse:
		if e := c.n.login(body); e != nil {
			return errFrame(e)
		}
		return frame.AppendFrame(dst, v, true, 0, s, frame.OpAuthSuccess, []byte{0xff, 0xff, 0xff, 0xff})
	case frame.OpRegister:
		return frame.AppendReady(dst, v, s)
	case frame.OpQuery:
		q, err := frame.QueryString(body)
		if err != nil {
			return protoErr(err)
		}
		if b, ok := c.n.cachedQuery(v, q, c.idx); ok {
			return result(b)
		}
		b, e := c.query(v, string(q))
		if e != nil {
			return errFrame(e)
		}
		return result(b)
	case frame.OpPrepare:
		q, err := frame.QueryString(body)
		if err != nil {
			return protoErr(err)
		}
		ks, err := frame.PrepareKeyspace(v, body)
		if err != nil {
			return protoErr(err)
		}
		if ks == "" {
			ks = c.keyspace
		}
		c.n.mu.Lock()
		b, e := c.n.prepare(v, ks, string(q))
		c.n.mu.Unlock()
		if e != nil {
			return errFrame(e)
		}
		return result(b)
	case frame.OpExecute:
		return c.execute(dst, h, body)
	case frame.OpBatch:
		return c.batch(dst, h, body)
	}
	return protoErr(fmt.Errorf("unexpected opcode"))
}

// cachedQuery serves a QUERY whose answer was computed before, counting
// the execution: the benchmarks' hot path, without allocation.
func (n *Node) cachedQuery(v byte, q []byte, shard int) ([]byte, bool) {
	qc := n.qcache.Load()
	if qc == nil {
		return nil, false
	}
	a, ok := qc.answers[v][string(q)]
	if !ok {
		return nil, false
	}
	a.count.add(shard)
	return a.body, true
}

// queryCache is an immutable set of QUERY answers by protocol version.
type queryCache struct {
	answers [6]map[string]cachedAnswer
}

type cachedAnswer struct {
	body  []byte
	count *counter // the text's execution counter in stats
}

// cacheQuery adds an answer (n.mu held), copying the cache: it is tiny.
func (n *Node) cacheQuery(v byte, q string, body []byte) {
	next := &queryCache{}
	if old := n.qcache.Load(); old != nil {
		next.answers = old.answers
	}
	m := make(map[string]cachedAnswer, len(next.answers[v])+1)
	for k, a := range next.answers[v] {
		m[k] = a
	}
	m[q] = cachedAnswer{body: body, count: counterOf(n.stats.execQuery, q)}
	next.answers[v] = m
	n.qcache.Store(next)
}

// query answers a QUERY the cache does not hold.
func (c *conn) query(v byte, q string) ([]byte, *Error) {
	n := c.n
	st := parseStmt(q, c.keyspace)
	n.mu.Lock()
	counterOf(n.stats.execQuery, q).add(c.idx)
	n.mu.Unlock()
	switch st.kind {
	case kindUse:
		if st.keyspace == "" {
			return nil, &Error{Code: frame.ErrCodeSyntax, Message: "USE without a keyspace"}
		}
		c.keyspace = st.keyspace
		b, err := encodeResult(v, &message.SetKeyspaceResult{Keyspace: st.keyspace})
		if err != nil {
			return nil, ServerError(err.Error())
		}
		return b, nil
	case kindSelect:
	default:
		return voidBody, nil
	}
	if t := n.systemTable(st.table); t != nil {
		sel, err := selectFrom(t, st.cols)
		if err != nil {
			return nil, Invalid(err.Error())
		}
		b, err := sel.rowsBody(v, true, nil)
		if err != nil {
			return nil, ServerError(err.Error())
		}
		return b, nil
	}
	if st.table == "system.peers_v2" {
		return nil, Invalid("unconfigured table peers_v2")
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	b, e := n.queryBody(v, st)
	// Only answers that depend on nothing but the text are cached: a
	// qualified user table (system tables change with the cluster).
	if e == nil && !strings.HasPrefix(st.table, "system") && strings.Contains(q, ".") {
		n.cacheQuery(v, q, b)
	}
	return b, e
}

// execute answers an EXECUTE.
func (c *conn) execute(dst []byte, h frame.Header, body []byte) []byte {
	v, s := h.Version, h.Stream
	id, err := frame.ExecuteID(body)
	if err != nil {
		return frame.AppendError(dst, v, s, frame.ErrCodeProtocol, "fakenode: EXECUTE: "+err.Error())
	}
	var metaID []byte
	if v >= frame.V5 {
		rest := body[2+len(id):]
		if len(rest) < 2 || len(rest) < 2+int(binary.BigEndian.Uint16(rest)) {
			return frame.AppendError(dst, v, s, frame.ErrCodeProtocol, "fakenode: EXECUTE: short result_metadata_id")
		}
		metaID = rest[2 : 2+int(binary.BigEndian.Uint16(rest))]
	}
	params, err := frame.ParseQueryParams(v, frame.OpExecute, body)
	if err != nil {
		return frame.AppendError(dst, v, s, frame.ErrCodeProtocol, "fakenode: EXECUTE: "+err.Error())
	}
	n := c.n
	n.mu.Lock()
	p := n.prepared[string(id)]
	if p == nil {
		n.mu.Unlock()
		return frame.AppendUnprepared(dst, v, s, "Prepared query with ID "+hexID(id)+" not found", id)
	}
	b, void, e := n.executeBody(p, v, params.Flags&frame.QueryFlagSkipMetadata != 0, metaID)
	if e == nil {
		counterOf(n.stats.execID, id).add(c.idx)
		counterOf(n.stats.execQuery, p.query).add(c.idx)
	}
	n.mu.Unlock()
	switch {
	case e != nil:
		return frame.AppendErrorBody(dst, v, s, e.Code, e.Message, e.Extra)
	case void:
		b = voidBody
	}
	return frame.AppendFrame(dst, v, true, 0, s, frame.OpResult, b)
}

// batch answers a BATCH: UNPREPARED for the first unknown prepared child,
// as Cassandra checks them all before running any, else Void.
func (c *conn) batch(dst []byte, h frame.Header, body []byte) []byte {
	v, s := h.Version, h.Stream
	bt, err := frame.ParseBatch(v, body)
	if err != nil {
		return frame.AppendError(dst, v, s, frame.ErrCodeProtocol, "fakenode: BATCH: "+err.Error())
	}
	n := c.n
	n.mu.Lock()
	defer n.mu.Unlock()
	it := bt.Children()
	for ch, ok := it.Next(); ok; ch, ok = it.Next() {
		if ch.Kind == frame.BatchChildPrepared && n.prepared[string(ch.ID)] == nil {
			return frame.AppendUnprepared(dst, v, s, "Prepared query with ID "+hexID(ch.ID)+" not found", ch.ID)
		}
	}
	it = bt.Children()
	for ch, ok := it.Next(); ok; ch, ok = it.Next() {
		if ch.Kind == frame.BatchChildPrepared {
			counterOf(n.stats.execID, ch.ID).add(c.idx)
			counterOf(n.stats.execQuery, n.prepared[string(ch.ID)].query).add(c.idx)
		} else {
			counterOf(n.stats.execQuery, ch.Query).add(c.idx)
		}
	}
	return frame.AppendFrame(dst, v, true, 0, s, frame.OpResult, voidBody)
}

// login checks an AUTH_RESPONSE body against Config.Passwords, answering
// as Cassandra's PasswordAuthenticator does.
func (n *Node) login(body []byte) *Error {
	if len(body) < 4 || int(binary.BigEndian.Uint32(body)) != len(body)-4 {
		return &Error{Code: 0x0100, Message: "Credential format error"}
	}
	parts := bytes.Split(body[4:], []byte{0})
	if len(parts) != 3 {
		return &Error{Code: 0x0100, Message: "Credential format error"}
	}
	if pass, ok := n.cfg.Passwords[string(parts[1])]; !ok || pass != string(parts[2]) {
		return &Error{Code: 0x0100, Message: "Provided username " + string(parts[1]) + " and/or password are incorrect"}
	}
	return nil
}
