package frame

import (
	"bytes"
	"testing"

	"github.com/datastax/go-cassandra-native-protocol/datatype"
	"github.com/datastax/go-cassandra-native-protocol/message"
	"github.com/datastax/go-cassandra-native-protocol/primitive"
)

func encodeRows(t *testing.T, v primitive.ProtocolVersion, m message.Message) []byte {
	t.Helper()
	for _, c := range message.DefaultMessageCodecs {
		if c.GetOpCode() == primitive.OpCodeResult {
			var buf bytes.Buffer
			if err := c.Encode(m, &buf, v); err != nil {
				t.Fatal(err)
			}
			return buf.Bytes()
		}
	}
	t.Fatal("no RESULT codec")
	return nil
}

func TestRowsCount(t *testing.T) {
	row := message.Row{[]byte{0, 0, 0, 1}, []byte("x")}
	cols := []*message.ColumnMetadata{
		{Keyspace: "ks", Table: "t", Name: "k", Type: datatype.Int},
		{Keyspace: "ks", Table: "t", Name: "m", Type: datatype.NewMap(datatype.Varchar, datatype.NewList(datatype.Int))},
	}
	for _, v := range []primitive.ProtocolVersion{3, 4, 5} {
		for _, meta := range []*message.RowsMetadata{
			{ColumnCount: 2, Columns: cols},
			{ColumnCount: 2, Columns: cols, PagingState: []byte("page")},
			{ColumnCount: 2}, // skip_metadata: no column specs
		} {
			body := encodeRows(t, v, &message.RowsResult{Metadata: meta, Data: message.RowSet{row, row, row}})
			if n, ok := RowsCount(body); !ok || n != 3 {
				t.Errorf("v%d %+v: RowsCount = %d, %v; want 3", v, meta, n, ok)
			}
			if _, ok := RowsCount(body[:14]); ok {
				t.Errorf("v%d: a truncated body was read", v)
			}
		}
	}
	if _, ok := RowsCount(encodeRows(t, 4, &message.VoidResult{})); ok {
		t.Error("RowsCount of a Void result reported rows")
	}
}
