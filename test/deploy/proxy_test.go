package deploy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gocql/gocql"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/cqlgate/cqlgate/pkg/config"
	"github.com/cqlgate/cqlgate/pkg/proxy"
)

// startInProcess runs a proxy with default settings (but fleet mode) in
// front of contact points, registering its metrics in reg, until the test
// ends. It returns the address clients dial.
func startInProcess(t *testing.T, contactPoints []string, reg prometheus.Registerer) string {
	t.Helper()
	cfg := config.Default()
	cfg.Listen = []string{"127.0.0.1:0"}
	cfg.ContactPoints = contactPoints
	// Per-statement series exist only for the top N statements: with some,
	// the docs can tell their types.
	cfg.StatementMetricsTop = 5
	// Rule series exist only for the rules of the file: one that matches
	// nothing lets the docs tell their types.
	cfg.RulesFile = filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(cfg.RulesFile, []byte("rules: [{name: docs, table: docs.none, max_in_flight: 1}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The node's own threads and queue are read in fleet mode only: read
	// often, they have series by the time the docs are taken.
	cfg.LimitMode = "fleet"
	cfg.LimitNodePoll = 100 * time.Millisecond
	if err := cfg.Validate(); err != nil {
		t.Fatalf("config: %v", err)
	}
	p, err := proxy.New(cfg, zap.NewNop(), reg)
	if err != nil {
		t.Fatalf("proxy.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("proxy.Run: %v", err)
			}
		case <-time.After(60 * time.Second):
			t.Errorf("proxy.Run did not return within 60s of cancel")
		}
	})
	select {
	case <-p.Serving():
	case err := <-done:
		t.Fatalf("proxy stopped before serving: %v", err)
	case <-time.After(2 * time.Minute):
		t.Fatal("proxy not serving after 2m")
	}
	return p.Addrs()[0].String()
}

// exercise sends a few requests of each kind through the proxy at addr:
// queries, a prepared statement and its executions, a batch-free USE, and
// an invalid query that Cassandra answers with an error.
func exercise(t *testing.T, addr string) {
	t.Helper()
	cluster := gocql.NewCluster(addr)
	cluster.ProtoVersion = 4
	cluster.Timeout = 10 * time.Second
	cluster.ConnectTimeout = 10 * time.Second
	cluster.NumConns = 1
	cluster.Consistency = gocql.One
	cluster.Logger = nopLogger{}
	s, err := cluster.CreateSession()
	if err != nil {
		t.Fatalf("connecting through the proxy at %s: %v", addr, err)
	}
	defer s.Close()
	// 120 runs of one prepared statement: enough latency samples (100) for
	// its hedge delay to be exported.
	for i := range 120 {
		if i < 20 {
			var n int
			it := s.Query("SELECT keyspace_name FROM system_schema.keyspaces").Iter()
			for it.Scan(new(string)) {
				n++
			}
			if err := it.Close(); err != nil || n == 0 {
				t.Fatalf("query through the proxy: %d rows, %v", n, err)
			}
		}
		var name string
		if err := s.Query("SELECT table_name FROM system_schema.tables WHERE keyspace_name = ? LIMIT 1", "system").Scan(&name); err != nil {
			t.Fatalf("prepared query through the proxy: %v", err)
		}
	}
	if err := s.Query("SELECT nonexistent FROM system.local").Exec(); err == nil {
		t.Error("an invalid query succeeded")
	}
}

type nopLogger struct{}

func (nopLogger) Print(...any)          {}
func (nopLogger) Printf(string, ...any) {}
func (nopLogger) Println(...any)        {}

// binaryProxy is the cqlgate binary running in its own process.
type binaryProxy struct {
	cmd      *exec.Cmd
	AdminURL string // e.g. http://127.0.0.1:41234
	CQLAddr  string // the address clients dial
	logs     *lineBuffer
	exited   chan struct{}
	exitErr  error
}

// startBinary runs the built cqlgate binary with args and extra environment
// variables, JSON logs, and the listen and admin addresses on loopback port
// 0, until the test ends; it returns once /readyz answers 200. At the end of
// the test it sends SIGTERM and checks that the process exits 0.
func startBinary(t *testing.T, env []string, args ...string) *binaryProxy {
	t.Helper()
	proxyBin, _ := bins.get(t)
	args = append([]string{"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--log-format", "json", "--drain-timeout", "5s"}, args...)
	b := &binaryProxy{cmd: exec.Command(proxyBin, args...), logs: &lineBuffer{}, exited: make(chan struct{})}
	b.cmd.Env = append(cleanEnv(), env...)
	b.cmd.Stderr = b.logs
	b.cmd.Stdout = b.logs
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		b.exitErr = b.cmd.Wait()
		close(b.exited)
	}()
	t.Cleanup(func() {
		_ = b.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-b.exited:
			if b.exitErr != nil {
				t.Errorf("cqlgate exited with %v after SIGTERM, want status 0; log:\n%s", b.exitErr, b.logs)
			}
		case <-time.After(30 * time.Second):
			_ = b.cmd.Process.Kill()
			<-b.exited
			t.Errorf("cqlgate still running 30s after SIGTERM; log:\n%s", b.logs)
		}
	})

	deadline := time.Now().Add(2 * time.Minute)
	for b.AdminURL == "" {
		for _, rec := range b.logs.records() {
			if rec["msg"] == "admin server listening" {
				b.AdminURL = fmt.Sprintf("http://%v", rec["address"])
			}
		}
		b.checkAlive(t, deadline)
	}
	for {
		if code, _ := httpGet(b.AdminURL + "/readyz"); code == http.StatusOK {
			break
		}
		b.checkAlive(t, deadline)
	}
	addrs, err := listeningAddrs(b.cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	admin := strings.TrimPrefix(b.AdminURL, "http://")
	for _, a := range addrs {
		if a != admin {
			b.CQLAddr = a
		}
	}
	if b.CQLAddr == "" {
		t.Fatalf("cqlgate listens on %v only; want a CQL address besides the admin one %s", addrs, admin)
	}
	return b
}

func (b *binaryProxy) checkAlive(t *testing.T, deadline time.Time) {
	t.Helper()
	select {
	case <-b.exited:
		t.Fatalf("cqlgate exited early (%v); log:\n%s", b.exitErr, b.logs)
	default:
	}
	if time.Now().After(deadline) {
		t.Fatalf("cqlgate not ready in time; log:\n%s", b.logs)
	}
	time.Sleep(50 * time.Millisecond)
}

// cleanEnv is the test's environment without CQLGATE_ variables, which
// would configure the proxy under test.
func cleanEnv() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "CQLGATE_") })
}

func httpGet(url string) (int, []byte) {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

// listeningAddrs returns the TCP addresses process pid listens on (IPv4),
// read from /proc: the sockets among its file descriptors that are in the
// LISTEN state.
func listeningAddrs(pid int) ([]string, error) {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return nil, fmt.Errorf("listing the proxy's sockets: %w", err)
	}
	inodes := make(map[string]bool)
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join(fmt.Sprintf("/proc/%d/fd", pid), fd.Name()))
		if err == nil && strings.HasPrefix(link, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
		}
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/tcp", pid))
	if err != nil {
		return nil, fmt.Errorf("listing the proxy's sockets: %w", err)
	}
	var out []string
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
		if len(f) < 10 || f[3] != "0A" || !inodes[f[9]] {
			continue
		}
		hostPort := strings.Split(f[1], ":")
		ip, err1 := hex.DecodeString(hostPort[0])
		port, err2 := strconv.ParseUint(hostPort[1], 16, 16)
		if err1 != nil || err2 != nil || len(ip) != 4 {
			continue
		}
		// /proc shows the address in host (little-endian) byte order.
		out = append(out, net.JoinHostPort(net.IPv4(ip[3], ip[2], ip[1], ip[0]).String(), strconv.Itoa(int(port))))
	}
	return out, nil
}

// lineBuffer collects a process's output; records parses its JSON lines.
type lineBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lineBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lineBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// records returns the JSON objects among the complete lines so far.
func (l *lineBuffer) records() []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(l.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) == nil {
			out = append(out, rec)
		}
	}
	return out
}
