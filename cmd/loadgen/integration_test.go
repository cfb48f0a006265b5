package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/cqlgate/cqlgate/internal/cassandratest"
)

// testCassandraAddr is where the fallback node runs: an address of its own,
// so that it collides neither with scripts/bench.sh's node (127.0.10.1) nor
// with other packages' clusters when go test runs packages in parallel.
const testCassandraAddr = "127.0.14.1"

// cassandraAddr returns host:port of a real single Cassandra node: the one
// named by CQLGATE_TEST_CASSANDRA_SINGLE, else one started for this test
// (and stopped after it). With CQLGATE_SKIP_CASSANDRA=1 the test is
// skipped; otherwise a Cassandra that cannot be had fails it, because a
// load generator never run against Cassandra is not tested.
func cassandraAddr(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, stop, err := cassandratest.Shared(ctx, "SINGLE", cassandratest.Options{
		Nodes:     1,
		Addresses: []string{testCassandraAddr},
	})
	if errors.Is(err, cassandratest.ErrSkipped) {
		t.Skip("CQLGATE_SKIP_CASSANDRA=1")
	}
	if err != nil {
		t.Fatalf("no Cassandra (set CQLGATE_TEST_CASSANDRA_SINGLE=host:port to use a running node): %v", err)
	}
	t.Cleanup(stop)
	return c.Addrs[0]
}

// runLoadgen runs one subcommand in-process and returns its exit code,
// stdout and stderr.
func runLoadgen(t *testing.T, ctx context.Context, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(ctx, args, &stdout, &stderr)
	t.Logf("loadgen %s -> %d\nstderr:\n%s", strings.Join(args, " "), code, stderr.String())
	return code, stdout.String(), stderr.String()
}

// TestAgainstCassandra runs setup, run and compare for real: 8 workers, 1 s
// windows.
func TestAgainstCassandra(t *testing.T) {
	addr := cassandraAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	ks := "loadgen_it_" + strconv.Itoa(os.Getpid())
	t.Cleanup(func() { dropKeyspace(t, addr, ks) })
	schema := []string{"--keyspace", ks, "--rows", "500", "--value-size", "64"}
	// No --fail-on-errors: on a busy machine a request may time out, and
	// that is loadgen reporting honestly, not loadgen failing. A real
	// failure (nothing measured, mostly errors) is asserted below.
	load := []string{"--workers", "8", "--duration", "1s", "--warmup", "300ms"}

	t.Run("setup", func(t *testing.T) {
		code, _, stderr := runLoadgen(t, ctx, append([]string{"setup", "--hosts", addr}, schema...)...)
		if code != exitOK {
			t.Fatalf("setup exit %d: %s", code, stderr)
		}
		if n := countRows(t, addr, ks); n != 500 {
			t.Errorf("%s.kv has %d rows; want 500", ks, n)
		}
	})

	t.Run("run", func(t *testing.T) {
		args := append(append([]string{"run", "--hosts", addr, "--workload", "mixed"}, schema...), load...)
		code, stdout, stderr := runLoadgen(t, ctx, args...)
		if code != exitOK {
			t.Fatalf("run exit %d: %s", code, stderr)
		}
		for _, want := range []string{"throughput", "p99.9", "loadgen cpu"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("run output lacks %q:\n%s", want, stdout)
			}
		}

		if !strings.Contains(stderr, "measure ops/s=") {
			t.Errorf("no progress line on stderr:\n%s", stderr)
		}
	})

	t.Run("compare", func(t *testing.T) {
		// Both targets are the same node. This test process stands in for
		// the proxy whose CPU is read from /proc: the figure must come out
		// positive and of the same order as loadgen's own CPU per op.
		args := append(append([]string{"compare",
			"--target", "direct=" + addr, "--target", "again=" + addr,
			"--rounds", "2", "--proxy-target", "again", "--proxy-pid", strconv.Itoa(os.Getpid()), "--json",
		}, schema...), load...)
		code, stdout, stderr := runLoadgen(t, ctx, args...)
		if code != exitOK {
			t.Fatalf("compare exit %d: %s", code, stderr)
		}
		var rep compareReport
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
			t.Fatalf("compare --json output: %v\n%s", err, stdout)
		}
		if got := fmt.Sprint(rep.Order); got != "[[direct again] [again direct]]" {
			t.Errorf("order = %s; want ABBA", got)
		}
		for _, tg := range rep.Targets {
			if tg.Ops == 0 || tg.ErrorsTotal*100 > tg.Ops || len(tg.Rounds) != 2 {
				t.Errorf("%s: %d ops, %d errors (%v), %d rounds; want >0, under 1%%, 2",
					tg.Name, tg.Ops, tg.ErrorsTotal, tg.ErrorSamples, len(tg.Rounds))
			}
			if tg.Latency.P50 <= 0 || tg.LoadgenCPUPerOp <= 0 {
				t.Errorf("%s: p50 %dµs, loadgen cpu %vµs/op; want both > 0", tg.Name, tg.Latency.P50, tg.LoadgenCPUPerOp)
			}
		}
		again := rep.Targets[1]
		if again.ProxyCPUPerReq == nil || *again.ProxyCPUPerReq <= 0 {
			t.Fatalf("again: proxy_cpu_us_per_req = %v; want > 0", again.ProxyCPUPerReq)
		}
		if r := *again.ProxyCPUPerReq / again.LoadgenCPUPerOp; r < 0.3 || r > 3 {
			t.Errorf("/proc CPU %vµs/req vs getrusage %vµs/op: same process, want within 3x",
				*again.ProxyCPUPerReq, again.LoadgenCPUPerOp)
		}
		if again.Significance == nil || again.Significance.P == nil {
			t.Errorf("no significance test for the second target")
		}
	})

	t.Run("failed requests exit 3 with --fail-on-errors", func(t *testing.T) {
		// A keyspace without table kv: every request fails on the server
		// with "unconfigured table", deterministically.
		empty := ks + "_empty"
		s := testSession(t, addr)
		err := s.Query("CREATE KEYSPACE IF NOT EXISTS " + empty +
			" WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}").Exec()
		s.Close()
		if err != nil {
			t.Fatalf("create keyspace %s: %v", empty, err)
		}
		t.Cleanup(func() { dropKeyspace(t, addr, empty) })

		code, stdout, stderr := runLoadgen(t, ctx, "run", "--hosts", addr, "--keyspace", empty,
			"--workers", "2", "--duration", "500ms", "--warmup", "0s", "--fail-on-errors", "--json")
		if code != exitErrorsSeen {
			t.Fatalf("exit %d; want %d: %s", code, exitErrorsSeen, stderr)
		}
		var rep runReport
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
			t.Fatalf("run --json output: %v\n%s", err, stdout)
		}
		if rep.Target.Ops != 0 || rep.Target.Errors[ErrKindOther] == 0 || rep.Target.Errors[ErrKindOther] != rep.Target.ErrorsTotal {
			t.Errorf("ops %d, errors %v; want 0 ops and only 'other' errors", rep.Target.Ops, rep.Target.Errors)
		}
		if msg := rep.Target.ErrorSamples["other"]; !strings.Contains(msg, "kv") {
			t.Errorf("error sample %q; want the server's message about table kv", msg)
		}
	})

	t.Run("unreachable target fails", func(t *testing.T) {
		host, _, _ := strings.Cut(addr, ":")
		code, _, stderr := runLoadgen(t, ctx, "run", "--hosts", host+":1", "--duration", "1s")
		if code != exitFailure || !strings.Contains(stderr, "connect to") {
			t.Errorf("exit %d, stderr %q; want %d and a connect error", code, stderr, exitFailure)
		}
	})
}

func testSession(t *testing.T, addr string) *gocql.Session {
	t.Helper()
	c := gocql.NewCluster(addr)
	c.Timeout = 10 * time.Second
	s, err := c.CreateSession()
	if err != nil {
		t.Fatalf("connect to %s: %v", addr, err)
	}
	return s
}

func countRows(t *testing.T, addr, ks string) int64 {
	t.Helper()
	s := testSession(t, addr)
	defer s.Close()
	var n int64
	if err := s.Query("SELECT count(*) FROM " + ks + ".kv").Scan(&n); err != nil {
		t.Fatalf("count rows: %v", err)
	}
	return n
}

func dropKeyspace(t *testing.T, addr, ks string) {
	s := testSession(t, addr)
	defer s.Close()
	if err := s.Query("DROP KEYSPACE IF EXISTS " + ks).Exec(); err != nil {
		t.Errorf("drop keyspace %s: %v", ks, err)
	}
}
