package stmtstats

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

func TestHistogramQuantiles(t *testing.T) {
	var h histogram
	for i := 1; i <= 1000; i++ {
		h[bucketOf(time.Duration(i)*time.Millisecond)]++
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Millisecond}, {0.99, 990 * time.Millisecond}} {
		got := h.quantile(c.q, 1000, time.Second)
		if got < c.want || float64(got) > float64(c.want)*1.13 {
			t.Errorf("p%v = %v, want %v within 13%%", c.q*100, got, c.want)
		}
	}
	for _, d := range []time.Duration{0, time.Microsecond, 7 * time.Microsecond, 8 * time.Microsecond, time.Millisecond, time.Hour} {
		b := bucketOf(d)
		if b < 0 || b >= histBuckets {
			t.Fatalf("bucketOf(%v) = %d", d, b)
		}
		if d < 100*time.Second && bucketUpper(b) < d {
			t.Errorf("bucketUpper(bucketOf(%v)) = %v", d, bucketUpper(b))
		}
	}
}

// TestQueriesFold sends 100,000 distinct literal-laden QUERY strings, as an
// application concatenating its values would: they fold into a bounded
// number of fingerprints and the table stays within its bound.
func TestQueriesFold(t *testing.T) {
	tb := New(Config{MaxEntries: 100})
	shapes := []string{
		"SELECT * FROM shop.orders WHERE customer = %d AND day = '2024-%d'",
		"select * from shop.orders where customer=%d and day='x%d';",
		"UPDATE shop.stock SET qty = %d WHERE sku = 'sku-%d'",
		"SELECT * FROM shop.items WHERE id IN (%d, %d, 3, 4)",
		"INSERT INTO events (id, v) VALUES (%d, 0x%x) USING TTL 3600",
	}
	for i := range 100000 {
		q := fmt.Sprintf(shapes[i%len(shapes)], i, i*31)
		e := tb.Query([]byte(q), "shop")
		e.Record(&Sample{Now: time.Now(), Latency: time.Millisecond})
	}
	r := tb.Snapshot("calls", 0)
	if r.Entries != 4 { // the first two shapes are one statement
		for _, s := range r.Statements {
			t.Logf("%d %s", s.Calls, s.Text)
		}
		t.Fatalf("%d entries, want 4", r.Entries)
	}
	if r.Statements[0].Calls != 40000 || r.Statements[0].Text != "SELECT * FROM shop.orders WHERE customer = ? AND day = ?" {
		t.Errorf("top statement %+v", r.Statements[0])
	}
	var bytes int
	for i := range tb.texts {
		bytes += tb.texts[i].bytes
	}
	if bytes > tb.cfg.MaxEntries*1024 {
		t.Errorf("text cache holds %d bytes, over its bound %d", bytes, tb.cfg.MaxEntries*1024)
	}
}

func TestEvictionKeepsHeavyStatements(t *testing.T) {
	tb := New(Config{MaxEntries: 50})
	heavy := tb.Query([]byte("SELECT * FROM ks.big WHERE p = 1"), "ks")
	for range 1000 {
		heavy.Record(&Sample{Now: time.Now(), Latency: time.Second})
	}
	for i := range 5000 {
		// Distinct statements (table names), each called once.
		tb.Query([]byte(fmt.Sprintf("SELECT * FROM ks.t%d WHERE p = 1", i)), "ks").Record(&Sample{Now: time.Now()})
	}
	if n := tb.Len(); n != 50 {
		t.Fatalf("%d entries, want the bound 50", n)
	}
	if tb.Evictions() != 5001-50 {
		t.Errorf("%d evictions, want %d", tb.Evictions(), 5001-50)
	}
	if heavy.Evicted() {
		t.Fatal("the most used statement was evicted")
	}
	if r := tb.Snapshot("p99", 1); r.Statements[0].ID != heavy.ID() || r.Statements[0].Calls != 1000 {
		t.Errorf("top by p99: %+v", r.Statements[0])
	}
	// An evicted entry is found again by a new lookup.
	e := tb.Query([]byte("SELECT * FROM ks.t0 WHERE p = 1"), "ks")
	if e.Evicted() {
		t.Error("lookup returned an evicted entry")
	}
	tb.Reset()
	if tb.Len() != 0 || !heavy.Evicted() || tb.Evictions() != 0 {
		t.Error("Reset left entries")
	}
}

func TestPreparedAndBatch(t *testing.T) {
	tb := New(Config{})
	id := []byte{0xca, 0xfe}
	e := tb.Prepared(id, func() (string, string) { return "SELECT v FROM kv WHERE k = ?", "ks" })
	if e2 := tb.Prepared(id, nil); e2 != e {
		t.Fatal("second lookup made a new entry")
	}
	e.Record(&Sample{Now: time.Now(), Latency: 2 * time.Millisecond, Rows: 3, BytesIn: 40, BytesOut: 100})
	e.Record(&Sample{Now: time.Now(), Latency: time.Millisecond, Error: true, Code: 0x1200})
	e.Record(&Sample{Now: time.Now(), Latency: time.Millisecond, Error: true, Code: 0x1001, Rejected: true, Queued: time.Millisecond})
	s := tb.Snapshot("errors", 0).Statements[0]
	if s.ID != "cafe" || s.Keyspace != "ks" || s.Table != "kv" || s.Statement != "SELECT" || !s.Idempotent ||
		s.Calls != 2 || s.Errors != 2 || s.Rejected != 1 || s.Rows != 3 || s.BytesOut != 100 || s.Queued != 1 ||
		s.ErrorCodes["0x1200"] != 1 || s.ErrorCodes["0x1001"] != 1 {
		t.Errorf("%+v", s)
	}
	children := []BatchChild{{ID: id}, {Query: []byte("INSERT INTO ks.log (id) VALUES (7)")}}
	b := tb.Batch(1, "ks", children, func([]byte) string { return "SELECT v FROM kv WHERE k = ?" })
	children[1].Query = []byte("INSERT INTO ks.log (id) VALUES (8)")
	if b2 := tb.Batch(1, "ks", children, nil); b2 != b {
		t.Error("the same batch with other literals made a new entry")
	}
	if b.Text() != "BEGIN UNLOGGED BATCH SELECT v FROM kv WHERE k = ?; INSERT INTO ks.log (id) VALUES (?); APPLY BATCH" {
		t.Errorf("batch text %q", b.Text())
	}
}

// A batch of one statement repeated is one entry however many times the
// statement is in it (twice or more), as an application writing N rows at
// once sends it.
func TestBatchRunsFold(t *testing.T) {
	tb := New(Config{})
	id := []byte{0xca, 0xfe}
	other := []byte{0xbe, 0xef}
	describe := func(id []byte) string {
		if id[0] == 0xca {
			return "INSERT INTO ks.kv (k, v) VALUES (?, ?)"
		}
		return "UPDATE ks.c SET n = n + 1 WHERE k = ?"
	}
	batch := func(n int, q bool) *Entry {
		var children []BatchChild
		for i := range n {
			if q {
				children = append(children, BatchChild{Query: []byte(fmt.Sprintf("INSERT INTO ks.kv (k, v) VALUES (%d, 'v%d')", i, i))})
			} else {
				children = append(children, BatchChild{ID: id})
			}
		}
		return tb.Batch(1, "ks", append(children, BatchChild{ID: other}), describe)
	}
	for _, q := range []bool{false, true} {
		two := batch(2, q)
		for _, n := range []int{3, 10, 31, 40} {
			if e := batch(n, q); e != two {
				t.Errorf("query children %v: a batch of %d made a new entry %q, not %q", q, n, e.Text(), two.Text())
			}
		}
		if one := batch(1, q); one == two {
			t.Errorf("query children %v: a batch of one statement is the batch of several", q)
		}
		want := "BEGIN UNLOGGED BATCH INSERT INTO ks.kv (k, v) VALUES (?, ?); ... UPDATE ks.c SET n = n + 1 WHERE k = ?; APPLY BATCH"
		if two.Text() != want {
			t.Errorf("batch text %q, want %q", two.Text(), want)
		}
	}
}

// TestEntryMemory measures the heap an entry takes with a 100-byte text
// (the figure doc.go and docs/statements.md give).
func TestEntryMemory(t *testing.T) {
	const n = 5000
	tb := New(Config{MaxEntries: n})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range n {
		q := fmt.Sprintf("SELECT a, b, c, d FROM keyspace_name.table_name_%05d WHERE partition_key = 1 AND clustering > 2", i)
		tb.Query([]byte(q), "keyspace_name")
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := float64(after.HeapAlloc-before.HeapAlloc) / n
	t.Logf("%.0f bytes per entry (100-byte text, its text cache line included)", per)
	if per > 2600 {
		t.Errorf("%.0f bytes per entry, over the documented 2.5 KiB", per)
	}
	runtime.KeepAlive(tb)
}

func TestRecordAllocatesNothing(t *testing.T) {
	tb := New(Config{})
	q := []byte("SELECT v FROM ks.kv WHERE k = 1")
	s := &Sample{Now: time.Now(), Latency: time.Millisecond, Rows: 1}
	tb.Query(q, "ks")
	if n := testing.AllocsPerRun(1000, func() { tb.Query(q, "ks").Record(s) }); n != 0 {
		t.Errorf("a repeated query costs %v allocations", n)
	}
}

func BenchmarkQueryRecord(b *testing.B) {
	tb := New(Config{})
	q := []byte("SELECT v FROM ks.kv WHERE k = 1")
	s := &Sample{Now: time.Now(), Latency: time.Millisecond, Rows: 1}
	b.ReportAllocs()
	for b.Loop() {
		tb.Query(q, "ks").Record(s)
	}
}

func BenchmarkRecordParallel(b *testing.B) {
	tb := New(Config{})
	e := tb.Query([]byte("SELECT v FROM ks.kv WHERE k = 1"), "ks")
	b.RunParallel(func(pb *testing.PB) {
		s := &Sample{Now: time.Now(), Latency: time.Millisecond, Rows: 1}
		for pb.Next() {
			e.Record(s)
		}
	})
}
