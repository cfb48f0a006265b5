package frame

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/datastax/go-cassandra-native-protocol/message"
	"github.com/datastax/go-cassandra-native-protocol/primitive"
)

// checkRequest compares what ParseRequest found in the request frame f
// with what the separate decoders find, which the tests against the
// reference implementation cover.
func checkRequest(t *testing.T, f []byte) {
	t.Helper()
	r, err := ParseRequest(f)
	msg, msgErr := MessageBody(f)
	if msgErr != nil {
		if err == nil {
			t.Fatalf("ParseRequest accepted a frame whose message does not parse: %v", msgErr)
		}
		return
	}
	h := ParseHeader(f)
	if op := h.Opcode; op == OpQuery || op == OpPrepare {
		q, qErr := QueryString(msg)
		if (err == nil) != (qErr == nil) || !bytes.Equal(r.Text(f), q) {
			t.Fatalf("Text = %q, %v; QueryString = %q, %v", r.Text(f), err, q, qErr)
		}
	}
	if err != nil {
		if h.Opcode != OpQuery && h.Opcode != OpPrepare {
			t.Fatalf("ParseRequest failed on %s: %v", OpcodeName(h.Opcode), err)
		}
		return
	}
	if r.Header != h || !bytes.Equal(r.Body(f), msg) {
		t.Fatalf("header %+v, body %x; want %+v, %x", r.Header, r.Body(f), h, msg)
	}
	switch h.Opcode {
	case OpPrepare:
		ks, _ := PrepareKeyspace(h.Version, msg)
		if string(r.Keyspace(f)) != ks {
			t.Fatalf("PREPARE keyspace = %q; want %q", r.Keyspace(f), ks)
		}
		return
	case OpExecute:
		id, idErr := ExecuteID(msg)
		if (idErr == nil) != (r.ID(f) != nil) || !bytes.Equal(id, r.ID(f)) {
			t.Fatalf("ID = %x; ExecuteID = %x, %v", r.ID(f), id, idErr)
		}
		if h.Version >= V5 {
			rid, _ := ExecuteResultMetadataID(msg)
			if !bytes.Equal(rid, r.ResultMetadataID(f)) {
				t.Fatalf("ResultMetadataID = %x; want %x", r.ResultMetadataID(f), rid)
			}
		}
	case OpBatch:
		checkRequestBatch(t, &r, f, msg)
	}
	if h.Opcode != OpQuery && h.Opcode != OpExecute && h.Opcode != OpBatch {
		if r.HasParams() {
			t.Fatalf("%s has parameters", OpcodeName(h.Opcode))
		}
		return
	}
	p, pErr := ParseQueryParams(h.Version, h.Opcode, msg)
	if (pErr == nil) != r.HasParams() {
		t.Fatalf("HasParams = %v; ParseQueryParams: %v", r.HasParams(), pErr)
	}
	if pErr != nil {
		return
	}
	if r.Consistency != p.Consistency || r.QueryFlags != p.Flags || !bytes.Equal(r.Keyspace(f), p.Keyspace) {
		t.Fatalf("consistency %#x, flags %#x, keyspace %q; want %#x, %#x, %q",
			r.Consistency, r.QueryFlags, r.Keyspace(f), p.Consistency, p.Flags, p.Keyspace)
	}
	if h.Opcode == OpExecute {
		for _, idx := range [][]uint16{{0}, {1, 0}, {2}} {
			got, err1 := r.Values(f, idx, nil)
			want, err2 := ExecuteValues(h.Version, msg, idx, nil)
			if (err1 == nil) != (err2 == nil) || !sameValues(got, want) {
				t.Fatalf("Values(%v) = %x, %v; ExecuteValues = %x, %v", idx, got, err1, want, err2)
			}
		}
	}
	checkWithTimestamp(t, r, f)
}

func checkRequestBatch(t *testing.T, r *Request, f, msg []byte) {
	t.Helper()
	b, err := ParseBatch(r.Version, msg)
	if (err == nil) != r.HasParams() {
		t.Fatalf("BATCH HasParams = %v; ParseBatch: %v", r.HasParams(), err)
	}
	if err != nil {
		return
	}
	if r.BatchType != b.Type || r.BatchCount != b.Count {
		t.Fatalf("BATCH type %d count %d; want %d %d", r.BatchType, r.BatchCount, b.Type, b.Count)
	}
	got, want := r.Children(f), b.Children()
	for i := 0; ; i++ {
		c1, ok1 := got.Next()
		c2, ok2 := want.Next()
		if ok1 != ok2 || c1.Kind != c2.Kind || !bytes.Equal(c1.ID, c2.ID) || !bytes.Equal(c1.Query, c2.Query) {
			t.Fatalf("child %d: %+v, %v; want %+v, %v", i, c1, ok1, c2, ok2)
		}
		if !ok1 {
			break
		}
		if i > 0 {
			continue
		}
		if !bytes.Equal(r.ID(f), c2.ID) {
			t.Fatalf("ID = %x; first child's %x", r.ID(f), c2.ID)
		}
		if c2.Kind == BatchChildPrepared {
			for _, idx := range [][]uint16{{0}, {1, 0}} {
				v1, err1 := r.Values(f, idx, nil)
				v2, err2 := c2.Values(idx, nil)
				if (err1 == nil) != (err2 == nil) || !sameValues(v1, v2) {
					t.Fatalf("first child Values(%v) = %x, %v; want %x, %v", idx, v1, err1, v2, err2)
				}
			}
		}
	}
}

// checkWithTimestamp compares WithTimestamp with AppendFrameWithTimestamp
// and checks that the view it leaves is that of the frame it built.
func checkWithTimestamp(t *testing.T, r Request, f []byte) {
	t.Helper()
	const ts = 1_700_000_000_000_000
	want, wantAdded, wantErr := AppendFrameWithTimestamp(nil, f, ts)
	got, added, err := r.WithTimestamp(nil, f, ts)
	if (err == nil) != (wantErr == nil) || added != wantAdded {
		t.Fatalf("WithTimestamp: added %v, %v; AppendFrameWithTimestamp: %v, %v", added, err, wantAdded, wantErr)
	}
	if !added {
		return
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("WithTimestamp built %x; want %x", got, want)
	}
	again, err := ParseRequest(got)
	if err != nil || again != r {
		t.Fatalf("view after WithTimestamp %+v; parsing the new frame gives %+v, %v", r, again, err)
	}
}

func TestParseRequestAgainstLibrary(t *testing.T) {
	payload := map[string][]byte{"k": {1, 2}, "other": nil}
	for _, v := range []byte{V3, V4, V5} {
		var msgs []message.Message
		for _, c := range paramCases() {
			if v >= c.minV {
				msgs = append(msgs, requestMessages(v, c.opts(v))...)
			}
		}
		msgs = append(msgs, testBatch(v),
			&message.Batch{Children: []*message.BatchChild{{Id: []byte{7}}}, Consistency: primitive.ConsistencyLevelOne},
			&message.Prepare{Query: "SELECT * FROM t", Keyspace: map[bool]string{true: "ks1"}[v >= V5]},
			&message.Options{})
		for i, msg := range msgs {
			for _, pl := range []map[string][]byte{nil, payload} {
				if pl != nil && v < V4 {
					continue
				}
				t.Run(fmt.Sprintf("v%d/%d-%s/payload=%v", v, i, OpcodeName(byte(msg.GetOpCode())), pl != nil), func(t *testing.T) {
					f := routingLibFrame(t, v, msg, pl)
					checkRequest(t, f)
					r, _ := ParseRequest(f)
					if op := r.Opcode; (op == OpQuery || op == OpExecute || op == OpBatch) && !r.HasParams() {
						t.Fatalf("parameters of a well-formed %s did not parse", OpcodeName(op))
					}
				})
			}
		}
	}
}

func TestRequestClearSkipMetadata(t *testing.T) {
	for _, v := range []byte{V3, V4, V5} {
		for _, msg := range requestMessages(v, paramCases()[4].opts(v)) { // "paging": skip metadata set
			f := routingLibFrame(t, v, msg, nil)
			r, err := ParseRequest(f)
			if err != nil || r.QueryFlags&QueryFlagSkipMetadata == 0 {
				t.Fatalf("v%d %s: flags %#x, %v", v, OpcodeName(r.Opcode), r.QueryFlags, err)
			}
			r.ClearSkipMetadata(f)
			again, _ := ParseRequest(f)
			if again.QueryFlags&QueryFlagSkipMetadata != 0 || again != r {
				t.Fatalf("v%d %s: after ClearSkipMetadata the frame parses as %+v; the view is %+v", v, OpcodeName(r.Opcode), again, r)
			}
			if got := routingLibDecode(t, f).Body.Message; got == nil {
				t.Fatalf("the library cannot decode the frame any more")
			}
		}
	}
}

// FuzzRequest checks ParseRequest against the separate decoders on any
// QUERY, PREPARE, EXECUTE or BATCH body, with or without a custom payload.
func FuzzRequest(f *testing.F) {
	for _, v := range versions {
		for _, c := range paramCases() {
			if v < c.minV {
				continue
			}
			for _, msg := range requestMessages(v, c.opts(v)) {
				fr := routingLibFrame(f, v, msg, nil)
				f.Add(v, byte(0), fr[4], Body(fr))
			}
		}
		fr := routingLibFrame(f, v, testBatch(v), nil)
		f.Add(v, byte(0), byte(OpBatch), Body(fr))
		fr = AppendPrepare(nil, v, 0, "SELECT 1", "ks")
		f.Add(v, FlagCustomPayload, byte(OpPrepare), append([]byte{0, 1, 0, 1, 'k', 0, 0, 0, 1, 9}, Body(fr)...))
	}
	f.Fuzz(func(t *testing.T, version, flags, op byte, body []byte) {
		switch op {
		case OpQuery, OpPrepare, OpExecute, OpBatch:
		default:
			op = OpExecute
		}
		checkRequest(t, AppendFrame(nil, version, false, flags, 1, op, body))
	})
}

func BenchmarkParseRequest(b *testing.B) {
	f := routingLibFrame(b, V4, requestMessages(V4, paramCases()[4].opts(V4))[1], nil)
	b.ReportAllocs()
	for b.Loop() {
		_, _ = ParseRequest(f)
	}
}
