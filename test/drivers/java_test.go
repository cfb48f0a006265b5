package drivers

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cqlgate/cqlgate/internal/proxytest"
	"github.com/cqlgate/cqlgate/pkg/config"
)

// javaProbe is the driver check and javaLogConfig the driver's logging
// (WARN and above), relative to this package.
const (
	javaProbe     = "../java/Probe.java"
	javaLogConfig = "../java/logback-test.xml"
)

// TestJavaDriver3 runs test/java/Probe.java, which drives the DataStax Java
// driver 3.x (the one Cassandra ships in its lib directory, so no download)
// through an in-process proxy: host discovery, schema agreement, DDL, a
// keyspace-bound session, prepared statements, paging, a batch and
// token-aware routing. First with one listen address, then with two on the
// same port, where the driver must see two hosts, both of them the proxy's.
func TestJavaDriver3(t *testing.T) {
	java, err := exec.LookPath("java")
	if err != nil {
		if os.Getenv("CQLGATE_SKIP_JAVA") == "1" {
			t.Skip("CQLGATE_SKIP_JAVA=1: no java on PATH")
		}
		t.Fatalf("no java on PATH (Cassandra needs it too): %v; CQLGATE_SKIP_JAVA=1 skips this test", err)
	}
	addrs := single.get(t)
	lib := cassandraLibDir()
	if jars, _ := filepath.Glob(filepath.Join(lib, "cassandra-driver-core-3.*.jar")); len(jars) == 0 {
		t.Fatalf("no cassandra-driver-core 3.x jar in %s: scripts/cassandra-local.sh fetch puts it there (CQLGATE_CASSANDRA_CACHE moves it)", lib)
	}
	port := freePortOn(t, "127.0.0.1", "127.0.0.2")
	for _, listen := range [][]string{
		{"127.0.0.1:" + port},
		{"127.0.0.1:" + port, "127.0.0.2:" + port},
	} {
		t.Run(fmt.Sprintf("%d_addresses", len(listen)), func(t *testing.T) {
			p := proxytest.Start(t, addrs, func(cfg *config.Config) { cfg.Listen = listen })
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, java, "-Dlogback.configurationFile="+javaLogConfig, "-cp", filepath.Join(lib, "*"), javaProbe,
				strings.Join(listen, ","), fmt.Sprint(len(listen)))
			cmd.WaitDelay = 10 * time.Second
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "OK rows 102") {
				t.Fatalf("%s through %v: %v\n%s\nproxy log:\n%s", javaProbe, listen, err, out, p.Logs)
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

// freePortOn returns a port that was free on every one of hosts just now.
func freePortOn(t *testing.T, hosts ...string) string {
	t.Helper()
	for range 20 {
		ln, err := net.Listen("tcp", hosts[0]+":0")
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		free := true
		var held []net.Listener
		for _, h := range hosts[1:] {
			l, err := net.Listen("tcp", net.JoinHostPort(h, port))
			if err != nil {
				free = false
				break
			}
			held = append(held, l)
		}
		ln.Close()
		for _, l := range held {
			l.Close()
		}
		if free {
			return port
		}
	}
	t.Fatalf("no port free on all of %v", hosts)
	return ""
}
