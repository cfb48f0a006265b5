package token

import (
	"bytes"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	dsframe "github.com/datastax/go-cassandra-native-protocol/frame"
	"github.com/datastax/go-cassandra-native-protocol/message"
	"github.com/datastax/go-cassandra-native-protocol/primitive"

	"github.com/cqlgate/cqlgate/pkg/frame"
)

// rawConn is a bare native-protocol connection to one node, speaking one
// request at a time, for requests the drivers would not send as they are.
type rawConn struct {
	t      *testing.T
	c      net.Conn
	r      *frame.Reader
	w      *frame.Writer
	v      byte
	stream int16
}

func dialRaw(t *testing.T, addr string, v byte) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(2 * time.Minute))
	rc := &rawConn{t: t, c: c, r: frame.NewReader(c, 0), w: frame.NewWriter(c), v: v}
	if resp := rc.roundTrip(frame.AppendStartup(nil, v, 0, map[string]string{"CQL_VERSION": "3.0.0"})); frame.Opcode(resp) != frame.OpReady {
		t.Fatalf("v%d STARTUP answered with %s", v, frame.OpcodeName(frame.Opcode(resp)))
	}
	if v >= frame.V5 {
		rc.r.EnableSegments(frame.CompressionNone)
		rc.w.EnableSegments(frame.CompressionNone)
	}
	return rc
}

// roundTrip sends the request frame f and returns the response frame,
// failing the test on an ERROR. Timeouts and OVERLOADED, which a loaded
// test machine causes, are retried: every request here is idempotent, the
// writes carrying their timestamp included.
func (rc *rawConn) roundTrip(f []byte) []byte {
	rc.t.Helper()
	for attempt := 1; ; attempt++ {
		resp := rc.send(f)
		if frame.Opcode(resp) != frame.OpError {
			return resp
		}
		code, msg, _ := frame.ErrorCode(frame.Body(resp))
		switch code {
		case frame.ErrCodeWriteTimeout, frame.ErrCodeReadTimeout, frame.ErrCodeOverloaded:
			if attempt < 4 {
				rc.t.Logf("%s answered with ERROR 0x%04x (%s); retrying", frame.OpcodeName(frame.Opcode(f)), code, msg)
				continue
			}
		}
		rc.t.Fatalf("%s answered with ERROR 0x%04x: %s", frame.OpcodeName(frame.Opcode(f)), code, msg)
	}
}

// send sends the request frame f and returns the response frame.
func (rc *rawConn) send(f []byte) []byte {
	rc.t.Helper()
	rc.stream++
	frame.SetStream(f, rc.stream)
	if err := rc.w.WriteFrame(f); err != nil {
		rc.t.Fatal(err)
	}
	if err := rc.w.Flush(); err != nil {
		rc.t.Fatal(err)
	}
	b, err := rc.r.ReadFrame()
	if err != nil {
		rc.t.Fatalf("reading the answer to %s: %v", frame.OpcodeName(frame.Opcode(f)), err)
	}
	resp := bytes.Clone(b.B)
	b.Release()
	if frame.Stream(resp) != rc.stream {
		rc.t.Fatalf("answer on stream %d; want %d", frame.Stream(resp), rc.stream)
	}
	return resp
}

// libFrame encodes msg with the reference implementation.
func (rc *rawConn) libFrame(msg message.Message) []byte {
	rc.t.Helper()
	var buf bytes.Buffer
	if err := dsframe.NewCodec().EncodeFrame(dsframe.NewFrame(primitive.ProtocolVersion(rc.v), 0, msg), &buf); err != nil {
		rc.t.Fatal(err)
	}
	return buf.Bytes()
}

// withTimestamp sends the request frame f with the default timestamp ts
// added, checking whether AppendFrameWithTimestamp added it.
func (rc *rawConn) withTimestamp(f []byte, ts int64, wantAdded bool) {
	rc.t.Helper()
	out, added, err := frame.AppendFrameWithTimestamp(nil, f, ts)
	if err != nil {
		rc.t.Fatal(err)
	}
	if added != wantAdded {
		rc.t.Fatalf("AppendFrameWithTimestamp added = %v; want %v", added, wantAdded)
	}
	rc.roundTrip(out)
}

// TestRoutingPipelineInCassandra runs what a token-aware proxy does on
// real requests, for every protocol version: PREPARE, ParsePrepared,
// ExecuteValues and PartitionToken must give the token Cassandra gives the
// row, and QUERY, EXECUTE and BATCH sent with a timestamp added by
// AppendFrameWithTimestamp must write with that timestamp.
func TestRoutingPipelineInCassandra(t *testing.T) {
	c := cluster3.Get(t)
	s := session(t, c)
	const insert = "INSERT INTO tok_rf1.t_comp (v, b, a) VALUES (?, ?, ?)"
	val := func(x []byte) *primitive.Value { return primitive.NewValue(x) }

	type written struct {
		a  int32
		b  string
		ts int64
	}
	var rows []written
	for _, v := range []byte{frame.V3, frame.V4, frame.V5} {
		rc := dialRaw(t, c.Addrs[0], v)
		base := int32(v) * 100
		tsBase := int64(1_600_000_000_000_000) + int64(v)*1000
		key := func(i int32) (int32, string) { return base + i, fmt.Sprintf("v%d-%d", v, i) }
		args := func(i int32) []*primitive.Value {
			a, b := key(i)
			return []*primitive.Value{val([]byte("x")), val([]byte(b)), val(int32Bytes(a))}
		}

		// QUERY without, then with, a timestamp of its own.
		q := &message.Query{Query: insert, Options: &message.QueryOptions{Consistency: primitive.ConsistencyLevelOne, PositionalValues: args(1)}}
		rc.withTimestamp(rc.libFrame(q), tsBase+1, true)
		q = &message.Query{Query: insert, Options: &message.QueryOptions{Consistency: primitive.ConsistencyLevelOne, PositionalValues: args(2), DefaultTimestamp: ptr(tsBase + 2)}}
		rc.withTimestamp(rc.libFrame(q), 1, false)

		// PREPARE, and what routing reads from its answer.
		resp := rc.roundTrip(frame.AppendPrepare(nil, v, 0, insert, ""))
		meta, err := frame.ParsePrepared(v, frame.Body(resp))
		if err != nil {
			t.Fatalf("v%d: ParsePrepared: %v", v, err)
		}
		if meta.Keyspace != "tok_rf1" || meta.Table != "t_comp" || !slices.Equal(meta.VarNames, []string{"v", "b", "a"}) ||
			!slices.Equal(meta.VarTypes, []uint16{frame.TypeVarchar, frame.TypeVarchar, frame.TypeInt}) {
			t.Errorf("v%d: prepared metadata %+v", v, meta)
		}
		wantPK := []uint16{2, 1} // partition key (a, b): markers 2 and 1
		if v < frame.V4 {
			wantPK = nil
		}
		if !slices.Equal(meta.PKIndexes, wantPK) {
			t.Errorf("v%d: PKIndexes = %v; want %v", v, meta.PKIndexes, wantPK)
		}

		// EXECUTE: its routing token, and the timestamp.
		e := &message.Execute{QueryId: meta.ID, ResultMetadataId: meta.ResultMetadataID,
			Options: &message.QueryOptions{Consistency: primitive.ConsistencyLevelOne, PositionalValues: args(3)}}
		ef := rc.libFrame(e)
		if v >= frame.V4 {
			parts, err := frame.ExecuteValues(v, frame.Body(ef), meta.PKIndexes, nil)
			if err != nil {
				t.Fatalf("v%d: ExecuteValues: %v", v, err)
			}
			a, b := key(3)
			var want int64
			if err := s.Query("SELECT token(a, b) FROM tok_rf1.t_comp WHERE a = ? AND b = ?", a, b).Scan(&want); err == nil {
				t.Fatalf("v%d: row (%d, %s) exists before the EXECUTE", v, a, b)
			}
			rc.withTimestamp(ef, tsBase+3, true)
			if err := s.Query("SELECT token(a, b) FROM tok_rf1.t_comp WHERE a = ? AND b = ?", a, b).Scan(&want); err != nil {
				t.Fatalf("v%d: token of the executed row: %v", v, err)
			}
			if got := PartitionToken(parts); got != want {
				t.Errorf("v%d: token from the EXECUTE's values = %d; Cassandra says %d", v, got, want)
			}
		} else {
			rc.withTimestamp(ef, tsBase+3, true)
		}

		// BATCH of a query child and a prepared child.
		batch := &message.Batch{Type: primitive.BatchTypeLogged, Consistency: primitive.ConsistencyLevelOne, Children: []*message.BatchChild{
			{Query: insert, Values: args(4)},
			{Id: meta.ID, Values: args(5)},
		}}
		bf := rc.libFrame(batch)
		pb, err := frame.ParseBatch(v, frame.Body(bf))
		if err != nil || pb.Count != 2 {
			t.Fatalf("v%d: ParseBatch: %d children, %v", v, pb.Count, err)
		}
		rc.withTimestamp(bf, tsBase+4, true)

		for i, ts := range map[int32]int64{1: tsBase + 1, 2: tsBase + 2, 3: tsBase + 3, 4: tsBase + 4, 5: tsBase + 4} {
			a, b := key(i)
			rows = append(rows, written{a, b, ts})
		}
	}
	for _, r := range rows {
		var got int64
		if err := s.Query("SELECT WRITETIME(v) FROM tok_rf1.t_comp WHERE a = ? AND b = ?", r.a, r.b).Scan(&got); err != nil {
			t.Fatalf("row (%d, %s): %v", r.a, r.b, err)
		}
		if got != r.ts {
			t.Errorf("row (%d, %s): WRITETIME = %d; want %d", r.a, r.b, got, r.ts)
		}
	}
}

func ptr[T any](v T) *T { return &v }
