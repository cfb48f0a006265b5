package fakenode

import (
	"bytes"
	"crypto/md5"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/datastax/go-cassandra-native-protocol/datatype"
	"github.com/datastax/go-cassandra-native-protocol/message"
	"github.com/datastax/go-cassandra-native-protocol/primitive"
)

// Column is a table column.
type Column struct {
	Name string
	Type datatype.DataType
	// PartitionKey marks the partition-key columns, in key order; a
	// PREPARE binding all of them reports their pk_indexes.
	PartitionKey bool
}

// Col is shorthand for a regular column.
func Col(name string, t datatype.DataType) Column { return Column{Name: name, Type: t} }

// Key is shorthand for a partition-key column.
func Key(name string, t datatype.DataType) Column {
	return Column{Name: name, Type: t, PartitionKey: true}
}

type table struct {
	ks, name string
	cols     []Column
	rows     [][][]byte
}

func (t *table) col(name string) (Column, bool) {
	for _, c := range t.cols {
		if c.Name == name {
			return c, true
		}
	}
	return Column{}, false
}

// schema is the node's tables. gen changes on every change so cached
// answers can tell they are stale.
type schema struct {
	tables  map[string]*table // by "ks.name"
	gen     uint64
	version [16]byte // schema_version: a hash of the definitions
}

func newSchema() schema {
	s := schema{tables: map[string]*table{}}
	s.version = s.hash()
	return s
}

// hash derives schema_version from the table definitions only, so nodes
// given the same tables agree on it, as a real cluster after a DDL does.
func (s *schema) hash() [16]byte {
	names := make([]string, 0, len(s.tables))
	for k := range s.tables {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, k := range names {
		b.WriteString(k)
		for _, c := range s.tables[k].cols {
			fmt.Fprintf(&b, "|%s %s %v", c.Name, c.Type, c.PartitionKey)
		}
		b.WriteByte('\n')
	}
	return uuidFrom("schema " + b.String())
}

// SetTable creates or replaces table name ("ks.table") with cols and rows
// (each row one value per column, nil for null). Replacing a table keeps
// the prepared statements on it: their next EXECUTE answers in the new
// column layout, which is what an ALTER TABLE does under a prepared
// SELECT *.
func (n *Node) SetTable(name string, cols []Column, rows ...[][]byte) {
	ks, tn, ok := strings.Cut(strings.ToLower(name), ".")
	if !ok || ks == "" || tn == "" {
		n.tb.Errorf("fakenode: SetTable(%q): want keyspace.table", name)
		return
	}
	if err := checkRows(cols, rows); err != nil {
		n.tb.Errorf("fakenode: SetTable(%q): %v", name, err)
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.schema.tables[ks+"."+tn] = &table{ks: ks, name: tn, cols: slices.Clone(cols), rows: rows}
	n.schema.gen++
	n.schema.version = n.schema.hash()
	n.qcache.Store(nil)
}

// SetRows replaces the rows of an existing table.
func (n *Node) SetRows(name string, rows ...[][]byte) {
	n.mu.Lock()
	defer n.mu.Unlock()
	t := n.schema.tables[strings.ToLower(name)]
	if t == nil {
		n.tb.Errorf("fakenode: SetRows(%q): no such table", name)
		return
	}
	if err := checkRows(t.cols, rows); err != nil {
		n.tb.Errorf("fakenode: SetRows(%q): %v", name, err)
		return
	}
	t.rows = rows
	n.schema.gen++
	n.qcache.Store(nil)
}

func checkRows(cols []Column, rows [][][]byte) error {
	for i, r := range rows {
		if len(r) != len(cols) {
			return fmt.Errorf("row %d has %d values for %d columns", i, len(r), len(cols))
		}
	}
	return nil
}

// SchemaVersion returns the schema_version system.local reports.
func (n *Node) SchemaVersion() [16]byte {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.schema.version
}

var resultCodec = func() message.Codec {
	for _, c := range message.DefaultMessageCodecs {
		if c.GetOpCode() == primitive.OpCodeResult {
			return c
		}
	}
	return nil
}()

// encodeResult encodes a RESULT body.
func encodeResult(version byte, m message.Message) ([]byte, error) {
	if resultCodec == nil {
		return nil, fmt.Errorf("fakenode: go-cassandra-native-protocol has no RESULT codec")
	}
	var buf bytes.Buffer
	if err := resultCodec.Encode(m, &buf, primitive.ProtocolVersion(version)); err != nil {
		return nil, fmt.Errorf("fakenode: encode %T for v%d: %w", m, version, err)
	}
	return buf.Bytes(), nil
}

// selection is the result columns of a SELECT and where each comes from.
type selection struct {
	t    *table
	cols []Column
	idx  []int // index in t.cols, -1 for a column the table lacks
}

// selectFrom resolves a SELECT's columns against t; an unknown plain
// column is an error, as in Cassandra.
func selectFrom(t *table, names []string) (selection, error) {
	sel := selection{t: t}
	if names == nil {
		sel.cols = t.cols
		for i := range t.cols {
			sel.idx = append(sel.idx, i)
		}
		return sel, nil
	}
	for _, name := range names {
		i := slices.IndexFunc(t.cols, func(c Column) bool { return c.Name == name })
		if i < 0 {
			if !strings.HasSuffix(name, "(...)") {
				//lint:ignore ST1005 Cassandra's own INVALID message, word for word: clients see it
				return sel, fmt.Errorf("Undefined column name %s in table %s.%s", name, t.ks, t.name)
			}
			// A function call: typed blob, always null.
			sel.cols = append(sel.cols, Column{Name: strings.TrimSuffix(name, "(...)"), Type: datatype.Blob})
			sel.idx = append(sel.idx, -1)
			continue
		}
		sel.cols = append(sel.cols, t.cols[i])
		sel.idx = append(sel.idx, i)
	}
	return sel, nil
}

func (sel selection) meta() []*message.ColumnMetadata {
	out := make([]*message.ColumnMetadata, len(sel.cols))
	for i, c := range sel.cols {
		out[i] = &message.ColumnMetadata{Keyspace: sel.t.ks, Table: sel.t.name, Name: c.Name, Type: c.Type}
	}
	return out
}

func (sel selection) rows() message.RowSet {
	out := make(message.RowSet, len(sel.t.rows))
	for r, row := range sel.t.rows {
		out[r] = make(message.Row, len(sel.idx))
		for i, j := range sel.idx {
			if j >= 0 {
				out[r][i] = row[j]
			}
		}
	}
	return out
}

// metadataID is v5's result_metadata_id: a hash of the result columns, so
// it changes exactly when they do.
func (sel selection) metadataID() []byte {
	h := md5.New()
	for _, c := range sel.cols {
		fmt.Fprintf(h, "%s.%s.%s %s\n", sel.t.ks, sel.t.name, c.Name, c.Type)
	}
	return h.Sum(nil)
}

// rowsBody encodes the rows of sel: with full metadata, without
// (No_metadata, for skip_metadata) or with Metadata_changed and newID (v5).
func (sel selection) rowsBody(version byte, withMeta bool, newID []byte) ([]byte, error) {
	md := &message.RowsMetadata{ColumnCount: int32(len(sel.cols)), NewResultMetadataId: newID}
	if withMeta || newID != nil {
		md.Columns = sel.meta()
	}
	return encodeResult(version, &message.RowsResult{Metadata: md, Data: sel.rows()})
}
