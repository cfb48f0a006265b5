// Package admin serves cqlgate's operational HTTP endpoints:
//
//	/metrics  Prometheus metrics from the given registry
//	/healthz  200 "ok" while the process runs (liveness)
//	/readyz   200 "ok" when the readiness function returns nil, else 503
//	          with its error text (readiness)
//
// Handle adds endpoints the caller provides (the proxy's /statements).
//
// It must not serve CQL or know about requests: it only exposes what it
// is given (a registry, a readiness function, handlers).
package admin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
)

// Timeouts of the HTTP server. Scrapes of a large registry may take a while
// to write, so the write timeout is generous.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	writeTimeout      = 30 * time.Second
	idleTimeout       = 2 * time.Minute
)

// NewRegistry returns a registry holding the standard Go runtime and process
// collectors (go_* and process_* metrics).
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// Server is the admin HTTP server. Create it with New, then Start it; it
// serves until Shutdown.
type Server struct {
	addr string
	log  *zap.Logger
	srv  *http.Server

	mu      sync.Mutex
	ln      net.Listener  // set by Start
	stopped bool          // set by Shutdown
	done    chan struct{} // closed when the serving goroutine returns
	mux     *http.ServeMux
}

// New returns a server that will listen on addr (HOST:PORT; port 0 picks a
// free port). /metrics exposes reg, which New also registers the
// promhttp_metric_handler_* metrics in. ready decides /readyz; nil means
// always ready. log may be nil.
func New(addr string, reg *prometheus.Registry, ready func() error, log *zap.Logger) *Server {
	if log == nil {
		log = zap.NewNop()
	}
	if ready == nil {
		ready = func() error { return nil }
	}
	log = log.Named("admin")
	s := &Server{addr: addr, log: log, done: make(chan struct{}), mux: handler(reg, ready, log)}
	s.srv = &http.Server{
		Handler:           s.mux,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		ErrorLog:          zap.NewStdLog(log),
	}
	return s
}

// EnablePprof serves the Go profiler under /debug/pprof/ (CPU and heap
// profiles, goroutine dumps), for diagnosing a live proxy. Call it before
// Start. A CPU profile needs ?seconds= below the server's write timeout.
func (s *Server) EnablePprof() {
	s.mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	s.mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	s.mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	s.mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	s.mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
}

// Handle serves h for pattern (http.ServeMux syntax, e.g. "GET
// /statements") on the admin address, for endpoints the caller provides.
// Call it before Start.
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// handler routes the admin endpoints.
func handler(reg *prometheus.Registry, ready func() error, log *zap.Logger) *http.ServeMux {
	metrics := promhttp.InstrumentMetricHandler(reg, promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:      zap.NewStdLog(log),
		ErrorHandling: promhttp.ContinueOnError,
		Registry:      reg, // promhttp_metric_handler_errors_total
	}))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeText(w, http.StatusOK, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := ready(); err != nil {
			writeText(w, http.StatusServiceUnavailable, err.Error())
			return
		}
		writeText(w, http.StatusOK, "ok")
	})
	return mux
}

func writeText(w http.ResponseWriter, code int, body string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, body+"\n")
}

// Start binds the listening socket, so that an unusable address is reported
// here, and serves in a new goroutine. It may be called once.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil || s.stopped {
		return errors.New("admin: server already started or shut down")
	}
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("admin: listening on %s: %w", s.addr, err)
	}
	s.ln = ln
	s.log.Info("admin server listening", zap.Stringer("address", ln.Addr()))
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("admin server stopped", zap.Error(err))
		}
	}()
	return nil
}

// Addr returns the address the server listens on, or nil before Start.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Shutdown stops accepting connections and waits for requests in flight to
// finish. When ctx ends first, it closes the remaining connections and
// returns ctx's error. Calling Shutdown before Start, or twice, is harmless.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	started := s.ln != nil
	s.stopped = true
	s.mu.Unlock()
	if !started {
		return nil
	}
	err := s.srv.Shutdown(ctx)
	if err != nil {
		// Requests are still running: cut them off.
		_ = s.srv.Close()
		err = fmt.Errorf("admin: shutting down: %w", err)
	}
	<-s.done
	return err
}
