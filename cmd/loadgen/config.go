package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/gocql/gocql"
)

const (
	cmdSetup       = "setup"
	cmdRun         = "run"
	cmdCompare     = "compare"
	cmdWorkers     = "workers"
	cmdRateLimited = "ratelimited"
	cmdMultiget    = "multiget"
	cmdHeavy       = "heavy"
)

// Key distributions of the kv workloads.
const (
	keysUniform    = "uniform"
	keysSequential = "sequential"
	keysZipf       = "zipf"
)

// Config holds every flag of every subcommand. Each subcommand binds only
// the fields it uses (see flagSet); the zero value is not meaningful, start
// from defaultConfig.
type Config struct {
	// Hosts are the contact points of every command but compare
	// ("host" or "host:port").
	Hosts []string
	// Targets are the named endpoints of compare, in the order given; the
	// first one is the baseline of every ratio.
	Targets []Endpoint

	Keyspace string
	// RF is the SimpleStrategy replication factor of the keyspace setup
	// creates; Replication, when set, replaces it with
	// NetworkTopologyStrategy ("dc1:3,dc2:3").
	RF          int
	Replication string
	Rows        int64 // keys are drawn from [0, Rows)
	ValueSize   int   // bytes per value written by setup and by write operations

	// SetupConcurrency bounds the in-flight preload inserts.
	SetupConcurrency int
	// Setup makes run, compare and the scenarios create and preload their
	// schema first, as the setup command does.
	Setup bool

	Workers   int
	Duration  time.Duration // measured window (per round for compare)
	Ops       int64         // closed loop: measured requests; 0 = use Duration
	Warmup    time.Duration // unmeasured load before the first window
	Workload  string        // read, write or mixed
	ReadRatio float64       // share of reads in the mixed workload
	KeyDist   string        // uniform, sequential or zipf
	ZipfS     float64       // exponent of the zipf distribution (> 1)

	// Rate, when positive, switches to open loop: requests are scheduled
	// at Rate per second whatever the answers do, with at most
	// MaxInFlight outstanding.
	Rate        float64
	MaxInFlight int

	Proto       int           // native protocol version; 0 lets gocql negotiate
	Timeout     time.Duration // gocql per-request timeout; 0 = gocql's default (11s)
	Consistency string        // "" = gocql's default (QUORUM)
	NumConns    int           // connections per host; 0 = gocql's default (2)
	// Username and Password log every session in (PasswordAuthenticator);
	// "" for none. A server that asks for no login ignores them.
	Username string
	Password string

	Rounds       int
	ProxyTarget  string // which target the proxy figures belong to
	ProxyMetrics string // proxy Prometheus URL: CPU, limiter and speculative metrics
	ProxyPID     int    // proxy process: CPU from /proc/PID/stat, RSS from /proc/PID/status

	Interval time.Duration // progress line and timeline period
	HDRLog   string        // file for the HdrHistogram interval log
	Plot     string        // PNG file for throughput and latency over time

	// The workers scenario: Workers goroutines each run Queries
	// single-row SELECTs of one key.
	Queries int
	// Settle is how long the workers scenario waits after the session
	// starts before the flood. 0, as in the published program; gocql
	// opens a host's first connection before the session returns and the
	// others in the background, so a flood at once can find one
	// connection's 32,768 streams where two were meant.
	Settle time.Duration
	// The ratelimited scenario: Parallelism writers share Rate per second
	// for Runs one-second runs, with KeyOrder keys; Keep leaves the table.
	Parallelism int
	Runs        int
	KeyOrder    string // serial or random
	Keep        bool
	// The multiget scenario: batches of Partitions partitions of
	// RowsPerPartition rows, fetched Batches times by each method.
	Partitions       int
	RowsPerPartition int
	TotalPartitions  int64
	Batches          int
	InLimit          int
	Methods          []string
	// The heavy scenario: HeavyWorkers workers send one SELECT of
	// HeavyKeys partitions (IN) beside the Workers of the mixed workload.
	HeavyWorkers int
	HeavyKeys    int

	JSON         bool
	FailOnErrors bool
	Quiet        bool // no progress lines
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
		KeyDist:          keysUniform,
		ZipfS:            1.1,
		MaxInFlight:      1024,
		Timeout:          5 * time.Second,
		Consistency:      "ONE",
		Rounds:           4,
		ProxyTarget:      "proxy",
		Interval:         time.Second,
		Password:         os.Getenv("LOADGEN_PASSWORD"),
	}
}

// applyScenarioDefaults changes the defaults that differ for a scenario;
// it runs before the flags are bound, so flags still override.
func (c *Config) applyScenarioDefaults(cmd string) {
	switch cmd {
	case cmdWorkers:
		// The published program: stock gocql settings, 50,000 x 200.
		c.Workers = 50000
		c.Queries = 200
		c.Timeout = 0
		c.Consistency = ""
		c.Rows = 1000
	case cmdRateLimited:
		c.Parallelism = 16
		c.Rate = 1000
		c.Runs = 5
		c.KeyOrder = "serial"
		c.Rows = 1_000_000
	case cmdMultiget:
		c.RF = 3
		c.Partitions = 100
		c.RowsPerPartition = 50
		c.TotalPartitions = 1000
		c.Batches = 20
		c.Methods = []string{methodSequential, methodAsync, methodIn, methodInLimit}
	case cmdHeavy:
		c.Workers = 32
		c.HeavyWorkers = 8
		c.HeavyKeys = 500
		c.Duration = 20 * time.Second
		c.Warmup = 5 * time.Second
	}
}

// flagSet binds the flags of one subcommand to c. Errors from Parse are
// reported on stderr by the flag package itself.
func (c *Config) flagSet(cmd string, stderr io.Writer) (*flag.FlagSet, error) {
	fs := flag.NewFlagSet("loadgen "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.applyScenarioDefaults(cmd)

	hosts := func() {
		fs.Var((*hostList)(&c.Hosts), "hosts", "comma-separated contact points (host or host:port)")
	}
	schema := func() {
		fs.StringVar(&c.Keyspace, "keyspace", c.Keyspace, "keyspace holding the tables")
		fs.Int64Var(&c.Rows, "rows", c.Rows, "number of keys (0..rows-1)")
		fs.IntVar(&c.ValueSize, "value-size", c.ValueSize, "bytes per written value (the row size)")
	}
	replication := func() {
		fs.IntVar(&c.RF, "rf", c.RF, "replication factor (SimpleStrategy) of a keyspace setup creates")
		fs.StringVar(&c.Replication, "replication", c.Replication, "NetworkTopologyStrategy instead of --rf: DC:RF[,DC:RF...]")
		fs.IntVar(&c.SetupConcurrency, "setup-concurrency", c.SetupConcurrency, "in-flight preload inserts")
	}
	session := func() {
		fs.IntVar(&c.Proto, "proto", c.Proto, "native protocol version (0 = negotiate)")
		fs.DurationVar(&c.Timeout, "timeout", c.Timeout, "gocql per-request timeout (0 = gocql's default, 11s)")
		fs.StringVar(&c.Consistency, "consistency", c.Consistency, `consistency level ("" = gocql's default, QUORUM)`)
		fs.IntVar(&c.NumConns, "num-conns", c.NumConns, "connections per host (0 = gocql's default, 2)")
		fs.StringVar(&c.Username, "username", c.Username, "log in as this role (every target; \"\" = no login)")
		fs.StringVar(&c.Password, "password", c.Password, "the role's password (default $LOADGEN_PASSWORD, which keeps it out of ps)")
	}
	output := func() {
		fs.BoolVar(&c.JSON, "json", c.JSON, "print one JSON object on stdout instead of a table")
		fs.BoolVar(&c.FailOnErrors, "fail-on-errors", c.FailOnErrors, "exit 3 if any request failed")
		fs.BoolVar(&c.Quiet, "quiet", c.Quiet, "no progress lines on stderr")
		fs.DurationVar(&c.Interval, "interval", c.Interval, "period of the progress lines and of the timeline")
	}
	timeline := func() {
		fs.StringVar(&c.HDRLog, "hdr-log", c.HDRLog, "write an HdrHistogram interval log (latency in µs) to this file")
		fs.StringVar(&c.Plot, "plot", c.Plot, "write a PNG of throughput and latency over time to this file")
	}
	proxyProbe := func() {
		fs.StringVar(&c.ProxyMetrics, "proxy-metrics", c.ProxyMetrics, "proxy Prometheus URL (CPU, limiter and speculative metrics)")
		fs.IntVar(&c.ProxyPID, "proxy-pid", c.ProxyPID, "proxy process id (CPU and RSS from /proc)")
	}
	load := func() {
		fs.IntVar(&c.Workers, "workers", c.Workers, "concurrent closed-loop workers")
		fs.DurationVar(&c.Duration, "duration", c.Duration, "measured window (per round for compare)")
		fs.Int64Var(&c.Ops, "ops", c.Ops, "closed loop: stop after this many measured requests instead of --duration")
		fs.DurationVar(&c.Warmup, "warmup", c.Warmup, "unmeasured load before measuring")
		fs.StringVar(&c.Workload, "workload", c.Workload, "read, write or mixed")
		fs.Float64Var(&c.ReadRatio, "read-ratio", c.ReadRatio, "share of reads in the mixed workload")
		fs.StringVar(&c.KeyDist, "keys", c.KeyDist, "key distribution: uniform, sequential or zipf")
		fs.Float64Var(&c.ZipfS, "zipf-s", c.ZipfS, "zipf exponent (> 1; larger is hotter)")
		fs.Float64Var(&c.Rate, "rate", c.Rate, "open loop: requests per second (0 = closed loop)")
		fs.IntVar(&c.MaxInFlight, "max-in-flight", c.MaxInFlight, "open loop: most requests outstanding at once")
		fs.BoolVar(&c.Setup, "setup", c.Setup, "create and preload the schema first")
	}

	switch cmd {
	case cmdSetup:
		hosts()
		schema()
		replication()
		session()
	case cmdRun:
		hosts()
		schema()
		replication()
		session()
		load()
		output()
		timeline()
		proxyProbe()
	case cmdCompare:
		fs.Var((*targetList)(&c.Targets), "target", "NAME=HOST[:PORT][,HOST...]; repeat; the first is the baseline")
		fs.IntVar(&c.Rounds, "rounds", c.Rounds, "measured rounds per target, in ABBA order")
		fs.StringVar(&c.ProxyTarget, "proxy-target", c.ProxyTarget, "target whose rounds the proxy figures belong to")
		schema()
		replication()
		session()
		load()
		output()
		proxyProbe()
	case cmdWorkers:
		hosts()
		schema()
		replication()
		session()
		output()
		timeline()
		proxyProbe()
		fs.IntVar(&c.Workers, "workers", c.Workers, "goroutines, each with one key")
		fs.IntVar(&c.Queries, "queries", c.Queries, "sequential single-row SELECTs per goroutine")
		fs.DurationVar(&c.Settle, "settle", c.Settle, "wait this long after the session starts, before the flood, so gocql can open its whole pool (0: flood at once, as published)")
		fs.BoolVar(&c.Setup, "setup", c.Setup, "create and preload the schema first")
	case cmdRateLimited:
		hosts()
		schema()
		replication()
		session()
		output()
		timeline()
		proxyProbe()
		fs.IntVar(&c.Parallelism, "parallelism", c.Parallelism, "concurrent writers (most requests in flight)")
		fs.Float64Var(&c.Rate, "rate", c.Rate, "requests per second, all writers together")
		fs.IntVar(&c.Runs, "runs", c.Runs, "one-second runs")
		fs.StringVar(&c.KeyOrder, "keys", c.KeyOrder, "serial or random keys")
		fs.BoolVar(&c.Keep, "keep", c.Keep, "keep the written table (default: drop it at the end)")
	case cmdMultiget:
		hosts()
		fs.StringVar(&c.Keyspace, "keyspace", c.Keyspace, "keyspace holding table mg")
		fs.IntVar(&c.ValueSize, "value-size", c.ValueSize, "bytes per row value")
		replication()
		session()
		output()
		fs.IntVar(&c.Partitions, "partitions", c.Partitions, "partitions fetched per batch")
		fs.IntVar(&c.RowsPerPartition, "rows-per-partition", c.RowsPerPartition, "rows in each partition")
		fs.Int64Var(&c.TotalPartitions, "total-partitions", c.TotalPartitions, "partitions loaded (batches draw from them)")
		fs.IntVar(&c.Batches, "batches", c.Batches, "batches fetched by each method")
		fs.IntVar(&c.InLimit, "in-limit", c.InLimit, "LIMIT of the in_limit method (0 = partitions x rows-per-partition)")
		fs.Var((*stringList)(&c.Methods), "methods", "comma-separated: sequential, async, in, in_limit")
		fs.BoolVar(&c.Setup, "setup", c.Setup, "create and load table mg first")
		fs.DurationVar(&c.Warmup, "warmup", 0, "unmeasured fetching by every method first")
	case cmdHeavy:
		hosts()
		schema()
		replication()
		session()
		output()
		fs.IntVar(&c.Workers, "workers", c.Workers, "closed-loop workers of the mixed workload (single-partition reads and writes)")
		fs.Float64Var(&c.ReadRatio, "read-ratio", c.ReadRatio, "share of reads in the mixed workload")
		fs.IntVar(&c.HeavyWorkers, "heavy-workers", c.HeavyWorkers, "closed-loop workers of the heavy statement (0: the mixed workload alone)")
		fs.IntVar(&c.HeavyKeys, "heavy-keys", c.HeavyKeys, "partitions the heavy statement reads with one IN")
		fs.DurationVar(&c.Duration, "duration", c.Duration, "measured window")
		fs.DurationVar(&c.Warmup, "warmup", c.Warmup, "load before the measured window (its requests count in calls and errors, not in latencies)")
		fs.BoolVar(&c.Setup, "setup", c.Setup, "create and preload table kv first")
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
	check(c.Timeout >= 0, "--timeout must not be negative")
	check(c.NumConns >= 0, "--num-conns must not be negative")
	check(c.Interval >= 10*time.Millisecond, "--interval must be at least 10ms")
	_, err := c.consistency()
	check(err == nil, "%v", err)
	check(c.RF > 0, "--rf must be positive")
	check(c.SetupConcurrency > 0, "--setup-concurrency must be positive")
	_, err = replicationMap(c.Keyspace, c.RF, c.Replication)
	check(err == nil, "%v", err)
	if cmd != cmdCompare {
		check(len(c.Hosts) > 0, "--hosts is required")
	}

	switch cmd {
	case cmdRun, cmdCompare:
		check(c.Workers > 0, "--workers must be positive")
		check(c.Duration > 0 || c.Ops > 0, "--duration or --ops must be positive")
		check(c.Ops >= 0, "--ops must not be negative")
		check(c.Warmup >= 0, "--warmup must not be negative")
		check(c.Rate >= 0, "--rate must not be negative")
		check(c.Rate == 0 || c.MaxInFlight > 0, "--max-in-flight must be positive")
		check(c.Rate == 0 || c.Ops == 0, "--ops is for the closed loop; the open loop (--rate) runs for --duration")
		check(c.Rate == 0 || c.Duration > 0, "--rate needs a positive --duration")
		_, err := newWorkload(c)
		check(err == nil, "%v", err)
	case cmdWorkers:
		check(c.Workers > 0, "--workers must be positive")
		check(c.Queries > 0, "--queries must be positive")
		check(c.Settle >= 0, "--settle must not be negative")
	case cmdRateLimited:
		check(c.Parallelism > 0, "--parallelism must be positive")
		check(c.Rate > 0, "--rate must be positive")
		check(c.Runs > 0, "--runs must be positive")
		check(c.KeyOrder == "serial" || c.KeyOrder == "random", "--keys must be serial or random, not %q", c.KeyOrder)
	case cmdHeavy:
		check(c.Workers >= 0 && c.HeavyWorkers >= 0 && c.Workers+c.HeavyWorkers > 0, "--workers and --heavy-workers must not be negative, and not both 0")
		check(c.HeavyKeys > 0 && c.HeavyKeys <= 65535, "--heavy-keys must be in 1..65535")
		check(c.ReadRatio >= 0 && c.ReadRatio <= 1, "--read-ratio %v is outside [0, 1]", c.ReadRatio)
		check(c.Duration > 0, "--duration must be positive")
		check(c.Warmup >= 0, "--warmup must not be negative")
	case cmdMultiget:
		check(c.Partitions > 0, "--partitions must be positive")
		check(c.RowsPerPartition > 0, "--rows-per-partition must be positive")
		check(c.TotalPartitions >= int64(c.Partitions), "--total-partitions must be at least --partitions")
		check(c.Batches > 0, "--batches must be positive")
		check(c.InLimit >= 0, "--in-limit must not be negative")
		check(len(c.Methods) > 0, "--methods must name at least one method")
		for _, m := range c.Methods {
			check(validMethod(m), "unknown multiget method %q (want sequential, async, in or in_limit)", m)
		}
	}
	if cmd == cmdCompare {
		check(len(c.Targets) > 0, "at least one --target is required")
		check(c.Rounds > 0, "--rounds must be positive")
		seen := map[string]bool{}
		for _, t := range c.Targets {
			check(!seen[t.Name], "target %q given twice", t.Name)
			seen[t.Name] = true
		}
		if c.ProxyMetrics != "" || c.ProxyPID != 0 {
			check(seen[c.ProxyTarget], "proxy figures need a target named %q (see --proxy-target)", c.ProxyTarget)
		}
	}
	return errors.Join(errs...)
}

// consistency parses --consistency; ok is false for "" (gocql's default).
func (c *Config) consistency() (*gocql.Consistency, error) {
	if c.Consistency == "" {
		return nil, nil
	}
	cl, err := gocql.ParseConsistencyWrapper(strings.ToUpper(c.Consistency))
	if err != nil {
		return nil, fmt.Errorf("--consistency: %w", err)
	}
	return &cl, nil
}

// dcName is what a data center name may look like in the replication map.
var dcName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// replicationMap returns the CQL replication map of the keyspace: from
// spec ("dc1:3,dc2:3", NetworkTopologyStrategy) when set, else
// SimpleStrategy with rf. The result is interpolated into CQL, so every
// part is checked.
func replicationMap(keyspace string, rf int, spec string) (string, error) {
	if spec == "" {
		return fmt.Sprintf("{'class': 'SimpleStrategy', 'replication_factor': %d}", rf), nil
	}
	var b strings.Builder
	b.WriteString("{'class': 'NetworkTopologyStrategy'")
	for _, part := range strings.Split(spec, ",") {
		dc, n, ok := strings.Cut(strings.TrimSpace(part), ":")
		v, err := strconv.Atoi(n)
		if !ok || err != nil || v < 0 || !dcName.MatchString(dc) {
			return "", fmt.Errorf("--replication %q for %s: want DC:RF[,DC:RF...]", spec, keyspace)
		}
		fmt.Fprintf(&b, ", '%s': %d", dc, v)
	}
	b.WriteString("}")
	return b.String(), nil
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

// stringList is a flag.Value for a comma-separated list that replaces the
// default.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(s string) error {
	*l = nil
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*l = append(*l, v)
		}
	}
	return nil
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
