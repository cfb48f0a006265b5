package frame

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/datastax/go-cassandra-native-protocol/message"
	"github.com/datastax/go-cassandra-native-protocol/primitive"
)

// paramCase is one set of query parameters, built for a protocol version.
type paramCase struct {
	name string
	opts func(v byte) *message.QueryOptions
	// positional values, as ExecuteValues should return them (nil = null)
	values  [][]byte
	unset   int // index of an unset value, or -1
	named   bool
	minV    byte
	queryOK bool // only valid in QUERY (named values)
}

func ptr[T any](v T) *T { return &v }

var (
	valInt   = []byte{0, 0, 0, 42}
	valText  = []byte("partition")
	valEmpty = []byte{}
)

func paramCases() []paramCase {
	serial := primitive.ConsistencyLevelLocalSerial
	return []paramCase{
		{name: "bare", unset: -1, opts: func(byte) *message.QueryOptions {
			return &message.QueryOptions{Consistency: primitive.ConsistencyLevelQuorum}
		}},
		{name: "values", values: [][]byte{valInt, nil, valEmpty, valText}, unset: -1, opts: func(byte) *message.QueryOptions {
			return &message.QueryOptions{Consistency: primitive.ConsistencyLevelOne, PositionalValues: []*primitive.Value{
				primitive.NewValue(valInt), primitive.NewNullValue(), primitive.NewValue(valEmpty), primitive.NewValue(valText)}}
		}},
		{name: "unset", values: [][]byte{valText, nil, valInt}, unset: 1, minV: V4, opts: func(byte) *message.QueryOptions {
			return &message.QueryOptions{Consistency: primitive.ConsistencyLevelOne, PositionalValues: []*primitive.Value{
				primitive.NewValue(valText), primitive.NewUnsetValue(), primitive.NewValue(valInt)}}
		}},
		{name: "named", named: true, unset: -1, queryOK: true, opts: func(byte) *message.QueryOptions {
			return &message.QueryOptions{Consistency: primitive.ConsistencyLevelOne, NamedValues: map[string]*primitive.Value{
				"a": primitive.NewValue(valInt), "b": primitive.NewValue(valText)}}
		}},
		{name: "paging", values: [][]byte{valInt}, unset: -1, opts: func(byte) *message.QueryOptions {
			return &message.QueryOptions{Consistency: primitive.ConsistencyLevelLocalQuorum, SkipMetadata: true,
				PositionalValues: []*primitive.Value{primitive.NewValue(valInt)},
				PageSize:         5000, PagingState: []byte{1, 2, 3, 4, 5}, SerialConsistency: &serial}
		}},
		{name: "timestamp", values: [][]byte{valText}, unset: -1, opts: func(byte) *message.QueryOptions {
			return &message.QueryOptions{Consistency: primitive.ConsistencyLevelAll, SerialConsistency: &serial,
				PositionalValues: []*primitive.Value{primitive.NewValue(valText)}, DefaultTimestamp: ptr[int64](1234567)}
		}},
		{name: "v5-keyspace-now", values: [][]byte{valInt, valText}, unset: -1, minV: V5, opts: func(byte) *message.QueryOptions {
			return &message.QueryOptions{Consistency: primitive.ConsistencyLevelTwo, SerialConsistency: &serial,
				PositionalValues: []*primitive.Value{primitive.NewValue(valInt), primitive.NewValue(valText)},
				PageSize:         100, PagingState: []byte{9},
				Keyspace: "ks_with_a_long_name", NowInSeconds: ptr[int32](1700000000)}
		}},
		{name: "v5-everything", values: [][]byte{valInt}, unset: -1, minV: V5, opts: func(byte) *message.QueryOptions {
			return &message.QueryOptions{Consistency: primitive.ConsistencyLevelEachQuorum, SerialConsistency: &serial,
				PositionalValues: []*primitive.Value{primitive.NewValue(valInt)}, SkipMetadata: true,
				PageSize: 1, PagingState: []byte{7, 7}, DefaultTimestamp: ptr[int64](-5),
				Keyspace: "k", NowInSeconds: ptr[int32](-1)}
		}},
	}
}

// requestMessages returns a QUERY and an EXECUTE carrying opts.
func requestMessages(v byte, opts *message.QueryOptions) []message.Message {
	exec := &message.Execute{QueryId: []byte{0xca, 0xfe, 0x01}, Options: opts}
	if v >= V5 {
		exec.ResultMetadataId = []byte{0x11, 0x22}
	}
	return []message.Message{
		&message.Query{Query: "SELECT * FROM ks.t WHERE k = ?", Options: opts},
		exec,
	}
}

func checkParams(t *testing.T, p QueryParams, o *message.QueryOptions, nvalues int) {
	t.Helper()
	if p.Consistency != uint16(o.Consistency) {
		t.Errorf("Consistency = %#x; want %#x", p.Consistency, o.Consistency)
	}
	if p.ValueCount != nvalues {
		t.Errorf("ValueCount = %d; want %d", p.ValueCount, nvalues)
	}
	if (o.PageSize > 0) != (p.Flags&QueryFlagPageSize != 0) || p.PageSize != max(o.PageSize, 0) {
		t.Errorf("PageSize = %d (flags %#x); want %d", p.PageSize, p.Flags, o.PageSize)
	}
	if !bytes.Equal(p.PagingState, o.PagingState) {
		t.Errorf("PagingState = %x; want %x", p.PagingState, o.PagingState)
	}
	if o.SerialConsistency != nil && p.SerialConsistency != uint16(*o.SerialConsistency) ||
		o.SerialConsistency == nil && p.Flags&QueryFlagSerialConsistency != 0 {
		t.Errorf("SerialConsistency = %#x (flags %#x); want %v", p.SerialConsistency, p.Flags, o.SerialConsistency)
	}
	if (o.DefaultTimestamp != nil) != p.HasTimestamp() || o.DefaultTimestamp != nil && p.Timestamp != *o.DefaultTimestamp {
		t.Errorf("Timestamp = %d (has %v); want %v", p.Timestamp, p.HasTimestamp(), o.DefaultTimestamp)
	}
	if string(p.Keyspace) != o.Keyspace {
		t.Errorf("Keyspace = %q; want %q", p.Keyspace, o.Keyspace)
	}
	if o.NowInSeconds != nil && p.NowInSeconds != *o.NowInSeconds {
		t.Errorf("NowInSeconds = %d; want %d", p.NowInSeconds, *o.NowInSeconds)
	}
	if o.SkipMetadata != (p.Flags&QueryFlagSkipMetadata != 0) {
		t.Errorf("flags %#x; skip metadata want %v", p.Flags, o.SkipMetadata)
	}
}

func TestQueryParamsAgainstLibrary(t *testing.T) {
	for _, v := range []byte{V3, V4, V5} {
		for _, c := range paramCases() {
			if v < c.minV {
				continue
			}
			o := c.opts(v)
			for _, msg := range requestMessages(v, o) {
				op := byte(msg.GetOpCode())
				t.Run(fmt.Sprintf("v%d/%s/%s", v, OpcodeName(op), c.name), func(t *testing.T) {
					body := routingLibBody(t, v, msg)
					p, err := ParseQueryParams(v, op, body)
					if err != nil {
						t.Fatal(err)
					}
					n := len(o.PositionalValues) + len(o.NamedValues)
					checkParams(t, p, o, n)
					if p.NamedValues() != c.named {
						t.Errorf("NamedValues() = %v; want %v", p.NamedValues(), c.named)
					}
					cl, err := Consistency(v|ResponseBit, op, body)
					if err != nil || cl != uint16(o.Consistency) {
						t.Errorf("Consistency = %#x, %v; want %#x", cl, err, o.Consistency)
					}
					checkValues(t, c, p, v, op, body)
				})
			}
		}
	}
}

// checkValues picks values in every order, through QueryParams.Values and
// (for EXECUTE) ExecuteValues.
func checkValues(t *testing.T, c paramCase, p QueryParams, v, op byte, body []byte) {
	t.Helper()
	pick := func(idx []uint16) ([][]byte, error) {
		got, err := p.Values(idx, make([][]byte, 0, 4))
		if op == OpExecute {
			got2, err2 := ExecuteValues(v, body, idx, nil)
			if !sameValues(got, got2) || (err == nil) != (err2 == nil) {
				t.Errorf("ExecuteValues(%v) = %q, %v; QueryParams.Values gave %q, %v", idx, got2, err2, got, err)
			}
		}
		return got, err
	}
	if c.named {
		if _, err := pick([]uint16{0}); !errors.Is(err, ErrNamedValues) {
			t.Errorf("named values: error %v; want ErrNamedValues", err)
		}
		return
	}
	if got, err := pick(nil); err != nil || len(got) != 0 {
		t.Errorf("no indexes: %q, %v; want nothing", got, err)
	}
	n := len(c.values)
	for i := range n {
		idx := []uint16{uint16(i), uint16(n - 1 - i)}
		got, err := pick(idx)
		if c.unset == i || c.unset == n-1-i {
			if !errors.Is(err, ErrUnsetValue) {
				t.Errorf("Values(%v) error = %v; want ErrUnsetValue", idx, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Values(%v): %v", idx, err)
			continue
		}
		for k, ix := range idx {
			want := c.values[ix]
			if !bytes.Equal(got[k], want) || (got[k] == nil) != (want == nil) {
				t.Errorf("Values(%v)[%d] = %q; want %q (nil: %v)", idx, k, got[k], want, want == nil)
			}
			if cap(got[k]) != len(got[k]) {
				t.Errorf("Values(%v)[%d] has capacity %d > length %d", idx, k, cap(got[k]), len(got[k]))
			}
		}
	}
	if _, err := pick([]uint16{uint16(n)}); !errors.Is(err, ErrMalformedBody) {
		t.Errorf("Values([%d]) of %d values: error %v; want ErrMalformedBody", n, n, err)
	}
}

// sameValues compares picked values, telling nil (null) from empty.
func sameValues(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) || (a[i] == nil) != (b[i] == nil) {
			return false
		}
	}
	return true
}

func TestQueryParamsTruncated(t *testing.T) {
	for _, v := range []byte{V3, V4, V5} {
		for _, c := range paramCases() {
			if v < c.minV {
				continue
			}
			for _, msg := range requestMessages(v, c.opts(v)) {
				op := byte(msg.GetOpCode())
				body := routingLibBody(t, v, msg)
				for i := range len(body) {
					if _, err := ParseQueryParams(v, op, body[:i]); !errors.Is(err, ErrShortBody) {
						t.Fatalf("v%d %s %s: %d of %d bytes: error %v; want ErrShortBody", v, OpcodeName(op), c.name, i, len(body), err)
					}
					if _, _, err := AppendWithTimestamp(nil, v, op, body[:i], 1); err == nil {
						t.Fatalf("v%d %s %s: AppendWithTimestamp accepted %d of %d bytes", v, OpcodeName(op), c.name, i, len(body))
					}
				}
			}
		}
	}
}

func TestQueryParamsErrors(t *testing.T) {
	if _, err := ParseQueryParams(V4, OpPrepare, []byte{0, 0, 0, 0}); !errors.Is(err, ErrWrongKind) {
		t.Errorf("PREPARE: error %v; want ErrWrongKind", err)
	}
	if _, err := Consistency(V4, OpStartup, nil); !errors.Is(err, ErrWrongKind) {
		t.Errorf("Consistency of STARTUP: error %v; want ErrWrongKind", err)
	}
	// QUERY "" ONE, flags VALUES, 1 value of length -3.
	bad := []byte{0, 0, 0, 0, 0, 1, 0x01, 0, 1, 0xff, 0xff, 0xff, 0xfd}
	if _, err := ParseQueryParams(V4, OpQuery, bad); !errors.Is(err, ErrMalformedBody) {
		t.Errorf("value length -3: error %v; want ErrMalformedBody", err)
	}
	// QUERY "" ONE, flags TIMESTAMP, -2^63.
	minTS := []byte{0, 0, 0, 0, 0, 1, 0x20, 0x80, 0, 0, 0, 0, 0, 0, 0}
	if _, err := ParseQueryParams(V4, OpQuery, minTS); !errors.Is(err, ErrMalformedBody) {
		t.Errorf("timestamp -2^63: error %v; want ErrMalformedBody", err)
	}
	if _, _, err := AppendWithTimestamp(nil, V4, OpQuery, []byte{0, 0, 0, 0, 0, 1, 0}, math.MinInt64); !errors.Is(err, ErrMalformedBody) {
		t.Errorf("AppendWithTimestamp(-2^63): error %v; want ErrMalformedBody", err)
	}
	// EXECUTE without values asked for a value.
	exec := []byte{0, 1, 7, 0, 1, 0}
	if _, err := ExecuteValues(V4, exec, []uint16{0}, nil); !errors.Is(err, ErrMalformedBody) {
		t.Errorf("EXECUTE without values: error %v; want ErrMalformedBody", err)
	}
	if got, err := ExecuteValues(V4, exec, nil, nil); err != nil || len(got) != 0 {
		t.Errorf("EXECUTE without values, none asked: %q, %v", got, err)
	}
}

func TestAppendWithTimestampAgainstLibrary(t *testing.T) {
	const ts = int64(1_700_000_000_123_456)
	for _, v := range []byte{V3, V4, V5} {
		for _, c := range paramCases() {
			if v < c.minV {
				continue
			}
			for _, msg := range requestMessages(v, c.opts(v)) {
				op := byte(msg.GetOpCode())
				t.Run(fmt.Sprintf("v%d/%s/%s", v, OpcodeName(op), c.name), func(t *testing.T) {
					checkAppendWithTimestamp(t, v, msg, ts)
				})
			}
		}
	}
}

// checkAppendWithTimestamp adds ts to msg, body- and frame-wise (with a
// custom payload), and checks with the library that the result is msg
// with ts as its default timestamp, or msg unchanged if it had one.
func checkAppendWithTimestamp(t *testing.T, v byte, msg message.Message, ts int64) {
	t.Helper()
	op := byte(msg.GetOpCode())
	body := routingLibBody(t, v, msg)
	orig := bytes.Clone(body)
	prefix := []byte("prefix")
	out, added, err := AppendWithTimestamp(bytes.Clone(prefix), v, op, body, ts)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(body, orig) {
		t.Fatal("AppendWithTimestamp modified its input")
	}
	if !bytes.HasPrefix(out, prefix) {
		t.Fatalf("AppendWithTimestamp did not append to dst")
	}
	out = out[len(prefix):]
	had, _ := ParseQueryParams(v, op, body)
	if added == had.HasTimestamp() {
		t.Fatalf("added = %v for a request with timestamp %v", added, had.HasTimestamp())
	}
	if !added {
		if !bytes.Equal(out, body) {
			t.Fatalf("request with a timestamp: body changed")
		}
	} else if len(out) != len(body)+8 {
		t.Fatalf("body grew by %d bytes; want 8", len(out)-len(body))
	}
	want := routingLibDecode(t, routingLibFrame(t, v, msg, nil)).Body.Message
	if added {
		setDefaultTimestamp(want, ts)
	}
	got := routingLibDecode(t, AppendFrame(nil, v, false, 0, 3, op, out)).Body.Message
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("with timestamp, the library decodes\n%#v\nwant\n%#v", got, want)
	}
	p, err := ParseQueryParams(v, op, out)
	if err != nil || !p.HasTimestamp() || added && p.Timestamp != ts {
		t.Fatalf("ParseQueryParams of the result: ts %d (has %v), %v; want %d", p.Timestamp, p.HasTimestamp(), err, ts)
	}
	if again, added2, err := AppendWithTimestamp(nil, v, op, out, ts+1); err != nil || added2 || !bytes.Equal(again, out) {
		t.Fatalf("second AppendWithTimestamp: added %v, err %v, changed %v; want the body unchanged", added2, err, !bytes.Equal(again, out))
	}

	// The same through a whole frame carrying a custom payload.
	var payload map[string][]byte
	if v >= V4 { // custom payloads came with v4
		payload = map[string][]byte{"k": {1, 2, 3}}
	}
	f := routingLibFrame(t, v, msg, payload)
	fout, fadded, err := AppendFrameWithTimestamp([]byte{0xaa}, f, ts)
	if err != nil || fadded != added || fout[0] != 0xaa {
		t.Fatalf("AppendFrameWithTimestamp: added %v, err %v", fadded, err)
	}
	dec := routingLibDecode(t, fout[1:])
	if !reflect.DeepEqual(dec.Body.Message, want) || !reflect.DeepEqual(dec.Body.CustomPayload, payload) {
		t.Fatalf("frame with timestamp decodes as %#v, payload %v", dec.Body.Message, dec.Body.CustomPayload)
	}
}

func setDefaultTimestamp(m message.Message, ts int64) {
	switch m := m.(type) {
	case *message.Query:
		m.Options.DefaultTimestamp = &ts
	case *message.Execute:
		m.Options.DefaultTimestamp = &ts
	case *message.Batch:
		m.DefaultTimestamp = &ts
	}
}

func TestRoutingDecodersDoNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	opts := paramCases()[6].opts(V5)
	body := routingLibBody(t, V5, requestMessages(V5, opts)[1])
	idx := []uint16{1, 0}
	dst := make([][]byte, 0, 2)
	batch := routingLibBody(t, V5, testBatch(V5))
	frame := routingLibFrame(t, V5, requestMessages(V5, opts)[1], map[string][]byte{"k": {1}})
	for name, f := range map[string]func(){
		"ParseQueryParams": func() { _, _ = ParseQueryParams(V5, OpExecute, body) },
		"ExecuteValues":    func() { _, _ = ExecuteValues(V5, body, idx, dst) },
		"Consistency":      func() { _, _ = Consistency(V5, OpExecute, body) },
		"ParseRequest": func() {
			r, _ := ParseRequest(frame)
			_, _ = r.Values(frame, idx, dst)
		},
		"ParseBatch": func() {
			b, _ := ParseBatch(V5, batch)
			it := b.Children()
			for c, ok := it.Next(); ok; c, ok = it.Next() {
				if c.ValueCount > 0 {
					_, _ = c.Values(idx[1:], dst)
				}
			}
		},
	} {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s allocates %.0f times per call; want 0", name, n)
		}
	}
}

func BenchmarkExecuteValues(b *testing.B) {
	opts := &message.QueryOptions{Consistency: primitive.ConsistencyLevelLocalQuorum, PositionalValues: []*primitive.Value{
		primitive.NewValue([]byte("a text value")), primitive.NewValue(valInt), primitive.NewValue(make([]byte, 100)), primitive.NewValue(valInt)},
		PageSize: 5000}
	body := routingLibBody(b, V4, requestMessages(V4, opts)[1])
	idx := []uint16{1, 3}
	dst := make([][]byte, 0, 2)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ExecuteValues(V4, body, idx, dst); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendWithTimestamp(b *testing.B) {
	opts := &message.QueryOptions{Consistency: primitive.ConsistencyLevelLocalQuorum, PositionalValues: []*primitive.Value{
		primitive.NewValue([]byte("a text value")), primitive.NewValue(valInt)}, PageSize: 5000}
	body := routingLibBody(b, V5, requestMessages(V5, opts)[1])
	dst := make([]byte, 0, len(body)+8)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := AppendWithTimestamp(dst, V5, OpExecute, body, 1700000000000000); err != nil {
			b.Fatal(err)
		}
	}
}
