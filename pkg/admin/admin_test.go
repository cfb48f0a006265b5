package admin

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// start runs a server on a loopback port and stops it when the test ends.
func start(t *testing.T, reg *prometheus.Registry, ready func() error) *Server {
	t.Helper()
	s := New("127.0.0.1:0", reg, ready, zap.NewNop())
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	return s
}

// get fetches path from s without keeping connections open.
func get(t *testing.T, s *Server, method, path string) (int, http.Header, string) {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	req, err := http.NewRequest(method, "http://"+s.Addr().String()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(body)
}

func TestEndpoints(t *testing.T) {
	reg := NewRegistry()
	requests := prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "cqlgate", Name: "test_requests_total", Help: "Test counter.",
	})
	reg.MustRegister(requests)
	requests.Add(3)

	var notReady atomic.Pointer[error]
	s := start(t, reg, func() error {
		if p := notReady.Load(); p != nil {
			return *p
		}
		return nil
	})

	tests := []struct {
		method, path string
		code         int
		body         []string // substrings
	}{
		{"GET", "/healthz", 200, []string{"ok\n"}},
		{"HEAD", "/healthz", 200, nil},
		{"GET", "/readyz", 200, []string{"ok\n"}},
		{"GET", "/metrics", 200, []string{
			"cqlgate_test_requests_total 3",
			"go_goroutines ",
			"process_cpu_seconds_total ",
			"promhttp_metric_handler_requests_total{code=\"200\"}",
		}},
		{"POST", "/healthz", 405, nil},
		{"GET", "/nope", 404, nil},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			code, _, body := get(t, s, tt.method, tt.path)
			if code != tt.code {
				t.Errorf("status %d, want %d", code, tt.code)
			}
			for _, want := range tt.body {
				if !strings.Contains(body, want) {
					t.Errorf("body lacks %q:\n%.2000s", want, body)
				}
			}
		})
	}

	reason := errors.New("no connection to the cluster")
	notReady.Store(&reason)
	code, h, body := get(t, s, "GET", "/readyz")
	if code != http.StatusServiceUnavailable || body != "no connection to the cluster\n" {
		t.Errorf("not ready: %d %q", code, body)
	}
	if ct := h.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	if code, _, _ := get(t, s, "GET", "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz follows readiness: %d", code)
	}
	notReady.Store(nil)
	if code, _, _ := get(t, s, "GET", "/readyz"); code != http.StatusOK {
		t.Errorf("ready again: %d", code)
	}
}

func TestNilReadyMeansReady(t *testing.T) {
	s := start(t, prometheus.NewRegistry(), nil)
	if code, _, _ := get(t, s, "GET", "/readyz"); code != http.StatusOK {
		t.Errorf("status %d", code)
	}
}

func TestStartBindError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	s := New(ln.Addr().String(), prometheus.NewRegistry(), nil, nil)
	err = s.Start()
	if err == nil || !strings.Contains(err.Error(), ln.Addr().String()) {
		t.Fatalf("Start on a used port: %v", err)
	}
	if s.Addr() != nil {
		t.Errorf("Addr after failed Start = %v", s.Addr())
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown of an unstarted server: %v", err)
	}
}

func TestLifecycle(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	s := New("127.0.0.1:0", NewRegistry(), nil, zap.New(core))
	if s.Addr() != nil {
		t.Errorf("Addr before Start = %v", s.Addr())
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err == nil {
		t.Error("second Start succeeded")
	}
	addr := s.Addr().String()
	if got := logs.FilterMessage("admin server listening").All(); len(got) != 1 || got[0].ContextMap()["address"] != addr {
		t.Errorf("listening log: %v", got)
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Error("still accepting after Shutdown")
	}
	if err := s.Start(); err == nil {
		t.Error("Start after Shutdown succeeded")
	}
}

// TestShutdownDeadline checks that a stuck request cannot hold Shutdown
// beyond its context.
func TestShutdownDeadline(t *testing.T) {
	reg := prometheus.NewRegistry()
	entered := make(chan struct{})
	release := make(chan struct{})
	s := New("127.0.0.1:0", reg, func() error {
		close(entered)
		<-release
		return nil
	}, nil)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	errc := make(chan error, 1)
	go func() {
		resp, err := client.Get("http://" + s.Addr().String() + "/readyz")
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := s.Shutdown(ctx)
	close(release)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown = %v, want DeadlineExceeded", err)
	}
	if err := <-errc; err == nil {
		t.Error("stuck request completed normally after forced close")
	}
}

func TestPprofOnlyWhenEnabled(t *testing.T) {
	off := start(t, prometheus.NewRegistry(), nil)
	if code, _, _ := get(t, off, "GET", "/debug/pprof/"); code != http.StatusNotFound {
		t.Errorf("pprof disabled: status %d; want 404", code)
	}
	on := New("127.0.0.1:0", prometheus.NewRegistry(), nil, zap.NewNop())
	on.EnablePprof()
	if err := on.Start(); err != nil {
		t.Fatal(err)
	}
	defer on.Shutdown(context.Background())
	if code, _, body := get(t, on, "GET", "/debug/pprof/goroutine?debug=1"); code != http.StatusOK || !strings.Contains(body, "goroutine profile") {
		t.Errorf("pprof enabled: status %d, body %.80q; want 200 with a goroutine profile", code, body)
	}
}
