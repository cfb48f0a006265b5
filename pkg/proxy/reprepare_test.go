package proxy_test

// UNPREPARED through the proxy (reprepare.go, statement.mayHideUnprepared):
// hidden when a node only forgot a statement, relayed when the statement's
// columns changed, so that the driver prepares it again and learns them.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/datastax/go-cassandra-native-protocol/datatype"

	"github.com/cqlgate/cqlgate/internal/fakenode"
	"github.com/cqlgate/cqlgate/internal/proxytest"
	"github.com/cqlgate/cqlgate/pkg/frame"
)

// rows is a decoded RESULT Rows body.
type rows struct {
	noMetadata bool
	names      []string // nil with noMetadata
	cells      [][][]byte
}

// decodeRows reads a RESULT Rows answer whose columns have simple types.
func decodeRows(tb testing.TB, f []byte) rows {
	tb.Helper()
	body, err := frame.MessageBody(f)
	if frame.Opcode(f) != frame.OpResult || err != nil || len(body) < 12 || binary.BigEndian.Uint32(body) != 2 {
		tb.Fatalf("want RESULT Rows, got %s", describe(f))
	}
	fail := func(what string) { tb.Fatalf("malformed RESULT Rows: %s", what) }
	b := body[4:]
	u32 := func() int {
		if len(b) < 4 {
			fail("short int")
		}
		v := int(int32(binary.BigEndian.Uint32(b)))
		b = b[4:]
		return v
	}
	short := func() int {
		if len(b) < 2 {
			fail("short short")
		}
		v := int(binary.BigEndian.Uint16(b))
		b = b[2:]
		return v
	}
	str := func() string {
		n := short()
		if len(b) < n {
			fail("short string")
		}
		s := string(b[:n])
		b = b[n:]
		return s
	}
	flags, ncols := u32(), u32()
	var r rows
	if flags&0x2 != 0 { // paging state
		if n := u32(); n > 0 {
			b = b[n:]
		}
	}
	if flags&0x8 != 0 { // v5 new result metadata id
		b = b[short():]
	}
	r.noMetadata = flags&0x4 != 0
	if !r.noMetadata {
		global := flags&0x1 != 0
		if global {
			str()
			str()
		}
		for range ncols {
			if !global {
				str()
				str()
			}
			r.names = append(r.names, str())
			if id := short(); id >= 0x20 {
				fail(fmt.Sprintf("column type 0x%x not simple", id))
			}
		}
	}
	for range u32() {
		row := make([][]byte, ncols)
		for i := range row {
			n := u32()
			if n >= 0 {
				row[i] = b[:n]
				b = b[n:]
			}
		}
		r.cells = append(r.cells, row)
	}
	return r
}

// isUnprepared reports whether f is an UNPREPARED error naming id.
func isUnprepared(f []byte, id []byte) bool {
	if frame.Opcode(f) != frame.OpError {
		return false
	}
	body, err := frame.MessageBody(f)
	if err != nil {
		return false
	}
	if code, _, err := frame.ErrorCode(body); err != nil || code != frame.ErrCodeUnprepared {
		return false
	}
	got, err := frame.UnpreparedID(body)
	return err == nil && bytes.Equal(got, id)
}

var (
	// abcCols and abbcCols are ks.t before and after ALTER TABLE ADD b
	// (a column that comes between a and c in SELECT *).
	abcCols  = []fakenode.Column{fakenode.Key("k", datatype.Int), fakenode.Col("a", datatype.Varchar), fakenode.Col("c", datatype.Varchar)}
	abbcCols = []fakenode.Column{fakenode.Key("k", datatype.Int), fakenode.Col("a", datatype.Varchar), fakenode.Col("b", datatype.Int), fakenode.Col("c", datatype.Varchar)}
)

const selectT = "SELECT * FROM ks.t WHERE k = ?"

// TestUnpreparedRelayedAfterColumnsChanged: a prepared SELECT * executed
// with skip_metadata, then ALTER TABLE ADD and a node that forgot the
// statement. The client must get UNPREPARED, as on a direct connection, so
// that its driver prepares again and learns the new column. Before the fix
// the proxy prepared the statement again itself and re-sent the EXECUTE:
// on v4 the client got rows of four columns without metadata, which its
// driver decodes with the three it knows (the new column's bytes read as
// c); on v5 rows with Metadata_changed instead of the UNPREPARED a direct
// connection gets.
func TestUnpreparedRelayedAfterColumnsChanged(t *testing.T) {
	for _, v := range []byte{frame.V4, frame.V5} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			cl := fakenode.StartCluster(t, 1, fakenode.Config{})
			cl.SetTable("ks.t", abcCols, [][]byte{fakenode.Int(1), fakenode.Text("a1"), fakenode.Text("c1")})
			p := proxytest.Start(t, cl.Addrs(), nil)
			c := dialRaw(t, p.Addr, v)

			meta := c.prepare(1, selectT)
			r := decodeRows(t, c.roundTrip(execute(v, 2, meta.ID, meta.ResultMetadataID, true, fakenode.Int(1))))
			if !r.noMetadata || len(r.cells) != 1 || len(r.cells[0]) != 3 || string(r.cells[0][2]) != "c1" {
				t.Fatalf("first EXECUTE: %+v, want one row of 3 columns without metadata", r)
			}

			cl.SetTable("ks.t", abbcCols, [][]byte{fakenode.Int(1), fakenode.Text("a1"), fakenode.Int(7), fakenode.Text("c1")})
			cl.ForgetPrepared()
			resp := c.roundTrip(execute(v, 3, meta.ID, meta.ResultMetadataID, true, fakenode.Int(1)))
			if !isUnprepared(resp, meta.ID) {
				desc := describe(resp)
				if frame.Opcode(resp) == frame.OpResult {
					r := decodeRows(t, resp)
					desc = fmt.Sprintf("RESULT Rows (no metadata: %v, %d columns a row) for a statement the client holds as 3 columns", r.noMetadata, len(r.cells[0]))
				}
				t.Fatalf("EXECUTE after ALTER TABLE ADD and a node that forgot the statement: %s, want UNPREPARED", desc)
			}
			if got := metricValue(t, p, "cqlgate_unprepared_relayed_total"); got != 1 {
				t.Errorf("cqlgate_unprepared_relayed_total = %v, want 1", got)
			}

			// The driver prepares again and reads the row right.
			meta = c.prepare(4, selectT)
			r = decodeRows(t, c.roundTrip(execute(v, 5, meta.ID, meta.ResultMetadataID, false, fakenode.Int(1))))
			want := []string{"k", "a", "b", "c"}
			if fmt.Sprint(r.names) != fmt.Sprint(want) || len(r.cells) != 1 || !bytes.Equal(r.cells[0][2], fakenode.Int(7)) || string(r.cells[0][3]) != "c1" {
				t.Fatalf("EXECUTE after preparing again: columns %v rows %q, want columns %v and b = 7, c = c1", r.names, r.cells, want)
			}
		})
	}
}

// TestUnpreparedHiddenAfterRestart: a node that only forgot a statement (a
// restart, no schema change) is taught it again and the request re-sent:
// the client gets its rows and never sees UNPREPARED. (This held before
// the fix too; it guards the fix from hiding too little.)
func TestUnpreparedHiddenAfterRestart(t *testing.T) {
	for _, v := range []byte{frame.V4, frame.V5} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			cl := fakenode.StartCluster(t, 1, fakenode.Config{})
			cl.SetTable("ks.t", abcCols, [][]byte{fakenode.Int(1), fakenode.Text("a1"), fakenode.Text("c1")})
			p := proxytest.Start(t, cl.Addrs(), nil)
			c := dialRaw(t, p.Addr, v)

			meta := c.prepare(1, selectT)
			decodeRows(t, c.roundTrip(execute(v, 2, meta.ID, meta.ResultMetadataID, true, fakenode.Int(1))))
			cl.ForgetPrepared()
			r := decodeRows(t, c.roundTrip(execute(v, 3, meta.ID, meta.ResultMetadataID, true, fakenode.Int(1))))
			if len(r.cells) != 1 || len(r.cells[0]) != 3 || string(r.cells[0][2]) != "c1" {
				t.Fatalf("EXECUTE after the node forgot the statement: %+v, want its row", r)
			}
			if got := metricValue(t, p, "cqlgate_reprepares_total"); got != 1 {
				t.Errorf("cqlgate_reprepares_total = %v, want 1", got)
			}
			if got := metricValue(t, p, "cqlgate_unprepared_relayed_total"); got > 0 {
				t.Errorf("cqlgate_unprepared_relayed_total = %v, want 0", got)
			}
		})
	}
}

// batch builds a BATCH (logged) of one EXECUTE of id per values list.
func batch(version byte, stream int16, id []byte, values ...[][]byte) []byte {
	b := []byte{0}
	b = binary.BigEndian.AppendUint16(b, uint16(len(values)))
	for _, vs := range values {
		b = append(b, 1)
		b = binary.BigEndian.AppendUint16(b, uint16(len(id)))
		b = append(b, id...)
		b = binary.BigEndian.AppendUint16(b, uint16(len(vs)))
		for _, v := range vs {
			b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
			b = append(b, v...)
		}
	}
	b = binary.BigEndian.AppendUint16(b, 0x0001)
	if version >= frame.V5 {
		b = binary.BigEndian.AppendUint32(b, 0)
	} else {
		b = append(b, 0)
	}
	return frame.AppendFrame(nil, version, false, 0, stream, frame.OpBatch, b)
}

// TestUnpreparedBatchRelayedAfterBindTypeChanged: a BATCH of a prepared
// INSERT whose bound column changed type (DROP and CREATE TABLE) on a node
// that forgot it gets UNPREPARED, so that the driver prepares again and
// encodes the values with the new types. Before the fix the proxy prepared
// it again and re-sent the BATCH with the values bound for the old types.
func TestUnpreparedBatchRelayedAfterBindTypeChanged(t *testing.T) {
	for _, v := range []byte{frame.V4, frame.V5} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			cl := fakenode.StartCluster(t, 1, fakenode.Config{})
			cl.SetTable("ks.t", kvCols)
			p := proxytest.Start(t, cl.Addrs(), nil)
			c := dialRaw(t, p.Addr, v)

			const insert = "INSERT INTO ks.t (k, v) VALUES (?, ?)"
			meta := c.prepare(1, insert)
			if resp := c.roundTrip(batch(v, 2, meta.ID, [][]byte{fakenode.Int(1), fakenode.Text("one")})); frame.Opcode(resp) != frame.OpResult {
				t.Fatalf("first BATCH: %s", describe(resp))
			}
			cl.SetTable("ks.t", []fakenode.Column{fakenode.Key("k", datatype.Int), fakenode.Col("v", datatype.Bigint)})
			cl.ForgetPrepared()
			resp := c.roundTrip(batch(v, 3, meta.ID, [][]byte{fakenode.Int(1), fakenode.Text("one")}))
			if !isUnprepared(resp, meta.ID) {
				t.Fatalf("BATCH after the bound column's type changed, on a node that forgot the statement: %s, want UNPREPARED (executed %d times)", describe(resp), cl.Executions(meta.ID))
			}
			if got := cl.Executions(meta.ID); got != 1 {
				t.Errorf("the statement ran %d times, want once (before the change)", got)
			}
		})
	}
}

// TestUnpreparedRelayedForStaleResultMetadataID: a v5 EXECUTE naming a
// result metadata id the node no longer gives its statement (the client
// prepared it before ALTER TABLE, elsewhere: on the node directly, another
// proxy), on a node that forgot the statement, gets UNPREPARED, even though
// every PREPARED answer this proxy saw had one shape. Before the fix the
// proxy re-sent it and the client got rows with Metadata_changed.
func TestUnpreparedRelayedForStaleResultMetadataID(t *testing.T) {
	cl := fakenode.StartCluster(t, 1, fakenode.Config{})
	cl.SetTable("ks.t", abcCols, [][]byte{fakenode.Int(1), fakenode.Text("a1"), fakenode.Text("c1")})
	direct := dialRaw(t, cl.Addrs()[0], frame.V5)
	old := direct.prepare(1, selectT)

	cl.SetTable("ks.t", abbcCols, [][]byte{fakenode.Int(1), fakenode.Text("a1"), fakenode.Int(7), fakenode.Text("c1")})
	p := proxytest.Start(t, cl.Addrs(), nil)
	c := dialRaw(t, p.Addr, frame.V5)
	cur := c.prepare(1, selectT)
	if !bytes.Equal(cur.ID, old.ID) || bytes.Equal(cur.ResultMetadataID, old.ResultMetadataID) {
		t.Fatalf("prepared ids %x and %x, result metadata ids %x and %x: want one id and two metadata ids", old.ID, cur.ID, old.ResultMetadataID, cur.ResultMetadataID)
	}
	cl.ForgetPrepared()
	resp := c.roundTrip(execute(frame.V5, 2, old.ID, old.ResultMetadataID, true, fakenode.Int(1)))
	if !isUnprepared(resp, old.ID) {
		t.Fatalf("v5 EXECUTE with a stale result metadata id on a node that forgot the statement: %s, want UNPREPARED", describe(resp))
	}
	// A client holding the current id still has UNPREPARED hidden.
	cl.ForgetPrepared()
	r := decodeRows(t, c.roundTrip(execute(frame.V5, 3, cur.ID, cur.ResultMetadataID, true, fakenode.Int(1))))
	if len(r.cells) != 1 || len(r.cells[0]) != 4 {
		t.Fatalf("v5 EXECUTE with the current result metadata id: %+v, want one row of 4 columns", r)
	}
}
