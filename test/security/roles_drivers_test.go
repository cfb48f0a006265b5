package security

// The Python driver and the Java driver 4.x get through the proxy exactly
// what they get directly, role by role (gocql and raw frames: roles_test.go).

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cqlgate/cqlgate/internal/cassandratest"
	"github.com/cqlgate/cqlgate/internal/extdrivers"
)

// driverRoles are the roles of the driver tests, with their GRANTs and
// what must happen to them (so that a run where every step fails alike,
// or succeeds alike, does not pass).
var driverRoles = map[string][]string{
	"reader": {"SELECT ON KEYSPACE roles_ks1"},
	"writer": {"SELECT ON KEYSPACE roles_ks1", "MODIFY ON KEYSPACE roles_ks1"},
}

// TestRolesPythonDriver runs test/python/roles_check.py (cassandra-driver):
// reader and writer, directly and through the proxy, QUERY, PREPARE/EXECUTE,
// BATCH, DDL, GRANT and USE; every step must end the same way both ways.
// With --passthrough-identity proxy (every request as the proxy's
// superuser) it fails: reader's INSERT, and both roles' DDL, succeed
// through the proxy.
func TestRolesPythonDriver(t *testing.T) {
	python, version := extdrivers.Python(t)
	t.Logf("%s with cassandra-driver %s", python, version)
	runRoleSteps(t, func(direct, proxied string) []string {
		args := []string{python, extdrivers.Path("test/python/roles_check.py"),
			"--target", "direct=" + direct, "--target", "proxy=" + proxied}
		for role := range driverRoles {
			args = append(args, "--role", role+":pw-"+role)
		}
		return args
	})
}

// TestRolesJavaDriver4 runs test/java/driver4/Roles4.java (Apache Cassandra
// Java driver 4.x), the same steps as TestRolesPythonDriver.
func TestRolesJavaDriver4(t *testing.T) {
	java := extdrivers.Java(t)
	lib := extdrivers.JavaDriver4Jars(t)
	runRoleSteps(t, func(direct, proxied string) []string {
		args := []string{java, "-cp", filepath.Join(lib, "*"), extdrivers.Path("test/java/driver4/Roles4.java"),
			"datacenter1", "direct=" + direct + ",proxy=" + proxied}
		for role := range driverRoles {
			args = append(args, role+":pw-"+role)
		}
		return args
	})
}

// runRoleSteps creates the roles, starts a proxy with role pools, runs the
// command args returns (given the node's and the proxy's address), which
// prints "STEP ROLE TARGET STEP: OUTCOME" lines, and compares each role's
// steps on target direct with those on target proxy.
func runRoleSteps(t *testing.T, args func(direct, proxied string) []string) {
	n := cassandratest.Require(t, node)
	rolesSetup(t, driverRoles)
	p := startProxy(t, passthrough)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	a := args(n.Addrs[0], p.Addr)
	cmd := exec.CommandContext(ctx, a[0], a[1:]...)
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "done") {
		t.Fatalf("%v: %v\n%s", a[1:], err, out)
	}
	t.Logf("%s ran in %s", filepath.Base(a[0]), time.Since(start).Round(time.Millisecond))
	// outcomes[role][target] lists "STEP: OUTCOME" in order.
	outcomes := map[string]map[string][]string{}
	for _, line := range strings.Split(string(out), "\n") {
		rest, ok := strings.CutPrefix(line, "STEP ")
		if !ok {
			continue
		}
		f := strings.SplitN(rest, " ", 3)
		if len(f) < 3 {
			t.Fatalf("malformed line %q", line)
		}
		if outcomes[f[0]] == nil {
			outcomes[f[0]] = map[string][]string{}
		}
		outcomes[f[0]][f[1]] = append(outcomes[f[0]][f[1]], withoutAddrString(f[2], n.Addrs[0], p.Addr))
	}
	for role := range driverRoles {
		direct, proxied := outcomes[role]["direct"], outcomes[role]["proxy"]
		if len(direct) < 10 || len(direct) != len(proxied) {
			t.Fatalf("%s: %d steps directly, %d through the proxy\n%s", role, len(direct), len(proxied), out)
		}
		for i := range direct {
			if direct[i] != proxied[i] {
				t.Errorf("%s:\n  proxied %s\n  direct  %s", role, proxied[i], direct[i])
			} else {
				t.Logf("%s: %s", role, direct[i])
			}
		}
		// The steps must tell the roles apart, or the comparison proves
		// nothing: reader may not write roles_ks1, writer may.
		insert := ""
		for _, o := range direct {
			if s, ok := strings.CutPrefix(o, "insert ks1: "); ok {
				insert = s
			}
		}
		if denied := strings.Contains(insert, "has no MODIFY permission"); denied != (role == "reader") {
			t.Errorf("%s's INSERT into roles_ks1 directly: %s", role, insert)
		}
	}
}

// withoutAddrString replaces the given host:port addresses (and their
// hosts) in s, as withoutAddrs does in errors.
func withoutAddrString(s string, addrs ...string) string {
	for _, a := range addrs {
		s = strings.ReplaceAll(s, a, "ADDR")
		if h, _, ok := strings.Cut(a, ":"); ok {
			s = strings.ReplaceAll(s, h, "HOST")
		}
	}
	return s
}
