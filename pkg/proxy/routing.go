package proxy

// Token-aware routing and idempotency: what the proxy learns about a
// prepared statement when it is prepared, and how an EXECUTE or BATCH is
// sent to a replica of its partition.

import (
	"github.com/cqlgate/cqlgate/pkg/backend"
	"github.com/cqlgate/cqlgate/pkg/frame"
	"github.com/cqlgate/cqlgate/pkg/idempotency"
	"github.com/cqlgate/cqlgate/pkg/limiter"
	"github.com/cqlgate/cqlgate/pkg/token"
)

// maxReplicas bounds the replicas a request considers: RF beyond this is
// served by the first ones in placement order.
const maxReplicas = 8

// newStatement builds what the proxy keeps about a prepared statement from
// its text, the keyspace it was prepared in, and Cassandra's PREPARED
// answer (meta, nil if it could not be read). It runs when a statement is
// first prepared and again when its PREPARED answer changes.
func (p *Proxy) newStatement(id []byte, query, keyspace string, meta *frame.PreparedMeta) *statement {
	st := &statement{query: query, keyspace: keyspace, stats: &stmtRef{}}
	var types []uint16
	if meta != nil {
		st.pk = meta.PKIndexes
		st.routeKS = meta.Keyspace
		st.shape = meta.Shape
		types = meta.VarTypes
	}
	cs := p.classifier.Classify(query, keyspace, types)
	// A list overwrite run twice with one timestamp stores the list twice
	// ([1, 2, 1, 2]): hedged copies share a timestamp, and so does a retry
	// of a request whose client set one.
	st.idempotent = cs.Idempotent && !cs.ListOverwrite
	st.write = cs.Kind == idempotency.KindInsert || cs.Kind == idempotency.KindUpdate || cs.Kind == idempotency.KindDelete
	st.ownTimestamp = cs.UsingTimestamp
	if st.routeKS == "" {
		st.routeKS = cs.Keyspace
	}
	st.hedge = newStmtHedge(id, cs.Keyspace+"."+cs.Table)
	return st
}

// nodeTable is what routing needs to know about every node, indexed by
// backend.Node.ID; replaced whenever the set of nodes that are up changes.
type nodeTable struct {
	upCount int
	up      []bool
	local   []bool // in --local-dc (all true when none is known)
}

func (t *nodeTable) isUp(id int) bool { return id < len(t.up) && t.up[id] }

// setNodeTable records which nodes are up and which are local.
func (p *Proxy) setNodeTable(up []*backend.Node) {
	all := p.cluster.Nodes()
	size := 0
	for _, n := range all {
		size = max(size, n.ID+1)
	}
	t := &nodeTable{up: make([]bool, size), local: make([]bool, size)}
	dc := p.cfg.LocalDC
	if dc == "" {
		dc = p.cluster.LocalInfo().DataCenter
	}
	for _, n := range all {
		t.local[n.ID] = dc == "" || n.DataCenter == dc
	}
	for _, n := range up {
		if n.ID < size && !t.up[n.ID] {
			t.up[n.ID] = true
			t.upCount++
		}
	}
	p.nodeTable.Store(t)
}

// route sets req.cands to the replicas of the partition an EXECUTE (or a
// BATCH, by its first statement) writes or reads, when they can be known:
// the up replicas in the local data center, else any up replicas. It leaves
// req.cands nil (any node) otherwise. It also remembers the statement, for
// idempotency.
func (c *client) route(req *request) {
	v := &req.view
	// A batch goes where its first statement's partition lives: for the
	// usual single-partition batch, that is every statement's. The view
	// has the id of an EXECUTE and of a batch's first child.
	if v.Opcode != frame.OpExecute && v.Opcode != frame.OpBatch {
		return
	}
	id := v.ID(req.buf.B)
	if id == nil {
		return
	}
	st, ok := c.p.prep.get(id)
	if !ok {
		return
	}
	if req.view.Opcode == frame.OpExecute {
		req.st = st
	}
	if len(st.pk) == 0 {
		return
	}
	topo := c.p.cluster.Topology()
	nt := c.p.nodeTable.Load()
	if topo == nil || nt == nil {
		return
	}
	place := topo.Placement(st.routeKS)
	if place == nil {
		return
	}
	vals, err := v.Values(req.buf.B, st.pk, req.vals[:0])
	if err != nil {
		return
	}
	replicas := place.Replicas(token.PartitionToken(vals))
	req.cands = pickReplicas(nt, replicas, req.candBuf[:0])
}

// pickReplicas appends to dst the replicas that are up and local, or the
// up ones when none is local; nil when none is up, so that any node
// coordinates (and Cassandra reports the replicas' state).
func pickReplicas(nt *nodeTable, replicas []int, dst []limiter.NodeID) []limiter.NodeID {
	for _, id := range replicas {
		if len(dst) < maxReplicas && nt.isUp(id) && nt.local[id] {
			dst = append(dst, limiter.NodeID(id))
		}
	}
	if len(dst) == 0 {
		for _, id := range replicas {
			if len(dst) < maxReplicas && nt.isUp(id) {
				dst = append(dst, limiter.NodeID(id))
			}
		}
	}
	if len(dst) == 0 {
		return nil
	}
	return dst
}

// idempotent tells whether running the request twice is safe, so that it
// may be sent again after its connection died with it in flight, or hedged.
// It is computed only when needed: from the prepared statement's cached
// verdict, or by classifying the text of a QUERY or of a BATCH's children.
func (r *request) idempotent() bool {
	if r.idem != idemUnknown {
		return r.idem == idemYes
	}
	r.idem = idemNo
	if r.decideIdempotent() {
		r.idem = idemYes
	}
	return r.idem == idemYes
}

func (r *request) decideIdempotent() bool {
	c, v, f := r.c, &r.view, r.buf.B
	if verdict, ok := payloadVerdict(f); ok && v.Opcode != frame.OpQuery {
		// The client says so (a QUERY's text may be anything, even DDL).
		return verdict
	}
	if !v.HasParams() || !idempotency.ConsistencyIdempotent(v.Consistency) {
		return false
	}
	switch v.Opcode {
	case frame.OpExecute:
		return r.st != nil && r.st.idempotent
	case frame.OpQuery:
		cs := c.p.classifier.Classify(string(v.Text(f)), *c.keyspace.Load(), nil)
		return cs.Idempotent && !cs.ListOverwrite
	case frame.OpBatch:
		if v.BatchType == idempotency.BatchCounter {
			return false
		}
		it := v.Children(f)
		for {
			child, ok := it.Next()
			if !ok {
				return v.BatchCount > 0
			}
			var idem bool
			if child.Kind == frame.BatchChildPrepared {
				st, found := c.p.prep.get(child.ID)
				idem = found && st.idempotent
			} else {
				cs := c.p.classifier.Classify(string(child.Query), *c.keyspace.Load(), nil)
				idem = cs.Idempotent && !cs.ListOverwrite
			}
			if !idem {
				return false
			}
		}
	}
	return false
}

// payloadVerdict reads the client's own idempotency flag from a request's
// custom payload (idempotency.PayloadKey), if it set one.
func payloadVerdict(f []byte) (idempotent, ok bool) {
	v, found := frame.CustomPayloadValue(f, idempotency.PayloadKey)
	if !found {
		return false, false
	}
	verdict, ok := idempotency.PayloadVerdict(v)
	return verdict.Idempotent, ok
}

// Idempotency of a request, decided lazily.
const (
	idemUnknown int8 = iota
	idemYes
	idemNo
)
