// Command loadgen drives Cassandra, directly or through cqlgate, with gocql
// workloads and reports throughput, latency percentiles (HdrHistogram),
// errors by kind and the CPU the generator itself spent, so that a
// benchmark can tell a slow proxy from a saturated load generator.
//
// Subcommands:
//
//	loadgen setup       --hosts H[,H] [--keyspace K] [--rf N | --replication DC:N,...] [--rows N] [--value-size B]
//	loadgen run         --hosts H[,H] [--workers N] [--duration D | --ops N] [--rate R --max-in-flight N]
//	                    [--workload read|write|mixed] [--keys uniform|sequential|zipf] [--json] [--plot F.png]
//	loadgen compare     --target NAME=H[,H] --target NAME=H ... [--rounds N] [--proxy-metrics URL] [--proxy-pid PID]
//	loadgen workers     --hosts H [--workers 50000] [--queries 200]      (the published goroutine flood)
//	loadgen ratelimited --hosts H [--parallelism P] [--rate R] [--runs N] [--keys serial|random] [--keep]
//	loadgen multiget    --hosts H [--partitions 100] [--rows-per-partition 50] [--rf 3] [--setup]
//	loadgen heavy       --hosts H [--workers 32] [--heavy-workers 8] [--heavy-keys 500] [--setup]
//
// docs/loadgen.md describes the measurements; run "loadgen COMMAND -h" for
// every flag.
//
// Outside its tests it must not import the proxy's packages (only
// internal/loadgen and internal/plotpng): it measures the proxy from the
// outside, as an application would.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exit codes. Usage errors are distinguished from failures so that scripts
// can tell a typo from a broken cluster.
const (
	exitOK         = 0
	exitFailure    = 1
	exitUsage      = 2
	exitErrorsSeen = 3 // --fail-on-errors and at least one request failed
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is main without the process: it parses args, runs one subcommand and
// returns the exit code. Tests call it directly.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	cmd, rest := args[0], args[1:]
	if cmd == "-h" || cmd == "--help" || cmd == "help" {
		fmt.Fprint(stdout, usage)
		return exitOK
	}

	cfg := defaultConfig()
	fs, err := cfg.flagSet(cmd, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "loadgen: %v\n%s", err, usage)
		return exitUsage
	}
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "loadgen %s: unexpected arguments %q\n", cmd, fs.Args())
		return exitUsage
	}
	if err := cfg.validate(cmd); err != nil {
		fmt.Fprintf(stderr, "loadgen %s: %v\n", cmd, err)
		return exitUsage
	}

	var errorsSeen bool
	switch cmd {
	case cmdSetup:
		err = runSetup(ctx, cfg, stderr)
	case cmdRun:
		errorsSeen, err = runRun(ctx, cfg, stdout, stderr)
	case cmdCompare:
		errorsSeen, err = runCompare(ctx, cfg, stdout, stderr)
	case cmdWorkers:
		errorsSeen, err = runWorkers(ctx, cfg, stdout, stderr)
	case cmdRateLimited:
		errorsSeen, err = runRateLimited(ctx, cfg, stdout, stderr)
	case cmdMultiget:
		errorsSeen, err = runMultiget(ctx, cfg, stdout, stderr)
	case cmdHeavy:
		errorsSeen, err = runHeavy(ctx, cfg, stdout, stderr)
	}
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "loadgen %s: %v\n", cmd, err)
		return exitFailure
	case errorsSeen && cfg.FailOnErrors:
		fmt.Fprintf(stderr, "loadgen %s: requests failed and --fail-on-errors is set\n", cmd)
		return exitErrorsSeen
	}
	return exitOK
}

const usage = `usage: loadgen COMMAND [flags]

commands:
  setup        create the keyspace and table and preload rows
  run          drive one endpoint (closed or open loop) and report throughput and latency
  compare      drive several endpoints in alternating rounds and compare them
  workers      N goroutines x K single-row SELECTs at stock gocql settings: wall time, errors
  ratelimited  a rate-limited parallel writer in one-second runs
  multiget     fetch batches of partitions four ways: sequential, async, IN, IN with LIMIT
  heavy        a mixed workload plus one heavy statement (a multi-partition IN), each statement reported apart

Run "loadgen COMMAND -h" for the flags of a command.
`
