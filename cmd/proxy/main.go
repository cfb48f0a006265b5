// Command proxy runs cqlgate, a proxy for Cassandra's native protocol.
//
// Run it with --help for its settings. Besides CQL it serves /metrics,
// /healthz, /readyz, /statements and a status page (/) over HTTP on
// --admin-listen. SIGINT or SIGTERM start a
// graceful shutdown (see --drain-timeout); a second signal kills the process.
// SIGHUP loads the configuration again (flags, environment and --config
// file), reads --rules-file again, and applies the settings that can change
// while running.
//
// "cqlgate statements --admin URL" shows the statement statistics of a
// running proxy as a table (--watch refreshes it; see statements.go).
//
// Exit status: 0 after a clean shutdown, --help or --version; 1 on a runtime
// error; 2 on a usage or configuration error.
//
// It only wires settings, logging, the admin server and signals to
// pkg/proxy; it must not hold request logic of its own.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/cqlgate/cqlgate/pkg/admin"
	"github.com/cqlgate/cqlgate/pkg/config"
	"github.com/cqlgate/cqlgate/pkg/proxy"
	"github.com/cqlgate/cqlgate/pkg/statuspage"
	"github.com/cqlgate/cqlgate/pkg/stmtstats"
)

// Exit codes.
const (
	exitOK      = 0
	exitRuntime = 1
	exitUsage   = 2
)

// adminShutdownTimeout bounds how long scrapes in flight may delay exit.
const adminShutdownTimeout = 5 * time.Second

// server is what run needs of the CQL proxy; *proxy.Proxy implements it.
type server interface {
	// Run serves until ctx is done, then drains and returns nil, or returns
	// the error that stopped it.
	Run(ctx context.Context) error
	// Ready returns nil while the proxy serves, else why it does not.
	Ready() error
	// Reload applies the reloadable settings of a new configuration and
	// returns the flags of changed settings that need a restart.
	Reload(config.Config) (restart []string, err error)
}

// statementsServer is a server with statement statistics to serve on the
// admin address (*proxy.Proxy is one).
type statementsServer interface {
	StatementsHandler() http.Handler
	Statements() *stmtstats.Table
}

// newServerFunc builds the proxy; it has the signature of proxy.New.
type newServerFunc func(config.Config, *zap.Logger, prometheus.Registerer) (server, error)

// app holds run's dependencies, so that tests can substitute a fake proxy
// without package-level state.
type app struct {
	newServer newServerFunc
	// reload delivers a value for every SIGHUP: the configuration is then
	// loaded again from the same flags, environment and file.
	reload <-chan os.Signal
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // restore default handling: a second signal kills the process
	}()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	a := app{newServer: func(c config.Config, l *zap.Logger, r prometheus.Registerer) (server, error) {
		return proxy.New(c, l, r)
	}, reload: hup}
	os.Exit(a.run(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
}

// run is the whole program: it loads the configuration from args and env,
// serves until ctx is done, and returns the exit code. Usage and version text
// go to stdout; errors and logs go to stderr.
func (a app) run(ctx context.Context, args, env []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "statements" {
		return runStatements(ctx, args[1:], stdout, stderr)
	}
	cfg, err := config.Load(args, env, stdout)
	switch {
	case errors.Is(err, config.ErrHelp):
		return exitOK
	case errors.Is(err, config.ErrVersion):
		fmt.Fprintln(stdout, versionString())
		return exitOK
	case err != nil:
		printConfigError(stderr, err)
		return exitUsage
	}

	if cfg.MaxProcs > 0 {
		runtime.GOMAXPROCS(cfg.MaxProcs)
	}
	level := zap.NewAtomicLevel()
	log, err := newLogger(level, cfg.LogLevel, cfg.LogFormat, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "cqlgate: %v\n", err)
		return exitRuntime
	}
	defer func() { _ = log.Sync() }() // fails harmlessly on terminals and pipes

	info := readBuildInfo()
	log.Info("starting cqlgate",
		zap.String("version", info.version),
		zap.String("revision", info.revision),
		zap.String("go_version", info.goVersion),
		zap.Any("config", cfg.LogSafe()),
	)

	if err := a.serve(ctx, cfg, log, info, func(srv server) { a.reloadLoop(ctx, srv, cfg, args, env, level, log) }); err != nil {
		log.Error("cqlgate failed", zap.Error(err))
		return exitRuntime
	}
	log.Info("cqlgate stopped")
	return exitOK
}

// serve starts the admin server and runs the proxy until ctx is done.
func (a app) serve(ctx context.Context, cfg config.Config, log *zap.Logger, info buildInfo, onStart func(server)) error {
	reg := admin.NewRegistry()
	if err := reg.Register(info.collector()); err != nil {
		return fmt.Errorf("registering build info: %w", err)
	}

	srv, err := a.newServer(cfg, log, reg)
	if err != nil {
		return fmt.Errorf("creating proxy: %w", err)
	}

	// Report not-ready as soon as shutdown begins, so that load balancers
	// stop sending new clients while connections drain.
	ready := func() error {
		if ctx.Err() != nil {
			return errors.New("shutting down")
		}
		return srv.Ready()
	}
	adm := admin.New(cfg.AdminListen, reg, ready, log)
	if cfg.AdminPprof {
		adm.EnablePprof()
	}
	var stmts func() *stmtstats.Table
	if sp, ok := srv.(statementsServer); ok {
		h := sp.StatementsHandler()
		adm.Handle("GET /statements", h)
		adm.Handle("POST /statements/reset", h)
		stmts = sp.Statements
	}
	adm.Handle("GET /{$}", statuspage.New(reg, stmts))
	if err := adm.Start(); err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), adminShutdownTimeout)
		defer cancel()
		if err := adm.Shutdown(sctx); err != nil {
			log.Warn("admin server shutdown", zap.Error(err))
		}
	}()

	go onStart(srv)
	err = srv.Run(ctx)
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		err = nil // stopped as asked
	}
	if err != nil {
		return fmt.Errorf("proxy: %w", err)
	}
	return nil
}

// reloadLoop applies the configuration again on every value from a.reload
// until ctx is done. A configuration that does not load or validate is
// refused as a whole and the running one stays.
func (a app) reloadLoop(ctx context.Context, srv server, cfg config.Config, args, env []string, level zap.AtomicLevel, log *zap.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.reload:
		}
		next, err := config.Load(args, env, io.Discard)
		if err != nil {
			log.Error("reload refused: configuration not changed", zap.Error(err))
			continue
		}
		changed, _ := cfg.Diff(next)
		restart, err := srv.Reload(next)
		if err != nil {
			log.Error("reload refused: configuration not changed", zap.Error(err))
			continue
		}
		if lvl, err := zapcore.ParseLevel(next.LogLevel); err == nil {
			level.SetLevel(lvl)
		}
		if len(restart) > 0 {
			log.Warn("reloaded; these changed settings take effect only after a restart", zap.Strings("restart_needed", restart))
		}
		log.Info("configuration reloaded", zap.Strings("changed", changed), zap.Any("config", next.LogSafe()))
		cfg = next
	}
}

// printConfigError writes a configuration error: one line, or a list of
// problems, followed by a pointer to --help.
func printConfigError(w io.Writer, err error) {
	lines := strings.Split(err.Error(), "\n")
	if len(lines) == 1 {
		fmt.Fprintf(w, "cqlgate: %s\n", lines[0])
	} else {
		fmt.Fprintf(w, "cqlgate: %d configuration problems:\n", len(lines))
		for _, l := range lines {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
	fmt.Fprintln(w, "Run 'cqlgate --help' for usage.")
}

// newLogger returns a logger writing to w in the given format ("json" or
// "console") at the given level and above. Like zap's production preset it
// samples repetitive messages.
func newLogger(atom zap.AtomicLevel, level, format string, w io.Writer) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("log level: %w", err)
	}
	atom.SetLevel(lvl)
	ec := zap.NewProductionEncoderConfig()
	ec.TimeKey = "ts"
	ec.EncodeTime = zapcore.ISO8601TimeEncoder
	ec.EncodeDuration = zapcore.StringDurationEncoder
	var enc zapcore.Encoder
	switch format {
	case "json":
		enc = zapcore.NewJSONEncoder(ec)
	case "console":
		ec.EncodeLevel = zapcore.CapitalLevelEncoder
		enc = zapcore.NewConsoleEncoder(ec)
	default:
		return nil, fmt.Errorf("unknown log format %q", format)
	}
	sink := zapcore.Lock(zapcore.AddSync(w))
	core := zapcore.NewSamplerWithOptions(zapcore.NewCore(enc, sink, atom), time.Second, 100, 100)
	return zap.New(core, zap.AddCaller(), zap.ErrorOutput(sink)), nil
}
