package integration

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"math/big"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocql/gocql"
	"gopkg.in/inf.v0"

	"github.com/cqlgate/cqlgate/pkg/frame"
)

// typesRow is one row of it_basic.types as gocql scans it.
type typesRow struct {
	A   string
	Bi  int64
	Bl  []byte
	Bo  bool
	D   time.Time
	Dec *inf.Dec
	Dbl float64
	Du  gocql.Duration
	F   float32
	I   net.IP
	Si  int16
	Tx  string
	Tm  time.Duration
	Ts  time.Time
	Tu  gocql.UUID
	Ti  int8
	U   gocql.UUID
	Vi  *big.Int
}

const typesColumns = "a, bi, bl, bo, d, dec, dbl, du, f, i, si, tx, tm, ts, tu, ti, u, vi"

func (r *typesRow) dests() []any {
	return []any{&r.A, &r.Bi, &r.Bl, &r.Bo, &r.D, &r.Dec, &r.Dbl, &r.Du, &r.F, &r.I, &r.Si, &r.Tx, &r.Tm, &r.Ts, &r.Tu, &r.Ti, &r.U, &r.Vi}
}

func (r *typesRow) values() []any {
	return []any{r.A, r.Bi, r.Bl, r.Bo, r.D, r.Dec, r.Dbl, r.Du, r.F, r.I, r.Si, r.Tx, r.Tm, r.Ts, r.Tu, r.Ti, r.U, r.Vi}
}

// diff lists the fields where got differs from want.
func (want *typesRow) diff(got *typesRow) []string {
	var d []string
	check := func(name string, eq bool, g, w any) {
		if !eq {
			d = append(d, fmt.Sprintf("%s: got %v, want %v", name, g, w))
		}
	}
	check("ascii", got.A == want.A, got.A, want.A)
	check("bigint", got.Bi == want.Bi, got.Bi, want.Bi)
	check("blob", bytes.Equal(got.Bl, want.Bl), got.Bl, want.Bl)
	check("boolean", got.Bo == want.Bo, got.Bo, want.Bo)
	check("date", got.D.Equal(want.D), got.D, want.D)
	check("decimal", got.Dec != nil && got.Dec.Cmp(want.Dec) == 0, got.Dec, want.Dec)
	check("double", got.Dbl == want.Dbl, got.Dbl, want.Dbl)
	check("duration", got.Du == want.Du, got.Du, want.Du)
	check("float", got.F == want.F, got.F, want.F)
	check("inet", got.I.Equal(want.I), got.I, want.I)
	check("smallint", got.Si == want.Si, got.Si, want.Si)
	check("text", got.Tx == want.Tx, got.Tx, want.Tx)
	check("time", got.Tm == want.Tm, got.Tm, want.Tm)
	check("timestamp", got.Ts.Equal(want.Ts), got.Ts, want.Ts)
	check("timeuuid", got.Tu == want.Tu, got.Tu, want.Tu)
	check("tinyint", got.Ti == want.Ti, got.Ti, want.Ti)
	check("uuid", got.U == want.U, got.U, want.U)
	check("varint", got.Vi != nil && got.Vi.Cmp(want.Vi) == 0, got.Vi, want.Vi)
	return d
}

// TestSimpleAndPreparedStatements writes a row with every scalar type as a
// simple QUERY with literal values (over a raw connection: gocql prepares
// every SELECT/INSERT/UPDATE/DELETE, even without bound values) and the
// same row with gocql's prepared INSERT, then reads both back with gocql's
// prepared SELECT and with a simple QUERY, which must return identical cells.
func TestSimpleAndPreparedStatements(t *testing.T) {
	c := singleCluster.Get(t)
	p := startProxy(t, c.Addrs, nil)
	s := proxySession(t, p, nil)
	recreateKeyspace(t, s, "it_basic", 1,
		`CREATE TABLE it_basic.types (k int PRIMARY KEY, a ascii, bi bigint, bl blob, bo boolean, d date,
		  dec decimal, dbl double, du duration, f float, i inet, si smallint, tx text, tm time, ts timestamp,
		  tu timeuuid, ti tinyint, u uuid, vi varint)`)

	vi, _ := new(big.Int).SetString("123456789012345678901234567890", 10)
	tu, _ := gocql.ParseUUID("d2177dd0-eaa2-11de-a572-001b779c76e3")
	u, _ := gocql.ParseUUID("5ab7c3e9-33b5-4f21-9b4c-8b1a6c0b1f5d")
	want := &typesRow{
		A: "ascii", Bi: 9223372036854775807, Bl: []byte{0xca, 0xfe, 0xba, 0xbe}, Bo: true,
		D: time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC), Dec: inf.NewDec(123456, 3), Dbl: 3.5,
		Du: gocql.Duration{Months: 1, Days: 2, Nanoseconds: 3_000_000_000}, F: 1.25,
		I: net.ParseIP("192.168.1.1"), Si: 32767, Tx: "héllo ✓ 世界",
		Tm: 13*time.Hour + 14*time.Minute + 15*time.Second + 123456789,
		Ts: time.Date(2024, 2, 29, 12, 34, 56, 789e6, time.UTC), Tu: tu, Ti: -128, U: u, Vi: vi,
	}

	before := metricSeries(t, p.Reg, "cqlgate_requests_total")

	// Simple statement: a QUERY with literal values.
	raw := dialRaw(t, p.Addr, 4)
	raw.startup(nil)
	resp := raw.query(1, `INSERT INTO it_basic.types (k, `+typesColumns+`) VALUES (1, 'ascii', 9223372036854775807, 0xcafebabe, true,
		'2024-02-29', 123.456, 3.5, 1mo2d3s, 1.25, '192.168.1.1', 32767, 'héllo ✓ 世界', '13:14:15.123456789',
		'2024-02-29T12:34:56.789Z', d2177dd0-eaa2-11de-a572-001b779c76e3, -128, 5ab7c3e9-33b5-4f21-9b4c-8b1a6c0b1f5d,
		123456789012345678901234567890)`)
	if frame.Opcode(resp) != frame.OpResult {
		t.Fatalf("simple INSERT: got %s, want RESULT", describe(resp))
	}
	// Prepared statement: bound values.
	args := append([]any{2}, want.values()...)
	mustExec(t, s, `INSERT INTO it_basic.types (k, `+typesColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, args...)

	for _, k := range []int{1, 2} {
		var got typesRow
		if err := s.Query("SELECT "+typesColumns+" FROM it_basic.types WHERE k = ?", k).Scan(got.dests()...); err != nil {
			t.Fatalf("prepared SELECT k=%d: %v", k, err)
		}
		if d := want.diff(&got); len(d) > 0 {
			t.Errorf("row %d read with a prepared SELECT differs:\n  %s", k, strings.Join(d, "\n  "))
		}
	}
	rs := raw.mustRows("SELECT k, " + typesColumns + " FROM it_basic.types WHERE k IN (1, 2)")
	if len(rs.rows) != 2 || len(rs.cols) != 19 {
		t.Fatalf("simple SELECT: got %d rows of %d columns, want 2 rows of 19", len(rs.rows), len(rs.cols))
	}
	for j, col := range rs.cols[1:] {
		a, b := rs.rows[0][j+1], rs.rows[1][j+1]
		if a == nil || !bytes.Equal(a, b) {
			t.Errorf("simple SELECT: column %s is %x in the row written by a simple INSERT and %x in the one written by a prepared INSERT, want equal and not null", col, a, b)
		}
	}

	// Nulls and a missing row.
	mustExec(t, s, "INSERT INTO it_basic.types (k) VALUES (3)")
	var txt *string
	var bi *int64
	if err := s.Query("SELECT tx, bi FROM it_basic.types WHERE k = ?", 3).Scan(&txt, &bi); err != nil {
		t.Fatalf("SELECT k=3: %v", err)
	}
	if txt != nil || bi != nil {
		t.Errorf("null columns: got tx=%v bi=%v, want nil, nil", txt, bi)
	}
	if err := s.Query("SELECT tx FROM it_basic.types WHERE k = ?", 404).Scan(&txt); !errors.Is(err, gocql.ErrNotFound) {
		t.Errorf("SELECT of a missing row: got %v, want gocql.ErrNotFound", err)
	}

	// Both paths really went through the proxy as the opcodes they are.
	after := metricSeries(t, p.Reg, "cqlgate_requests_total")
	for op, atLeast := range map[string]float64{"QUERY": 2, "PREPARE": 2, "EXECUTE": 4} {
		key := "opcode=" + op
		if got := after[key] - before[key]; got < atLeast {
			t.Errorf("cqlgate_requests_total{opcode=%q} grew by %v, want at least %v", op, got, atLeast)
		}
	}
}

// TestPaging reads 5,000 rows of one partition and 5,000 single-row
// partitions in pages of 100, with gocql's automatic paging and with manual
// paging states, and checks every row comes back exactly once.
func TestPaging(t *testing.T) {
	const n, pageSize = 5000, 100
	c := singleCluster.Get(t)
	p := startProxy(t, c.Addrs, nil)
	s := proxySession(t, p, nil)
	recreateKeyspace(t, s, "it_page", 1,
		"CREATE TABLE it_page.wide (p int, c int, v text, PRIMARY KEY (p, c))",
		"CREATE TABLE it_page.spread (k int PRIMARY KEY, v int)")

	// One partition, written in unlogged batches of 100.
	for start := 0; start < n; start += 100 {
		b := s.NewBatch(gocql.UnloggedBatch)
		for c := start; c < start+100; c++ {
			b.Query("INSERT INTO it_page.wide (p, c, v) VALUES (0, ?, ?)", c, fmt.Sprintf("value-%d", c))
		}
		if err := s.ExecuteBatch(b); err != nil {
			t.Fatalf("batch insert at %d: %v", start, err)
		}
	}
	// n partitions, written by 16 workers.
	var wg sync.WaitGroup
	errs := make(chan error, n)
	work := make(chan int)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range work {
				if err := s.Query("INSERT INTO it_page.spread (k, v) VALUES (?, ?)", k, k*3).Exec(); err != nil {
					errs <- fmt.Errorf("insert k=%d: %w", k, err)
				}
			}
		}()
	}
	for k := 0; k < n; k++ {
		work <- k
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	t.Run("AutomaticOnePartition", func(t *testing.T) {
		iter := s.Query("SELECT c, v FROM it_page.wide WHERE p = 0").PageSize(pageSize).Iter()
		var c int
		var v string
		next := 0
		for iter.Scan(&c, &v) {
			if c != next || v != fmt.Sprintf("value-%d", c) {
				t.Fatalf("row %d: got (c=%d, v=%q), want (c=%d, v=%q)", next, c, v, next, fmt.Sprintf("value-%d", next))
			}
			next++
		}
		if err := iter.Close(); err != nil {
			t.Fatalf("iterating: %v", err)
		}
		if next != n {
			t.Fatalf("got %d rows, want %d", next, n)
		}
	})

	t.Run("ManualOnePartition", func(t *testing.T) {
		var state []byte
		seen := map[int]bool{}
		pages := 0
		for i := 0; i < n/pageSize+5; i++ {
			iter := s.Query("SELECT c FROM it_page.wide WHERE p = 0").PageSize(pageSize).PageState(state).Iter()
			rows := 0
			var c int
			for iter.Scan(&c) {
				if seen[c] {
					t.Fatalf("page %d: row c=%d returned twice", pages, c)
				}
				seen[c] = true
				rows++
			}
			state = iter.PageState()
			if err := iter.Close(); err != nil {
				t.Fatalf("page %d: %v", pages, err)
			}
			if rows > pageSize {
				t.Fatalf("page %d: got %d rows, want at most %d", pages, rows, pageSize)
			}
			if rows > 0 {
				pages++
			}
			if len(state) == 0 {
				break
			}
		}
		if len(state) != 0 {
			t.Fatalf("still a paging state after %d pages", pages)
		}
		if len(seen) != n || pages != n/pageSize {
			t.Fatalf("got %d distinct rows in %d non-empty pages, want %d rows in %d pages", len(seen), pages, n, n/pageSize)
		}
	})

	t.Run("AutomaticAcrossPartitions", func(t *testing.T) {
		iter := s.Query("SELECT k, v FROM it_page.spread").PageSize(pageSize).Iter()
		seen := make(map[int]bool, n)
		var k, v int
		rows := 0
		for iter.Scan(&k, &v) {
			rows++
			if seen[k] {
				t.Fatalf("k=%d returned twice", k)
			}
			if v != 3*k {
				t.Fatalf("k=%d: got v=%d, want %d", k, v, 3*k)
			}
			seen[k] = true
		}
		if err := iter.Close(); err != nil {
			t.Fatalf("iterating: %v", err)
		}
		if rows != n || len(seen) != n {
			t.Fatalf("got %d rows (%d distinct), want %d", rows, len(seen), n)
		}
		for k := 0; k < n; k++ {
			if !seen[k] {
				t.Fatalf("k=%d missing", k)
			}
		}
	})
}

// TestBatchesLWTAndTypes covers BATCH, lightweight transactions, counters,
// collections, UDTs, tuples and 1 MiB blobs. The parts share a keyspace
// and a session, each on tables or keys of its own: none depends on another.
func TestBatchesLWTAndTypes(t *testing.T) {
	c := singleCluster.Get(t)
	p := startProxy(t, c.Addrs, nil)
	s := proxySession(t, p, nil)
	recreateKeyspace(t, s, "it_types", 1,
		"CREATE TABLE it_types.kv (k int PRIMARY KEY, v text)",
		"CREATE TABLE it_types.counters (k int PRIMARY KEY, c counter)",
		"CREATE TABLE it_types.colls (k int PRIMARY KEY, l list<int>, s set<text>, m map<text, int>, fl frozen<list<frozen<map<text, int>>>>)",
		"CREATE TYPE it_types.address (street text, zip int, tags frozen<set<text>>)",
		"CREATE TABLE it_types.udts (k int PRIMARY KEY, a address, fa frozen<address>)",
		"CREATE TABLE it_types.tuples (k int PRIMARY KEY, t tuple<int, text, double>)",
		"CREATE TABLE it_types.blobs (k int PRIMARY KEY, b blob)")

	t.Run("LoggedBatch", func(t *testing.T) { testBatch(t, s, gocql.LoggedBatch, "LoggedBatch", 100) })
	t.Run("UnloggedBatch", func(t *testing.T) { testBatch(t, s, gocql.UnloggedBatch, "UnloggedBatch", 200) })
	t.Run("LWT", func(t *testing.T) { testLWT(t, s) })
	t.Run("Counters", func(t *testing.T) { testCounters(t, s) })
	t.Run("Collections", func(t *testing.T) { testCollections(t, s) })
	t.Run("UDT", func(t *testing.T) { testUDT(t, s) })
	t.Run("Tuple", func(t *testing.T) { testTuple(t, s) })
	t.Run("LargeBlobs", func(t *testing.T) { testLargeBlobs(t, s) })
}

// readKV reads it_types.kv's value for k, and whether the row exists.
func readKV(t *testing.T, s *gocql.Session, k int) (string, bool) {
	t.Helper()
	var v string
	err := s.Query("SELECT v FROM it_types.kv WHERE k = ?", k).Scan(&v)
	if errors.Is(err, gocql.ErrNotFound) {
		return "", false
	}
	if err != nil {
		t.Fatalf("read k=%d: %v", k, err)
	}
	return v, true
}

// testBatch runs a batch of type typ mixing prepared and unprepared
// statements, inserts and a delete, on the keys from base, and reads back
// what it wrote.
func testBatch(t *testing.T, s *gocql.Session, typ gocql.BatchType, name string, base int) {
	b := s.NewBatch(typ)
	for i := 0; i < 10; i++ {
		b.Query("INSERT INTO it_types.kv (k, v) VALUES (?, ?)", base+i, fmt.Sprintf("%s-%d", name, i)) // prepared
	}
	b.Query(fmt.Sprintf("INSERT INTO it_types.kv (k, v) VALUES (%d, 'literal')", base+10)) // not prepared
	b.Query("DELETE FROM it_types.kv WHERE k = ?", base+3)
	if err := s.ExecuteBatch(b); err != nil {
		t.Fatalf("batch: %v", err)
	}
	for i := 0; i <= 10; i++ {
		want, wantOK := fmt.Sprintf("%s-%d", name, i), true
		switch i {
		case 3:
			want, wantOK = "", false
		case 10:
			want = "literal"
		}
		got, ok := readKV(t, s, base+i)
		if got != want || ok != wantOK {
			t.Errorf("k=%d: got (%q, found=%v), want (%q, found=%v)", base+i, got, ok, want, wantOK)
		}
	}
}

// testLWT: conditional INSERT, UPDATE and BATCH, applied or not, each step
// building on the one before.
func testLWT(t *testing.T, s *gocql.Session) {
	var v string
	applied, err := s.Query("INSERT INTO it_types.kv (k, v) VALUES (?, ?) IF NOT EXISTS", 1, "first").ScanCAS(&v)
	if err != nil || !applied {
		t.Fatalf("first INSERT IF NOT EXISTS: applied=%v err=%v, want applied", applied, err)
	}
	existing := map[string]any{}
	applied, err = s.Query("INSERT INTO it_types.kv (k, v) VALUES (?, ?) IF NOT EXISTS", 1, "second").MapScanCAS(existing)
	if err != nil || applied {
		t.Fatalf("second INSERT IF NOT EXISTS: applied=%v err=%v, want not applied", applied, err)
	}
	if existing["v"] != "first" {
		t.Errorf("not-applied INSERT returned v=%v, want the existing %q", existing["v"], "first")
	}
	applied, err = s.Query("UPDATE it_types.kv SET v = ? WHERE k = ? IF v = ?", "third", 1, "wrong").ScanCAS(&v)
	if err != nil || applied || v != "first" {
		t.Fatalf("UPDATE IF with a false condition: applied=%v v=%q err=%v, want not applied, v=%q", applied, v, err, "first")
	}
	applied, err = s.Query("UPDATE it_types.kv SET v = ? WHERE k = ? IF v = ?", "third", 1, "first").ScanCAS(&v)
	if err != nil || !applied {
		t.Fatalf("UPDATE IF with a true condition: applied=%v err=%v, want applied", applied, err)
	}
	if got, _ := readKV(t, s, 1); got != "third" {
		t.Errorf("after the conditional UPDATE: got v=%q, want %q", got, "third")
	}
	// A conditional batch.
	b := s.NewBatch(gocql.LoggedBatch)
	b.Query("UPDATE it_types.kv SET v = ? WHERE k = ? IF v = ?", "fourth", 1, "third")
	applied, iter, err := s.ExecuteBatchCAS(b)
	if err == nil && iter != nil {
		err = iter.Close()
	}
	if err != nil || !applied {
		t.Fatalf("conditional batch: applied=%v err=%v, want applied", applied, err)
	}
	if got, _ := readKV(t, s, 1); got != "fourth" {
		t.Errorf("after the conditional batch: got v=%q, want %q", got, "fourth")
	}
}

// testCounters: counter updates, alone and in a counter batch.
func testCounters(t *testing.T, s *gocql.Session) {
	for i := 0; i < 3; i++ {
		mustExec(t, s, "UPDATE it_types.counters SET c = c + ? WHERE k = ?", int64(5), 1)
	}
	mustExec(t, s, "UPDATE it_types.counters SET c = c - 2 WHERE k = 1")
	b := s.NewBatch(gocql.CounterBatch)
	b.Query("UPDATE it_types.counters SET c = c + ? WHERE k = ?", int64(100), 1)
	b.Query("UPDATE it_types.counters SET c = c + ? WHERE k = ?", int64(7), 2)
	if err := s.ExecuteBatch(b); err != nil {
		t.Fatalf("counter batch: %v", err)
	}
	for k, want := range map[int]int64{1: 113, 2: 7} {
		var got int64
		if err := s.Query("SELECT c FROM it_types.counters WHERE k = ?", k).Scan(&got); err != nil {
			t.Fatalf("read counter %d: %v", k, err)
		}
		if got != want {
			t.Errorf("counter k=%d: got %d, want %d", k, got, want)
		}
	}
}

// testCollections: lists, sets, maps and a frozen list of maps, written
// whole and updated in place.
func testCollections(t *testing.T, s *gocql.Session) {
	fl := []map[string]int{{"a": 1}, {"b": 2, "c": 3}}
	mustExec(t, s, "INSERT INTO it_types.colls (k, l, s, m, fl) VALUES (?, ?, ?, ?, ?)",
		1, []int{1, 2, 3}, []string{"x", "y"}, map[string]int{"one": 1}, fl)
	mustExec(t, s, "UPDATE it_types.colls SET l = l + ?, s = s + ?, m = m + ? WHERE k = ?",
		[]int{4}, []string{"z"}, map[string]int{"two": 2}, 1)
	mustExec(t, s, "UPDATE it_types.colls SET l = [0] + l, s = s - {'x'}, m['one'] = 11 WHERE k = 1")
	var l []int
	var set []string
	var m map[string]int
	var gotFL []map[string]int
	if err := s.Query("SELECT l, s, m, fl FROM it_types.colls WHERE k = ?", 1).Scan(&l, &set, &m, &gotFL); err != nil {
		t.Fatalf("read collections: %v", err)
	}
	if fmt.Sprint(l) != "[0 1 2 3 4]" {
		t.Errorf("list: got %v, want [0 1 2 3 4]", l)
	}
	if fmt.Sprint(set) != "[y z]" {
		t.Errorf("set: got %v, want [y z]", set)
	}
	if len(m) != 2 || m["one"] != 11 || m["two"] != 2 {
		t.Errorf("map: got %v, want map[one:11 two:2]", m)
	}
	if fmt.Sprint(gotFL) != fmt.Sprint(fl) {
		t.Errorf("frozen list of maps: got %v, want %v", gotFL, fl)
	}
}

// testUDT: a UDT column and a frozen one, with a field updated in place.
func testUDT(t *testing.T, s *gocql.Session) {
	type address struct {
		Street string   `cql:"street"`
		Zip    int      `cql:"zip"`
		Tags   []string `cql:"tags"`
	}
	a := address{Street: "1 Main St", Zip: 12345, Tags: []string{"home", "work"}}
	fa := address{Street: "2 Frozen Rd", Zip: 54321, Tags: []string{"cold"}}
	mustExec(t, s, "INSERT INTO it_types.udts (k, a, fa) VALUES (?, ?, ?)", 1, a, fa)
	mustExec(t, s, "UPDATE it_types.udts SET a.zip = ? WHERE k = ?", 99999, 1)
	var gotA, gotFA address
	if err := s.Query("SELECT a, fa FROM it_types.udts WHERE k = ?", 1).Scan(&gotA, &gotFA); err != nil {
		t.Fatalf("read UDTs: %v", err)
	}
	a.Zip = 99999
	if fmt.Sprint(gotA) != fmt.Sprint(a) || fmt.Sprint(gotFA) != fmt.Sprint(fa) {
		t.Errorf("UDTs: got %+v and %+v, want %+v and %+v", gotA, gotFA, a, fa)
	}
}

// testTuple: a tuple bound element by element and as a literal.
func testTuple(t *testing.T, s *gocql.Session) {
	// gocql 1.7.0 cannot bind a whole tuple (it counts tuple elements as
	// bind markers), so bind its elements; it scans a tuple column into
	// one destination per element.
	mustExec(t, s, "INSERT INTO it_types.tuples (k, t) VALUES (?, (?, ?, ?))", 1, 42, "forty-two", 4.2)
	mustExec(t, s, "INSERT INTO it_types.tuples (k, t) VALUES (2, (7, 'seven', 0.7))")
	for k, want := range map[int]string{1: "42 forty-two 4.2", 2: "7 seven 0.7"} {
		var i int
		var txt string
		var f float64
		if err := s.Query("SELECT t FROM it_types.tuples WHERE k = ?", k).Scan(&i, &txt, &f); err != nil {
			t.Fatalf("read tuple %d: %v", k, err)
		}
		if got := fmt.Sprint(i, " ", txt, " ", f); got != want {
			t.Errorf("tuple k=%d: got %q, want %q", k, got, want)
		}
	}
}

// testLargeBlobs: four 1 MiB blobs, read one by one and in one 4 MiB
// response.
func testLargeBlobs(t *testing.T, s *gocql.Session) {
	blobs := make([][]byte, 4)
	for i := range blobs {
		blobs[i] = make([]byte, 1<<20)
		if _, err := rand.Read(blobs[i]); err != nil {
			t.Fatal(err)
		}
		mustExec(t, s, "INSERT INTO it_types.blobs (k, b) VALUES (?, ?)", i, blobs[i])
	}
	for i, want := range blobs {
		var got []byte
		if err := s.Query("SELECT b FROM it_types.blobs WHERE k = ?", i).Scan(&got); err != nil {
			t.Fatalf("read blob %d: %v", i, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("blob %d: got %d bytes, not byte-identical to the %d written", i, len(got), len(want))
		}
	}
	// All four in one 4 MiB response.
	iter := s.Query("SELECT k, b FROM it_types.blobs").Iter()
	var k int
	var got []byte
	n := 0
	for iter.Scan(&k, &got) {
		n++
		if k < 0 || k >= len(blobs) || !bytes.Equal(got, blobs[k]) {
			t.Errorf("full scan: blob k=%d (%d bytes) does not match what was written", k, len(got))
		}
	}
	if err := iter.Close(); err != nil {
		t.Fatalf("full scan: %v", err)
	}
	if n != len(blobs) {
		t.Errorf("full scan: got %d rows, want %d", n, len(blobs))
	}
}

// TestConcurrentRequests fires 2,000 requests at once from one session
// (then 2,000 reads), all of which must succeed.
func TestConcurrentRequests(t *testing.T) {
	const n = 2000
	c := singleCluster.Get(t)
	p := startProxy(t, c.Addrs, nil)
	s := proxySession(t, p, nil)
	recreateKeyspace(t, s, "it_conc", 1, "CREATE TABLE it_conc.kv (k int PRIMARY KEY, v int)")
	// Prepare once up front so the burst is EXECUTEs, not 2,000 PREPAREs racing.
	mustExec(t, s, "INSERT INTO it_conc.kv (k, v) VALUES (?, ?)", -1, -1)
	var v int
	if err := s.Query("SELECT v FROM it_conc.kv WHERE k = ?", -1).Scan(&v); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var failures []string
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, fmt.Sprintf(format, args...))
	}
	for _, phase := range []string{"write", "read"} {
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if phase == "write" {
					if err := s.Query("INSERT INTO it_conc.kv (k, v) VALUES (?, ?)", i, i*7).Exec(); err != nil {
						fail("insert %d: %v", i, err)
					}
					return
				}
				var got int
				if err := s.Query("SELECT v FROM it_conc.kv WHERE k = ?", i).Scan(&got); err != nil {
					fail("select %d: %v", i, err)
				} else if got != i*7 {
					fail("select %d: got v=%d, want %d", i, got, i*7)
				}
			}()
		}
		began := time.Now()
		close(start)
		wg.Wait()
		t.Logf("%d concurrent %ss in %s", n, phase, time.Since(began).Round(time.Millisecond))
	}
	if len(failures) > 0 {
		t.Fatalf("%d of %d requests failed; first: %s", len(failures), 2*n, strings.Join(failures[:min(5, len(failures))], "; "))
	}
	var count int
	if err := s.Query("SELECT count(*) FROM it_conc.kv").Scan(&count); err != nil {
		t.Fatal(err)
	}
	if count != n+1 {
		t.Fatalf("count(*): got %d, want %d", count, n+1)
	}
}

// TestErrorCodes checks that Cassandra's errors reach the client with their
// codes and details, that they are not counted as the proxy's own, and that
// the session keeps working.
func TestErrorCodes(t *testing.T) {
	c := singleCluster.Get(t)
	p := startProxy(t, c.Addrs, nil)
	s := proxySession(t, p, nil)
	recreateKeyspace(t, s, "it_err", 1, "CREATE TABLE it_err.kv (k int PRIMARY KEY, v text)")
	proxyErrorsBefore := metricSum(t, p.Reg, "cqlgate_proxy_errors_total")

	cases := []struct {
		name     string
		query    string
		args     []any
		code     int
		contains string
	}{
		{"Syntax", "SELEC * FROM it_err.kv", nil, gocql.ErrCodeSyntax, ""},
		{"UnknownTable", "SELECT * FROM it_err.no_such_table", nil, gocql.ErrCodeInvalid, "no_such_table"},
		{"UnknownKeyspace", "SELECT * FROM it_no_such_ks.kv", nil, gocql.ErrCodeInvalid, "it_no_such_ks"},
		{"UnknownTablePrepared", "SELECT * FROM it_err.no_such_table WHERE k = ?", []any{1}, gocql.ErrCodeInvalid, "no_such_table"},
		{"BadLiteral", "INSERT INTO it_err.kv (k, v) VALUES ('not an int', 'x')", nil, gocql.ErrCodeInvalid, ""},
		{"AlreadyExists", "CREATE TABLE it_err.kv (k int PRIMARY KEY)", nil, gocql.ErrCodeAlreadyExists, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := s.Query(tc.query, tc.args...).Exec()
			if err == nil {
				t.Fatalf("%s: got no error, want code 0x%04x", tc.query, tc.code)
			}
			code, ok := requestErrorCode(err)
			if !ok {
				t.Fatalf("%s: got %T %v, want a gocql.RequestError", tc.query, err, err)
			}
			if code != tc.code {
				t.Fatalf("%s: got code 0x%04x (%v), want 0x%04x", tc.query, code, err, tc.code)
			}
			if tc.contains != "" && !strings.Contains(err.Error(), tc.contains) {
				t.Errorf("%s: message %q does not mention %q", tc.query, err.Error(), tc.contains)
			}
		})
	}
	// The typed error carries its extra fields through the proxy.
	err := s.Query("CREATE TABLE it_err.kv (k int PRIMARY KEY)").Exec()
	var ae *gocql.RequestErrAlreadyExists
	if !errors.As(err, &ae) || ae.Keyspace != "it_err" || ae.Table != "kv" {
		t.Errorf("CREATE TABLE of an existing table: got %#v, want *gocql.RequestErrAlreadyExists for it_err.kv", err)
	}

	// The session still works.
	mustExec(t, s, "INSERT INTO it_err.kv (k, v) VALUES (?, ?)", 1, "ok")
	var v string
	if err := s.Query("SELECT v FROM it_err.kv WHERE k = ?", 1).Scan(&v); err != nil || v != "ok" {
		t.Fatalf("after the errors: got (%q, %v), want (\"ok\", nil)", v, err)
	}
	if after := metricSum(t, p.Reg, "cqlgate_proxy_errors_total"); after != proxyErrorsBefore {
		t.Errorf("cqlgate_proxy_errors_total: got %v, want %v: Cassandra's errors must be relayed, not made up by the proxy", after, proxyErrorsBefore)
	}
}
