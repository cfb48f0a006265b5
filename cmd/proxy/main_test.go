package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/cqlgate/cqlgate/pkg/config"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// syncBuffer is a bytes.Buffer safe for the logger and the test to share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// fakeServer stands in for the proxy.
type fakeServer struct {
	cfg      config.Config
	started  chan struct{}
	notReady atomic.Pointer[error]
	runErr   error // returned by Run once ctx is done, or at once if runNow
	runNow   bool
	reloaded chan config.Config
}

func newFake() *fakeServer {
	return &fakeServer{started: make(chan struct{}), reloaded: make(chan config.Config, 4)}
}

func (f *fakeServer) Run(ctx context.Context) error {
	close(f.started)
	if f.runNow {
		return f.runErr
	}
	<-ctx.Done()
	return f.runErr
}

func (f *fakeServer) Reload(cfg config.Config) ([]string, error) {
	_, restart := f.cfg.Diff(cfg)
	f.reloaded <- cfg
	return restart, nil
}

func (f *fakeServer) Ready() error {
	if p := f.notReady.Load(); p != nil {
		return *p
	}
	return nil
}

// appWith returns an app whose proxy is f, which also registers a metric.
func appWith(f *fakeServer) app {
	return app{newServer: func(cfg config.Config, log *zap.Logger, reg prometheus.Registerer) (server, error) {
		f.cfg = cfg
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: "cqlgate_fake_total", Help: "Fake."})
		if err := reg.Register(c); err != nil {
			return nil, err
		}
		c.Inc()
		return f, nil
	}}
}

// result is what run returned, with its output.
type result struct {
	code           int
	stdout, stderr string
}

func runSync(t *testing.T, a app, args []string, env []string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	code := a.run(ctx, args, env, &stdout, &stderr)
	return result{code, stdout.String(), stderr.String()}
}

// okArgs are valid flags that bind only loopback ports picked by the kernel.
var okArgs = []string{"--contact-points=10.9.9.9", "--admin-listen=127.0.0.1:0", "--listen=127.0.0.1:0"}

func TestHelp(t *testing.T) {
	r := runSync(t, appWith(newFake()), []string{"--help"}, nil)
	if r.code != exitOK || !strings.Contains(r.stdout, "--contact-points") || !strings.Contains(r.stdout, "CQLGATE_CONTACT_POINTS") || r.stderr != "" {
		t.Errorf("--help: %+v", r)
	}
}

func TestVersion(t *testing.T) {
	r := runSync(t, appWith(newFake()), []string{"--version"}, nil)
	if r.code != exitOK || !strings.HasPrefix(r.stdout, "cqlgate dev\n") || !strings.Contains(r.stdout, "revision: ") || r.stderr != "" {
		t.Errorf("--version: %+v", r)
	}
}

func TestConfigErrors(t *testing.T) {
	badRules := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(badRules, []byte("rules: [{name: reports, table: shop.events}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		env  []string
		want []string
	}{
		{"missing contact points", nil, nil, []string{
			"cqlgate: --contact-points: required",
			"Run 'cqlgate --help' for usage.",
		}},
		{"unknown flag", []string{"--contact-point=a"}, nil, []string{
			"cqlgate: command line: flag provided but not defined: --contact-point\n",
		}},
		{"several problems", []string{"--connections-per-node=0", "--log-level=loud"}, []string{"CQLGATE_CONTACT_POINTS=a"}, []string{
			"cqlgate: 2 configuration problems:\n  --connections-per-node: must be between 1 and 64, got 0\n  --log-level:",
		}},
		{"bad env", nil, []string{"CQLGATE_CONTACT_POINTS=a", "CQLGATE_CONNECT_TIMEOUT=5"}, []string{
			`cqlgate: $CQLGATE_CONNECT_TIMEOUT: invalid duration "5"`,
		}},
		{"bad rules file", []string{"--contact-points=a", "--rules-file=" + badRules}, nil, []string{
			`cqlgate: --rules-file: rules file ` + badRules + `: rule 1 ("reports"): max_in_flight required`,
		}},
		{"missing rules file", []string{"--contact-points=a", "--rules-file=/nonexistent/rules.yaml"}, nil, []string{
			`cqlgate: --rules-file: rules file: open /nonexistent/rules.yaml: no such file or directory`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			r := runSync(t, appWith(f), tt.args, tt.env)
			if r.code != exitUsage {
				t.Errorf("exit code %d, want %d", r.code, exitUsage)
			}
			for _, want := range tt.want {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("stderr\n%s\nlacks\n%s", r.stderr, want)
				}
			}
			if r.stdout != "" {
				t.Errorf("stdout %q", r.stdout)
			}
			select {
			case <-f.started:
				t.Error("proxy ran despite the bad configuration")
			default:
			}
		})
	}
}

// logLine finds the first JSON log line with the given message.
func logLine(logs, msg string) map[string]any {
	for line := range strings.SplitSeq(logs, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == msg {
			return m
		}
	}
	return nil
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

func TestServeAndShutdown(t *testing.T) {
	f := newFake()
	notReady := errors.New("connecting to the cluster")
	f.notReady.Store(&notReady)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() { done <- appWith(f).run(ctx, okArgs, []string{"CQLGATE_DATA_CENTER=dc9"}, &stdout, &stderr) }()

	select {
	case <-f.started:
	case code := <-done:
		t.Fatalf("run returned %d early; stderr:\n%s", code, stderr.String())
	case <-time.After(10 * time.Second):
		t.Fatal("proxy not started")
	}
	if f.cfg.DataCenter != "dc9" || f.cfg.ContactPoints[0] != "10.9.9.9:9042" {
		t.Errorf("proxy got config %+v", f.cfg)
	}

	logs := stderr.String()
	start := logLine(logs, "starting cqlgate")
	if start == nil || start["version"] != "dev" {
		t.Fatalf("no startup line in\n%s", logs)
	}
	cfgLog, _ := start["config"].(map[string]any)
	if cfgLog["data_center"] != "dc9" || cfgLog["request_timeout"] != "15s" {
		t.Errorf("logged config %v", cfgLog)
	}
	if n := strings.Count(logs, `"msg":"starting cqlgate"`); n != 1 {
		t.Errorf("config logged %d times", n)
	}
	listening := logLine(logs, "admin server listening")
	addr, _ := listening["address"].(string)
	if _, _, err := net.SplitHostPort(addr); err != nil {
		t.Fatalf("admin address %q in\n%s", addr, logs)
	}
	base := "http://" + addr

	if code, body := httpGet(t, base+"/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if code, body := httpGet(t, base+"/readyz"); code != 503 || body != "connecting to the cluster\n" {
		t.Errorf("/readyz while not ready: %d %q", code, body)
	}
	f.notReady.Store(nil)
	if code, body := httpGet(t, base+"/readyz"); code != 200 || body != "ok\n" {
		t.Errorf("/readyz when ready: %d %q", code, body)
	}
	code, body := httpGet(t, base+"/metrics")
	for _, want := range []string{"cqlgate_fake_total 1", `cqlgate_build_info{goversion="go`, `version="dev"`, "go_goroutines", "process_open_fds"} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("/metrics (%d) lacks %q", code, want)
		}
	}

	cancel()
	select {
	case code := <-done:
		if code != exitOK {
			t.Errorf("exit code %d after cancel; stderr:\n%s", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after cancel")
	}
	if logLine(stderr.String(), "cqlgate stopped") == nil {
		t.Errorf("no stop line in\n%s", stderr.String())
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Error("admin server still accepting after run returned")
	}
}

func TestRuntimeErrors(t *testing.T) {
	t.Run("proxy fails", func(t *testing.T) {
		f := newFake()
		f.runNow, f.runErr = true, errors.New("no contact point reachable")
		r := runSync(t, appWith(f), okArgs, nil)
		if r.code != exitRuntime || !strings.Contains(r.stderr, "proxy: no contact point reachable") {
			t.Errorf("%+v", r)
		}
	})
	t.Run("proxy returns nil early", func(t *testing.T) {
		f := newFake()
		f.runNow = true
		if r := runSync(t, appWith(f), okArgs, nil); r.code != exitOK {
			t.Errorf("%+v", r)
		}
	})
	t.Run("constructor fails", func(t *testing.T) {
		a := app{newServer: func(config.Config, *zap.Logger, prometheus.Registerer) (server, error) {
			return nil, errors.New("bad TLS material")
		}}
		r := runSync(t, a, okArgs, nil)
		if r.code != exitRuntime || !strings.Contains(r.stderr, "creating proxy: bad TLS material") {
			t.Errorf("%+v", r)
		}
	})
	t.Run("admin port taken", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		f := newFake()
		r := runSync(t, appWith(f), []string{"--contact-points=a", "--admin-listen=" + ln.Addr().String()}, nil)
		if r.code != exitRuntime || !strings.Contains(r.stderr, "admin: listening on "+ln.Addr().String()) {
			t.Errorf("%+v", r)
		}
		select {
		case <-f.started:
			t.Error("proxy ran without its admin server")
		default:
		}
	})
}

func TestAlreadyCancelled(t *testing.T) {
	f := newFake()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stdout, stderr bytes.Buffer
	if code := appWith(f).run(ctx, okArgs, nil, &stdout, &stderr); code != exitOK {
		t.Errorf("exit code %d; stderr:\n%s", code, stderr.String())
	}
}

func TestContextCanceledIsClean(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	f := newFake()
	f.runErr = context.Canceled
	go func() {
		<-f.started
		cancel()
	}()
	var stdout, stderr bytes.Buffer
	if code := appWith(f).run(ctx, okArgs, nil, &stdout, &stderr); code != exitOK {
		t.Errorf("exit code %d; stderr:\n%s", code, stderr.String())
	}
}

func TestConsoleLogs(t *testing.T) {
	f := newFake()
	f.runNow = true
	r := runSync(t, appWith(f), append([]string{"--log-format=console", "--log-level=warn"}, okArgs...), nil)
	if r.code != exitOK || r.stderr != "" {
		t.Errorf("warn level should hide info lines: %+v", r)
	}
}

func TestNewLogger(t *testing.T) {
	var buf bytes.Buffer
	log, err := newLogger(zap.NewAtomicLevel(), "debug", "console", &buf)
	if err != nil {
		t.Fatal(err)
	}
	log.Debug("hello", zap.Duration("d", time.Second))
	if s := buf.String(); !strings.Contains(s, "DEBUG") || !strings.Contains(s, "hello") || !strings.Contains(s, `"d": "1s"`) {
		t.Errorf("console output %q", s)
	}
	buf.Reset()
	log, err = newLogger(zap.NewAtomicLevel(), "info", "json", &buf)
	if err != nil {
		t.Fatal(err)
	}
	log.Debug("hidden")
	log.Info("shown", zap.Duration("d", time.Second))
	if s := buf.String(); strings.Contains(s, "hidden") || !strings.Contains(s, `"level":"info"`) || !strings.Contains(s, `"d":"1s"`) {
		t.Errorf("json output %q", s)
	}
	if _, err := newLogger(zap.NewAtomicLevel(), "loud", "json", &buf); err == nil {
		t.Error("bad level accepted")
	}
	if _, err := newLogger(zap.NewAtomicLevel(), "info", "xml", &buf); err == nil {
		t.Error("bad format accepted")
	}
}

func TestSIGHUPReloadsTheConfigFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cqlgate.yaml")
	write := func(body string) {
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("node_limit: 100\nconnections_per_node: 1\n")
	f := newFake()
	hup := make(chan os.Signal, 1)
	a := appWith(f)
	a.reload = hup
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr syncBuffer
	done := make(chan int)
	go func() {
		done <- a.run(ctx, append([]string{"--config=" + path, "--log-format=console"}, okArgs...), nil, io.Discard, &stderr)
	}()
	<-f.started

	write("node_limit: 200\nconnections_per_node: 2\n")
	hup <- syscall.SIGHUP
	select {
	case cfg := <-f.reloaded:
		if cfg.NodeLimit != 200 {
			t.Errorf("reloaded node limit %d; want 200", cfg.NodeLimit)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no reload after SIGHUP")
	}
	write("node_limit: -5\n")
	hup <- syscall.SIGHUP
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(stderr.String(), "reload refused") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if code := <-done; code != exitOK {
		t.Errorf("exit code %d", code)
	}
	out := stderr.String()
	for _, want := range []string{"restart_needed", "connections-per-node", "configuration reloaded", "reload refused", "--node-limit"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	select {
	case cfg := <-f.reloaded:
		t.Errorf("an invalid configuration was applied: %+v", cfg)
	default:
	}
}
