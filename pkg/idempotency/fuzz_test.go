package idempotency

import (
	"strings"
	"testing"
)

// Fuzz targets of the classifier. The property that matters is one-sided:
// a statement that is not idempotent must never be reported idempotent
// (the opposite error only costs a missed hedge). Run one with
//
//	go test -run '^$' -fuzz '^FuzzNonIdempotentVariants$' -fuzztime 60s ./pkg/idempotency/
//
// Seeds: the statements of testdata/classify.txt, and testdata/fuzz/.

// nonIdempotentTemplates are statements that are not idempotent whatever
// identifiers, values, spacing, comments and keyword case they are written
// with. Tokens are separated by single spaces; $K, $T, $C and $D are
// identifier slots (keyspace, table, two columns), $V a value slot.
var nonIdempotentTemplates = []string{
	"INSERT INTO $K . $T ( $C , $D ) VALUES ( $V , $V ) IF NOT EXISTS",
	"INSERT INTO $T ( $C ) VALUES ( $V ) IF NOT EXISTS USING TTL 5",
	"INSERT INTO $K . $T JSON $V IF NOT EXISTS",
	"UPDATE $K . $T SET $C = $V WHERE $D = $V IF EXISTS",
	"UPDATE $K . $T SET $C = $V WHERE $D = $V IF $C = $V",
	"UPDATE $T SET $C = $V , $D = $V WHERE $D IN ( $V , $V ) IF $C = $V AND $D = $V",
	"DELETE FROM $K . $T WHERE $D = $V IF EXISTS",
	"DELETE $C FROM $T WHERE $D = $V IF $C = $V",
	"UPDATE $K . $T SET $C = $C + 1 WHERE $D = $V",
	"UPDATE $K . $T SET $C = $C - 1 WHERE $D = $V",
	"UPDATE $K . $T SET $C = $C -1 WHERE $D = $V",
	"UPDATE $K . $T SET $C = $C + -7 WHERE $D = $V",
	"UPDATE $K . $T SET $C += 1 WHERE $D = $V",
	"UPDATE $K . $T SET $C -= 3 WHERE $D = $V",
	"UPDATE $T SET $D = $V , $C = $C + 1 WHERE $D = $V",
	"UPDATE $K . $T SET $C = $C + [ $V ] WHERE $D = $V",
	"UPDATE $K . $T SET $C = $C + [ ] WHERE $D = $V",
	"UPDATE $K . $T SET $C = [ $V , $V ] + $C WHERE $D = $V",
	"UPDATE $K . $T SET $C = ? + $C WHERE $D = $V",
	"UPDATE $K . $T SET $C += [ $V ] WHERE $D = $V",
	"UPDATE $K . $T SET $C = $C + ? WHERE $D = $V",
	"UPDATE $K . $T SET $C = $C - ? WHERE $D = $V",
	"UPDATE $K . $T SET $C += ? WHERE $D = $V",
	"UPDATE $K . $T SET $C = $C + :n WHERE $D = $V",
	"DELETE $C [ 1 ] FROM $K . $T WHERE $D = $V",
	"DELETE $C [ ? ] FROM $K . $T WHERE $D = $V",
	"DELETE $D , $C [ 0 ] FROM $T WHERE $D = $V",
	"UPDATE $K . $T SET $C [ 1 ] = null WHERE $D = $V",
	"UPDATE $K . $T SET $C [ ? ] = ? WHERE $D = $V",
	"UPDATE $K . $T SET $C [ 2 ] = :x WHERE $D = $V",
	"INSERT INTO $K . $T ( $C , $D ) VALUES ( $V , now ( ) )",
	"INSERT INTO $K . $T ( $C , $D ) VALUES ( uuid ( ) , $V )",
	"INSERT INTO $T ( $C ) VALUES ( toTimestamp ( now ( ) ) )",
	"INSERT INTO $T ( $C ) VALUES ( currentTimestamp ( ) )",
	"INSERT INTO $T ( $C ) VALUES ( current_timeuuid ( ) )",
	"INSERT INTO $T ( $C ) VALUES ( [ $V , now ( ) ] )",
	"INSERT INTO $T ( $C ) VALUES ( { $V : uuid ( ) } )",
	"INSERT INTO $T ( $C ) VALUES ( $K . myfunc ( $V ) )",
	"INSERT INTO $T ( $C ) VALUES ( system . now ( ) )",
	"UPDATE $K . $T SET $C = currentDate ( ) WHERE $D = $V",
	"UPDATE $K . $T SET $C = $V WHERE $D = now ( )",
	"DELETE FROM $K . $T WHERE $D = uuid ( )",
	"INSERT INTO $T ( $C , $D ) VALUES ( $V , [ $V ] ) USING TIMESTAMP 5",
	"INSERT INTO $K . $T ( $C , $D ) VALUES ( $V , [ ] ) USING TTL 5 AND TIMESTAMP 5",
	"UPDATE $T USING TIMESTAMP 5 SET $C = [ $V , $V ] WHERE $D = $V",
	"BEGIN BATCH USING TIMESTAMP 5 UPDATE $T SET $C = [ $V ] WHERE $D = $V ; APPLY BATCH",
	"BEGIN COUNTER BATCH UPDATE $K . $T SET $C = $C + 1 WHERE $D = $V ; APPLY BATCH",
	"BEGIN BATCH INSERT INTO $T ( $C ) VALUES ( $V ) IF NOT EXISTS ; APPLY BATCH",
	"BEGIN UNLOGGED BATCH INSERT INTO $T ( $C ) VALUES ( $V ) ; UPDATE $T SET $C = $C + [ $V ] WHERE $D = $V ; APPLY BATCH",
	"BEGIN BATCH UPDATE $T SET $C = $V WHERE $D = $V UPDATE $T SET $C = $V WHERE $D = $V IF EXISTS APPLY BATCH",
	"BEGIN BATCH INSERT INTO $T ( $C ) VALUES ( now ( ) ) APPLY BATCH",
	"USE $K",
	"TRUNCATE $K . $T",
	"TRUNCATE TABLE $T",
	"DROP TABLE IF EXISTS $K . $T",
	"CREATE TABLE $K . $T ( $C int PRIMARY KEY , $D text )",
	"ALTER TABLE $T ADD $C int",
	"CREATE KEYSPACE $K WITH replication = { 'class' : 'SimpleStrategy' , 'replication_factor' : 1 }",
	"GRANT SELECT ON $K . $T TO $C",
	"CREATE ROLE $C WITH PASSWORD = $V",
	"LIST ROLES",
	"SELECT * FROM $K . $T ; DELETE FROM $K . $T WHERE $D = $V",
}

// Identifiers and values the fuzzer picks from. Quoted identifiers may
// spell keywords and function names: they must stay identifiers.
var (
	fuzzIdents = []string{"k", "t", "ks", "col", "Col", "my_table", "x1", `"MyTable"`, `"if"`, `"IF"`, `"exists"`,
		`"now"`, `"a""b"`, `"select"`, `"with space"`, "key", "ttl", "timestamp", `"-- not a comment"`, `"/*"`}
	fuzzValues = []string{"1", "-5", "'a'", "?", ":v", ":\"Named\"", "'IF NOT EXISTS'", "'now()'", "$$x ' -- $$",
		"0xff", "1.5e3", "true", "null", "123e4567-e89b-12d3-a456-426614174000", "'it''s'", "[ 1 , 2 ]",
		"{ 'a' : 1 }", "{ 1 , 2 }", "( 1 , 'a' )", "P1D", "1h30m", "'/* x'"}
	fuzzSeps = []string{" ", "\n", "\t", "  ", " /* c */ ", "/**/", " -- c\n", " // c\n", "\r\n", ""}
)

// byteStream hands out the fuzzer's choices, and zeros once exhausted.
type byteStream []byte

func (b *byteStream) pick(n int) int {
	if len(*b) == 0 {
		return 0
	}
	v := (*b)[0]
	*b = (*b)[1:]
	return int(v) % n
}

// render writes template tmpl with the choices in bs: one identifier per
// slot, a value per $V, a separator between tokens, a case per keyword.
func render(tmpl string, bs *byteStream) string {
	slots := map[string]string{}
	var b strings.Builder
	prev := ""
	for i, tok := range strings.Fields(tmpl) {
		switch {
		case tok == "$V":
			tok = fuzzValues[bs.pick(len(fuzzValues))]
		case strings.HasPrefix(tok, "$"):
			id, ok := slots[tok]
			if !ok {
				id = fuzzIdents[bs.pick(len(fuzzIdents))]
				slots[tok] = id
			}
			tok = id
		default:
			tok = fuzzCase(tok, bs.pick(4))
		}
		if i > 0 {
			sep := fuzzSeps[bs.pick(len(fuzzSeps))]
			if sep == "" && !canJoin(prev, tok) {
				sep = " "
			}
			b.WriteString(sep)
		}
		b.WriteString(tok)
		prev = tok
	}
	if bs.pick(3) == 1 {
		b.WriteString(";")
	}
	return b.String()
}

// canJoin tells whether two tokens may be written with nothing between
// them and still lex as two tokens.
func canJoin(a, b string) bool {
	last, first := a[len(a)-1], b[0]
	isPunct := func(c byte) bool { return strings.IndexByte("()[]{},;=", c) >= 0 }
	if !(isPunct(last) || isPunct(first)) {
		return false
	}
	// "-" and "/" could start a comment or a negative number, "+" and "=" an
	// operator such as "+=".
	for _, c := range []byte{last, first} {
		if strings.IndexByte("-/+=<>!*", c) >= 0 {
			return false
		}
	}
	return true
}

func fuzzCase(word string, mode int) string {
	switch mode {
	case 1:
		return strings.ToLower(word)
	case 2:
		return strings.ToUpper(word)
	case 3:
		var b strings.Builder
		for i, r := range word {
			if i%2 == 0 {
				b.WriteString(strings.ToLower(string(r)))
			} else {
				b.WriteString(strings.ToUpper(string(r)))
			}
		}
		return b.String()
	}
	return word
}

// FuzzNonIdempotentVariants: a non-idempotent statement stays non-idempotent
// however it is written.
func FuzzNonIdempotentVariants(f *testing.F) {
	for i := range nonIdempotentTemplates {
		f.Add(uint8(i), []byte{})
		f.Add(uint8(i), []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20})
	}
	f.Fuzz(func(t *testing.T, tmpl uint8, choices []byte) {
		bs := byteStream(choices)
		tm := nonIdempotentTemplates[int(tmpl)%len(nonIdempotentTemplates)]
		q := render(tm, &bs)
		st := Classify(q, "", nil)
		if st.Idempotent {
			t.Fatalf("%q classified idempotent: %+v", q, st)
		}
		// Nor do bind types of the kinds a counter or a list position has
		// (a list type would make x = x - ? a removal by value, a text key
		// x[?] a map access: both idempotent).
		types := make([]uint16, st.Markers)
		for i := range types {
			types[i] = []uint16{typeCounter, typeBigint, typeInt}[bs.pick(3)]
			if strings.Contains(tm, "[ ?") {
				types[i] = typeInt // a list position
			}
		}
		if st := Classify(q, "", types); st.Idempotent {
			t.Fatalf("%q with bind types %v classified idempotent: %+v", q, types, st)
		}
	})
}

// FuzzClassify: any input; Classify never panics, is deterministic, calls
// only reads and writes idempotent, and keeps its verdict when a comment is
// put between two tokens. A write found idempotent stops being so when a
// lightweight-transaction condition, a list append, a counter increment or
// a call of now() is added to it.
func FuzzClassify(f *testing.F) {
	for _, e := range loadCorpus(f) {
		f.Add(e.query)
	}
	f.Fuzz(func(t *testing.T, q string) {
		st := Classify(q, "ks", nil)
		if again := Classify(q, "ks", nil); again != st {
			t.Fatalf("%q: two verdicts %+v and %+v", q, st, again)
		}
		if st.Idempotent && !st.Kind.isDML() {
			t.Fatalf("%q: kind %s idempotent", q, st.Kind)
		}
		toks, err := lex(q, nil)
		if err != nil {
			if st.Idempotent || st.Reason != ReasonUnparsable {
				t.Fatalf("%q: lex error %v but %+v", q, err, st)
			}
			return
		}
		if len(toks) > 1 {
			// A comment between two tokens changes nothing.
			at := toks[len(toks)/2].end
			q2 := q[:at] + " /* x */ " + q[at:]
			st2 := Classify(q2, "ks", nil)
			if st2.Idempotent != st.Idempotent || st2.Reason != st.Reason || st2.Kind != st.Kind ||
				st2.Table != st.Table || st2.Markers != st.Markers || st2.UsingTimestamp != st.UsingTimestamp {
				t.Fatalf("comment inserted: %q gives %+v, %q gives %+v", q, st, q2, st2)
			}
		}
		if !st.Idempotent {
			return
		}
		switch st.Kind {
		case KindInsert:
			mustNotBeIdempotent(t, q+"\nIF NOT EXISTS")
		case KindUpdate, KindDelete:
			mustNotBeIdempotent(t, q+"\nIF EXISTS")
			mustNotBeIdempotent(t, q+"\nIF v = 1")
		}
		// Insert a non-idempotent item at the start of the SET or DELETE
		// list.
		if len(toks) < 2 {
			return
		}
		p := parser{q: q}
		for i := range toks[:len(toks)-1] {
			if st.Kind == KindUpdate && p.kw(toks, i, "SET") {
				at := toks[i].end
				for _, item := range []string{"l = l + [1],", "l = [1] + l,", "c = c + 1,", "c = c -1,", "c += 2,",
					"x = now(),", "x = x + ?,", "l[0] = null,", "x = myks.f(1),"} {
					mustNotBeIdempotent(t, q[:at]+" "+item+" "+q[at:])
				}
				break
			}
			if st.Kind == KindDelete && i == 0 {
				at := toks[0].end
				sep := ","
				if p.kw(toks, 1, "FROM") {
					sep = ""
				}
				mustNotBeIdempotent(t, q[:at]+" l[1]"+sep+" "+q[at:])
				break
			}
		}
	})
}

func mustNotBeIdempotent(t *testing.T, q string) {
	t.Helper()
	if st := Classify(q, "ks", nil); st.Idempotent {
		t.Fatalf("%q classified idempotent: %+v", q, st)
	}
}

// FuzzOverrides: ParseOverrides never panics, and a rule it accepts
// classifies without panicking.
func FuzzOverrides(f *testing.F) {
	for _, s := range []string{"idempotent:ks.t", "not-idempotent:re:^UPDATE .* SET hits", "idempotent:glob:SELECT *", `idempotent:"K"."T"`, "idempotent:ks.*", "x"} {
		f.Add(s, "UPDATE ks.t SET hits = hits + 1 WHERE k = 1")
	}
	f.Fuzz(func(t *testing.T, spec, q string) {
		o, err := ParseOverrides([]string{spec})
		if err != nil {
			return
		}
		st := NewClassifier(o).Classify(q, "ks", nil)
		if st.Reason == ReasonOverride && !st.Kind.isDML() {
			t.Fatalf("override applied to %s statement %q", st.Kind, q)
		}
	})
}

// FuzzNormalize: Normalize never panics and only appends to dst, whatever
// the text (batches with stray verbs and semicolons included).
func FuzzNormalize(f *testing.F) {
	for _, q := range []string{
		"SELECT * FROM t WHERE k IN ? AND f = -Infinity",
		"BEGIN BATCH INSERT INTO t (a) VALUES (1); INSERT INTO t (a) VALUES (2) APPLY BATCH",
		"UPDATE t SET d = PT1H30M, f = NaN WHERE k = 1",
		"begin batch apply batch",
		"BEGIN BATCH ; ; INSERT ; APPLY ; APPLY",
	} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, q string) {
		n, _ := Normalize([]byte("prefix:"), q)
		if !strings.HasPrefix(string(n), "prefix:") {
			t.Fatalf("%q: dst's content was overwritten: %q", q, n)
		}
	})
}
