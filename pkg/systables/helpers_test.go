package systables

import (
	"bytes"
	"net"
	"testing"

	"github.com/datastax/go-cassandra-native-protocol/datacodec"
	"github.com/datastax/go-cassandra-native-protocol/datatype"
	"github.com/datastax/go-cassandra-native-protocol/message"
	"github.com/datastax/go-cassandra-native-protocol/primitive"
)

var versions = []byte{3, 4, 5}

// resultCodec is the datastax library's RESULT codec, used as the reference
// encoder and decoder of test bodies.
var resultCodec = func() message.Codec {
	for _, c := range message.DefaultMessageCodecs {
		if c.GetOpCode() == primitive.OpCodeResult {
			return c
		}
	}
	panic("no RESULT codec")
}()

// colDef is one column of a system table, with the value a real Cassandra
// node would return for it.
type colDef struct {
	name  string
	typ   datatype.DataType
	value any // nil: null
}

var (
	realIP        = net.ParseIP("10.0.0.5").To4()
	realHostID    = primitive.UUID{0xaa, 0xbb, 0xcc, 0xdd, 1, 2, 0x43, 4, 0x85, 6, 7, 8, 9, 10, 11, 12}
	realSchema    = primitive.UUID{0x5c, 0x4e, 0x3a, 0x2b, 0x11, 0x22, 0x33, 0x44, 0x95, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc}
	realTokens    = []string{"-8000000000000000000", "-12345", "42", "9000000000000000000"}
	truncatedAt   = map[primitive.UUID][]byte{{1, 2, 3}: {0, 0, 1, 0x8f, 0x12, 0x34, 0x56, 0x78, 0, 0, 0, 0}}
	tokensType    = datatype.NewSet(datatype.Varchar)
	truncatedType = datatype.NewMap(datatype.Uuid, datatype.Blob)
)

// localCols is system.local of Cassandra 5.0, as `SELECT *` returns it.
var localCols = []colDef{
	{"key", datatype.Varchar, "local"},
	{"bootstrapped", datatype.Varchar, "COMPLETED"},
	{"broadcast_address", datatype.Inet, realIP},
	{"broadcast_port", datatype.Int, int32(7000)},
	{"cluster_name", datatype.Varchar, "Test Cluster"},
	{"cql_version", datatype.Varchar, "3.4.7"},
	{"data_center", datatype.Varchar, "dc-real"},
	{"gossip_generation", datatype.Int, int32(1714000000)},
	{"host_id", datatype.Uuid, realHostID},
	{"listen_address", datatype.Inet, realIP},
	{"listen_port", datatype.Int, int32(7000)},
	{"native_protocol_version", datatype.Varchar, "5"},
	{"partitioner", datatype.Varchar, "org.apache.cassandra.dht.Murmur3Partitioner"},
	{"rack", datatype.Varchar, "rack-real"},
	{"release_version", datatype.Varchar, "5.0.2"},
	{"rpc_address", datatype.Inet, realIP},
	{"rpc_port", datatype.Int, int32(9042)},
	{"schema_version", datatype.Uuid, realSchema},
	{"tokens", tokensType, realTokens},
	{"truncated_at", truncatedType, truncatedAt},
}

// peersCols is system.peers of Cassandra 5.0.
var peersCols = []colDef{
	{"peer", datatype.Inet, net.ParseIP("10.0.0.6").To4()},
	{"data_center", datatype.Varchar, "dc-real"},
	{"host_id", datatype.Uuid, primitive.UUID{0x11, 0x12, 0x13}},
	{"preferred_ip", datatype.Inet, nil},
	{"rack", datatype.Varchar, "rack-real"},
	{"release_version", datatype.Varchar, "5.0.2"},
	{"rpc_address", datatype.Inet, net.ParseIP("10.0.0.6").To4()},
	{"schema_version", datatype.Uuid, realSchema},
	{"tokens", tokensType, []string{"1", "2"}},
}

// peersV2Cols is system.peers_v2 of Cassandra 5.0.
var peersV2Cols = []colDef{
	{"peer", datatype.Inet, net.ParseIP("fd00::6")},
	{"peer_port", datatype.Int, int32(7000)},
	{"data_center", datatype.Varchar, "dc-real"},
	{"host_id", datatype.Uuid, primitive.UUID{0x11, 0x12, 0x13}},
	{"native_address", datatype.Inet, net.ParseIP("fd00::6")},
	{"native_port", datatype.Int, int32(9042)},
	{"preferred_ip", datatype.Inet, nil},
	{"preferred_port", datatype.Int, nil},
	{"rack", datatype.Varchar, "rack-real"},
	{"release_version", datatype.Varchar, "5.0.2"},
	{"schema_version", datatype.Uuid, realSchema},
	{"tokens", tokensType, []string{"1", "2"}},
}

// pick returns the columns of cols named in names, in that order.
func pick(t testing.TB, cols []colDef, names ...string) []colDef {
	t.Helper()
	var out []colDef
	for _, n := range names {
		found := false
		for _, c := range cols {
			if c.name == n {
				out = append(out, c)
				found = true
			}
		}
		if !found {
			t.Fatalf("no column %q", n)
		}
	}
	return out
}

// encodeValue encodes v as a cell of type dt with the library's codecs.
func encodeValue(t testing.TB, dt datatype.DataType, v any, version byte) []byte {
	t.Helper()
	if v == nil {
		return nil
	}
	c, err := datacodec.NewCodec(dt)
	if err != nil {
		t.Fatalf("codec for %v: %v", dt, err)
	}
	b, err := c.Encode(v, primitive.ProtocolVersion(version))
	if err != nil {
		t.Fatalf("encoding %v as %v: %v", v, dt, err)
	}
	return b
}

// rowsOpts are the variations of a Rows result.
type rowsOpts struct {
	table       string // table name in the table spec
	nRows       int
	pagingState []byte
	metadataID  []byte // v5 new_metadata_id
	perColumn   bool   // per-column table spec instead of global
	trailing    []byte // bytes after the rows
}

// buildRows encodes a Rows RESULT body of cols with the library.
func buildRows(t testing.TB, version byte, cols []colDef, o rowsOpts) []byte {
	t.Helper()
	md := &message.RowsMetadata{ColumnCount: int32(len(cols)), PagingState: o.pagingState, NewResultMetadataId: o.metadataID}
	for i, c := range cols {
		md.Columns = append(md.Columns, &message.ColumnMetadata{Keyspace: "system", Table: o.table, Name: c.name, Index: int32(i), Type: c.typ})
	}
	msg := &message.RowsResult{Metadata: md, Data: message.RowSet{}}
	for r := 0; r < o.nRows; r++ {
		row := message.Row{}
		for _, c := range cols {
			row = append(row, encodeValue(t, c.typ, c.value, version))
		}
		msg.Data = append(msg.Data, row)
	}
	var buf bytes.Buffer
	if err := resultCodec.Encode(msg, &buf, primitive.ProtocolVersion(version)); err != nil {
		t.Fatalf("encoding rows: %v", err)
	}
	body := buf.Bytes()
	if o.perColumn {
		body = toPerColumnSpec(t, version, body)
	}
	return append(body, o.trailing...)
}

// toPerColumnSpec re-encodes a Rows body with the Global_tables_spec flag
// cleared and a table spec in front of every column, as Cassandra may send.
func toPerColumnSpec(t testing.TB, version byte, body []byte) []byte {
	t.Helper()
	rs := decodeRows(t, version, body)
	md := rs.Metadata
	var buf bytes.Buffer
	w := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	w(primitive.WriteInt(int32(primitive.ResultTypeRows), &buf))
	w(primitive.WriteInt(int32(md.Flags()&^primitive.RowsFlagGlobalTablesSpec), &buf))
	w(primitive.WriteInt(md.ColumnCount, &buf))
	if md.PagingState != nil {
		w(primitive.WriteBytes(md.PagingState, &buf))
	}
	if version >= 5 && md.NewResultMetadataId != nil {
		w(primitive.WriteShortBytes(md.NewResultMetadataId, &buf))
	}
	for _, c := range md.Columns {
		w(primitive.WriteString(c.Keyspace, &buf))
		w(primitive.WriteString(c.Table, &buf))
		w(primitive.WriteString(c.Name, &buf))
		w(datatype.WriteDataType(c.Type, &buf, primitive.ProtocolVersion(version)))
	}
	w(primitive.WriteInt(int32(len(rs.Data)), &buf))
	for _, row := range rs.Data {
		for _, cell := range row {
			w(primitive.WriteBytes(cell, &buf))
		}
	}
	return buf.Bytes()
}

// decodeRows decodes a Rows RESULT body with the library.
func decodeRows(t testing.TB, version byte, body []byte) *message.RowsResult {
	t.Helper()
	msg, err := resultCodec.Decode(bytes.NewReader(body), primitive.ProtocolVersion(version))
	if err != nil {
		t.Fatalf("library cannot decode body: %v", err)
	}
	rs, ok := msg.(*message.RowsResult)
	if !ok {
		t.Fatalf("decoded %T, want *message.RowsResult", msg)
	}
	return rs
}

// decodeValue decodes a cell of type dt with the library into a Go value:
// net.IP, int32, primitive.UUID, string, []string or nil for null.
func decodeValue(t testing.TB, dt datatype.DataType, cell []byte, version byte) any {
	t.Helper()
	if cell == nil {
		return nil
	}
	c, err := datacodec.NewCodec(dt)
	if err != nil {
		t.Fatalf("codec for %v: %v", dt, err)
	}
	var v any
	switch dt.Code() {
	case primitive.DataTypeCodeInet:
		var ip net.IP
		_, err = c.Decode(cell, &ip, primitive.ProtocolVersion(version))
		v = ip
	case primitive.DataTypeCodeInt:
		var i int32
		_, err = c.Decode(cell, &i, primitive.ProtocolVersion(version))
		v = i
	case primitive.DataTypeCodeUuid:
		var u primitive.UUID
		_, err = c.Decode(cell, &u, primitive.ProtocolVersion(version))
		v = u
	case primitive.DataTypeCodeVarchar:
		var s string
		_, err = c.Decode(cell, &s, primitive.ProtocolVersion(version))
		v = s
	case primitive.DataTypeCodeSet:
		var ss []string
		_, err = c.Decode(cell, &ss, primitive.ProtocolVersion(version))
		v = ss
	default:
		t.Fatalf("decodeValue: unsupported type %v", dt)
	}
	if err != nil {
		t.Fatalf("decoding %x as %v: %v", cell, dt, err)
	}
	return v
}
