package stmtstats

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"
)

// carelessShapes are statements as an application that concatenates its
// values into the text sends them: each returns a variant with literals of
// every CQL kind (integers, negative numbers, floats with NaN and
// Infinity, strings with quotes, timestamps in quotes, UUIDs, blobs,
// booleans, durations, collections, IN lists of any length or bound to one
// marker, batches of any size) and, through vary, keywords in any case and
// any spacing. Every variant of a shape is the same statement.
var carelessShapes = []func(r *rand.Rand) string{
	func(r *rand.Rand) string {
		return fmt.Sprintf("SELECT * FROM shop.orders WHERE customer = %d AND day = '2026-%02d-%02d'", r.Int64N(1e12), 1+r.IntN(12), 1+r.IntN(28))
	},
	func(r *rand.Rand) string {
		if r.IntN(10) == 0 {
			return "SELECT id, name FROM shop.items WHERE id IN ?"
		}
		return "SELECT id, name FROM shop.items WHERE id IN (" + list(r, 1+r.IntN(50), uuid) + ")"
	},
	func(r *rand.Rand) string {
		return fmt.Sprintf("SELECT * FROM shop.stock WHERE sku IN (%s) LIMIT %d", list(r, 1+r.IntN(30), str), 1+r.IntN(1000))
	},
	func(r *rand.Rand) string {
		return fmt.Sprintf("INSERT INTO shop.events (id, at, payload, ok, score) VALUES (%s, '%s', 0x%x, %v, %s) USING TTL %d",
			uuid(r), time.Unix(r.Int64N(2e9), 0).UTC().Format("2006-01-02 15:04:05+0000"), r.Uint64(), r.IntN(2) == 0, float(r), r.IntN(1e6))
	},
	func(r *rand.Rand) string {
		return fmt.Sprintf("UPDATE shop.stock SET qty = %d, note = %s WHERE sku = %s IF qty > %d", r.IntN(1e6)-5e5, str(r), str(r), r.IntN(100))
	},
	func(r *rand.Rand) string {
		return fmt.Sprintf("DELETE FROM shop.carts WHERE user = %s AND item = %s", uuid(r), uuid(r))
	},
	func(r *rand.Rand) string {
		return fmt.Sprintf("UPDATE shop.profiles SET tags = tags + {%s}, prefs[%s] = %s, history = history + [%s] WHERE id = %d",
			list(r, 1+r.IntN(5), str), str(r), str(r), list(r, 1+r.IntN(5), integer), r.Int64())
	},
	func(r *rand.Rand) string {
		// Bind markers and literals mixed, either way round.
		if r.IntN(2) == 0 {
			return fmt.Sprintf("SELECT v FROM shop.kv WHERE k = ? AND c > %d", r.IntN(1e9))
		}
		return fmt.Sprintf("SELECT v FROM shop.kv WHERE k = %d AND c > :c", r.IntN(1e9))
	},
	func(r *rand.Rand) string {
		t := r.Int64N(2e12)
		return fmt.Sprintf("SELECT * FROM shop.ts WHERE k = %d AND t >= %d AND t < '%s' ORDER BY t DESC LIMIT %d",
			r.IntN(100), t, time.UnixMilli(t).UTC().Format(time.RFC3339Nano), 1+r.IntN(500))
	},
	func(r *rand.Rand) string {
		d := []string{fmt.Sprintf("%dh%dm", r.IntN(48), r.IntN(60)), fmt.Sprintf("PT%dH%dM", r.IntN(48), 1+r.IntN(59)), fmt.Sprintf("P%dD", 1+r.IntN(90)), fmt.Sprintf("%dd", r.IntN(90))}[r.IntN(4)]
		return fmt.Sprintf("UPDATE shop.sessions USING TTL %d SET expires = %s, valid = %v WHERE id = %s", r.IntN(86400), d, r.IntN(2) == 0, uuid(r))
	},
	func(r *rand.Rand) string {
		var b strings.Builder
		b.WriteString("BEGIN UNLOGGED BATCH ")
		for range 2 + r.IntN(20) {
			fmt.Fprintf(&b, "INSERT INTO shop.lines (order_id, line, sku, price) VALUES (%d, %d, %s, %s); ", r.Int64(), r.IntN(100), str(r), float(r))
		}
		b.WriteString("APPLY BATCH")
		return b.String()
	},
	func(r *rand.Rand) string {
		return fmt.Sprintf("SELECT * FROM shop.orders WHERE token(customer) > %d AND token(customer) <= %d LIMIT %d", -r.Int64(), r.Int64(), r.IntN(5000))
	},
	func(r *rand.Rand) string {
		return fmt.Sprintf(`INSERT INTO shop.docs JSON '{"id": %d, "body": "it''s %x"}'`, r.Int64(), r.Uint64())
	},
}

func integer(r *rand.Rand) string { return fmt.Sprint(r.Int64N(1e15) - 5e14) }
func str(r *rand.Rand) string {
	return "'" + strings.ReplaceAll(fmt.Sprintf("o'k %x", r.Uint64()), "'", "''") + "'"
}
func uuid(r *rand.Rand) string {
	return fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", r.Uint32(), r.IntN(1<<16), r.IntN(1<<16), r.IntN(1<<16), r.Int64N(1<<48))
}
func float(r *rand.Rand) string {
	switch r.IntN(8) {
	case 0:
		return "NaN"
	case 1:
		return "-Infinity"
	case 2:
		return "Infinity"
	}
	return fmt.Sprint((r.Float64() - 0.5) * 1e6)
}
func list(r *rand.Rand, n int, one func(*rand.Rand) string) string {
	s := make([]string, n)
	for i := range s {
		s[i] = one(r)
	}
	return strings.Join(s, ", ")
}

// vary changes what a careless application may change without changing
// the statement: the case of keywords and the spacing, and a trailing
// semicolon.
func vary(r *rand.Rand, q string) string {
	if r.IntN(3) == 0 {
		for _, kw := range []string{"SELECT", "FROM", "WHERE", "AND", "INSERT", "INTO", "VALUES", "UPDATE", "SET", "DELETE", "LIMIT", "IN", "USING", "TTL", "BATCH", "APPLY", "BEGIN", "UNLOGGED"} {
			q = strings.ReplaceAll(q, kw+" ", strings.ToLower(kw)+" ")
		}
	}
	switch r.IntN(4) {
	case 0:
		q = strings.ReplaceAll(q, " = ", "=")
	case 1:
		q = strings.ReplaceAll(q, " WHERE ", "\n  WHERE ")
	case 2:
		q = strings.ReplaceAll(q, ", ", ",\t")
	}
	if r.IntN(2) == 0 {
		q += ";"
	}
	return q
}

// TestCarelessQueriesFold sends 100,000 distinct literal-laden QUERY
// strings of 13 statements: they make 13 entries, and the table, text
// cache included, stays within the memory the documentation gives
// (docs/statements.md: about 1.5 KiB an entry, plus at most
// --statement-stats-entries KiB of cached texts).
func TestCarelessQueriesFold(t *testing.T) {
	n := 100000
	if raceEnabled {
		n = 10000 // the folding only: memory is measured without -race
	}
	r := rand.New(rand.NewPCG(1, 2))
	queries := make([]string, 0, n)
	seen := make(map[string]bool, n)
	var textBytes int
	for len(queries) < n {
		q := vary(r, carelessShapes[len(queries)%len(carelessShapes)](r))
		if !seen[q] {
			seen[q] = true
			queries = append(queries, q)
			textBytes += len(q)
		}
	}
	seen = nil

	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	tb := New(Config{}) // the defaults: 5000 entries
	// The heap the table holds, measured after a GC every 5,000 strings:
	// the text cache fills and starts over, so its peak is what counts.
	var elapsed time.Duration
	var peak int64
	for i, q := range queries {
		start := time.Now()
		tb.Query([]byte(q), "shop").Record(&Sample{Now: time.Now(), Latency: time.Duration(i%1000) * time.Microsecond})
		elapsed += time.Since(start)
		if (i+1)%5000 == 0 {
			var m runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m)
			peak = max(peak, int64(m.HeapAlloc)-int64(before.HeapAlloc))
		}
	}
	var cached int
	for i := range tb.texts {
		cached += tb.texts[i].bytes
	}

	rep := tb.Snapshot("calls", 0)
	t.Logf("%d distinct strings (%.1f MiB of text) -> %d entries, %d evictions, in %v (%.1f µs a string, lexer pass included); "+
		"table heap at most %.2f MiB; at the end %.2f MiB of cached texts",
		n, float64(textBytes)/(1<<20), rep.Entries, rep.Evictions, elapsed.Round(time.Millisecond),
		float64(elapsed.Microseconds())/float64(n), float64(peak)/(1<<20), float64(cached)/(1<<20))
	if rep.Entries != len(carelessShapes) || rep.Evictions != 0 {
		for _, s := range rep.Statements {
			t.Logf("%6d %s", s.Calls, s.Text)
		}
		t.Fatalf("%d entries, %d evictions; want %d entries, one per statement", rep.Entries, rep.Evictions, len(carelessShapes))
	}
	for _, s := range rep.Statements {
		if want := uint64(n / len(carelessShapes)); s.Calls < want || s.Calls > want+1 {
			t.Errorf("%d calls of %s, want %d", s.Calls, s.Text, want)
		}
	}
	// The documented bound with the defaults: 1.5 KiB an entry and the text
	// cache's MaxEntries KiB.
	bound := int64(len(carelessShapes))*1536 + int64(tb.MaxEntries())*1024
	if peak > bound && !raceEnabled {
		t.Errorf("the table took up to %d bytes of heap over %d distinct strings, over the documented %d", peak, n, bound)
	}
	runtime.KeepAlive(tb)
	runtime.KeepAlive(queries)
}

// TestDistinctStatementsStayBounded sends 100,000 QUERY strings that do not
// fold (a table per tenant): the table keeps its bound of entries, evicting
// the others, and its memory stays within the documented bound: evicted
// entries must not be kept alive by the text cache.
func TestDistinctStatementsStayBounded(t *testing.T) {
	if raceEnabled {
		t.Skip("a memory measurement: run without -race")
	}
	const n = 100000
	queries := make([]string, n)
	for i := range queries {
		queries[i] = fmt.Sprintf("SELECT v FROM tenants.orders_%06d WHERE k = %d", i, i)
	}
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	tb := New(Config{MaxEntries: 2000})
	var peak int64
	for i, q := range queries {
		tb.Query([]byte(q), "tenants").Record(&Sample{Now: time.Now(), Latency: time.Millisecond})
		if (i+1)%5000 == 0 {
			var m runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m)
			peak = max(peak, int64(m.HeapAlloc)-int64(before.HeapAlloc))
		}
	}
	bound := int64(tb.MaxEntries()) * (1536 + 1024)
	t.Logf("%d distinct statements -> %d entries, %d evictions; table heap at most %.2f MiB (bound %.2f MiB)",
		n, tb.Len(), tb.Evictions(), float64(peak)/(1<<20), float64(bound)/(1<<20))
	if tb.Len() != tb.MaxEntries() || tb.Evictions() != uint64(n-tb.MaxEntries()) {
		t.Errorf("%d entries, %d evictions", tb.Len(), tb.Evictions())
	}
	if peak > bound {
		t.Errorf("the table took up to %d bytes of heap, over the documented %d", peak, bound)
	}
	runtime.KeepAlive(tb)
	runtime.KeepAlive(queries)
}
