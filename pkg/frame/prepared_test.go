package frame

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"

	dsdatatype "github.com/datastax/go-cassandra-native-protocol/datatype"
	dsframe "github.com/datastax/go-cassandra-native-protocol/frame"
	"github.com/datastax/go-cassandra-native-protocol/message"
	"github.com/datastax/go-cassandra-native-protocol/primitive"
)

// routingLibFrame encodes msg as a whole frame of version v with the
// reference implementation, with a custom payload if one is given.
func routingLibFrame(t testing.TB, v byte, msg message.Message, payload map[string][]byte) []byte {
	t.Helper()
	f := dsframe.NewFrame(primitive.ProtocolVersion(v), 3, msg)
	if payload != nil {
		f.SetCustomPayload(payload)
	}
	var buf bytes.Buffer
	if err := dsframe.NewCodec().EncodeFrame(f, &buf); err != nil {
		t.Fatalf("library encoding v%d %v: %v", v, msg, err)
	}
	return buf.Bytes()
}

// routingLibBody is the body of routingLibFrame without a custom payload.
func routingLibBody(t testing.TB, v byte, msg message.Message) []byte {
	t.Helper()
	return routingLibFrame(t, v, msg, nil)[HeaderLen:]
}

// routingLibDecode decodes one whole frame with the reference implementation.
func routingLibDecode(t testing.TB, f []byte) *dsframe.Frame {
	t.Helper()
	r := bytes.NewReader(f)
	out, err := dsframe.NewCodec().DecodeFrame(r)
	if err != nil {
		t.Fatalf("library decoding: %v", err)
	}
	if r.Len() != 0 {
		t.Fatalf("library decoding left %d bytes", r.Len())
	}
	return out
}

func mustUDT(t testing.TB) dsdatatype.DataType {
	t.Helper()
	udt, err := dsdatatype.NewUserDefined("ks1", "address",
		[]string{"street", "tags", "loc"},
		[]dsdatatype.DataType{dsdatatype.Varchar, dsdatatype.NewSet(dsdatatype.Varchar), dsdatatype.NewTuple(dsdatatype.Double, dsdatatype.Double)})
	if err != nil {
		t.Fatal(err)
	}
	return udt
}

// preparedVars are bind variables of every kind of type, nested ones
// included, so that skipping a type option is exercised.
func preparedVars(t testing.TB, table2 string) ([]*message.ColumnMetadata, []uint16) {
	col := func(i int32, table, name string, typ dsdatatype.DataType) *message.ColumnMetadata {
		return &message.ColumnMetadata{Keyspace: "ks1", Table: table, Name: name, Index: i, Type: typ}
	}
	cols := []*message.ColumnMetadata{
		col(0, "t1", "k2", dsdatatype.Varchar),
		col(1, "t1", "m", dsdatatype.NewMap(dsdatatype.Varchar, dsdatatype.NewList(dsdatatype.NewTuple(dsdatatype.Int, dsdatatype.Blob)))),
		col(2, "t1", "k1", dsdatatype.Int),
		col(3, "t1", "addr", mustUDT(t)),
		col(4, table2, "c", dsdatatype.Counter),
		col(5, table2, "vec", dsdatatype.NewCustom("org.apache.cassandra.db.marshal.VectorType(org.apache.cassandra.db.marshal.FloatType,3)")),
		col(6, table2, "s", dsdatatype.NewSet(dsdatatype.Timeuuid)),
		col(7, table2, "d", dsdatatype.Duration),
	}
	types := []uint16{TypeVarchar, TypeMap, TypeInt, TypeUDT, TypeCounter, TypeCustom, TypeSet, TypeDuration}
	return cols, types
}

func TestParsePreparedAgainstLibrary(t *testing.T) {
	for _, v := range []byte{V3, V4, V5} {
		for _, global := range []bool{true, false} {
			t.Run(fmt.Sprintf("v%d/global=%v", v, global), func(t *testing.T) {
				table2 := "t1"
				if !global {
					table2 = "t2" // mixed tables: no global table spec
				}
				cols, types := preparedVars(t, table2)
				msg := &message.PreparedResult{
					PreparedQueryId:   []byte{0xde, 0xad, 0xbe, 0xef},
					VariablesMetadata: &message.VariablesMetadata{PkIndices: []uint16{2, 0}, Columns: cols},
					ResultMetadata: &message.RowsMetadata{ColumnCount: 1, Columns: []*message.ColumnMetadata{
						{Keyspace: "ks1", Table: "t1", Name: "m", Type: dsdatatype.NewList(dsdatatype.Int)}}},
				}
				if v >= V5 {
					msg.ResultMetadataId = []byte{1, 2, 3}
				}
				body := routingLibBody(t, v, msg)
				m, err := ParsePrepared(v, body)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(m.ID, msg.PreparedQueryId) || !bytes.Equal(m.ResultMetadataID, msg.ResultMetadataId) {
					t.Errorf("ids = %x, %x; want %x, %x", m.ID, m.ResultMetadataID, msg.PreparedQueryId, msg.ResultMetadataId)
				}
				if m.Keyspace != "ks1" || m.Table != "t1" {
					t.Errorf("keyspace.table = %s.%s; want ks1.t1", m.Keyspace, m.Table)
				}
				var wantPK []uint16
				if v >= V4 {
					wantPK = []uint16{2, 0}
				}
				if !slices.Equal(m.PKIndexes, wantPK) {
					t.Errorf("PKIndexes = %v; want %v", m.PKIndexes, wantPK)
				}
				if !slices.Equal(m.VarTypes, types) {
					t.Errorf("VarTypes = %#x; want %#x", m.VarTypes, types)
				}
				wantNames := []string{"k2", "m", "k1", "addr", "c", "vec", "s", "d"}
				if !slices.Equal(m.VarNames, wantNames) {
					t.Errorf("VarNames = %q; want %q", m.VarNames, wantNames)
				}
				// The result owns its memory: scribbling over the body changes nothing.
				clear(body)
				if m.ID[0] != 0xde || m.VarNames[0] != "k2" {
					t.Errorf("PreparedMeta aliases the body: ID %x, first name %q", m.ID, m.VarNames[0])
				}
			})
		}
	}
}

func TestParsePreparedWithoutVariables(t *testing.T) {
	for _, v := range []byte{V3, V4, V5} {
		msg := &message.PreparedResult{
			PreparedQueryId:   []byte{9},
			ResultMetadataId:  []byte{8},
			VariablesMetadata: &message.VariablesMetadata{},
			ResultMetadata:    &message.RowsMetadata{},
		}
		if v < V5 {
			msg.ResultMetadataId = nil
		}
		m, err := ParsePrepared(v|ResponseBit, routingLibBody(t, v, msg))
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		if m.Keyspace != "" || len(m.VarNames) != 0 || m.PKIndexes != nil || !bytes.Equal(m.ID, []byte{9}) {
			t.Errorf("v%d: %+v; want id 09 and nothing else", v, m)
		}
	}
}

func TestParsePreparedErrors(t *testing.T) {
	cols, _ := preparedVars(t, "t1")
	for _, v := range []byte{V3, V4, V5} {
		msg := &message.PreparedResult{
			PreparedQueryId:   []byte{1, 2},
			ResultMetadataId:  []byte{3},
			VariablesMetadata: &message.VariablesMetadata{PkIndices: []uint16{2, 0}, Columns: cols},
			ResultMetadata:    &message.RowsMetadata{},
		}
		if v < V5 {
			msg.ResultMetadataId = nil
		}
		body := routingLibBody(t, v, msg)
		// Every truncation of the bind-variable metadata is reported.
		end := len(body) - 8 // the empty result metadata: flags, count
		for i := range end {
			if _, err := ParsePrepared(v, body[:i]); !errors.Is(err, ErrShortBody) {
				t.Fatalf("v%d: %d of %d bytes: error %v; want ErrShortBody", v, i, end, err)
			}
		}
	}
	if _, err := ParsePrepared(V4, []byte{0, 0, 0, 1}); !errors.Is(err, ErrWrongKind) {
		t.Errorf("RESULT Void: error %v; want ErrWrongKind", err)
	}
	// pk_count larger than the variables, and a pk index past them.
	bad := [][]byte{
		{0, 0, 0, 4, 0, 1, 7, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 0},
		{0, 0, 0, 4, 0, 1, 7, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 1},
		{0, 0, 0, 4, 0, 1, 7, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff},
	}
	for _, b := range bad {
		if _, err := ParsePrepared(V4, b); !errors.Is(err, ErrMalformedBody) {
			t.Errorf("ParsePrepared(% x): error %v; want ErrMalformedBody", b, err)
		}
	}
	// A type nested deeper than maxTypeDepth.
	deep := []byte{0, 0, 0, 4, 0, 1, 7, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 'k', 0, 1, 't', 0, 1, 'v'}
	for range maxTypeDepth + 2 {
		deep = append(deep, 0, byte(TypeList))
	}
	deep = append(deep, 0, byte(TypeInt))
	if _, err := ParsePrepared(V4, deep); !errors.Is(err, ErrMalformedBody) {
		t.Errorf("deeply nested type: error %v; want ErrMalformedBody", err)
	}
}

// TestPreparedShape: the Shape of a PREPARED answer changes with the
// statement's result columns and bind variables, and with nothing else
// (its ids, its version among v4 and v5, its partition-key indexes).
func TestPreparedShape(t *testing.T) {
	col := func(name string, typ dsdatatype.DataType) *message.ColumnMetadata {
		return &message.ColumnMetadata{Keyspace: "ks", Table: "t", Name: name, Type: typ}
	}
	vars := []*message.ColumnMetadata{col("k", dsdatatype.Int)}
	before := []*message.ColumnMetadata{col("k", dsdatatype.Int), col("name", dsdatatype.Varchar), col("zbal", dsdatatype.Bigint)}
	// ALTER TABLE t ADD age int: "age" sorts between the others.
	after := []*message.ColumnMetadata{col("k", dsdatatype.Int), col("age", dsdatatype.Int), col("name", dsdatatype.Varchar), col("zbal", dsdatatype.Bigint)}
	retyped := []*message.ColumnMetadata{col("k", dsdatatype.Int), col("name", dsdatatype.Varchar), col("zbal", dsdatatype.Timestamp)}
	shape := func(v byte, id []byte, vars, result []*message.ColumnMetadata) uint64 {
		t.Helper()
		m := &message.PreparedResult{
			PreparedQueryId:   id,
			ResultMetadataId:  []byte("result-metadata-id"),
			VariablesMetadata: &message.VariablesMetadata{Columns: vars, PkIndices: []uint16{0}},
			ResultMetadata:    &message.RowsMetadata{ColumnCount: int32(len(result)), Columns: result},
		}
		if v < V5 {
			m.ResultMetadataId = nil
		}
		meta, err := ParsePrepared(v, routingLibBody(t, v, m))
		if err != nil {
			t.Fatalf("ParsePrepared v%d: %v", v, err)
		}
		return meta.Shape
	}
	base := shape(V4, []byte("id1"), vars, before)
	for _, tc := range []struct {
		name string
		got  uint64
		same bool
	}{
		{"v5", shape(V5, []byte("id1"), vars, before), true},
		{"another id", shape(V4, []byte("id2"), vars, before), true},
		{"column added", shape(V4, []byte("id1"), vars, after), false},
		{"column dropped", shape(V4, []byte("id1"), vars, before[:2]), false},
		{"type changed", shape(V4, []byte("id1"), vars, retyped), false},
		{"variable type changed", shape(V4, []byte("id1"), []*message.ColumnMetadata{col("k", dsdatatype.Bigint)}, before), false},
		{"no result columns", shape(V4, []byte("id1"), vars, nil), false},
	} {
		if (tc.got == base) != tc.same {
			t.Errorf("%s: shape %x, before %x; want same=%v", tc.name, tc.got, base, tc.same)
		}
	}
}

func TestExecuteResultMetadataID(t *testing.T) {
	body := []byte{0, 2, 'i', 'd', 0, 3, 'r', 'm', 'd', 0, 1}
	id, err := ExecuteResultMetadataID(body)
	if err != nil || string(id) != "rmd" {
		t.Errorf("got %q, %v; want rmd", id, err)
	}
	if _, err := ExecuteResultMetadataID(body[:5]); !errors.Is(err, ErrShortBody) {
		t.Errorf("truncated: got %v; want ErrShortBody", err)
	}
}
