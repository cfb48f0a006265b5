package integration

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/cqlgate/cqlgate/pkg/config"
	"github.com/cqlgate/cqlgate/pkg/frame"
)

// TestUseKeyspace checks per-client keyspaces over shared backend
// connections: two sessions whose keyspaces both hold a table t see only
// their own t, concurrently, through one proxy; raw clients switching
// keyspaces with USE do too; and USE of a missing keyspace gets Cassandra's
// error and leaves the client where it was.
func TestUseKeyspace(t *testing.T) {
	c := singleCluster.Get(t)
	p := startProxy(t, c.Addrs, nil)
	admin := proxySession(t, p, nil)
	// The second keyspace has a case-sensitive name, which must be quoted
	// all the way to Cassandra.
	const ks1, ks2, ks2Quoted = "it_ks1", "It_Ks2", `"It_Ks2"`
	for _, ks := range []string{ks1, ks2Quoted} {
		recreateKeyspace(t, admin, ks, 1, "CREATE TABLE "+ks+".t (k int PRIMARY KEY, v text)")
		for k := 0; k < 100; k++ {
			mustExec(t, admin, "INSERT INTO "+ks+".t (k, v) VALUES (?, ?)", k, fmt.Sprintf("%s-%d", strings.Trim(ks, `"`), k))
		}
	}

	s1 := proxySession(t, p, func(cc *gocql.ClusterConfig) { cc.Keyspace = ks1 })
	s2 := proxySession(t, p, func(cc *gocql.ClusterConfig) { cc.Keyspace = ks2 })
	f := useKeyspaceFixture{p: p, admin: admin, s1: s1, s2: s2, ks1: ks1, ks2: ks2, ks2Quoted: ks2Quoted}

	t.Run("ConcurrentSessions", f.testConcurrentSessions)
	t.Run("UnqualifiedDDL", f.testUnqualifiedDDL)
	t.Run("RawUse", func(t *testing.T) {
		for _, v := range []byte{4, 5} {
			t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) { f.testRawUse(t, v) })
		}
	})
	t.Run("SessionWithMissingKeyspace", f.testSessionWithMissingKeyspace)
}

// useKeyspaceFixture is what TestUseKeyspace's parts share: the proxy, a
// session without a keyspace, one in each keyspace, and the keyspaces'
// names (ks2 is case-sensitive: ks2Quoted is how CQL names it).
type useKeyspaceFixture struct {
	p                   *testProxy
	admin, s1, s2       *gocql.Session
	ks1, ks2, ks2Quoted string
}

// testConcurrentSessions: the two sessions, used at once, read and write
// their own keyspace's t only.
func (f useKeyspaceFixture) testConcurrentSessions(t *testing.T) {
	admin, s1, s2, ks1, ks2, ks2Quoted := f.admin, f.s1, f.s2, f.ks1, f.ks2, f.ks2Quoted
	const workers, iterations = 8, 100
	var wg sync.WaitGroup
	errs := make(chan string, 2*workers*iterations)
	for _, sc := range []struct {
		s  *gocql.Session
		ks string
	}{{s1, ks1}, {s2, ks2}} {
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < iterations; i++ {
					k := (w*iterations + i) % 100
					var v string
					if err := sc.s.Query("SELECT v FROM t WHERE k = ?", k).Scan(&v); err != nil {
						errs <- fmt.Sprintf("%s: SELECT k=%d: %v", sc.ks, k, err)
						continue
					}
					if want := fmt.Sprintf("%s-%d", sc.ks, k); v != want {
						errs <- fmt.Sprintf("%s: SELECT v FROM t WHERE k=%d: got %q, want %q", sc.ks, k, v, want)
					}
					wk := 1000 + w*iterations + i
					if err := sc.s.Query("INSERT INTO t (k, v) VALUES (?, ?)", wk, sc.ks).Exec(); err != nil {
						errs <- fmt.Sprintf("%s: INSERT k=%d: %v", sc.ks, wk, err)
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	var msgs []string
	for m := range errs {
		msgs = append(msgs, m)
	}
	if len(msgs) > 0 {
		t.Fatalf("%d failures; first ones:\n  %s", len(msgs), strings.Join(msgs[:min(10, len(msgs))], "\n  "))
	}
	// Each session's unqualified INSERTs landed in its own keyspace only.
	for _, ks := range []string{ks1, ks2Quoted} {
		iter := admin.Query("SELECT k, v FROM " + ks + ".t").Iter()
		var k int
		var v string
		written := 0
		for iter.Scan(&k, &v) {
			if k < 1000 {
				continue
			}
			written++
			if want := strings.Trim(ks, `"`); v != want {
				t.Errorf("%s.t k=%d: got v=%q, want %q (written by the other session)", ks, k, v, want)
			}
		}
		if err := iter.Close(); err != nil {
			t.Fatal(err)
		}
		if written != workers*iterations {
			t.Errorf("%s.t: got %d rows written with unqualified INSERTs, want %d", ks, written, workers*iterations)
		}
	}
}

// testUnqualifiedDDL: DDL without a keyspace lands in the session's.
func (f useKeyspaceFixture) testUnqualifiedDDL(t *testing.T) {
	admin, s2, ks1, ks2 := f.admin, f.s2, f.ks1, f.ks2
	// DDL is sent as a simple QUERY, resolved in the session's keyspace.
	mustExec(t, s2, "CREATE TABLE IF NOT EXISTS only_in_ks2 (k int PRIMARY KEY)")
	var n int
	if err := admin.Query("SELECT count(*) FROM system_schema.tables WHERE keyspace_name = ? AND table_name = 'only_in_ks2'", ks2).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("table only_in_ks2 in %s: got %d, want 1", ks2, n)
	}
	if err := admin.Query("SELECT count(*) FROM system_schema.tables WHERE keyspace_name = ? AND table_name = 'only_in_ks2'", ks1).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("table only_in_ks2 in %s: got %d, want 0", ks1, n)
	}
}

// testRawUse: two raw connections of protocol version v switch to a
// keyspace each with USE and see their own t, interleaved; USE of a
// missing keyspace gets Cassandra's error and leaves the connection where
// it was.
func (f useKeyspaceFixture) testRawUse(t *testing.T, v byte) {
	p, ks1, ks2, ks2Quoted := f.p, f.ks1, f.ks2, f.ks2Quoted
	r1, r2 := dialRaw(t, p.Addr, v), dialRaw(t, p.Addr, v)
	r1.startup(nil)
	r2.startup(nil)
	for _, u := range []struct {
		r  *rawConn
		ks string
	}{{r1, ks1}, {r2, ks2Quoted}} {
		resp := u.r.query(1, "USE "+u.ks)
		if ks, err := frame.SetKeyspaceName(resultBodyOf(t, resp)); err != nil || ks != strings.Trim(u.ks, `"`) {
			t.Fatalf("v%d USE %s: got %s (keyspace %q, %v), want RESULT Set_keyspace %s", v, u.ks, describe(resp), ks, err, u.ks)
		}
	}
	// Interleave simple unqualified queries on both connections.
	for i := 0; i < 20; i++ {
		for _, u := range []struct {
			r  *rawConn
			ks string
		}{{r1, ks1}, {r2, ks2}} {
			rs := u.r.mustRows(fmt.Sprintf("SELECT v FROM t WHERE k = %d", i))
			want := fmt.Sprintf("%s-%d", u.ks, i)
			if len(rs.rows) != 1 || string(rs.rows[0][0]) != want {
				t.Fatalf("v%d, after USE %s: SELECT v FROM t WHERE k = %d: got %q, want [%q]", v, u.ks, i, rs.rows, want)
			}
		}
	}

	// USE of a missing keyspace: Cassandra's error; the connection
	// stays in its keyspace.
	resp := r1.query(2, "USE it_no_such_keyspace")
	code, msg, ok := errorOf(resp)
	if !ok || code != frame.ErrCodeInvalid || !strings.Contains(msg, "does not exist") {
		t.Fatalf("v%d USE of a missing keyspace: got %s, want ERROR 0x2200 saying it does not exist", v, describe(resp))
	}
	if frame.Stream(resp) != 2 {
		t.Errorf("v%d USE of a missing keyspace: answered on stream %d, want 2", v, frame.Stream(resp))
	}
	rs := r1.mustRows("SELECT v FROM t WHERE k = 7")
	if want := ks1 + "-7"; len(rs.rows) != 1 || string(rs.rows[0][0]) != want {
		t.Fatalf("v%d after a failed USE: got %q, want [%q] (still in %s)", v, rs.rows, want, ks1)
	}
}

// testSessionWithMissingKeyspace: a session whose keyspace does not exist
// fails with Cassandra's message.
func (f useKeyspaceFixture) testSessionWithMissingKeyspace(t *testing.T) {
	p := f.p
	// gocql returns a generic error and logs the server's; catch both.
	logs := &logCapture{}
	cc := gocql.NewCluster(p.Addr)
	cc.Keyspace = "it_no_such_keyspace"
	cc.Logger = logs
	s, err := cc.CreateSession()
	if err == nil {
		s.Close()
		t.Fatal("CreateSession with a missing keyspace: got no error")
	}
	if want := "Keyspace 'it_no_such_keyspace' does not exist"; !strings.Contains(err.Error()+logs.String(), want) {
		t.Errorf("CreateSession with a missing keyspace: got error %q and logs %q, want Cassandra's %q", err, logs, want)
	}
}

// logCapture is a gocql.StdLogger that keeps what it is given.
type logCapture struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logCapture) Print(v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprint(&l.b, v...)
	l.b.WriteByte('\n')
}
func (l *logCapture) Printf(format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(&l.b, format, v...)
	l.b.WriteByte('\n')
}
func (l *logCapture) Println(v ...any) { l.Print(v...) }
func (l *logCapture) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// resultBodyOf returns the message of a RESULT frame, failing on an ERROR.
func resultBodyOf(t testing.TB, f []byte) []byte {
	t.Helper()
	if frame.Opcode(f) != frame.OpResult {
		t.Fatalf("got %s, want RESULT", describe(f))
	}
	b, err := frame.MessageBody(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestIdleKeyspacePoolIsClosed: the connections opened for a keyspace that
// clients USE stay open while a client uses it, are closed once none has
// for --keyspace-pool-idle-timeout, and are opened again by the next USE.
func TestIdleKeyspacePoolIsClosed(t *testing.T) {
	c := singleCluster.Get(t)
	const idle = time.Second
	p := startProxy(t, c.Addrs, func(cfg *config.Config) {
		cfg.KeyspacePoolIdleTimeout = idle
		cfg.RequestTimeout = idle // the idle timeout is never shorter
	})
	admin := proxySession(t, p, nil)
	recreateKeyspace(t, admin, "it_idlepool", 1, "CREATE TABLE it_idlepool.t (k int PRIMARY KEY, v int)")
	mustExec(t, admin, "INSERT INTO it_idlepool.t (k, v) VALUES (1, 1)")

	use := func() *rawConn {
		r := dialRaw(t, p.Addr, 4)
		r.startup(nil)
		if ks, err := frame.SetKeyspaceName(resultBodyOf(t, r.query(1, "USE it_idlepool"))); err != nil || ks != "it_idlepool" {
			t.Fatalf("USE it_idlepool: keyspace %q, %v", ks, err)
		}
		return r
	}
	pools := func() float64 { return metricSum(t, p.Reg, "cqlgate_backend_pools") }
	r := dialRaw(t, p.Addr, 4) // opens the version's pool without a keyspace
	r.startup(nil)
	before := pools()

	held := use()
	if got := pools(); got != before+1 {
		t.Fatalf("after USE: %v pools, want %v", got, before+1)
	}
	// Held by a connected client, the pool outlives the idle timeout.
	time.Sleep(3 * idle)
	if got := pools(); got != before+1 {
		t.Fatalf("%v after USE, with the client still connected: %v pools, want %v", 3*idle, got, before+1)
	}
	if rs := held.mustRows("SELECT v FROM t WHERE k = 1"); len(rs.rows) != 1 {
		t.Fatalf("unqualified SELECT after %v: %d rows, want 1", 3*idle, len(rs.rows))
	}

	held.nc.Close()
	waitFor(t, 10*time.Second, "the keyspace pool to close", func() (bool, string) {
		got := pools()
		return got == before, fmt.Sprintf("%v pools, want %v", got, before)
	})

	again := use()
	if rs := again.mustRows("SELECT v FROM t WHERE k = 1"); len(rs.rows) != 1 {
		t.Fatalf("unqualified SELECT after the pool was reopened: %d rows, want 1", len(rs.rows))
	}
	if got := pools(); got != before+1 {
		t.Fatalf("after USE again: %v pools, want %v", got, before+1)
	}
}
