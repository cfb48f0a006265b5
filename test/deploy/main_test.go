// Package deploy tests what an operator deploys and reads: the container
// build files, the Kubernetes and compose examples, the Prometheus rules and
// the Grafana dashboard in deploy/, and the reference documents in docs/,
// which are regenerated from the code and compared with the checked-in ones.
//
// Run `go test ./test/deploy -run Docs -update` (or `make docs`) to rewrite
// the generated documents.
//
// The checks use real tools where they exist: promtool (Debian's prometheus
// package), kubernetes-validate (Kubernetes' OpenAPI schemas, from PyPI),
// check-jsonschema (the compose specification's schema), hadolint, kubectl
// (kustomize) and a Prometheus server. scripts/ci-install.sh installs them;
// without one a test is skipped with a message, except in CI ($CI set),
// where it fails.
package deploy

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cqlgate/cqlgate/internal/cassandratest"
)

var update = flag.Bool("update", false, "rewrite the generated documents in docs/ instead of comparing them")

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	single.Stop()
	bins.remove()
	os.Exit(code)
}

// repoRoot is the module's root directory.
func repoRoot(tb testing.TB) string {
	tb.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		tb.Fatal("cannot find the test's source file")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// repoFile reads a file given relative to the repository root.
func repoFile(tb testing.TB, rel string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(tb), rel))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// tool returns the path of an external program, found on $PATH or in
// Python's scripts directory (where pip puts the programs it installs). If
// it is missing, the test is skipped, or fails in CI, where
// scripts/ci-install.sh installs it from pkg.
func tool(tb testing.TB, name, pkg string) string {
	tb.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if out, err := exec.Command("python3", "-c", "import sysconfig; print(sysconfig.get_path('scripts'))").Output(); err == nil {
		p := filepath.Join(strings.TrimSpace(string(out)), name)
		if fi, err := os.Stat(p); err == nil && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	msg := fmt.Sprintf("%s not found: it comes from %s, which scripts/ci-install.sh installs", name, pkg)
	if os.Getenv("CI") != "" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
	return ""
}

// requires skips a subtest whose prerequisite, an earlier subtest of the
// same parent, failed: that failure is reported already, and checks built
// on what it did not produce would only add confusing ones.
func requires(t *testing.T, ok bool, prereq string) {
	t.Helper()
	if !ok {
		t.Skipf("skipped: needs %s, which failed", prereq)
	}
}

// run runs a program in dir and fails the test, with its output, if it
// fails. It returns the combined output.
func run(tb testing.TB, dir string, name string, args ...string) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		tb.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return string(out)
}

// single is the one-node Cassandra the tests that need a live proxy share:
// the suite's (CQLGATE_TEST_CASSANDRA_SINGLE), or one started on first use.
var single = &cassandratest.Lazy{Name: "single", Options: cassandratest.Options{Addresses: []string{"127.0.10.1"}}, Timeout: 8 * time.Minute}

// testVersion is stamped into the binaries the tests build, as `make build`
// stamps the git version.
const testVersion = "v0.0.0-deploytest"

// bins are the proxy and loadgen binaries, built once per test run.
var bins builtBinaries

type builtBinaries struct {
	once           sync.Once
	dir            string
	proxy, loadgen string
	err            error
}

// get builds bin/cqlgate and bin/loadgen the way the Makefile and the
// Dockerfile do (static, trimmed, version stamped) into a temporary
// directory.
func (b *builtBinaries) get(tb testing.TB) (proxy, loadgen string) {
	tb.Helper()
	b.once.Do(func() {
		b.dir, b.err = os.MkdirTemp("", "cqlgate-deploytest-")
		if b.err != nil {
			return
		}
		root := repoRoot(tb)
		for _, x := range []struct {
			out       *string
			name, pkg string
		}{
			{&b.proxy, "cqlgate", "./cmd/proxy"},
			{&b.loadgen, "loadgen", "./cmd/loadgen"},
		} {
			*x.out = filepath.Join(b.dir, x.name)
			cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-X main.version="+testVersion, "-o", *x.out, x.pkg)
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				b.err = fmt.Errorf("go build %s: %w\n%s", x.pkg, err, out)
				return
			}
		}
	})
	if b.err != nil {
		tb.Fatal(b.err)
	}
	return b.proxy, b.loadgen
}

func (b *builtBinaries) remove() {
	if b.dir != "" {
		os.RemoveAll(b.dir)
	}
}
