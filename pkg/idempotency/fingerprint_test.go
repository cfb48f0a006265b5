package idempotency

import (
	"fmt"
	"testing"
)

func TestNormalize(t *testing.T) {
	cases := []struct{ in, want string }{
		{"SELECT v FROM ks.kv WHERE k = 1", "SELECT v FROM ks.kv WHERE k = ?"},
		{"select  v from KS.KV where k=42;", "SELECT v FROM ks.kv WHERE k = ?"},
		{"SELECT v FROM ks.kv WHERE k = ?", "SELECT v FROM ks.kv WHERE k = ?"},
		{"SELECT v FROM ks.kv WHERE k = :key", "SELECT v FROM ks.kv WHERE k = ?"},
		{"SELECT * FROM t WHERE k IN (1, 2, 3)", "SELECT * FROM t WHERE k IN (...)"},
		{"SELECT * FROM t WHERE k IN (4)", "SELECT * FROM t WHERE k IN (...)"},
		{"SELECT * FROM t WHERE (a, b) IN ((1, 2), (3, 4)) LIMIT 10", "SELECT * FROM t WHERE (a, b) IN (...) LIMIT ?"},
		{"INSERT INTO t (a, b) VALUES ('x''y', 0xCAFE) USING TTL 60", "INSERT INTO t (a, b) VALUES (?, ?) USING TTL ?"},
		{"UPDATE t SET tags = {'a', 'b'}, l = [1,2] WHERE id = 123e4567-e89b-12d3-a456-426614174000", "UPDATE t SET tags = {?}, l = [?] WHERE id = ?"},
		{"SELECT count(*), \"Quoted\" FROM t /* c */ WHERE ok = true -- x\n", "SELECT count(*), \"Quoted\" FROM t WHERE ok = ?"},
		{"SELECT now() FROM t", "SELECT now() FROM t"},
		{"INSERT INTO ks.t(a) VALUES(1)", "INSERT INTO ks.t (a) VALUES (?)"},
		{"SELECT v FROM t WHERE k = 'unterminated", "SELECT v FROM t WHERE k = 'unterminated"},
		{"SELECT * FROM t WHERE k IN ? AND f = -Infinity", "SELECT * FROM t WHERE k IN (...) AND f = ?"},
		{"UPDATE t SET d = PT1H30M, f = NaN WHERE k = 1", "UPDATE t SET d = ?, f = ? WHERE k = ?"},
		{"BEGIN BATCH INSERT INTO t (a) VALUES (1); INSERT INTO t (a) VALUES (2); APPLY BATCH", "BEGIN BATCH INSERT INTO t (a) VALUES (?) ; ... APPLY BATCH"},
		{"BEGIN BATCH INSERT INTO t (a) VALUES (1); APPLY BATCH", "BEGIN BATCH INSERT INTO t (a) VALUES (?) ; APPLY BATCH"},
	}
	for _, c := range cases {
		got, _ := Normalize(nil, c.in)
		if string(got) != c.want {
			t.Errorf("Normalize(%q)\n got %q\nwant %q", c.in, got, c.want)
		}
	}
}

// Literals that normalized to texts of their own, and so to statements of
// their own: each group must normalize to one text.
func TestNormalizeFoldsEveryLiteral(t *testing.T) {
	for _, group := range [][]string{
		// A whole IN list bound to one marker, or written out.
		{"SELECT * FROM t WHERE k IN ?", "SELECT * FROM t WHERE k IN :keys", "SELECT * FROM t WHERE k IN (1, 2)", "SELECT * FROM t WHERE k IN ()"},
		// Floats as Java and Python print them, NaN and the infinities included.
		{"UPDATE t SET f = 1.5 WHERE k = 1", "UPDATE t SET f = NaN WHERE k = 1", "UPDATE t SET f = -NaN WHERE k = 1",
			"UPDATE t SET f = Infinity WHERE k = 1", "UPDATE t SET f = -Infinity WHERE k = 1", "UPDATE t SET f = -1.5E-7 WHERE k = 1"},
		// Durations, in units and in ISO 8601 (java.time.Duration's toString).
		{"UPDATE t SET d = 1h30m WHERE k = 1", "UPDATE t SET d = PT1H30M WHERE k = 1", "UPDATE t SET d = P1DT2H WHERE k = 1",
			"UPDATE t SET d = P2W WHERE k = 1", "UPDATE t SET d = -PT5S WHERE k = 1", "UPDATE t SET d = P1Y2M3D WHERE k = 1"},
		// A batch of one statement repeated any number of times (twice or more).
		{"BEGIN BATCH INSERT INTO t (a) VALUES (1); INSERT INTO t (a) VALUES (2); APPLY BATCH",
			"BEGIN BATCH INSERT INTO t (a) VALUES (1); INSERT INTO t (a) VALUES (2); INSERT INTO t (a) VALUES (3); APPLY BATCH;",
			"begin batch insert into t (a) values (1) insert into t (a) values (2) insert into t (a) values (3) insert into t (a) values (4) apply batch"},
		// The same with two statements alternating runs.
		{"BEGIN UNLOGGED BATCH INSERT INTO t (a) VALUES (1); INSERT INTO t (a) VALUES (2); UPDATE u SET b = 1 WHERE a = 1; UPDATE u SET b = 2 WHERE a = 2; APPLY BATCH",
			"BEGIN UNLOGGED BATCH INSERT INTO t (a) VALUES (1); INSERT INTO t (a) VALUES (2); INSERT INTO t (a) VALUES (3); UPDATE u SET b = 1 WHERE a = 1; UPDATE u SET b = 2 WHERE a = 2; UPDATE u SET b = 3 WHERE a = 3 APPLY BATCH"},
	} {
		first, _ := Normalize(nil, group[0])
		for _, q := range group[1:] {
			if got, _ := Normalize(nil, q); string(got) != string(first) {
				t.Errorf("Normalize(%q)\n  = %q\nNormalize(%q)\n  = %q", q, got, group[0], first)
			}
		}
	}
	// What must stay apart: an identifier is not a literal, a batch of one
	// statement is not a batch of several, and different statements differ.
	for _, pair := range [][2]string{
		{"UPDATE t SET f = nan_count WHERE k = 1", "UPDATE t SET f = 1 WHERE k = 1"},
		{"UPDATE t SET d = p1d WHERE k = 1", "UPDATE t SET d = 1d WHERE k = 1"},
		{"UPDATE t SET d = p WHERE k = 1", "UPDATE t SET d = 1d WHERE k = 1"},
		{"SELECT a - b FROM t", "SELECT a - 1 FROM t"},
		{"BEGIN BATCH INSERT INTO t (a) VALUES (1); APPLY BATCH", "BEGIN BATCH INSERT INTO t (a) VALUES (1); INSERT INTO t (a) VALUES (2); APPLY BATCH"},
		{"BEGIN BATCH INSERT INTO t (a) VALUES (1); INSERT INTO u (a) VALUES (2); APPLY BATCH", "BEGIN BATCH INSERT INTO t (a) VALUES (1); INSERT INTO t (a) VALUES (2); APPLY BATCH"},
		{"BEGIN BATCH INSERT INTO t (a) VALUES (1); INSERT INTO u (a) VALUES (2); INSERT INTO t (a) VALUES (3); APPLY BATCH", "BEGIN BATCH INSERT INTO t (a) VALUES (1); INSERT INTO u (a) VALUES (2); APPLY BATCH"},
	} {
		a, _ := Normalize(nil, pair[0])
		b, _ := Normalize(nil, pair[1])
		if string(a) == string(b) {
			t.Errorf("%q and %q both normalize to %q", pair[0], pair[1], a)
		}
	}
}

func TestNormalizeFoldsLiterals(t *testing.T) {
	seen := map[string]bool{}
	for i := range 100000 {
		q := fmt.Sprintf("SELECT * FROM shop.orders WHERE customer = %d AND day = '2024-01-%02d' AND id IN (%d, %d) LIMIT %d", i, i%28+1, i, i*7, i%100)
		if i%2 == 0 {
			q = fmt.Sprintf("select *  from shop.orders where customer=%d and day='x%d' and id in (%d) limit %d;", i, i, i, i%5)
		}
		n, err := Normalize(nil, q)
		if err != nil {
			t.Fatal(err)
		}
		seen[string(n)] = true
	}
	if len(seen) != 1 {
		t.Fatalf("100,000 literal-laden strings gave %d texts: %v", len(seen), seen)
	}
}

func BenchmarkNormalize(b *testing.B) {
	q := "SELECT v, w FROM ks.kv WHERE k = 1234 AND c IN (1, 2, 3) LIMIT 100"
	var dst []byte
	b.ReportAllocs()
	for b.Loop() {
		dst, _ = Normalize(dst[:0], q)
	}
}
