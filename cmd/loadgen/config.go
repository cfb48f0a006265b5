package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
)

const (
	cmdSetup   = "setup"
	cmdRun     = "run"
	cmdCompare = "compare"
)

// Config holds every flag of every subcommand. Each subcommand binds only
// the fields it uses (see flagSet); the zero value is not meaningful, start
// from defaultConfig.
type Config struct {
	// Hosts are the contact points of setup and run ("host" or "host:port").
	Hosts []string
	// Targets are the named endpoints of compare, in the order given; the
	// first one is the baseline of every ratio.
	Targets []Endpoint

	Keyspace  string
	RF        int   // replication factor of the keyspace setup creates
	Rows      int64 // keys are drawn from [0, Rows)
	ValueSize int   // bytes per value written by setup and by write operations

	// SetupConcurrency bounds the in-flight preload inserts.
	SetupConcurrency int

	Workers   int
	Duration  time.Duration // measured window (per round for compare)
	Warmup    time.Duration // unmeasured load before the first window
	Workload  string        // read, write or mixed
	ReadRatio float64       // share of reads in the mixed workload

	Proto   int           // native protocol version; 0 lets gocql negotiate
	Timeout time.Duration // gocql per-request timeout

	Rounds       int
	ProxyTarget  string // which target the proxy CPU figures belong to
	ProxyMetrics string // Prometheus URL exposing process_cpu_seconds_total
	ProxyPID     int    // alternative to ProxyMetrics: read /proc/PID/stat

	JSON         bool
	FailOnErrors bool
	Quiet        bool // no per-second progress lines
}

func defaultConfig() *Config {
	return &Config{
		Keyspace:         "cqlgate_bench",
		RF:               1,
		Rows:             10000,
		ValueSize:        100,
		SetupConcurrency: 64,
		Workers:          128,
		Duration:         10 * time.Second,
		Warmup:           2 * time.Second,
		Workload:         workloadRead,
		ReadRatio:        0.9,
		Timeout:          5 * time.Second,
		Rounds:           4,
		ProxyTarget:      "proxy",
	}
}

// flagSet binds the flags of one subcommand to c. Errors from Parse are
// reported on stderr by the flag package itself.
func (c *Config) flagSet(cmd string, stderr io.Writer) (*flag.FlagSet, error) {
	fs := flag.NewFlagSet("loadgen "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)

	schema := func() {
		fs.StringVar(&c.Keyspace, "keyspace", c.Keyspace, "keyspace holding table kv")
		fs.Int64Var(&c.Rows, "rows", c.Rows, "number of keys (0..rows-1)")
		fs.IntVar(&c.ValueSize, "value-size", c.ValueSize, "bytes per written value")
	}
	session := func() {
		fs.IntVar(&c.Proto, "proto", c.Proto, "native protocol version (0 = negotiate)")
		fs.DurationVar(&c.Timeout, "timeout", c.Timeout, "per-request timeout")
	}
	load := func() {
		fs.IntVar(&c.Workers, "workers", c.Workers, "concurrent closed-loop workers")
		fs.DurationVar(&c.Duration, "duration", c.Duration, "measured window (per round for compare)")
		fs.DurationVar(&c.Warmup, "warmup", c.Warmup, "unmeasured load before measuring")
		fs.StringVar(&c.Workload, "workload", c.Workload, "read, write or mixed")
		fs.Float64Var(&c.ReadRatio, "read-ratio", c.ReadRatio, "share of reads in the mixed workload")
		fs.BoolVar(&c.JSON, "json", c.JSON, "print one JSON object on stdout instead of a table")
		fs.BoolVar(&c.FailOnErrors, "fail-on-errors", c.FailOnErrors, "exit 3 if any request failed")
		fs.BoolVar(&c.Quiet, "quiet", c.Quiet, "no per-second progress lines on stderr")
	}

	switch cmd {
	case cmdSetup:
		fs.Var((*hostList)(&c.Hosts), "hosts", "comma-separated contact points (host or host:port)")
		fs.IntVar(&c.RF, "rf", c.RF, "replication factor (SimpleStrategy)")
		fs.IntVar(&c.SetupConcurrency, "concurrency", c.SetupConcurrency, "in-flight preload inserts")
		schema()
		session()
	case cmdRun:
		fs.Var((*hostList)(&c.Hosts), "hosts", "comma-separated contact points (host or host:port)")
		schema()
		session()
		load()
	case cmdCompare:
		fs.Var((*targetList)(&c.Targets), "target", "NAME=HOST[:PORT][,HOST...]; repeat; the first is the baseline")
		fs.IntVar(&c.Rounds, "rounds", c.Rounds, "measured rounds per target, in ABBA order")
		fs.StringVar(&c.ProxyTarget, "proxy-target", c.ProxyTarget, "target whose rounds the proxy CPU figures belong to")
		fs.StringVar(&c.ProxyMetrics, "proxy-metrics", c.ProxyMetrics, "proxy Prometheus URL with process_cpu_seconds_total")
		fs.IntVar(&c.ProxyPID, "proxy-pid", c.ProxyPID, "proxy process id (alternative to --proxy-metrics)")
		schema()
		session()
		load()
	default:
		return nil, fmt.Errorf("unknown command %q", cmd)
	}
	return fs, nil
}

// keyspaceName matches what Cassandra accepts unquoted; the name is
// interpolated into CQL, so nothing else may pass.
var keyspaceName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,47}$`)

func (c *Config) validate(cmd string) error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(keyspaceName.MatchString(c.Keyspace), "--keyspace %q is not a plain CQL identifier", c.Keyspace)
	check(c.Rows > 0, "--rows must be positive")
	check(c.ValueSize >= 0, "--value-size must not be negative")
	check(c.Proto >= 0 && c.Proto <= 5, "--proto must be 0 (negotiate) or 1..5")
	check(c.Timeout > 0, "--timeout must be positive")

	switch cmd {
	case cmdSetup:
		check(len(c.Hosts) > 0, "--hosts is required")
		check(c.RF > 0, "--rf must be positive")
		check(c.SetupConcurrency > 0, "--concurrency must be positive")
	case cmdRun, cmdCompare:
		check(c.Workers > 0, "--workers must be positive")
		check(c.Duration > 0, "--duration must be positive")
		check(c.Warmup >= 0, "--warmup must not be negative")
		_, err := newWorkload(c)
		check(err == nil, "%v", err)
	}
	switch cmd {
	case cmdRun:
		check(len(c.Hosts) > 0, "--hosts is required")
	case cmdCompare:
		check(len(c.Targets) > 0, "at least one --target is required")
		check(c.Rounds > 0, "--rounds must be positive")
		check(c.ProxyMetrics == "" || c.ProxyPID == 0, "--proxy-metrics and --proxy-pid are alternatives")
		seen := map[string]bool{}
		for _, t := range c.Targets {
			check(!seen[t.Name], "target %q given twice", t.Name)
			seen[t.Name] = true
		}
		if c.ProxyMetrics != "" || c.ProxyPID != 0 {
			check(seen[c.ProxyTarget], "proxy CPU needs a target named %q (see --proxy-target)", c.ProxyTarget)
		}
	}
	return errors.Join(errs...)
}

// hostList is a flag.Value for comma-separated hosts; repeating the flag
// appends.
type hostList []string

func (h *hostList) String() string { return strings.Join(*h, ",") }

func (h *hostList) Set(s string) error {
	hosts, err := splitHosts(s)
	if err != nil {
		return err
	}
	*h = append(*h, hosts...)
	return nil
}

func splitHosts(s string) ([]string, error) {
	var hosts []string
	for _, h := range strings.Split(s, ",") {
		if h = strings.TrimSpace(h); h != "" {
			hosts = append(hosts, h)
		}
	}
	if len(hosts) == 0 {
		return nil, fmt.Errorf("no host in %q", s)
	}
	return hosts, nil
}

// targetList is a flag.Value for repeated --target NAME=HOSTS.
type targetList []Endpoint

func (t *targetList) String() string {
	parts := make([]string, len(*t))
	for i, e := range *t {
		parts[i] = e.String()
	}
	return strings.Join(parts, " ")
}

func (t *targetList) Set(s string) error {
	e, err := parseEndpoint(s)
	if err != nil {
		return err
	}
	*t = append(*t, e)
	return nil
}
