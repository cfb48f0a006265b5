package drivers

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cqlgate/cqlgate/internal/extdrivers"
	"github.com/cqlgate/cqlgate/internal/proxytest"
)

const (
	// pythonScript is the driver check, relative to this package.
	pythonScript = "../python/driver_check.py"
	// pythonSchemaScript is the schema-change check, relative to this package.
	pythonSchemaScript = "../python/schema_change_check.py"
	// pythonTimeout bounds one run of the script.
	pythonTimeout = 3 * time.Minute
)

// summaryRE matches the script's last line.
var summaryRE = regexp.MustCompile(`^(\d+) passed, (\d+) failed$`)

// TestPythonDriver runs test/python/driver_check.py (DataStax/Apache
// cassandra-driver with default settings, then with lz4 compression) against
// an in-process proxy in front of a real Cassandra node, and checks that the
// driver never connects to the node itself.
func TestPythonDriver(t *testing.T) {
	python, version := extdrivers.Python(t)
	t.Logf("using %s with cassandra-driver %s", python, version)

	addrs := single.get(t)
	proxyAddr := startProxy(t, addrs)
	host, port, err := net.SplitHostPort(proxyAddr)
	if err != nil {
		t.Fatal(err)
	}

	runPythonScript(t, python, pythonScript,
		"--host", host, "--port", port, "--forbidden", strings.Join(addrs, ","))
}

// TestPythonDriverSchemaChanges runs test/python/schema_change_check.py:
// prepared statements of the Python driver across ALTER TABLE ADD/DROP and
// DROP/CREATE TABLE, on protocol v5 and v4, directly against the node and
// through an in-process proxy; the driver must read the same both ways (the
// proxy once hid UNPREPARED and the driver decoded new rows with old
// columns). TestPreparedStatementsAcrossSchemaChanges in test/integration
// runs the scenario with the Go drivers.
func TestPythonDriverSchemaChanges(t *testing.T) {
	python, version := extdrivers.Python(t)
	t.Logf("using %s with cassandra-driver %s", python, version)
	addrs := single.get(t)
	p := proxytest.Start(t, addrs, nil)
	runPythonScript(t, python, pythonSchemaScript, "--proxy", p.Addr, "--direct", addrs[0])
	reprepares, reshaped := repreparesOf(t, p.Reg)
	t.Logf("proxy: %v UNPREPARED hidden (prepared again and re-sent), %v passed on (columns changed)", reprepares, reshaped)
}

// runPythonScript runs script with args, logging its output, and fails the
// test unless it exits 0 with a last "N passed, 0 failed" line.
func runPythonScript(t *testing.T, python, script string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), pythonTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, append([]string{script}, args...)...)
	cmd.Env = append(os.Environ(), "PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1")
	cmd.WaitDelay = 10 * time.Second // if the script leaves children holding the pipe
	out := &lineLogger{t: t, prefix: "py| "}
	cmd.Stdout = out
	cmd.Stderr = out
	start := time.Now()
	err := cmd.Run()
	out.flush()
	elapsed := time.Since(start).Round(time.Millisecond)

	lines := out.all()
	summary := ""
	for i := len(lines) - 1; i >= 0; i-- {
		if summaryRE.MatchString(lines[i]) {
			summary = lines[i]
			break
		}
	}
	var failures []string // FAIL lines with their indented continuations
	inFailure := false
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "FAIL "):
			failures = append(failures, l)
			inFailure = true
		case inFailure && strings.HasPrefix(l, "      "):
			failures = append(failures, l)
		default:
			inFailure = false
		}
	}
	switch {
	case ctx.Err() != nil:
		t.Fatalf("%s timed out after %s (summary %q)", script, pythonTimeout, summary)
	case err != nil:
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("running %s: %v", script, err)
		}
		t.Fatalf("%s exited with %v after %s: %s\n%s", script, err, elapsed, summary, strings.Join(failures, "\n"))
	case summary == "":
		t.Fatalf("%s exited 0 after %s but printed no \"N passed, M failed\" line", script, elapsed)
	case !strings.HasSuffix(summary, " 0 failed") || len(failures) > 0:
		t.Fatalf("%s exited 0 but reported %q\n%s", script, summary, strings.Join(failures, "\n"))
	}
	t.Logf("%s: %s in %s", script, summary, elapsed)
}

// lineLogger is an io.Writer that sends every complete line to t.Log as it
// arrives and keeps them all.
type lineLogger struct {
	t      *testing.T
	prefix string

	mu      sync.Mutex
	partial []byte
	lines   []string
}

func (w *lineLogger) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		w.emit(string(bytes.TrimRight(w.partial[:i], "\r")))
		w.partial = w.partial[i+1:]
	}
	return len(p), nil
}

// flush logs an unterminated last line.
func (w *lineLogger) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.partial) > 0 {
		w.emit(string(w.partial))
		w.partial = nil
	}
}

func (w *lineLogger) emit(line string) {
	w.lines = append(w.lines, line)
	w.t.Log(w.prefix + line)
}

func (w *lineLogger) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.lines...)
}
