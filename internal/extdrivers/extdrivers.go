// Package extdrivers finds the client drivers that are not written in Go,
// for the tests that run them against the proxy (test/drivers, and
// test/security for roles): the Python interpreter with cassandra-driver,
// java, and the Java driver 4.x jars, which Maven fetches once into
// ~/.cache/cqlgate. A missing driver fails the test unless its skip
// variable is set (CQLGATE_SKIP_PYTHON=1, CQLGATE_SKIP_JAVA=1).
//
// It only locates and installs drivers; it must not run them or know what a
// test does with them.
package extdrivers

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// JavaDriver4 is the version of the Java driver 4.x in test/java/driver4/pom.xml.
const JavaDriver4 = "4.19.3"

const pythonInstallHint = "install the driver with: python3 -m pip install cassandra-driver lz4 " +
	"(psutil optional); CQLGATE_PYTHON=/path/to/python selects another interpreter; " +
	"CQLGATE_SKIP_PYTHON=1 skips this test"

// Path returns the absolute path of rel, a path relative to the
// repository's root (e.g. "test/python/driver_check.py").
func Path(rel string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", filepath.FromSlash(rel))
}

// Python returns the Python interpreter ($CQLGATE_PYTHON or python3 on
// $PATH) and the cassandra-driver version it imports. It fails the test
// when either is missing, or skips it if CQLGATE_SKIP_PYTHON=1.
func Python(t testing.TB) (python, version string) {
	t.Helper()
	missing := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("CQLGATE_SKIP_PYTHON") == "1" {
			t.Skipf("CQLGATE_SKIP_PYTHON=1: "+format, args...)
		}
		t.Fatalf(format+"; "+pythonInstallHint, args...)
	}
	python = os.Getenv("CQLGATE_PYTHON")
	if python == "" {
		p, err := exec.LookPath("python3")
		if err != nil {
			missing("python3 not found on PATH: %v", err)
		}
		python = p
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, python, "-c", "import cassandra, lz4; print(cassandra.__version__)")
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:] // the exception line of the traceback
		}
		missing("%s cannot import cassandra (cassandra-driver) and lz4: %v %s", python, err, msg)
	}
	return python, strings.TrimSpace(string(b))
}

// Java returns java from $PATH; it fails the test without one, or skips it
// with CQLGATE_SKIP_JAVA=1.
func Java(t testing.TB) string {
	t.Helper()
	java, err := exec.LookPath("java")
	if err != nil {
		if os.Getenv("CQLGATE_SKIP_JAVA") == "1" {
			t.Skip("CQLGATE_SKIP_JAVA=1: no java on PATH")
		}
		t.Fatalf("no java on PATH (Cassandra needs it too): %v; CQLGATE_SKIP_JAVA=1 skips this test", err)
	}
	return java
}

// JavaDriver4Jars returns a directory holding the Java driver 4.x and its
// dependencies, copied there by Maven from test/java/driver4/pom.xml the
// first time.
func JavaDriver4Jars(t testing.TB) string {
	t.Helper()
	home, _ := os.UserHomeDir()
	dir := filepath.Join(home, ".cache", "cqlgate", "java-driver-"+JavaDriver4)
	if _, err := os.Stat(filepath.Join(dir, "complete")); err == nil {
		return dir
	}
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		if os.Getenv("CQLGATE_SKIP_JAVA") == "1" {
			t.Skip("CQLGATE_SKIP_JAVA=1: no mvn on PATH")
		}
		t.Fatalf("no mvn on PATH to fetch the Java driver %s: %v; CQLGATE_SKIP_JAVA=1 skips this test", JavaDriver4, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tmp := dir + ".tmp"
	_ = os.RemoveAll(tmp)
	out, err := exec.CommandContext(ctx, mvn, "-B", "-q", "-f", Path("test/java/driver4/pom.xml"), "dependency:copy-dependencies",
		"-DoutputDirectory="+tmp).CombinedOutput()
	if err != nil {
		t.Fatalf("mvn dependency:copy-dependencies for the Java driver %s: %v\n%s", JavaDriver4, err, out)
	}
	if err := os.WriteFile(filepath.Join(tmp, "complete"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_ = os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		t.Fatal(err)
	}
	return dir
}
