package drivers

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cqlgate/cqlgate/internal/extdrivers"
)

// TestCqlsh runs cqlsh (the PyPI package of Cassandra's shell, on the Python
// driver) against the proxy the way an operator would: connecting, SHOW
// VERSION, DESCRIBE, DDL, writes and reads, USE, and a look at system.local,
// which must show the proxy.
func TestCqlsh(t *testing.T) {
	python, _ := extdrivers.Python(t)
	if out, err := exec.Command(python, "-c", "import cqlshlib").CombinedOutput(); err != nil {
		if os.Getenv("CQLGATE_SKIP_PYTHON") == "1" {
			t.Skipf("CQLGATE_SKIP_PYTHON=1: %s cannot import cqlshlib: %v", python, err)
		}
		t.Fatalf("%s cannot import cqlshlib (python3 -m pip install cqlsh): %v\n%s", python, err, out)
	}
	addrs := single.get(t)
	proxyAddr := startProxy(t, addrs)
	host, port, err := net.SplitHostPort(proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	cqlsh := func(statements string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, python, "-m", "cqlshlib", host, port, "--request-timeout", "30", "-e", statements)
		cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1", "HOME="+t.TempDir()) // no ~/.cassandra/cqlshrc
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("cqlsh -e %q: %v\n%s", statements, err, out)
		}
		return string(out)
	}
	expect := func(out, what string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: output lacks %q:\n%s", what, w, out)
			}
		}
	}

	expect(cqlsh("SHOW VERSION"), "SHOW VERSION", "Cassandra 5.0")
	expect(cqlsh("DESCRIBE KEYSPACES"), "DESCRIBE KEYSPACES", "system_schema", "system")
	cqlsh("DROP KEYSPACE IF EXISTS it_cqlsh; " +
		"CREATE KEYSPACE it_cqlsh WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}; " +
		"CREATE TABLE it_cqlsh.t (k int PRIMARY KEY, v text); " +
		"INSERT INTO it_cqlsh.t (k, v) VALUES (1, 'through-the-proxy')")
	expect(cqlsh("SELECT k, v FROM it_cqlsh.t"), "SELECT", "through-the-proxy", "(1 rows)")
	expect(cqlsh("USE it_cqlsh; SELECT v FROM t WHERE k = 1"), "USE then SELECT", "through-the-proxy")
	expect(cqlsh("DESCRIBE TABLE it_cqlsh.t"), "DESCRIBE TABLE", "CREATE TABLE it_cqlsh.t", "k int PRIMARY KEY")
	expect(cqlsh("SELECT rpc_address, rpc_port FROM system.local"), "system.local", host, port)
}
