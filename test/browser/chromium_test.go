package browser

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// chromiumPath returns the Chromium binary: $CQLGATE_CHROMIUM, or chromium
// (Debian's package) or chromium-browser on $PATH. Without one the test is
// skipped, or fails in CI, where scripts/ci-install.sh installs it.
func chromiumPath(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv("CQLGATE_CHROMIUM"); p != "" {
		if _, err := os.Stat(p); err != nil {
			tb.Fatalf("CQLGATE_CHROMIUM=%s: %v", p, err)
		}
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "chromium not found on $PATH (Debian's chromium package, which scripts/ci-install.sh installs; or set CQLGATE_CHROMIUM)"
	if os.Getenv("CI") != "" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
	return ""
}

// browser is a headless Chromium with one tab, and what its pages threw.
type browser struct {
	ctx    context.Context
	output *syncBuffer // the browser's stdout and stderr

	mu     sync.Mutex
	errors []string // uncaught exceptions and console.error calls
}

// newBrowser starts a headless Chromium as the tests may run it: as root
// (no sandbox), without a GPU, with a fresh profile, and with every
// background connection (component updates, sync, QUIC probes, safe
// browsing) off, since only loopback addresses are reachable. It is stopped
// at the end of the test; a failed test gets its output.
func newBrowser(t *testing.T, width, height int) *browser {
	t.Helper()
	path := chromiumPath(t)
	b := &browser{output: &syncBuffer{}}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(width, height),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-domain-reliability", true),
		chromedp.Flag("no-pings", true),
		chromedp.CombinedOutput(b.output),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	b.ctx = ctx
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
		if t.Failed() {
			t.Logf("chromium output:\n%s", b.output)
		}
	})
	// Start the browser now, so that a browser that does not start is
	// reported as such, not as a page that did not load. (The first action's
	// context owns the browser: it must be ctx itself, not one that ends
	// sooner.)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v\nits output:\n%s", path, err, b.output)
	}
	if err := chromedp.Listen(ctx, b.onEvent); err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *browser) onEvent(ev any) {
	var msg string
	switch ev := ev.(type) {
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		msg = "uncaught exception: " + d.Text
		if d.Exception != nil && d.Exception.Description != "" {
			msg += ": " + d.Exception.Description
		}
	case *runtime.EventConsoleAPICalled:
		if ev.Type != runtime.ConsoleAPICalledTypeError {
			return
		}
		var args []string
		for _, a := range ev.Args {
			args = append(args, strings.Trim(string(a.Value), `"`)+a.Description)
		}
		msg = "console.error: " + strings.Join(args, " ")
	default:
		return
	}
	b.mu.Lock()
	b.errors = append(b.errors, msg)
	b.mu.Unlock()
}

// pageErrors returns what the pages threw or logged as errors so far.
func (b *browser) pageErrors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.errors...)
}

// screenshot saves a PNG of the whole page as name in the artifacts
// directory and logs its path.
func (b *browser) screenshot(t *testing.T, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("screenshot is not a PNG (%d bytes)", len(png))
	}
	path := filepath.Join(artifactsDir(t), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(png))
	return path
}

// artifactsDir is $CQLGATE_ARTIFACTS (created if needed), or the test's
// temporary directory.
func artifactsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("CQLGATE_ARTIFACTS")
	if dir == "" {
		return t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
