package idempotency

import "testing"

// Benchmarks of the classifier. Run with
//
//	go test -run '^$' -bench . -benchmem ./pkg/idempotency/

var benchStatements = []struct{ name, q string }{
	{"select", "SELECT k, v, w FROM ks.tbl WHERE k = ? AND c > ? LIMIT 10"},
	{"insert", "INSERT INTO ks.tbl (k, c, v, w) VALUES (?, ?, ?, ?) USING TTL 86400"},
	{"update_lwt", "UPDATE ks.tbl SET v = ?, s = s + ? WHERE k = ? AND c = ? IF v = ?"},
	{"batch", "BEGIN UNLOGGED BATCH INSERT INTO ks.tbl (k, c, v) VALUES (?, ?, ?); " +
		"UPDATE ks.tbl SET m['a'] = ? WHERE k = ? AND c = ?; DELETE FROM ks.tbl WHERE k = ? AND c = ?; APPLY BATCH"},
}

func BenchmarkClassify(b *testing.B) {
	for _, st := range benchStatements {
		b.Run(st.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(st.q)))
			for b.Loop() {
				Classify(st.q, "", nil)
			}
		})
	}
}

func BenchmarkClassifyWithOverrides(b *testing.B) {
	o, err := ParseOverrides([]string{"idempotent:other.tbl", "not-idempotent:re:^UPDATE .* SET hits"})
	if err != nil {
		b.Fatal(err)
	}
	c := NewClassifier(o)
	q := benchStatements[2].q
	b.ReportAllocs()
	for b.Loop() {
		c.Classify(q, "", nil)
	}
}
