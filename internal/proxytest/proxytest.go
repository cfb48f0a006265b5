// Package proxytest runs a cqlgate proxy inside a test process, in front of
// real Cassandra nodes, and stops it when the test ends.
// It must not change the proxy's behaviour: it starts the real pkg/proxy
// with config.Default() and the test's changes, and nothing else.
package proxytest

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/cqlgate/cqlgate/pkg/config"
	"github.com/cqlgate/cqlgate/pkg/proxy"
)

// Proxy is a running proxy.
type Proxy struct {
	*proxy.Proxy
	Addr string               // host:port clients dial
	Reg  *prometheus.Registry // the proxy's metrics
	Logs *SyncBuffer          // its log, info level and above

	stop func()
}

// Start runs a proxy on 127.0.0.1:0 in front of contactPoints with
// config.Default() settings changed only by mod (may be nil). It is stopped
// at the end of the test (or by Stop); a Run that does not return nil
// within 30 s of being stopped fails the test, and a failed test gets the
// proxy's log.
func Start(tb testing.TB, contactPoints []string, mod func(*config.Config)) *Proxy {
	tb.Helper()
	cfg := config.Default()
	cfg.Listen = []string{"127.0.0.1:0"}
	cfg.ContactPoints = contactPoints
	if mod != nil {
		mod(&cfg)
	}
	logs := &SyncBuffer{}
	log := zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()), logs, zap.InfoLevel))
	reg := prometheus.NewRegistry()
	p, err := proxy.New(cfg, log, reg)
	if err != nil {
		tb.Fatalf("proxy.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	select {
	case <-p.Serving():
	case err := <-done:
		cancel()
		tb.Fatalf("proxy.Run returned before serving: %v\nproxy log:\n%s", err, logs)
	case <-time.After(60 * time.Second):
		cancel()
		tb.Fatalf("proxy not serving after 60s\nproxy log:\n%s", logs)
	}
	tp := &Proxy{Proxy: p, Addr: p.Addrs()[0].String(), Reg: reg, Logs: logs}
	var once sync.Once
	tp.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					tb.Errorf("proxy.Run returned %v after cancel, want nil", err)
				}
			case <-time.After(30 * time.Second):
				tb.Errorf("proxy.Run did not return within 30s of cancel")
			}
			if tb.Failed() {
				tb.Logf("proxy log:\n%s", logs)
			}
		})
	}
	tb.Cleanup(tp.stop)
	return tp
}

// Stop stops the proxy and waits for Run to return; it is idempotent.
func (p *Proxy) Stop() { p.stop() }

// SyncBuffer is a bytes.Buffer safe for concurrent writers, used as the
// proxy's log sink.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// Sync implements zapcore.WriteSyncer.
func (s *SyncBuffer) Sync() error { return nil }

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
