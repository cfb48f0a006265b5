package proxy

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cqlgate/cqlgate/pkg/config"
)

// TestNewFailureStopsWhatItStarted makes New fail at its last step, after
// the limiter, the hedge scheduler and the cluster exist, and checks that
// their goroutines are gone.
func TestNewFailureStopsWhatItStarted(t *testing.T) {
	dir := t.TempDir()
	cfg := config.Default()
	cfg.ContactPoints = []string{"127.0.0.1:1"}
	cfg.LimitMode = "adaptive"
	cfg.TLSCertFile = filepath.Join(dir, "cert.pem")
	cfg.TLSKeyFile = filepath.Join(dir, "key.pem")
	for _, f := range []string{cfg.TLSCertFile, cfg.TLSKeyFile} {
		if err := os.WriteFile(f, []byte("not PEM"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	before := runtime.NumGoroutine()
	if _, err := New(cfg, nil, nil); err == nil || !strings.Contains(err.Error(), "--tls-cert-file") {
		t.Fatalf("err = %v, want a --tls-cert-file error", err)
	}
	for deadline := time.Now().Add(2 * time.Second); runtime.NumGoroutine() > before; {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines, %d before New:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
