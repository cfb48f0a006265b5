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
	}
	for _, c := range cases {
		got, _ := Normalize(nil, c.in)
		if string(got) != c.want {
			t.Errorf("Normalize(%q)\n got %q\nwant %q", c.in, got, c.want)
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
