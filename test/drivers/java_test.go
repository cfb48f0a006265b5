package drivers

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cqlgate/cqlgate/internal/extdrivers"
	"github.com/cqlgate/cqlgate/internal/proxytest"
	"github.com/cqlgate/cqlgate/pkg/config"
)

// The driver checks and the drivers' logging (WARN and above), relative to
// this package.
const (
	javaProbe3    = "../java/Probe.java"
	javaProbe4    = "../java/driver4/Probe4.java"
	javaSchema4   = "../java/driver4/SchemaChange4.java"
	javaLogConfig = "../java/logback-test.xml"
)

// TestJavaDriver3 runs test/java/Probe.java, which drives the DataStax Java
// driver 3.x (the one Cassandra ships in its lib directory, so no download)
// through an in-process proxy: host discovery, schema agreement, DDL, a
// keyspace-bound session, prepared statements, paging, a batch and
// token-aware routing. First with one listen address, then with two on the
// same port, where the driver must see two hosts, both of them the proxy's.
func TestJavaDriver3(t *testing.T) {
	java := extdrivers.Java(t)
	addrs := single.get(t)
	lib := cassandraLibDir()
	if jars, _ := filepath.Glob(filepath.Join(lib, "cassandra-driver-core-3.*.jar")); len(jars) == 0 {
		t.Fatalf("no cassandra-driver-core 3.x jar in %s: scripts/cassandra-local.sh fetch puts it there (CQLGATE_CASSANDRA_CACHE moves it)", lib)
	}
	runJavaProbe(t, addrs, func(listen []string) []string {
		return []string{java, "-Dlogback.configurationFile=" + javaLogConfig, "-cp", filepath.Join(lib, "*"), javaProbe3,
			strings.Join(listen, ","), fmt.Sprint(len(listen))}
	})
}

// TestJavaDriver4 runs test/java/driver4/Probe4.java, the same checks with
// the Apache Cassandra Java driver 4.x (fetched from Maven Central once, into
// ~/.cache/cqlgate), which reads system.peers_v2 and checks schema agreement
// after every DDL.
func TestJavaDriver4(t *testing.T) {
	java := extdrivers.Java(t)
	addrs := single.get(t)
	lib := extdrivers.JavaDriver4Jars(t)
	runJavaProbe(t, addrs, func(listen []string) []string {
		return []string{java, "-cp", filepath.Join(lib, "*"), javaProbe4,
			strings.Join(listen, ","), fmt.Sprint(len(listen)), "datacenter1"}
	})
}

// TestJavaDriver4SchemaChanges runs test/java/driver4/SchemaChange4.java:
// prepared statements of the Java driver 4.x across ALTER TABLE ADD/DROP and
// DROP/CREATE TABLE, on protocol v5 and v4, directly against the node and
// through an in-process proxy; the driver must read the same both ways (the
// proxy once hid UNPREPARED and the driver decoded new rows with old
// columns). TestPreparedStatementsAcrossSchemaChanges in test/integration
// runs the scenario with the Go drivers.
func TestJavaDriver4SchemaChanges(t *testing.T) {
	java := extdrivers.Java(t)
	addrs := single.get(t)
	lib := extdrivers.JavaDriver4Jars(t)
	p := proxytest.Start(t, addrs, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	args := []string{"-cp", filepath.Join(lib, "*"), javaSchema4, addrs[0], p.Addr, "datacenter1"}
	c := exec.CommandContext(ctx, java, args...)
	c.WaitDelay = 10 * time.Second
	start := time.Now()
	out, err := c.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "OK schema changes") {
		t.Fatalf("%v: %v\n%s", args, err, out)
	}
	t.Logf("%s\nin %s", out, time.Since(start).Round(time.Millisecond))
}

// runJavaProbe starts a proxy listening on one address, then on two with the
// same port, and runs the command cmd returns for each, which must print
// "OK rows 102".
func runJavaProbe(t *testing.T, addrs []string, cmd func(listen []string) []string) {
	port := proxytest.FreePortOn(t, "127.0.0.1", "127.0.0.2")
	for _, listen := range [][]string{
		{"127.0.0.1:" + port},
		{"127.0.0.1:" + port, "127.0.0.2:" + port},
	} {
		t.Run(fmt.Sprintf("%d_addresses", len(listen)), func(t *testing.T) {
			p := proxytest.Start(t, addrs, func(cfg *config.Config) { cfg.Listen = listen })
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			args := cmd(listen)
			c := exec.CommandContext(ctx, args[0], args[1:]...)
			c.WaitDelay = 10 * time.Second
			out, err := c.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "OK rows 102") {
				t.Fatalf("%v through %v: %v\n%s\nproxy log:\n%s", args[1:], listen, err, out, p.Logs)
			}
			t.Logf("%s", out)
		})
	}
}

// cassandraLibDir is where scripts/cassandra-local.sh keeps Cassandra's jars.
func cassandraLibDir() string {
	if d := os.Getenv("CQLGATE_CASSANDRA_CACHE"); d != "" {
		return filepath.Join(d, "lib")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "cqlgate", "cassandra-5.0.4", "lib")
}
