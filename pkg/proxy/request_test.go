package proxy

import (
	"bytes"
	"testing"
	"time"

	"github.com/cqlgate/cqlgate/pkg/frame"
	"github.com/cqlgate/cqlgate/pkg/limiter"
	"github.com/cqlgate/cqlgate/pkg/systables"
)

func TestResultBody(t *testing.T) {
	result := []byte{0, 0, 0, 1} // RESULT Void
	tracing := bytes.Repeat([]byte{9}, 16)
	warnings := []byte{0, 2, 0, 1, 'w', 0, 2, 'x', 'y'}
	payload := []byte{0, 1, 0, 1, 'k', 0, 0, 0, 2, 'v', 'v'}
	for _, tc := range []struct {
		name  string
		flags byte
		body  []byte
		want  []byte
	}{
		{"plain", 0, result, result},
		{"tracing", frame.FlagTracing, cat(tracing, result), result},
		{"warnings", frame.FlagWarning, cat(warnings, result), result},
		{"all", frame.FlagTracing | frame.FlagWarning | frame.FlagCustomPayload, cat(tracing, warnings, payload, result), result},
		{"truncated tracing", frame.FlagTracing, []byte{1, 2}, nil},
		{"truncated warnings", frame.FlagWarning, []byte{0, 5, 0}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := frame.AppendFrame(nil, frame.V4, true, tc.flags, 1, frame.OpResult, tc.body)
			if got := resultBody(f); !bytes.Equal(got, tc.want) {
				t.Errorf("got %x; want %x", got, tc.want)
			}
		})
	}
}

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestV3SchemaChange(t *testing.T) {
	str := func(ss ...string) []byte {
		var out []byte
		for _, s := range ss {
			out = append(out, byte(len(s)>>8), byte(len(s)))
			out = append(out, s...)
		}
		return out
	}
	fn := cat(str("SCHEMA_CHANGE", "CREATED", "FUNCTION", "ks", "f"), []byte{0, 1, 0, 3, 'i', 'n', 't'})
	if got, want := v3SchemaChange(fn), str("SCHEMA_CHANGE", "UPDATED", "KEYSPACE", "ks"); !bytes.Equal(got, want) {
		t.Errorf("FUNCTION: got %q; want %q", got, want)
	}
	table := str("SCHEMA_CHANGE", "CREATED", "TABLE", "ks", "t")
	if got := v3SchemaChange(table); !bytes.Equal(got, table) {
		t.Errorf("TABLE: got %q; want it unchanged", got)
	}
	ks := str("SCHEMA_CHANGE", "DROPPED", "KEYSPACE", "ks")
	if got := v3SchemaChange(ks); !bytes.Equal(got, ks) {
		t.Errorf("KEYSPACE: got %q; want it unchanged", got)
	}
	if got := v3SchemaChange([]byte{0, 9}); !bytes.Equal(got, []byte{0, 9}) {
		t.Errorf("truncated: got %q", got)
	}
}

// TestNoteLocalMergesPartialRows: what the proxy knows of the real
// system.local is filled in piece by piece; a partial SELECT (drivers read
// schema_version alone to check agreement) must not blank the rest, which
// the made-up system.peers rows show.
func TestNoteLocalMergesPartialRows(t *testing.T) {
	p := &Proxy{}
	p.noteLocal(systables.LocalInfo{ReleaseVersion: "5.0.4", DataCenter: "dc1", Rack: "r1"})
	v := [16]byte{1, 2, 3}
	p.noteLocal(systables.LocalInfo{SchemaVersion: v})
	p.noteLocal(systables.LocalInfo{Partitioner: "Murmur3Partitioner"})
	want := systables.LocalInfo{SchemaVersion: v, ReleaseVersion: "5.0.4", DataCenter: "dc1", Rack: "r1", Partitioner: "Murmur3Partitioner"}
	if got := *p.lastLocal.Load(); got != want {
		t.Errorf("after three partial rows: %+v, want %+v", got, want)
	}
	w := [16]byte{9}
	p.noteLocal(systables.LocalInfo{SchemaVersion: w, ReleaseVersion: "5.0.5"})
	want.SchemaVersion, want.ReleaseVersion = w, "5.0.5"
	if got := *p.lastLocal.Load(); got != want {
		t.Errorf("after a newer schema version and release: %+v, want %+v", got, want)
	}
}

// The adaptive limit's sample runs from the write to the backend, when the
// answer said when that was, not from the moment the request was queued.
func TestBackendLatencyStartsAtTheWrite(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	r := &request{sent: t0}
	if got := r.backendLatency(t0.Add(8 * time.Millisecond)); got != 8*time.Millisecond {
		t.Errorf("no write time: %s; want 8ms from the queueing", got)
	}
	r.written = t0.Add(5 * time.Millisecond)
	if got := r.backendLatency(t0.Add(8 * time.Millisecond)); got != 3*time.Millisecond {
		t.Errorf("written 5ms after queueing, answered at 8ms: %s; want 3ms", got)
	}
	// A write time from an earlier attempt (the request was sent again
	// since) is older than sent: ignored.
	r.sent = t0.Add(10 * time.Millisecond)
	if got := r.backendLatency(t0.Add(14 * time.Millisecond)); got != 4*time.Millisecond {
		t.Errorf("stale write time: %s; want 4ms from the last queueing", got)
	}
	// The answer arrived at 16ms and waited 4ms for the proxy to read it:
	// the sample ends at its arrival.
	r.arrived = t0.Add(16 * time.Millisecond)
	if got := r.backendLatency(t0.Add(20 * time.Millisecond)); got != 6*time.Millisecond {
		t.Errorf("arrived at 16ms, read at 20ms: %s; want 6ms", got)
	}
	// An arrival stamp of an earlier attempt is ignored.
	r.sent = t0.Add(30 * time.Millisecond)
	if got := r.backendLatency(t0.Add(35 * time.Millisecond)); got != 5*time.Millisecond {
		t.Errorf("stale arrival: %s; want 5ms", got)
	}
}

// What an answer tells the limiter: a PREPARE's or a USE's success is no
// latency sample (its time is the node's caches, not a statement's work),
// nor is a schema change's, while overload still counts; statements'
// rows and void answers are samples.
func TestOutcomeOf(t *testing.T) {
	kind := func(k int32) []byte { return []byte{0, 0, 0, byte(k)} } // the rest of the body matters not
	errBody := func(code int32) []byte {
		return []byte{byte(code >> 24), byte(code >> 16), byte(code >> 8), byte(code), 0, 1, 'x'}
	}
	for _, tc := range []struct {
		name string
		resp byte
		body []byte
		want limiter.Outcome
	}{
		{"EXECUTE answered (rows)", frame.OpResult, kind(frame.ResultRows), limiter.Success},
		{"INSERT answered (void)", frame.OpResult, kind(frame.ResultVoid), limiter.Success},
		{"PREPARE answered", frame.OpResult, kind(frame.ResultPrepared), limiter.Unsampled},
		{"USE answered", frame.OpResult, kind(frame.ResultSetKeyspace), limiter.Unsampled},
		{"schema change answered", frame.OpResult, kind(frame.ResultSchemaChange), limiter.Unsampled},
		{"PREPARE overloaded", frame.OpError, errBody(frame.ErrCodeOverloaded), limiter.Overloaded},
		{"EXECUTE read timeout", frame.OpError, errBody(frame.ErrCodeReadTimeout), limiter.Timeout},
		{"QUERY syntax error", frame.OpError, errBody(frame.ErrCodeSyntax), limiter.Failure},
	} {
		f := frame.AppendFrame(nil, frame.V4, true, 0, 1, tc.resp, tc.body)
		if got := outcomeOf(f); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
