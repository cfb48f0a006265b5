package fakenode

import (
	"bytes"
	"crypto/md5"
	"fmt"
	"strings"

	"github.com/datastax/go-cassandra-native-protocol/datatype"
	"github.com/datastax/go-cassandra-native-protocol/message"
)

// prepared is one statement in the node's prepared set.
type prepared struct {
	id       []byte
	query    string
	keyspace string
	st       stmt

	// Answers for the schema generation gen, computed on first use and
	// then served as they are: EXECUTE is the hot path of the proxy's
	// tests and benchmarks.
	gen    uint64
	err    *Error    // the statement no longer works (table dropped, ...)
	metaID []byte    // v5 result_metadata_id of the current columns
	full   [6][]byte // rows with metadata, by protocol version
	bare   [6][]byte // rows with No_metadata (skip_metadata)
	moved  [6][]byte // v5 rows with Metadata_changed, the new id and metadata
	void   bool      // not a SELECT: the answer is Void
}

// PreparedID returns the id a PREPARE of query in keyspace gets (keyspace
// is the connection's after USE, or the v5 PREPARE keyspace; "" if none):
// the MD5 of keyspace and text, as Cassandra computes it, so every node
// gives a statement the same id.
func PreparedID(keyspace, query string) []byte {
	h := md5.Sum([]byte(keyspace + query))
	return h[:]
}

// ForgetPrepared empties the node's prepared set, as a restart does: the
// next EXECUTE of any id is answered UNPREPARED.
func (n *Node) ForgetPrepared() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.prepared = map[string]*prepared{}
}

// Prepared returns how many statements the node has prepared.
func (n *Node) Prepared() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.prepared)
}

// IsPrepared reports whether the node knows the prepared id.
func (n *Node) IsPrepared(id []byte) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.prepared[string(id)] != nil
}

// prepare adds query to the prepared set (n.mu held) and returns the
// RESULT Prepared body.
func (n *Node) prepare(version byte, keyspace, query string) ([]byte, *Error) {
	st := parseStmt(query, keyspace)
	vars := &message.VariablesMetadata{Columns: []*message.ColumnMetadata{}}
	result := &message.RowsMetadata{}
	var metaID []byte
	if st.kind != kindOther {
		t := n.schema.tables[st.table]
		if t == nil {
			return nil, Invalid("unconfigured table " + st.table)
		}
		var err error
		if vars, err = bindMeta(t, st.binds, version); err != nil {
			return nil, Invalid(err.Error())
		}
		if st.kind == kindSelect {
			sel, err := selectFrom(t, st.cols)
			if err != nil {
				return nil, Invalid(err.Error())
			}
			result = &message.RowsMetadata{ColumnCount: int32(len(sel.cols)), Columns: sel.meta()}
			metaID = sel.metadataID()
		}
	} else {
		for range st.binds {
			vars.Columns = append(vars.Columns, &message.ColumnMetadata{Name: "?", Type: datatype.Blob})
		}
	}
	if metaID == nil {
		metaID = md5.New().Sum(nil) // no result columns
	}
	id := PreparedID(keyspace, query)
	if n.prepared[string(id)] == nil {
		n.prepared[string(id)] = &prepared{id: id, query: query, keyspace: keyspace, st: st}
	}
	m := &message.PreparedResult{PreparedQueryId: id, VariablesMetadata: vars, ResultMetadata: result}
	if version >= 5 {
		m.ResultMetadataId = metaID
	}
	body, err := encodeResult(version, m)
	if err != nil {
		return nil, ServerError(err.Error())
	}
	return body, nil
}

// bindMeta types the bind markers from the table's columns; markers the
// parser could not name are blobs. pk_indexes are given only when every
// partition-key column is bound, as Cassandra does.
func bindMeta(t *table, binds []string, version byte) (*message.VariablesMetadata, error) {
	vars := &message.VariablesMetadata{Columns: []*message.ColumnMetadata{}}
	for _, b := range binds {
		c := &message.ColumnMetadata{Keyspace: t.ks, Table: t.name, Name: b, Type: datatype.Blob}
		switch b {
		case "[ttl]", "[limit]":
			c.Type = datatype.Int
		case "[timestamp]":
			c.Type = datatype.Bigint
		case "":
			c.Name = "?"
		default:
			col, ok := t.col(b)
			if !ok {
				//lint:ignore ST1005 Cassandra's own INVALID message, word for word: clients see it
				return nil, fmt.Errorf("Undefined column name %s in table %s.%s", b, t.ks, t.name)
			}
			c.Type = col.Type
		}
		vars.Columns = append(vars.Columns, c)
	}
	if version < 4 {
		return vars, nil
	}
	var pk []uint16
	for _, col := range t.cols {
		if !col.PartitionKey {
			continue
		}
		found := false
		for i, b := range binds {
			if b == col.Name {
				pk = append(pk, uint16(i))
				found = true
				break
			}
		}
		if !found {
			return vars, nil
		}
	}
	vars.PkIndices = pk
	return vars, nil
}

// refresh recomputes p's answers when the schema changed (n.mu held).
func (n *Node) refresh(p *prepared, version byte) {
	if p.gen == n.schema.gen && (p.void || p.err != nil || p.full[version] != nil) {
		return
	}
	if p.gen != n.schema.gen {
		*p = prepared{id: p.id, query: p.query, keyspace: p.keyspace, st: p.st, gen: n.schema.gen}
	}
	if p.st.kind != kindSelect {
		p.void = true
		return
	}
	t := n.schema.tables[p.st.table]
	if t == nil {
		p.err = Invalid("unconfigured table " + p.st.table)
		return
	}
	sel, err := selectFrom(t, p.st.cols)
	if err != nil {
		p.err = Invalid(err.Error())
		return
	}
	p.metaID = sel.metadataID()
	var errs [3]error
	p.full[version], errs[0] = sel.rowsBody(version, true, nil)
	p.bare[version], errs[1] = sel.rowsBody(version, false, nil)
	if version >= 5 {
		p.moved[version], errs[2] = sel.rowsBody(version, true, p.metaID)
	}
	for _, err := range errs {
		if err != nil {
			p.err = ServerError(err.Error())
		}
	}
}

// executeBody picks the answer to an EXECUTE of p (n.mu held): nil body
// with void true for Void; metaID is the v5 request's result_metadata_id.
func (n *Node) executeBody(p *prepared, version byte, skipMeta bool, metaID []byte) (body []byte, void bool, e *Error) {
	n.refresh(p, version)
	switch {
	case p.err != nil:
		return nil, false, p.err
	case p.void:
		return nil, true, nil
	case version >= 5 && !bytes.Equal(metaID, p.metaID):
		// The driver's metadata is stale: Cassandra sends the new
		// columns and id whatever skip_metadata says.
		return p.moved[version], false, nil
	case skipMeta:
		// Before v5 this is the wrong-data bug: the rows follow the new
		// layout and the driver decodes them with the old metadata.
		return p.bare[version], false, nil
	}
	return p.full[version], false, nil
}

// queryBody answers a QUERY of a table (n.mu held).
func (n *Node) queryBody(version byte, st stmt) ([]byte, *Error) {
	t := n.schema.tables[st.table]
	if t == nil {
		if ks, _, _ := strings.Cut(st.table, "."); strings.HasPrefix(ks, "system") {
			// Drivers read many system tables; an empty answer
			// is enough for them.
			t = &table{ks: ks, name: strings.TrimPrefix(st.table, ks+"."), cols: []Column{Col("key", datatype.Varchar)}}
			if st.cols != nil {
				t.cols = nil
				for _, c := range st.cols {
					t.cols = append(t.cols, Col(strings.TrimSuffix(c, "(...)"), datatype.Blob))
				}
				st.cols = nil
			}
		} else {
			return nil, Invalid("unconfigured table " + st.table)
		}
	}
	sel, err := selectFrom(t, st.cols)
	if err != nil {
		return nil, Invalid(err.Error())
	}
	body, err := sel.rowsBody(version, true, nil)
	if err != nil {
		return nil, ServerError(err.Error())
	}
	return body, nil
}
