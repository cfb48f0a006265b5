package proxy

import (
	"context"
	"fmt"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/cqlgate/cqlgate/pkg/backend"
	"github.com/cqlgate/cqlgate/pkg/frame"
	"github.com/cqlgate/cqlgate/pkg/systables"
)

// statement is what the proxy needs to prepare a statement again on any
// node: Cassandra derives the id from the text and keyspace, so the same
// pair yields the same id everywhere.
//
// It also keeps what routing and hedging need, learnt once from the text
// and the PREPARED answer. A statement is immutable once cached.
type statement struct {
	query    string
	keyspace string

	routeKS      string   // keyspace of the table, for replica placement
	pk           []uint16 // partition-key bind indexes; nil: not token-aware
	idempotent   bool     // the text may run twice (consistency aside)
	write        bool     // INSERT, UPDATE or DELETE
	ownTimestamp bool     // USING TIMESTAMP: a client timestamp is ignored
	hedge        *stmtHedge
	stats        *stmtRef // its statement statistics entry, cached

	// shape is the PreparedMeta.Shape of the PREPARED answer the proxy
	// last saw (0: unknown); reshaped is set once two answers for this id
	// differed. See mayHideUnprepared.
	shape    uint64
	reshaped bool
}

// mayHideUnprepared reports whether the proxy may answer a node's
// UNPREPARED for st by preparing it again and re-sending the request, given
// the shape the node now gives it. That is safe only if the client's
// driver holds the same bind and result metadata as the node will use: a
// driver that set skip_metadata decodes the rows with the columns it
// learnt at PREPARE time, so rows of another shape are silently misread
// (after ALTER TABLE ADD, a new column's bytes taken for another's).
//
// In v3 and v4 the proxy cannot see which metadata a client holds, only
// every PREPARED answer that passed through it: as long as they all had one
// shape, every client holds it. Once a statement was seen in two shapes, a
// client may hold either, so UNPREPARED goes to the client from then on,
// as on a direct connection, and the driver prepares again and learns the
// new shape. v5 EXECUTEs carry the client's result metadata id, which is
// checked too (v5EXECUTE's id must match the node's new one).
func (st *statement) mayHideUnprepared(shape uint64) bool {
	return !st.reshaped && st.shape != 0 && st.shape == shape
}

// reshapedBy reports whether st, having seen shape too, has been seen in
// two shapes.
func (st *statement) reshapedBy(shape uint64) bool {
	return st.reshaped || (st.shape != 0 && shape != st.shape)
}

// reshape returns a copy of st that has seen the shape given.
func (st *statement) reshape(shape uint64) *statement {
	next := *st
	next.reshaped = st.reshapedBy(shape)
	next.shape = shape
	return &next
}

// preparedCache maps prepared ids to statements. It is bounded: an evicted
// statement is no longer re-prepared by the proxy, and the driver then sees
// UNPREPARED and prepares it again itself, as drivers are built to do.
type preparedCache struct {
	lru *lru.Cache[string, *statement]
}

func newPreparedCache(size int) (*preparedCache, error) {
	c, err := lru.New[string, *statement](size)
	if err != nil {
		return nil, fmt.Errorf("prepared cache: %w", err)
	}
	return &preparedCache{lru: c}, nil
}

func (pc *preparedCache) get(id []byte) (*statement, bool) { return pc.lru.Get(string(id)) }
func (pc *preparedCache) add(id []byte, st *statement)     { pc.lru.Add(string(id), st) }
func (pc *preparedCache) len() int                         { return pc.lru.Len() }

// remember records a statement a client prepared on node, and prepares it
// on the other nodes in the background (like the Java driver's
// prepare-on-all-nodes), so the first EXECUTE elsewhere needs no extra
// round trip.
//
// body is Cassandra's RESULT Prepared (may be nil), for routing metadata
// and the statement's shape. A statement first prepared on v3, whose
// answer lacks the partition-key indexes, is learnt again when a newer
// client prepares it; one whose shape changed (ALTER TABLE, DROP and
// CREATE) is learnt again and remembered as reshaped.
//
// The cache is global, like Cassandra's: the id derives from the text and
// keyspace alone, any role may EXECUTE it and Cassandra checks the role's
// rights then. The other nodes are taught it over role's pools (nil: the
// proxy's), so nothing runs as the proxy's user on a client's behalf.
func (p *Proxy) remember(id []byte, query, keyspace string, version byte, role *backend.Role, node *backend.Node, body []byte) {
	meta, err := frame.ParsePrepared(version, body)
	if err != nil {
		meta = nil
	}
	var shape uint64
	if meta != nil {
		shape = meta.Shape
	}
	old, known := p.prep.get(id)
	if known && old.shape == shape && (old.pk != nil || version < frame.V4) {
		return
	}
	st := p.newStatement(id, query, keyspace, meta)
	if known {
		st.reshaped = old.reshapedBy(shape)
	}
	p.prep.add(id, st)
	go func() {
		ctx, cancel := context.WithTimeout(p.ctx, p.cfg.RequestTimeout)
		defer cancel()
		pool, err := p.cluster.PoolAs(ctx, role, version, prepareKeyspacePool(version, keyspace))
		if err != nil {
			return
		}
		pool.Each(node, func(conn *backend.Conn) {
			b := frame.GetBuf(0)
			b.B = appendPrepare(b.B[:0], version, st)
			if conn.Send(b.B, discard{b}) != nil {
				b.Release()
			}
		})
	}()
}

// rememberSystemStatement records the id of a prepared query on a system
// table, so that its EXECUTEs are rewritten like the same QUERY would be.
// The set is copied on write: such statements are few and the EXECUTE path
// only pays one atomic load while there are none.
func (p *Proxy) rememberSystemStatement(id []byte, t systables.Table) {
	p.sysMu.Lock()
	defer p.sysMu.Unlock()
	next := map[string]systables.Table{}
	if cur := p.systemStatements.Load(); cur != nil {
		if (*cur)[string(id)] == t {
			return
		}
		for k, v := range *cur {
			next[k] = v
		}
	}
	next[string(id)] = t
	p.systemStatements.Store(&next)
}

// prepareOn prepares st on node as role (nil: the proxy's user), waits for
// the answer and returns what it says of the statement.
func (p *Proxy) prepareOn(ctx context.Context, st *statement, version byte, role *backend.Role, node *backend.Node) (*frame.PreparedMeta, error) {
	pool, err := p.cluster.PoolAs(ctx, role, version, prepareKeyspacePool(version, st.keyspace))
	if err != nil {
		return nil, err
	}
	conn := pool.OnNode(node)
	if conn == nil {
		return nil, fmt.Errorf("no connection to %s", node.Addr)
	}
	resp, err := conn.Request(ctx, appendPrepare(nil, version, st))
	if err != nil {
		return nil, fmt.Errorf("prepare on %s: %w", node.Addr, err)
	}
	defer resp.Release()
	meta, err := frame.ParsePrepared(version, resultBody(resp.B))
	if err != nil {
		return nil, fmt.Errorf("prepare on %s: %w", node.Addr, err)
	}
	return meta, nil
}

// prepareKeyspacePool names the pool to prepare in: v5 carries the keyspace
// in the PREPARE itself, older versions need a connection that has USEd it.
func prepareKeyspacePool(version byte, keyspace string) string {
	if version >= frame.V5 {
		return ""
	}
	return keyspace
}

func appendPrepare(dst []byte, version byte, st *statement) []byte {
	ks := ""
	if version >= frame.V5 {
		ks = st.keyspace
	}
	return frame.AppendPrepare(dst, version, 0, st.query, ks)
}

// discard is a Handler for fire-and-forget requests.
type discard struct{ req *frame.Buf }

func (d discard) OnTimeout(*backend.Conn) {}

func (d discard) OnResponse(_ *backend.Conn, resp *frame.Buf) {
	resp.Release()
	d.req.Release()
}

func (d discard) OnFailure(*backend.Conn, error, bool) { d.req.Release() }

// supported is the SUPPORTED answer to OPTIONS: Cassandra's, restricted to
// the protocol versions and compressions the proxy speaks.
func (p *Proxy) supported() map[string][]string {
	var versions []string
	for v := frame.MinVersion; v <= p.maxVersion(); v++ {
		versions = append(versions, fmt.Sprintf("%d/v%d", v, v))
	}
	cql := p.cluster.Supported()["CQL_VERSION"]
	if len(cql) == 0 {
		cql = []string{"3.4.7"}
	}
	return map[string][]string{
		"PROTOCOL_VERSIONS": versions,
		"COMPRESSION":       {"lz4", "snappy"},
		"CQL_VERSION":       cql,
	}
}
