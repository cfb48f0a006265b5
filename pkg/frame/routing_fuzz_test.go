package frame

import (
	"bytes"
	"testing"

	"github.com/datastax/go-cassandra-native-protocol/message"
)

// Fuzz targets of the routing decoders (prepared.go, queryparams.go,
// batch.go). Bounds are checked by the Go runtime, so "never reads out of
// bounds" is "never panics"; the targets also check that what the decoders
// return lies within the input and agrees between decoders.

// FuzzParsePrepared decodes arbitrary RESULT Prepared bodies.
func FuzzParsePrepared(f *testing.F) {
	for _, v := range []byte{V3, V4, V5} {
		cols, _ := preparedVars(f, "t2")
		msg := &message.PreparedResult{
			PreparedQueryId:   []byte{1, 2, 3},
			VariablesMetadata: &message.VariablesMetadata{PkIndices: []uint16{2, 0}, Columns: cols},
			ResultMetadata:    &message.RowsMetadata{},
		}
		if v >= V5 {
			msg.ResultMetadataId = []byte{4}
		}
		f.Add(v, routingLibBody(f, v, msg))
	}
	f.Fuzz(func(t *testing.T, v byte, body []byte) {
		m, err := ParsePrepared(v, body)
		if err != nil {
			if m != nil {
				t.Fatalf("error %v with a result", err)
			}
			return
		}
		if len(m.VarNames) != len(m.VarTypes) {
			t.Fatalf("%d names, %d types", len(m.VarNames), len(m.VarTypes))
		}
		for _, ix := range m.PKIndexes {
			if int(ix) >= len(m.VarNames) {
				t.Fatalf("pk index %d past %d variables", ix, len(m.VarNames))
			}
		}
	})
}

// FuzzQueryParams decodes arbitrary QUERY, EXECUTE and BATCH bodies with
// every decoder, and checks that AppendWithTimestamp round-trips: the result
// parses with the timestamp and with every other parameter unchanged.
func FuzzQueryParams(f *testing.F) {
	for _, v := range []byte{V3, V4, V5} {
		for _, c := range paramCases() {
			if v < c.minV {
				continue
			}
			for _, msg := range requestMessages(v, c.opts(v)) {
				f.Add(v, byte(msg.GetOpCode()), routingLibBody(f, v, msg))
			}
		}
		f.Add(v, OpBatch, routingLibBody(f, v, testBatch(v)))
	}
	f.Fuzz(func(t *testing.T, v, op byte, body []byte) {
		switch op % 3 {
		case 0:
			op = OpQuery
		case 1:
			op = OpExecute
		default:
			op = OpBatch
		}
		orig := bytes.Clone(body)
		p, perr := ParseQueryParams(v, op, body)
		cl, cerr := Consistency(v, op, body)
		if perr == nil && (cerr != nil || cl != p.Consistency) {
			t.Fatalf("Consistency = %#x, %v; ParseQueryParams says %#x", cl, cerr, p.Consistency)
		}
		if perr == nil && p.ValueCount > 0 && !p.NamedValues() {
			idx := []uint16{uint16(p.ValueCount - 1), 0}
			vals, err := p.Values(idx, nil)
			if err == nil {
				for _, val := range vals {
					if cap(val) != len(val) || !within(val, body) {
						t.Fatalf("value %x is not a capped sub-slice of the body", val)
					}
				}
			}
			if op == OpExecute {
				vals2, err2 := ExecuteValues(v, body, idx, nil)
				if (err == nil) != (err2 == nil) || err == nil && !sameValues(vals, vals2) {
					t.Fatalf("ExecuteValues = %x, %v; QueryParams.Values = %x, %v", vals2, err2, vals, err)
				}
			}
		}
		if op == OpExecute && perr != nil {
			_, _ = ExecuteValues(v, body, []uint16{0, 3}, nil)
		}
		if op == OpBatch {
			b, err := ParseBatch(v, body)
			if (err == nil) != (perr == nil) {
				t.Fatalf("ParseBatch error %v, ParseQueryParams error %v", err, perr)
			}
			if err == nil {
				it := b.Children()
				n := 0
				for c, ok := it.Next(); ok; c, ok = it.Next() {
					n++
					if c.ValueCount > 0 {
						// Unset values fail; only panics matter here.
						_, _ = c.Values([]uint16{uint16(c.ValueCount - 1)}, nil)
					}
				}
				if n != b.Count {
					t.Fatalf("iterated %d children of %d", n, b.Count)
				}
			}
		}

		const ts = 1_600_000_000_000_000
		out, added, err := AppendWithTimestamp(nil, v, op, body, ts)
		if !bytes.Equal(body, orig) {
			t.Fatal("AppendWithTimestamp modified its input")
		}
		if (err == nil) != (perr == nil) {
			t.Fatalf("AppendWithTimestamp error %v, ParseQueryParams error %v", err, perr)
		}
		if err != nil {
			return
		}
		if !added {
			if !p.HasTimestamp() || !bytes.Equal(out, body) {
				t.Fatalf("not added, but had timestamp %v / body changed %v", p.HasTimestamp(), !bytes.Equal(out, body))
			}
			return
		}
		if len(out) != len(body)+8 {
			t.Fatalf("body grew by %d bytes", len(out)-len(body))
		}
		q, err := ParseQueryParams(v, op, out)
		if err != nil {
			t.Fatalf("result does not parse: %v", err)
		}
		if q.Timestamp != ts || q.Flags != p.Flags|QueryFlagDefaultTimestamp || q.Consistency != p.Consistency ||
			q.ValueCount != p.ValueCount || q.PageSize != p.PageSize || !bytes.Equal(q.PagingState, p.PagingState) ||
			q.SerialConsistency != p.SerialConsistency || !bytes.Equal(q.Keyspace, p.Keyspace) ||
			q.NowInSeconds != p.NowInSeconds || !bytes.Equal(q.values, p.values) {
			t.Fatalf("parameters changed:\n%+v\n%+v", p, q)
		}
		if again, added, err := AppendWithTimestamp(nil, v, op, out, ts+1); err != nil || added || !bytes.Equal(again, out) {
			t.Fatalf("second AppendWithTimestamp: added %v, %v", added, err)
		}
	})
}

// within reports whether s lies inside b's backing array range.
func within(s, b []byte) bool {
	if len(s) == 0 {
		return true
	}
	for i := 0; i+len(s) <= len(b); i++ {
		if &b[i] == &s[0] {
			return true
		}
	}
	return false
}
