package idempotency

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// corpusEntry is one line of testdata/classify.txt (its format is described
// at the top of that file).
type corpusEntry struct {
	line      int
	expect    string // "idem" or a Reason label
	kind      string
	ks, table string
	tableSet  bool // the TABLE column is not "-"
	ts        bool
	lo        int // 1: ListOverwrite expected, -1: not expected, 0: not checked
	types     []uint16
	markers   int // -1: not checked
	nocass    bool
	query     string
}

var typeNames = map[string]uint16{
	"custom": 0x0000, "ascii": 0x0001, "bigint": typeBigint, "blob": 0x0003, "boolean": 0x0004,
	"counter": typeCounter, "decimal": 0x0006, "double": 0x0007, "float": 0x0008, "int": typeInt,
	"timestamp": 0x000B, "uuid": 0x000C, "text": 0x000D, "varint": 0x000E, "timeuuid": 0x000F,
	"inet": 0x0010, "date": 0x0011, "time": 0x0012, "smallint": 0x0013, "tinyint": 0x0014,
	"duration": 0x0015, "list": typeList, "map": typeMap, "set": typeSet, "udt": 0x0030, "tuple": 0x0031,
}

func loadCorpus(t testing.TB) []corpusEntry {
	t.Helper()
	f, err := os.Open("testdata/classify.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []corpusEntry
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		parts := strings.SplitN(line, "|", 5)
		if len(parts) != 5 {
			t.Fatalf("classify.txt:%d: want 5 fields: %q", n, line)
		}
		e := corpusEntry{line: n, markers: -1}
		e.expect = strings.TrimSpace(parts[0])
		e.kind = strings.TrimSpace(parts[1])
		if tbl := strings.TrimSpace(parts[2]); tbl != "-" {
			e.tableSet = true
			if ks, table, ok := strings.Cut(tbl, "."); ok {
				e.ks, e.table = ks, table
			} else {
				e.table = tbl
			}
		}
		for _, fl := range strings.Fields(parts[3]) {
			switch {
			case fl == "ts":
				e.ts = true
			case fl == "nocass":
				e.nocass = true
			case fl == "lo":
				e.lo = 1
			case fl == "nolo":
				e.lo = -1
			case strings.HasPrefix(fl, "markers="):
				if e.markers, err = strconv.Atoi(fl[len("markers="):]); err != nil {
					t.Fatalf("classify.txt:%d: %v", n, err)
				}
			case strings.HasPrefix(fl, "types="):
				for _, name := range strings.Split(fl[len("types="):], ",") {
					id, ok := typeNames[name]
					if !ok {
						t.Fatalf("classify.txt:%d: unknown type %q", n, name)
					}
					e.types = append(e.types, id)
				}
			default:
				t.Fatalf("classify.txt:%d: unknown flag %q", n, fl)
			}
		}
		q := strings.TrimPrefix(parts[4], " ")
		q = strings.NewReplacer(`\n`, "\n", `\t`, "\t", `\r`, "\r").Replace(q)
		e.query = q
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func (e corpusEntry) String() string { return fmt.Sprintf("classify.txt:%d %q", e.line, e.query) }

func TestClassifyCorpus(t *testing.T) {
	corpus := loadCorpus(t)
	if len(corpus) < 400 {
		t.Fatalf("corpus has %d statements; want several hundred", len(corpus))
	}
	seen := map[string]bool{}
	for _, e := range corpus {
		st := Classify(e.query, "", e.types)
		got := "idem"
		if !st.Idempotent {
			got = st.Reason.String()
		}
		seen[got] = true
		if got != e.expect {
			t.Errorf("%s: verdict %s (detail %q); want %s", e, got, st.Detail, e.expect)
		}
		if st.Idempotent && st.Reason != ReasonNone {
			t.Errorf("%s: idempotent with reason %s", e, st.Reason)
		}
		if st.Kind.String() != e.kind {
			t.Errorf("%s: kind %s; want %s", e, st.Kind, e.kind)
		}
		if e.expect != "unparsable" {
			if st.Keyspace != e.ks || st.Table != e.table {
				t.Errorf("%s: keyspace.table %q.%q; want %q.%q", e, st.Keyspace, st.Table, e.ks, e.table)
			}
		}
		if st.UsingTimestamp != e.ts {
			t.Errorf("%s: UsingTimestamp %v; want %v", e, st.UsingTimestamp, e.ts)
		}
		if e.lo != 0 && st.ListOverwrite != (e.lo > 0) {
			t.Errorf("%s: ListOverwrite %v", e, st.ListOverwrite)
		}
		if e.markers >= 0 && st.Markers != e.markers {
			t.Errorf("%s: %d markers; want %d", e, st.Markers, e.markers)
		}
		if e.types != nil && st.Markers != len(e.types) && e.expect != "unknown_bind_type" {
			t.Errorf("%s: %d markers but %d types listed", e, st.Markers, len(e.types))
		}
	}
	// Every reason Classify can give has an example.
	for r := ReasonNone + 1; r < numReasons; r++ {
		switch r {
		case ReasonOverride, ReasonPayload, ReasonSerialRead:
			continue // not from Classify alone
		}
		if !seen[r.String()] {
			t.Errorf("no corpus statement is classified %s", r)
		}
	}
}

// TestClassifyDefaultKeyspace: the keyspace passed in is reported when the
// statement names none, and only then.
func TestClassifyDefaultKeyspace(t *testing.T) {
	for _, tc := range []struct{ q, ks, table string }{
		{"SELECT * FROM t", "app", "t"},
		{"SELECT * FROM other.t", "other", "t"},
		{"INSERT INTO t (k) VALUES (1)", "app", "t"},
		{"UPDATE other.t SET v = 1 WHERE k = 1", "other", "t"},
		{"DELETE FROM t WHERE k = 1", "app", "t"},
		{"BEGIN BATCH INSERT INTO t (k) VALUES (1); INSERT INTO app.t (k) VALUES (2); APPLY BATCH", "app", "t"},
		{"BEGIN BATCH INSERT INTO t (k) VALUES (1); INSERT INTO other.t (k) VALUES (2); APPLY BATCH", "", ""},
	} {
		st := Classify(tc.q, "app", nil)
		if st.Keyspace != tc.ks || st.Table != tc.table {
			t.Errorf("%q: %q.%q; want %q.%q", tc.q, st.Keyspace, st.Table, tc.ks, tc.table)
		}
	}
}

func TestCombineBatch(t *testing.T) {
	idem := Verdict{Idempotent: true}
	lwt := Verdict{Reason: ReasonLWT, Detail: "IF"}
	ctr := Verdict{Reason: ReasonCounter}
	for _, tc := range []struct {
		typ      byte
		children []Verdict
		want     Verdict
	}{
		{BatchLogged, nil, idem},
		{BatchLogged, []Verdict{idem, idem}, idem},
		{BatchUnlogged, []Verdict{idem, idem, idem}, idem},
		{BatchLogged, []Verdict{idem, lwt, ctr}, lwt},
		{BatchUnlogged, []Verdict{ctr, idem}, ctr},
		{BatchCounter, []Verdict{idem}, Verdict{Reason: ReasonCounterBatch}},
		{BatchCounter, nil, Verdict{Reason: ReasonCounterBatch}},
		{3, []Verdict{idem}, Verdict{Reason: ReasonUnparsable, Detail: "batch type"}},
	} {
		if got := CombineBatch(tc.typ, tc.children...); got != tc.want {
			t.Errorf("CombineBatch(%d, %v) = %+v; want %+v", tc.typ, tc.children, got, tc.want)
		}
	}
}

func TestConsistencyIdempotent(t *testing.T) {
	for cl := uint16(0); cl <= 0x000A; cl++ {
		want := cl != 0x0008 && cl != 0x0009
		if got := ConsistencyIdempotent(cl); got != want {
			t.Errorf("ConsistencyIdempotent(%#04x) = %v; want %v", cl, got, want)
		}
	}
}

func TestPayloadVerdict(t *testing.T) {
	for _, tc := range []struct {
		in     string
		idem   bool
		wantOK bool
	}{
		{"true", true, true}, {"TRUE", true, true}, {"True", true, true},
		{"false", false, true}, {"FALSE", false, true},
		{"", false, false}, {"1", false, false}, {"yes", false, false}, {"true ", false, false}, {"tru", false, false},
		{"4rue", false, false},
	} {
		v, ok := PayloadVerdict([]byte(tc.in))
		if ok != tc.wantOK || (ok && (v.Idempotent != tc.idem || v.Reason != ReasonPayload)) {
			t.Errorf("PayloadVerdict(%q) = %+v, %v; want idempotent %v, ok %v", tc.in, v, ok, tc.idem, tc.wantOK)
		}
	}
}

// TestBindTypesMismatch: types that do not line up with the markers are
// ignored rather than applied to the wrong marker.
func TestBindTypesMismatch(t *testing.T) {
	q := "UPDATE ks.t SET s = s + ? WHERE k = ?"
	if st := Classify(q, "", []uint16{typeSet, typeInt}); !st.Idempotent {
		t.Fatalf("with aligned types: %+v", st)
	}
	for _, types := range [][]uint16{{typeSet}, {typeSet, typeInt, typeInt}, {}} {
		if st := Classify(q, "", types); st.Idempotent || st.Reason != ReasonUnknownType {
			t.Errorf("types %v: %+v; want not idempotent (unknown_bind_type)", types, st)
		}
	}
}

func TestKindAndReasonStrings(t *testing.T) {
	if Kind(200).String() != "other" || Reason(200).String() != "unknown" {
		t.Error("out-of-range Kind or Reason String")
	}
	labels := map[string]bool{}
	for r := Reason(0); r < numReasons; r++ {
		s := r.String()
		if s == "" || labels[s] || strings.ContainsAny(s, " -") {
			t.Errorf("reason %d label %q: empty, duplicate or not snake_case", r, s)
		}
		labels[s] = true
	}
}

// TestClassifyAllocations: classification runs once per PREPARE, but a
// typical statement should cost a handful of allocations, not one per
// token.
func TestClassifyAllocations(t *testing.T) {
	for _, tc := range []struct {
		q   string
		max float64
	}{
		{"SELECT k, v FROM ks.t WHERE k = ?", 0},
		{"INSERT INTO ks.t (k, v, w) VALUES (?, ?, ?) USING TTL ?", 0},
		{"UPDATE ks.t SET s = s + ?, v = ? WHERE k = ? IF EXISTS", 0},
		{"UPDATE Ks.T SET S = S + ? WHERE K = ?", 2},                      // lower-casing the names
		{strings.Repeat("INSERT INTO ks.t (k, v) VALUES (?, ?);", 40), 4}, // the token slice grows
	} {
		q := tc.q
		if strings.HasPrefix(q, "INSERT INTO ks.t (k, v) VALUES (?, ?);") {
			q = "BEGIN BATCH " + q + " APPLY BATCH"
		}
		n := testing.AllocsPerRun(50, func() { Classify(q, "", nil) })
		if n > tc.max {
			t.Errorf("%.40q...: %.0f allocations; want at most %.0f", q, n, tc.max)
		}
	}
}
