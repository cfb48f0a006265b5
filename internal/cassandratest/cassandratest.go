// Package cassandratest starts and controls real Apache Cassandra 5.0 clusters on loopback
// addresses for integration tests. It drives scripts/cassandra-local.sh (no Docker: the jars come
// from Maven Central and each node is a plain JVM on its own 127.x.y.z address, ports 9042/7000).
//
// Typical use, one cluster per test package:
//
//	var cluster *cassandratest.Cluster
//
//	func TestMain(m *testing.M) {
//		os.Exit(cassandratest.RunMain(m, "single", cassandratest.Options{}, &cluster))
//	}
//
//	func TestSomething(t *testing.T) {
//		c := cassandratest.Require(t, cluster)
//		... connect to c.Addrs[0] ...
//	}
//
// Tests that need Cassandra FAIL when it cannot be started. They are skipped only when the
// environment variable CQLGATE_SKIP_CASSANDRA=1 is set explicitly.
//
// Environment:
//   - CQLGATE_SKIP_CASSANDRA=1: Start/Shared return ErrSkipped; Require skips the test.
//   - CQLGATE_TEST_CASSANDRA_<NAME>=host:port,...: Shared(ctx, "<name>", ...) uses these running
//     nodes instead of starting a cluster; CQLGATE_TEST_CASSANDRA_<NAME>_DIR names the
//     cassandra-local.sh directory of those nodes, which StopNode/StartNode/PauseNode/PID need.
//   - CQLGATE_KEEP_CASSANDRA_DIR=1: Stop leaves the cluster directory (logs, data) in place.
//   - CQLGATE_CASSANDRA_SCRIPT: path of cassandra-local.sh (default: found from this source file
//     or the module root).
//   - the variables of cassandra-local.sh (CQLGATE_CASSANDRA_CACHE, CQLGATE_CASSANDRA_START_TIMEOUT, ...).
//
// It must not touch a Cassandra it did not start (a user's node on 127.0.0.1 is left alone) and
// stops only nodes it started, by pid.
package cassandratest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// CQLPort is the native protocol port of every node (each node has its own address).
const CQLPort = 9042

// Default superuser of clusters started with Options.Auth.
const (
	DefaultUsername = "cassandra"
	DefaultPassword = "cassandra"
)

// ErrSkipped is returned by Start and Shared when CQLGATE_SKIP_CASSANDRA=1 is set.
var ErrSkipped = errors.New("cassandratest: Cassandra disabled by CQLGATE_SKIP_CASSANDRA=1")

// Options describe a cluster to start. The zero value is a single node on 127.0.10.1.
type Options struct {
	// Nodes is the number of nodes (default 1, or len(Addresses)).
	Nodes int
	// Addresses are the nodes' loopback IPv4 addresses, one per node. Default
	// 127.0.10.1..127.0.10.N. Never 127.0.0.1, which may host a developer's own Cassandra.
	// Clusters on disjoint addresses can run at the same time.
	Addresses []string
	// Dir is the cluster directory (configs, data, logs). Default:
	// /tmp/cqlgate-cassandratest/<first address>. Start wipes it (cassandra-local.sh clean)
	// and Stop removes it again unless CQLGATE_KEEP_CASSANDRA_DIR=1.
	Dir string
	// Heap is the JVM heap per node, e.g. "512m" (the default) or "1g".
	Heap string
	// Auth enables PasswordAuthenticator and CassandraAuthorizer with the superuser
	// cassandra/cassandra. Start returns only once that login works on every node. With more
	// than one node, system_auth gets replication factor min(Nodes, 3) so that logins keep
	// working while one node is down.
	Auth bool
	// YAMLExtra is YAML text appended to every node's cassandra.yaml (e.g.
	// client_encryption_options for TLS tests). It must not repeat keys the script writes.
	YAMLExtra string
}

// Cluster is a running (or externally provided) Cassandra cluster.
type Cluster struct {
	// Addrs are the nodes' CQL endpoints, "host:9042", in node order.
	Addrs []string
	// Hosts are the nodes' IP addresses, in node order.
	Hosts []string
	// Dir is the cassandra-local.sh directory of the cluster ("" for an external cluster
	// without CQLGATE_TEST_CASSANDRA_<NAME>_DIR).
	Dir string
	// Auth tells whether the cluster requires a login; Username/Password are the superuser.
	Auth               bool
	Username, Password string

	script   string
	external bool // provided through the environment: never stopped by us
	autoDir  bool // Dir was chosen by Start: removed by Stop
	mu       sync.Mutex
	locks    []*os.File
	stopped  bool
}

// Start starts a fresh cluster with cassandra-local.sh and waits until every node answers CQL,
// (with Auth) accepts the superuser login, and sees all other nodes in system.peers. It first
// stops and wipes whatever an earlier, crashed run left in the same directory. Other processes
// using the same addresses through this package are waited for (per-address lock files in
// /tmp/cqlgate-cassandratest/locks, held until Stop), so concurrently running test packages do
// not collide; that wait counts against ctx. Packages that should run concurrently need
// distinct Addresses. The nodes are also stopped by a watchdog
// once the calling process exits, even if Stop was never called.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if skipRequested() {
		return nil, ErrSkipped
	}
	script, err := scriptPath()
	if err != nil {
		return nil, err
	}
	if opts.Nodes < 0 {
		return nil, fmt.Errorf("cassandratest: Nodes must not be negative")
	}
	addrs := opts.Addresses
	if len(addrs) == 0 {
		n := opts.Nodes
		if n == 0 {
			n = 1
		}
		for i := 1; i <= n; i++ {
			addrs = append(addrs, fmt.Sprintf("127.0.10.%d", i))
		}
	} else if opts.Nodes != 0 && opts.Nodes != len(addrs) {
		return nil, fmt.Errorf("cassandratest: Nodes=%d but %d Addresses", opts.Nodes, len(addrs))
	}
	for _, a := range addrs {
		ip := net.ParseIP(a)
		if ip == nil || ip.To4() == nil || !ip.IsLoopback() {
			return nil, fmt.Errorf("cassandratest: %q is not a loopback IPv4 address", a)
		}
	}
	heap := opts.Heap
	if heap == "" {
		heap = "512m"
	}
	c := &Cluster{Hosts: append([]string(nil), addrs...), Dir: opts.Dir, Auth: opts.Auth, script: script}
	for _, a := range addrs {
		c.Addrs = append(c.Addrs, net.JoinHostPort(a, strconv.Itoa(CQLPort)))
	}
	if opts.Auth {
		c.Username, c.Password = DefaultUsername, DefaultPassword
	}
	base := baseDir()
	if c.Dir == "" {
		c.Dir = filepath.Join(base, addrs[0])
		c.autoDir = true
	} else if c.Dir, err = filepath.Abs(c.Dir); err != nil {
		return nil, err
	}
	if err := c.lockAddresses(ctx, filepath.Join(base, "locks")); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			// Do not leave half-started nodes behind.
			sctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			_, _ = c.run(sctx, "stop", "--dir", c.Dir)
			cancel()
			c.unlock()
		}
	}()
	// Leftovers of an earlier run that died before its cleanup: the lock proves it is gone.
	if _, err := c.run(ctx, "clean", "--dir", c.Dir); err != nil {
		return nil, err
	}
	args := []string{"start", "--dir", c.Dir, "--addresses", strings.Join(addrs, ","),
		"--heap", heap, "--owner-pid", strconv.Itoa(os.Getpid())}
	if opts.Auth {
		args = append(args, "--auth")
	}
	if opts.YAMLExtra != "" {
		f, err := os.CreateTemp("", "cqlgate-cassandra-extra-*.yaml")
		if err != nil {
			return nil, err
		}
		defer os.Remove(f.Name())
		if _, err := f.WriteString(opts.YAMLExtra + "\n"); err != nil {
			f.Close()
			return nil, err
		}
		if err := f.Close(); err != nil {
			return nil, err
		}
		args = append(args, "--yaml-extra", f.Name())
	}
	args = append(args, "--timeout", nodeTimeout(ctx))
	t0 := time.Now()
	if _, err := c.run(ctx, args...); err != nil {
		return nil, err
	}
	if err := c.waitCluster(ctx); err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "cassandratest: %d-node cluster %s ready in %.1fs (dir %s)\n",
		len(addrs), strings.Join(c.Addrs, ","), time.Since(t0).Seconds(), c.Dir)
	ok = true
	return c, nil
}

// Stop stops all nodes (SIGTERM, SIGKILL after 30 s) and, if Start chose the directory, removes
// it. It is a no-op for an external cluster (see Shared) and when called again.
func (c *Cluster) Stop() error {
	if c == nil || c.external {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil
	}
	c.stopped = true
	defer c.unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := "clean"
	if !c.autoDir || os.Getenv("CQLGATE_KEEP_CASSANDRA_DIR") == "1" {
		cmd = "stop"
	}
	_, err := c.run(ctx, cmd, "--dir", c.Dir)
	return err
}

// Shared returns the cluster called name for a test package's TestMain, and a cleanup func to
// call after m.Run.
//
// If CQLGATE_TEST_CASSANDRA_<NAME> (name upper-cased, non-alphanumerics as '_') is set, e.g.
// CQLGATE_TEST_CASSANDRA_SINGLE=127.0.10.1:9042, it returns a Cluster for those running nodes
// (opts.Auth decides the credentials) and a no-op cleanup; node control (StopNode, PID, ...)
// then works only if CQLGATE_TEST_CASSANDRA_<NAME>_DIR names their cassandra-local.sh directory.
// Otherwise it starts a fresh cluster (see Start) and the cleanup stops it.
// With CQLGATE_SKIP_CASSANDRA=1 it returns ErrSkipped.
func Shared(ctx context.Context, name string, opts Options) (*Cluster, func(), error) {
	noop := func() {}
	if skipRequested() {
		return nil, noop, ErrSkipped
	}
	key := "CQLGATE_TEST_CASSANDRA_" + envName(name)
	if v := strings.TrimSpace(os.Getenv(key)); v != "" {
		c, err := external(ctx, key, v, os.Getenv(key+"_DIR"), opts)
		if err != nil {
			return nil, noop, err
		}
		return c, noop, nil
	}
	c, err := Start(ctx, opts)
	if err != nil {
		return nil, noop, fmt.Errorf("cassandratest: starting cluster %q: %w", name, err)
	}
	return c, func() {
		if err := c.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "cassandratest: stopping cluster %q: %v\n", name, err)
		}
	}, nil
}

// RunMain is a TestMain body: it gets the shared cluster name (see Shared) into *dst, runs the
// tests and stops the cluster. It returns the exit code for os.Exit. A cluster that cannot be
// started makes it print the error and return 1 (tests fail, they are not skipped); with
// CQLGATE_SKIP_CASSANDRA=1 it runs the tests with *dst == nil, and Require skips them.
func RunMain(m *testing.M, name string, opts Options, dst **Cluster) int {
	ctx, cancel := context.WithTimeout(context.Background(), startBudget(opts))
	c, cleanup, err := Shared(ctx, name, opts)
	cancel()
	if err != nil && !errors.Is(err, ErrSkipped) {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return 1
	}
	*dst = c
	defer cleanup()
	return m.Run()
}

// Require returns c for a test that needs Cassandra. It skips the test if (and only if)
// CQLGATE_SKIP_CASSANDRA=1 is set, and fails it if c is nil otherwise.
func Require(tb testing.TB, c *Cluster) *Cluster {
	tb.Helper()
	if skipRequested() {
		tb.Skip("Cassandra disabled by CQLGATE_SKIP_CASSANDRA=1")
	}
	if c == nil {
		tb.Fatal("cassandratest: no Cassandra cluster (it failed to start; see TestMain output)")
	}
	return c
}

// Skipped reports whether CQLGATE_SKIP_CASSANDRA=1 is set.
func Skipped() bool { return skipRequested() }

// ---------------------------------------------------------------------------------------------

func skipRequested() bool { return os.Getenv("CQLGATE_SKIP_CASSANDRA") == "1" }

// nodeTimeout is the script's per-node readiness timeout in seconds:
// $CQLGATE_CASSANDRA_START_TIMEOUT if set, else 240 s (a node needs 6-20 s on an idle 2-core
// machine, up to ~90 s on a badly overloaded one), capped by what is left of ctx (min 30 s).
func nodeTimeout(ctx context.Context) string {
	secs := 240
	if v, err := strconv.Atoi(os.Getenv("CQLGATE_CASSANDRA_START_TIMEOUT")); err == nil && v > 0 {
		secs = v
	}
	if dl, has := ctx.Deadline(); has {
		if left := int(time.Until(dl).Seconds()); left < secs {
			secs = left
		}
	}
	if secs < 30 {
		secs = 30
	}
	return strconv.Itoa(secs)
}

// startBudget bounds RunMain's Start: waiting for another test process that uses the same
// addresses (see Start) plus the start itself.
func startBudget(opts Options) time.Duration {
	n := opts.Nodes
	if len(opts.Addresses) > n {
		n = len(opts.Addresses)
	}
	if n < 1 {
		n = 1
	}
	return 20*time.Minute + time.Duration(2*n)*time.Minute
}

func envName(name string) string {
	var b strings.Builder
	for _, r := range strings.ToUpper(name) {
		if (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

func external(ctx context.Context, key, list, dir string, opts Options) (*Cluster, error) {
	c := &Cluster{external: true, Auth: opts.Auth}
	if opts.Auth {
		c.Username, c.Password = DefaultUsername, DefaultPassword
	}
	for _, a := range strings.Split(list, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			host, port = a, strconv.Itoa(CQLPort)
		}
		c.Hosts = append(c.Hosts, host)
		c.Addrs = append(c.Addrs, net.JoinHostPort(host, port))
	}
	if len(c.Addrs) == 0 {
		return nil, fmt.Errorf("cassandratest: %s=%q names no node", key, list)
	}
	for _, a := range c.Addrs {
		var d net.Dialer
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		conn, err := d.DialContext(dctx, "tcp", a)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("cassandratest: %s: node %s not reachable: %w", key, a, err)
		}
		conn.Close()
	}
	if dir != "" {
		script, err := scriptPath()
		if err != nil {
			return nil, err
		}
		if c.Dir, err = filepath.Abs(dir); err != nil {
			return nil, err
		}
		c.script = script
	}
	return c, nil
}

// run executes the script; its output goes to stderr and, on failure, into the error.
func (c *Cluster) run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "bash", append([]string{c.script}, args...)...)
	var out bytes.Buffer
	w := io.MultiWriter(&out, os.Stderr)
	cmd.Stdout, cmd.Stderr = w, w
	cmd.Stdin = nil
	// The script's background children (nodes, watchdog) redirect their output, but never hang
	// on a stray pipe holder.
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	if err != nil {
		msg := strings.TrimSpace(out.String())
		if len(msg) > 4000 {
			msg = "..." + msg[len(msg)-4000:]
		}
		if ctx.Err() != nil {
			return out.String(), fmt.Errorf("cassandratest: %s %s: %w (%v)\n%s", filepath.Base(c.script), args[0], ctx.Err(), err, msg)
		}
		return out.String(), fmt.Errorf("cassandratest: %s %s: %v\n%s", filepath.Base(c.script), args[0], err, msg)
	}
	return out.String(), nil
}

// lockAddresses takes an exclusive flock per node address (sorted, so no deadlock), waiting
// for other processes of this package that use the same addresses. A lock dies with its
// process, so a crashed test run never blocks the next one.
func (c *Cluster) lockAddresses(ctx context.Context, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	hosts := append([]string(nil), c.Hosts...)
	sort.Strings(hosts)
	announced := false
	for _, h := range hosts {
		f, err := os.OpenFile(filepath.Join(dir, h+".lock"), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			c.unlock()
			return err
		}
		for {
			err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
			if err == nil {
				break
			}
			if !errors.Is(err, syscall.EWOULDBLOCK) {
				f.Close()
				c.unlock()
				return fmt.Errorf("cassandratest: lock %s: %w", f.Name(), err)
			}
			if !announced {
				fmt.Fprintf(os.Stderr, "cassandratest: address %s is in use by another test process; waiting\n", h)
				announced = true
			}
			select {
			case <-ctx.Done():
				f.Close()
				c.unlock()
				return fmt.Errorf("cassandratest: waiting for address %s (used by another test process): %w", h, ctx.Err())
			case <-time.After(250 * time.Millisecond):
			}
		}
		c.locks = append(c.locks, f)
	}
	return nil
}

func (c *Cluster) unlock() {
	for _, f := range c.locks {
		f.Close() // releases the flock
	}
	c.locks = nil
}

// baseDir holds the default cluster directories and the address locks. Addresses are
// machine-wide, so it does not follow $TMPDIR: /tmp/cqlgate-cassandratest.
func baseDir() string {
	if fi, err := os.Stat("/tmp"); err == nil && fi.IsDir() {
		return "/tmp/cqlgate-cassandratest"
	}
	return filepath.Join(os.TempDir(), "cqlgate-cassandratest")
}

// scriptPath finds scripts/cassandra-local.sh.
func scriptPath() (string, error) {
	if p := os.Getenv("CQLGATE_CASSANDRA_SCRIPT"); p != "" {
		return filepath.Abs(p)
	}
	const rel = "scripts/cassandra-local.sh"
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		p := filepath.Join(filepath.Dir(file), "..", "..", rel)
		if _, err := os.Stat(p); err == nil {
			return filepath.Clean(p), nil
		}
	}
	// Module root: the nearest parent of the working directory with this module's go.mod.
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			bytes.Contains(b, []byte("module github.com/cqlgate/cqlgate")) {
			p := filepath.Join(dir, rel)
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cassandratest: cannot find scripts/cassandra-local.sh (set CQLGATE_CASSANDRA_SCRIPT)")
		}
		dir = parent
	}
}
