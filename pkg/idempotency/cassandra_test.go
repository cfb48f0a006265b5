package idempotency

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cqlgate/cqlgate/pkg/frame"
)

// These tests check the classifier's reading of CQL against a real
// Cassandra 5.0 node, with PREPARE only: nothing is ever executed. The
// statements prepared are of kinds the classifier claims to parse, so a
// syntax error there means the corpus (or the lexer) is wrong about CQL;
// the keyspaces they name do not exist, which Cassandra reports after
// parsing (as an invalid request, not a syntax error).

// testKeyspace is created for TestBindTypesFromCassandra.
const testKeyspace = "speculative_test"

// rawConn is a minimal protocol v4 connection: one request at a time.
type rawConn struct {
	c  net.Conn
	r  *bufio.Reader
	id int16
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rc := &rawConn{c: c, r: bufio.NewReader(c)}
	t.Cleanup(func() { c.Close() })
	op, body := rc.roundTrip(t, frame.AppendStartup(nil, frame.V4, 0, map[string]string{"CQL_VERSION": "3.0.0"}))
	if op != frame.OpReady {
		t.Fatalf("STARTUP answered with opcode %#x: %q", op, body)
	}
	return rc
}

// roundTrip sends one request frame and reads the answer.
func (rc *rawConn) roundTrip(t *testing.T, req []byte) (op byte, body []byte) {
	t.Helper()
	if err := rc.c.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.c.Write(req); err != nil {
		t.Fatal(err)
	}
	var h [frame.HeaderLen]byte
	if _, err := io.ReadFull(rc.r, h[:]); err != nil {
		t.Fatal(err)
	}
	n := binary.BigEndian.Uint32(h[5:9])
	if n > 16<<20 {
		t.Fatalf("answer body of %d bytes", n)
	}
	body = make([]byte, n)
	if _, err := io.ReadFull(rc.r, body); err != nil {
		t.Fatal(err)
	}
	return h[4], body
}

func (rc *rawConn) next() int16 { rc.id = (rc.id + 1) & 0x7fff; return rc.id }

// prepare PREPAREs q: on success the bind types, otherwise the error code
// and message.
func (rc *rawConn) prepare(t *testing.T, q string) (types []uint16, code int32, msg string) {
	t.Helper()
	op, body := rc.roundTrip(t, frame.AppendPrepare(nil, frame.V4, rc.next(), q, ""))
	switch op {
	case frame.OpResult:
		m, err := frame.ParsePrepared(frame.V4, body)
		if err != nil {
			t.Fatalf("%q: %v", q, err)
		}
		return m.VarTypes, 0, ""
	case frame.OpError:
		code, msg, err := frame.ErrorCode(body)
		if err != nil {
			t.Fatalf("%q: %v", q, err)
		}
		return nil, code, msg
	}
	t.Fatalf("%q: PREPARE answered with opcode %#x", q, op)
	return nil, 0, ""
}

func (rc *rawConn) exec(t *testing.T, q string) {
	t.Helper()
	op, body := rc.roundTrip(t, frame.AppendQuery(nil, frame.V4, rc.next(), q, 0x0001, 0))
	if op != frame.OpResult {
		_, msg, _ := frame.ErrorCode(body)
		t.Fatalf("%q: %s", q, msg)
	}
}

const errSyntax = 0x2000

// TestCorpusParsesInCassandra: every corpus read and write that the
// classifier parses is also valid CQL syntax for Cassandra 5.0.
func TestCorpusParsesInCassandra(t *testing.T) {
	c := single.Get(t)
	rc := dialRaw(t, c.Addrs[0])
	checked := 0
	for _, e := range loadCorpus(t) {
		switch {
		case e.nocass, e.expect == "unparsable", e.expect == "empty":
			continue
		case e.kind == "other":
			continue // USE, DDL, auth: parsed as a whole by Cassandra, not by the classifier
		}
		_, code, msg := rc.prepare(t, e.query)
		if code == errSyntax {
			t.Errorf("%s: Cassandra: syntax error: %s", e, msg)
		}
		checked++
	}
	t.Logf("%d statements prepared", checked)
}

// TestBindTypesFromCassandra: the n-th bind marker the lexer counts is the
// n-th variable of Cassandra's PREPARED metadata, and the verdicts with the
// real types are as documented.
func TestBindTypesFromCassandra(t *testing.T) {
	c := single.Get(t)
	rc := dialRaw(t, c.Addrs[0])
	for _, q := range []string{
		"CREATE KEYSPACE IF NOT EXISTS " + testKeyspace + " WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
		"CREATE TYPE IF NOT EXISTS " + testKeyspace + ".addr (street text, zip int)",
		"CREATE TABLE IF NOT EXISTS " + testKeyspace + ".t (k int, c int, v text, l list<int>, s set<int>, m map<text, int>, mi map<int, text>, u addr, PRIMARY KEY (k, c))",
		"CREATE TABLE IF NOT EXISTS " + testKeyspace + ".cnt (k int PRIMARY KEY, n counter)",
	} {
		rc.exec(t, q)
	}
	const ks = testKeyspace
	for _, tc := range []struct {
		q      string
		types  []uint16 // as Cassandra should report them
		expect string   // "idem" or a Reason label
	}{
		{"SELECT * FROM " + ks + ".t WHERE k = ? AND c > ? LIMIT ?", []uint16{typeInt, typeInt, typeInt}, "idem"},
		{"INSERT INTO " + ks + ".t (k, c, v) VALUES (:k, :c, :v) USING TIMESTAMP :ts AND TTL :ttl", []uint16{typeInt, typeInt, 0x000D, typeBigint, typeInt}, "idem"},
		{"UPDATE " + ks + ".t USING TTL ? SET l = l + ?, s = s + ?, m[?] = ? WHERE k = ? AND c = ?", []uint16{typeInt, typeList, typeSet, 0x000D, typeInt, typeInt, typeInt}, "list_append"},
		{"UPDATE " + ks + ".t SET s = s + ?, m = m - ? WHERE k = ? AND c = ?", []uint16{typeSet, typeSet, typeInt, typeInt}, "idem"},
		{"UPDATE " + ks + ".t SET m = m + ?, s = s - ? WHERE k = ? AND c = ?", []uint16{typeMap, typeSet, typeInt, typeInt}, "idem"},
		{"UPDATE " + ks + ".t SET s += ?, l -= ? WHERE k = ? AND c = ?", []uint16{typeSet, typeList, typeInt, typeInt}, "idem"},
		{"UPDATE " + ks + ".t SET l = l - ? WHERE k = ? AND c = ?", []uint16{typeList, typeInt, typeInt}, "idem"},
		{"UPDATE " + ks + ".t SET l += ? WHERE k = ? AND c = ?", []uint16{typeList, typeInt, typeInt}, "list_append"},
		{"UPDATE " + ks + ".t SET l = ? + l WHERE k = ? AND c = ?", []uint16{typeList, typeInt, typeInt}, "list_prepend"},
		{"UPDATE " + ks + ".t SET l[?] = ? WHERE k = ? AND c = ?", []uint16{typeInt, typeInt, typeInt, typeInt}, "list_index"},
		{"UPDATE " + ks + ".t SET l[?] = 5 WHERE k = ? AND c = ?", []uint16{typeInt, typeInt, typeInt}, "idem"},
		{"UPDATE " + ks + ".t SET m[?] = ? WHERE k = ? AND c = ?", []uint16{0x000D, typeInt, typeInt, typeInt}, "idem"},
		// A map with int keys looks like a list to the classifier: a missed
		// hedge, not a wrong one.
		{"UPDATE " + ks + ".t SET mi[?] = ? WHERE k = ? AND c = ?", []uint16{typeInt, 0x000D, typeInt, typeInt}, "list_index"},
		{"UPDATE " + ks + ".t SET m = m + {'a': 1}, v = ? WHERE k = ? AND c = ?", []uint16{0x000D, typeInt, typeInt}, "idem"},
		{"UPDATE " + ks + ".t SET u.zip = ? WHERE k = ? AND c = ?", []uint16{typeInt, typeInt, typeInt}, "idem"},
		{"DELETE l[?] FROM " + ks + ".t WHERE k = ? AND c = ?", []uint16{typeInt, typeInt, typeInt}, "list_index"},
		{"DELETE m[?], u.street FROM " + ks + ".t WHERE k = ? AND c = ?", []uint16{0x000D, typeInt, typeInt}, "idem"},
		{"DELETE FROM " + ks + ".t USING TIMESTAMP ? WHERE k = ? AND c IN ?", []uint16{typeBigint, typeInt, typeList}, "idem"},
		{"UPDATE " + ks + ".t SET v = ? WHERE k = ? AND c = ? IF v = ?", []uint16{0x000D, typeInt, typeInt, 0x000D}, "lwt"},
		{"UPDATE " + ks + ".cnt SET n = n + ? WHERE k = ?", []uint16{typeCounter, typeInt}, "counter"},
		{"UPDATE " + ks + ".cnt SET n -= ? WHERE k = ?", []uint16{typeCounter, typeInt}, "counter"},
		{"INSERT INTO " + ks + ".t JSON ?", []uint16{0x000D}, "idem"},
		// Named markers used twice are two variables.
		{"SELECT * FROM " + ks + ".t WHERE k = :k AND c IN (:c, :c)", []uint16{typeInt, typeInt, typeInt}, "idem"},
		{"BEGIN BATCH UPDATE " + ks + ".t SET s = s + ? WHERE k = ? AND c = ?; INSERT INTO " + ks + ".t (k, c, v) VALUES (?, ?, ?) USING TIMESTAMP ?; APPLY BATCH",
			[]uint16{typeSet, typeInt, typeInt, typeInt, typeInt, 0x000D, typeBigint}, "idem"},
		{"BEGIN BATCH UPDATE " + ks + ".t SET s = s + ? WHERE k = ? AND c = ?; INSERT INTO " + ks + ".t (k, c, l) VALUES (?, ?, ?) USING TIMESTAMP ?; APPLY BATCH",
			[]uint16{typeSet, typeInt, typeInt, typeInt, typeInt, typeList, typeBigint}, "list_overwrite_timestamp"},
		{"UPDATE " + ks + ".t USING TIMESTAMP ? SET l = ?, v = ? WHERE k = ? AND c = ?", []uint16{typeBigint, typeList, 0x000D, typeInt, typeInt}, "list_overwrite_timestamp"},
		{"UPDATE " + ks + ".t USING TIMESTAMP ? SET s = ?, v = ? WHERE k = ? AND c = ?", []uint16{typeBigint, typeSet, 0x000D, typeInt, typeInt}, "idem"},
		{"BEGIN COUNTER BATCH UPDATE " + ks + ".cnt SET n = n + ? WHERE k = ?; APPLY BATCH", []uint16{typeCounter, typeInt}, "counter_batch"},
	} {
		types, code, msg := rc.prepare(t, tc.q)
		if code != 0 {
			t.Errorf("%q: Cassandra error %#x: %s", tc.q, code, msg)
			continue
		}
		if !slices.Equal(types, tc.types) {
			t.Errorf("%q: Cassandra's bind types %#04x; the test expects %#04x", tc.q, types, tc.types)
		}
		st := Classify(tc.q, "", types)
		if st.Markers != len(types) {
			t.Errorf("%q: %d markers counted; Cassandra has %d variables", tc.q, st.Markers, len(types))
		}
		got := "idem"
		if !st.Idempotent {
			got = st.Reason.String()
		}
		if got != tc.expect {
			t.Errorf("%q with types %#04x: %s; want %s", tc.q, types, got, tc.expect)
		}
	}
}

// TestListOverwriteTwiceWithOneTimestamp shows, by running them, why
// ListOverwrite and ReasonListTimestamp exist: a whole list written twice
// with the same timestamp is stored twice, while a set or a plain column is
// not, and the same list write with two different timestamps is stored
// once.
func TestListOverwriteTwiceWithOneTimestamp(t *testing.T) {
	c := single.Get(t)
	rc := dialRaw(t, c.Addrs[0])
	rc.exec(t, "CREATE KEYSPACE IF NOT EXISTS "+testKeyspace+" WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
	rc.exec(t, "CREATE TABLE IF NOT EXISTS "+testKeyspace+".lists (k bigint PRIMARY KEY, l list<int>, s set<int>)")
	cfg := c.ClusterConfig(0)
	s, err := cfg.CreateSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	k := time.Now().UnixNano() // a fresh row: no older deletion shadows low timestamps
	for _, q := range []string{
		"INSERT INTO " + testKeyspace + ".lists (k, l, s) VALUES (?, [1, 2], {1, 2}) USING TIMESTAMP 1000",
		"INSERT INTO " + testKeyspace + ".lists (k, l, s) VALUES (?, [1, 2], {1, 2}) USING TIMESTAMP 1000",
		"INSERT INTO " + testKeyspace + ".lists (k, l) VALUES (?, [3])",
		"INSERT INTO " + testKeyspace + ".lists (k, l) VALUES (?, [3])",
	} {
		kk := k
		if strings.Contains(q, "[3]") {
			kk = k + 1
		}
		if err := s.Query(q, kk).Exec(); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var l []int
	var set []int
	if err := s.Query("SELECT l, s FROM "+testKeyspace+".lists WHERE k = ?", k).Scan(&l, &set); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(l, []int{1, 2, 1, 2}) || !slices.Equal(set, []int{1, 2}) {
		t.Errorf("written twice at one timestamp: list %v, set %v; want [1 2 1 2] and [1 2]", l, set)
	}
	if err := s.Query("SELECT l FROM "+testKeyspace+".lists WHERE k = ?", k+1).Scan(&l); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(l, []int{3}) {
		t.Errorf("written twice at two timestamps: list %v; want [3]", l)
	}
}
