// Package config defines cqlgate's settings and loads them from defaults, a
// YAML file, environment variables and command-line flags, in increasing
// order of precedence.
//
// Every setting is a field of Config. Its struct tags declare the flag name,
// environment variable, YAML key, default, help text and whether it can be
// reloaded or must be masked in logs; the loaders, the usage text, LogSafe and
// Fields are all driven by those tags, so adding a setting means adding one
// field. The tags also bound numeric settings (min, max, and above for an
// exclusive minimum), which Validate checks; other checks are code there.
//
// Lists are comma-separated in flags and environment variables and YAML
// sequences in the file. Durations use Go syntax everywhere (300ms, 5s,
// 1m30s).
package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cqlgate/cqlgate/pkg/idempotency"
	"github.com/cqlgate/cqlgate/pkg/rules"
)

// DefaultCQLPort is the port added to contact points given without one.
const DefaultCQLPort = "9042"

const (
	programName = "cqlgate"
	versionHelp = "print version information and exit"
)

// ErrHelp is returned (wrapped) by Load when the command line asks for help,
// after the usage text has been written. It is flag.ErrHelp.
var ErrHelp = flag.ErrHelp

// ErrVersion is returned (wrapped) by Load when the command line contains
// --version. Nothing else is loaded or checked; the caller prints the version.
var ErrVersion = errors.New("version requested")

// Config holds every cqlgate setting. The zero value is not useful: start
// from Default or Load. Validate normalizes some fields; see there.
type Config struct {
	Listen []string `flag:"listen" env:"CQLGATE_LISTEN" yaml:"listen" default:"127.0.0.1:9042" help:"client-facing CQL listen addresses, HOST:PORT, comma-separated"`

	ContactPoints []string `flag:"contact-points" env:"CQLGATE_CONTACT_POINTS" yaml:"contact_points" required:"true" help:"Cassandra nodes to discover the cluster from, HOST[:PORT], comma-separated; the port defaults to 9042 and IPv6 addresses with a port go in brackets, e.g. [::1]:9042"`

	AdminListen string `flag:"admin-listen" env:"CQLGATE_ADMIN_LISTEN" yaml:"admin_listen" default:"127.0.0.1:9180" help:"HOST:PORT of the HTTP server for /metrics, /healthz, /readyz, /statements and the status page at /"`

	ConfigFile string `flag:"config" env:"CQLGATE_CONFIG" yaml:"-" help:"YAML file of settings, keyed by the names shown as yaml below; environment variables and flags override it"`

	AdvertiseAddress string `flag:"advertise-address" env:"CQLGATE_ADVERTISE_ADDRESS" yaml:"advertise_address" help:"IP address reported to drivers as this node's rpc_address; defaults to the host of the first --listen address, and must be set when that host is unspecified (0.0.0.0 or ::) or a name"`

	ConnectionsPerNode int `flag:"connections-per-node" env:"CQLGATE_CONNECTIONS_PER_NODE" yaml:"connections_per_node" default:"1" min:"1" max:"64" help:"connections kept open to each Cassandra node per pool (1-64); one carries up to 32,768 requests at once, and fewer connections mean larger batches per syscall"`

	MaxFrameBytes int `flag:"max-frame-bytes" env:"CQLGATE_MAX_FRAME_BYTES" yaml:"max_frame_bytes" default:"16777216" min:"65536" max:"268435456" help:"largest frame accepted from a client or a node, in bytes (65536-268435456); like Cassandra's native_transport_max_frame_size"`

	ConnectTimeout time.Duration `flag:"connect-timeout" env:"CQLGATE_CONNECT_TIMEOUT" yaml:"connect_timeout" default:"5s" above:"0s" help:"time allowed to connect to a Cassandra node, including the protocol handshake"`

	KeyspacePoolIdleTimeout time.Duration `flag:"keyspace-pool-idle-timeout" env:"CQLGATE_KEYSPACE_POOL_IDLE_TIMEOUT" yaml:"keyspace_pool_idle_timeout" default:"10m" help:"close the connections opened for a keyspace (one pool per keyspace that clients USE) once no client has used it for this long (at least 1s, and never less than --request-timeout, so the last client's requests finish first); 0 keeps them open"`

	HeartbeatInterval time.Duration `flag:"heartbeat-interval" env:"CQLGATE_HEARTBEAT_INTERVAL" yaml:"heartbeat_interval" default:"30s" help:"interval between heartbeats on idle node connections; 0 disables them"`

	ReconnectBaseDelay time.Duration `flag:"reconnect-base-delay" env:"CQLGATE_RECONNECT_BASE_DELAY" yaml:"reconnect_base_delay" default:"200ms" above:"0s" help:"delay before the first attempt to reconnect to a node; it grows exponentially with each failure"`

	ReconnectMaxDelay time.Duration `flag:"reconnect-max-delay" env:"CQLGATE_RECONNECT_MAX_DELAY" yaml:"reconnect_max_delay" default:"30s" above:"0s" help:"upper bound of the reconnect delay; at least --reconnect-base-delay"`

	RequestTimeout time.Duration `flag:"request-timeout" env:"CQLGATE_REQUEST_TIMEOUT" yaml:"request_timeout" default:"15s" above:"0s" help:"proxy-side deadline of a request; keep it above the cluster's server-side timeouts (read_request_timeout, write_request_timeout, range_request_timeout...) so that Cassandra reports its own timeouts first"`

	DrainTimeout time.Duration `flag:"drain-timeout" env:"CQLGATE_DRAIN_TIMEOUT" yaml:"drain_timeout" default:"20s" above:"0s" help:"on SIGTERM, how long requests in flight may take to finish before connections close; new requests meanwhile get OVERLOADED so drivers move to another node. Keep the pod's termination grace period above it"`

	MaxClientConnections int `flag:"max-client-connections" env:"CQLGATE_MAX_CLIENT_CONNECTIONS" yaml:"max_client_connections" default:"4096" reload:"true" min:"0" max:"16777216" help:"client connections served at once; one more gets OVERLOADED in answer to its first message and is closed (0 means no limit), unless connections still in their handshake hold slots: the oldest of those is closed to make room"`

	HandshakeTimeout time.Duration `flag:"handshake-timeout" env:"CQLGATE_HANDSHAKE_TIMEOUT" yaml:"handshake_timeout" default:"10s" above:"0s" help:"time a new client connection has to finish its handshake (TLS, STARTUP and, with --client-auth passthrough, its login); a connection that sends nothing, or too slowly, is closed then instead of holding a connection slot"`

	MaxPendingHandshakes int `flag:"max-pending-handshakes" env:"CQLGATE_MAX_PENDING_HANDSHAKES" yaml:"max_pending_handshakes" default:"1024" reload:"true" min:"1" max:"16777216" help:"client connections in their handshake at once; a new one past it closes the oldest pending one, so a flood of idle or slow sockets cannot keep a well-behaved client out (its handshake takes milliseconds)"`

	MaxPendingHandshakesPerAddress int `flag:"max-pending-handshakes-per-address" env:"CQLGATE_MAX_PENDING_HANDSHAKES_PER_ADDRESS" yaml:"max_pending_handshakes_per_address" default:"256" reload:"true" min:"1" max:"16777216" help:"client connections in their handshake at once from one source address; a new one past it closes that address's oldest pending one, so one flooding address cannot push out the handshakes of others"`

	ClientWriteBufferBytes int `flag:"client-write-buffer-bytes" env:"CQLGATE_CLIENT_WRITE_BUFFER_BYTES" yaml:"client_write_buffer_bytes" default:"67108864" reload:"true" min:"1048576" max:"1099511627776" help:"answers waiting to be written to one client, in bytes; a client that stops reading is disconnected when its answers exceed this, so it cannot hold memory or slow anyone else (at least 1048576)"`

	MaxBufferedBytes int `flag:"max-buffered-bytes" env:"CQLGATE_MAX_BUFFERED_BYTES" yaml:"max_buffered_bytes" default:"1073741824" reload:"true" min:"16777216" max:"1099511627776" help:"bytes of requests and answers the proxy holds at once, all clients together: each request frame from when it is read until it is answered (queued ones included), each answer until it is written to its client. Past it, new requests get OVERLOADED until answers drain, so many clients with large requests or slow reads cannot exhaust the proxy's memory (at least 16777216)"`

	MaxOrphansPerConnection int `flag:"max-orphans-per-connection" env:"CQLGATE_MAX_ORPHANS_PER_CONNECTION" yaml:"max_orphans_per_connection" default:"1024" min:"1" max:"32768" help:"timed-out requests still holding a stream id on one Cassandra connection before that connection is replaced: it takes no new requests, a new one is opened, and it closes once nothing but orphans is left on it"`

	AddressMap []string `flag:"address-map" env:"CQLGATE_ADDRESS_MAP" yaml:"address_map" help:"address translation, comma-separated FROM=TO pairs: a node that Cassandra advertises as FROM (HOST or HOST:PORT, as in system.peers) is dialled at TO (HOST:PORT), for NAT, Kubernetes or a fault injector in between"`

	LocalDC string `flag:"local-dc" env:"CQLGATE_LOCAL_DC" yaml:"local_dc" help:"data center whose replicas serve requests first; other data centers are used only when no local replica is up. Empty: the data center of the first contact point that answers"`

	KeyspaceWeights []string `flag:"keyspace-weights" env:"CQLGATE_KEYSPACE_WEIGHTS" yaml:"keyspace_weights" reload:"true" help:"priority classes by keyspace for the admission queue, comma-separated KEYSPACE=WEIGHT pairs (weight 1-1000), with * for every other keyspace (default weight 1): under saturation each class gets at least its weight's share of the requests leaving the queue, e.g. orders=8,analytics=1,*=2"`

	SpeculativeMaxExecutions int `flag:"speculative-max-executions" env:"CQLGATE_SPECULATIVE_MAX_EXECUTIONS" yaml:"speculative_max_executions" default:"1" reload:"true" min:"0" max:"4" help:"extra copies (hedges) of a slow idempotent request sent to other replicas, 0-4; 0 turns speculative execution off"`

	SpeculativeDelay time.Duration `flag:"speculative-delay" env:"CQLGATE_SPECULATIVE_DELAY" yaml:"speculative_delay" default:"0s" min:"0s" help:"wait before a hedge is sent; 0 means adaptive: --speculative-percentile of each statement's recent latency on its fastest node, within --speculative-delay-min and --speculative-delay-max, and no hedging until 100 samples exist"`

	SpeculativePercentile float64 `flag:"speculative-percentile" env:"CQLGATE_SPECULATIVE_PERCENTILE" yaml:"speculative_percentile" default:"0.99" above:"0" max:"1" help:"latency percentile (0-1] that is the adaptive hedge delay"`

	SpeculativeDelayMin time.Duration `flag:"speculative-delay-min" env:"CQLGATE_SPECULATIVE_DELAY_MIN" yaml:"speculative_delay_min" default:"1ms" above:"0s" help:"floor of the adaptive hedge delay"`

	SpeculativeDelayMax time.Duration `flag:"speculative-delay-max" env:"CQLGATE_SPECULATIVE_DELAY_MAX" yaml:"speculative_delay_max" default:"200ms" help:"cap of the adaptive hedge delay"`

	SpeculativeBudget float64 `flag:"speculative-budget" env:"CQLGATE_SPECULATIVE_BUDGET" yaml:"speculative_budget" default:"0.05" above:"0" max:"1" help:"hedges allowed as a share of hedgeable requests over the last 10s (0-1]; hedges also take only a free limiter slot and pause while the limiter rejects, so they never add to an overload"`

	SpeculativeIdempotent []string `flag:"speculative-idempotent" env:"CQLGATE_SPECULATIVE_IDEMPOTENT" yaml:"speculative_idempotent" help:"idempotency overrides, comma-separated: idempotent:KS.TABLE, not-idempotent:KS.TABLE, or idempotent:re:REGEXP / not-idempotent:re:REGEXP on the statement text; the first match wins over what the proxy infers from the text"`

	PreparedCacheEntries int `flag:"prepared-cache-entries" env:"CQLGATE_PREPARED_CACHE_ENTRIES" yaml:"prepared_cache_entries" default:"20000" min:"100" help:"prepared statements remembered for re-preparing on other nodes (at least 100)"`

	StatementStatsEntries int `flag:"statement-stats-entries" env:"CQLGATE_STATEMENT_STATS_ENTRIES" yaml:"statement_stats_entries" default:"5000" min:"0" max:"1000000" help:"statements whose statistics are kept for GET /statements, the status page and cqlgate statements (about 1.5 KiB each; the least used are evicted); 0 turns statement statistics off"`

	StatementMetricsTop int `flag:"statement-metrics-top" env:"CQLGATE_STATEMENT_METRICS_TOP" yaml:"statement_metrics_top" default:"0" min:"0" max:"1000" reload:"true" help:"export cqlgate_statement_* Prometheus series for the N statements with the most calls (0: none); bounded so that a scrape never explodes in cardinality"`

	SlowStatementThreshold time.Duration `flag:"slow-statement-threshold" env:"CQLGATE_SLOW_STATEMENT_THRESHOLD" yaml:"slow_statement_threshold" default:"0s" min:"0s" reload:"true" help:"log requests slower than this (statement id, text, node, latency, queue wait, hedges; never bind values) at warn level; 0 turns the slow-statement log off"`

	SlowStatementSampleRate float64 `flag:"slow-statement-sample-rate" env:"CQLGATE_SLOW_STATEMENT_SAMPLE_RATE" yaml:"slow_statement_sample_rate" default:"1" above:"0" max:"1" reload:"true" help:"share (0-1] of the requests over --slow-statement-threshold that are logged"`

	RulesFile string `flag:"rules-file" env:"CQLGATE_RULES_FILE" yaml:"rules_file" reload:"true" help:"YAML file of rules capping the requests in flight of a statement (its id in /statements) or a keyspace.table, each with its own small queue; excess gets OVERLOADED naming the rule. Read again on SIGHUP; see docs/rules.md. Needs statement statistics (--statement-stats-entries above 0)"`

	HostID string `flag:"host-id" env:"CQLGATE_HOST_ID" yaml:"host_id" help:"host_id UUID this proxy reports in system.local; empty derives one"`

	DataCenter string `flag:"data-center" env:"CQLGATE_DATA_CENTER" yaml:"data_center" help:"data center this proxy reports in system.local; empty reports the backend node's"`

	ProtocolVersionMax int `flag:"protocol-version-max" env:"CQLGATE_PROTOCOL_VERSION_MAX" yaml:"protocol_version_max" default:"5" min:"3" max:"5" help:"highest native protocol version offered to clients (3-5)"`

	LogLevel string `flag:"log-level" env:"CQLGATE_LOG_LEVEL" yaml:"log_level" default:"info" reload:"true" help:"minimum log level: debug, info, warn or error"`

	LimitMode string `flag:"limit-mode" env:"CQLGATE_LIMIT_MODE" yaml:"limit_mode" default:"fleet" reload:"true" help:"requests in flight per Cassandra node: fixed (--node-limit), adaptive (follows the node's latency between --limit-min and --limit-max) or fleet (follows the node's standing queue and its own counts from --limit-floor up to --limit-max, meant for many sidecars in front of the same nodes; a node that cannot report its counts, before Cassandra 4.0 or to a role without SELECT on system_views, gets --node-limit; see docs/sizing.md)"`

	NodeLimit int `flag:"node-limit" env:"CQLGATE_NODE_LIMIT" yaml:"node_limit" default:"1024" reload:"true" min:"1" max:"1048576" help:"requests in flight per node with --limit-mode fixed, and in fleet mode to a node that cannot report its counts"`

	LimitMin int `flag:"limit-min" env:"CQLGATE_LIMIT_MIN" yaml:"limit_min" default:"16" reload:"true" min:"1" max:"1048576" help:"lowest adaptive per-node limit"`

	LimitFloor    float64       `flag:"limit-floor" env:"CQLGATE_LIMIT_FLOOR" yaml:"limit_floor" default:"0.1" reload:"true" above:"0" max:"1048576" help:"fleet mode: lowest per-node limit and where a limit starts; below 1 it is a fraction of one request in flight, paced (0.25: one request, then three of its latencies of rest), so that a fleet's floors add up to less than a node can serve"`
	LimitNodePoll time.Duration `flag:"limit-node-poll" env:"CQLGATE_LIMIT_NODE_POLL" yaml:"limit_node_poll" default:"200ms" reload:"true" help:"fleet mode: how often, at most, to read each node's own count of completed requests (system_views.thread_pools), by which the limit tells a queue from latency that buys throughput; a sidecar with less than a tenth of a node's requests reads it less often, so that a fleet of any size reads each node at most about 100 times a second, except while a standing wait lasts in a fleet of more than 8 proxies (each then reads it every N ms for N proxies); with it, now and then, the node's list of clients (system_views.clients), which tells how many proxies share the node; 0: never (latencies alone)"`

	LimitMax int `flag:"limit-max" env:"CQLGATE_LIMIT_MAX" yaml:"limit_max" default:"4096" reload:"true" help:"highest adaptive per-node limit (at most 32768 per connection to the node)"`

	LimitTolerance float64 `flag:"limit-tolerance" env:"CQLGATE_LIMIT_TOLERANCE" yaml:"limit_tolerance" default:"1.5" reload:"true" above:"1" max:"10" help:"adaptive mode: how far (as a multiple, in (1, 10]) a node's mean latency may rise above its no-load latency before the limit is cut; raise it where the latency swings with other load on the host. Fleet mode: the dead zone of a window's minimum latency over the lowest seen, 1.2 when left at 1.5, and at least 0.5 ms over it"`

	GlobalLimit int `flag:"global-limit" env:"CQLGATE_GLOBAL_LIMIT" yaml:"global_limit" default:"0" reload:"true" min:"0" max:"1073741824" help:"requests in flight to the whole cluster; 0 means the sum of the node limits"`

	QueueLength int `flag:"queue-length" env:"CQLGATE_QUEUE_LENGTH" yaml:"queue_length" default:"131072" reload:"true" min:"0" max:"16777216" help:"requests that may wait for a free slot when the limits are reached; beyond it clients get OVERLOADED at once (0 rejects without queueing, with --limit-mode fixed or adaptive). The default holds what two drivers' connection pools can have in flight (gocql: 2 connections x 32,768 streams per host)"`

	QueueMaxWait time.Duration `flag:"queue-max-wait" env:"CQLGATE_QUEUE_MAX_WAIT" yaml:"queue_max_wait" default:"5s" reload:"true" above:"0s" help:"longest a request waits in the queue before the client gets OVERLOADED; keep it below the drivers' request timeout (gocql 11s) so they get an answer, not a timeout"`

	QueueTarget time.Duration `flag:"queue-target" env:"CQLGATE_QUEUE_TARGET" yaml:"queue_target" default:"0s" reload:"true" min:"0s" help:"CoDel target against standing queues: once a client connection's queued requests have waited longer than this for an interval (20 times it, at most --queue-max-wait), those that did are rejected, and while it stands, arrivals that would wait over half of it are rejected at once (reason shed); 0 means --queue-max-wait/2"`

	MaxProcs int `flag:"max-procs" env:"CQLGATE_MAX_PROCS" yaml:"max_procs" default:"1" min:"0" max:"1024" help:"CPU cores the proxy's Go scheduler uses (GOMAXPROCS); 0 uses all. One suits a sidecar: the proxy does not compete with its application, and hand-offs between its goroutines need no cross-core wake-ups"`

	AdminPprof bool `flag:"admin-pprof" env:"CQLGATE_ADMIN_PPROF" yaml:"admin_pprof" help:"serve the Go profiler under /debug/pprof/ on --admin-listen (keep that address private)"`

	LogFormat string `flag:"log-format" env:"CQLGATE_LOG_FORMAT" yaml:"log_format" default:"json" help:"log encoding: json or console"`

	// Authentication and TLS. Checked by validateSecurity.

	ClientAuth string `flag:"client-auth" env:"CQLGATE_CLIENT_AUTH" yaml:"client_auth" default:"none" help:"how clients log in: none (any client is served; only allowed when every --listen address is loopback) or passthrough (clients log in with their Cassandra username and password, checked by logging in to Cassandra with them; what their requests then run as is --passthrough-identity)"`

	PassthroughIdentity string `flag:"passthrough-identity" env:"CQLGATE_PASSTHROUGH_IDENTITY" yaml:"passthrough_identity" default:"role" help:"with --client-auth passthrough, whom Cassandra sees run a client's requests: role (the client's own role, over backend connections logged in as that role and shared by every client connection of it, so its GRANTs, audit log entries and limits are its own) or proxy (every request runs as --backend-username over the proxy's shared connections)"`

	MaxRolePools int `flag:"max-role-pools" env:"CQLGATE_MAX_ROLE_POOLS" yaml:"max_role_pools" default:"64" min:"1" max:"100000" help:"with --passthrough-identity role, how many roles may have backend connections at once (each role has its own pool per protocol version and keyspace); a login of one more role is refused with an error saying so, never run as the proxy's user"`

	RolePoolIdleTimeout time.Duration `flag:"role-pool-idle-timeout" env:"CQLGATE_ROLE_POOL_IDLE_TIMEOUT" yaml:"role_pool_idle_timeout" default:"1m" min:"1s" help:"with --passthrough-identity role, close a role's backend connections once none of its client connections has used them for this long (never less than --request-timeout); its password is forgotten as soon as its last client connection closes"`

	RoleWeights []string `flag:"role-weights" env:"CQLGATE_ROLE_WEIGHTS" yaml:"role_weights" reload:"true" help:"priority classes by login role (--client-auth passthrough) for the admission queue, comma-separated ROLE=WEIGHT pairs (weight 1-1000), like --keyspace-weights, which they share * with: a request of a listed role takes its role's class, others their keyspace's, e.g. checkout=8,reporting=1"`

	MaxRoleSeries int `flag:"max-role-series" env:"CQLGATE_MAX_ROLE_SERIES" yaml:"max_role_series" default:"20" min:"0" max:"10000" help:"roles that get their own series in the per-role metrics (cqlgate_role_*); further roles are counted under role=\"other\", so a churn of roles cannot grow /metrics without bound"`

	LoginFailuresPerSecond float64 `flag:"login-failures-per-second" env:"CQLGATE_LOGIN_FAILURES_PER_SECOND" yaml:"login_failures_per_second" default:"1" min:"0" max:"1000000" help:"with --client-auth passthrough, failed logins allowed per second from one source address once --login-failure-burst is spent; other logins from it are refused without asking Cassandra, except credentials already verified (see --auth-cache-ttl). 0 means no limit"`

	LoginFailureBurst int `flag:"login-failure-burst" env:"CQLGATE_LOGIN_FAILURE_BURST" yaml:"login_failure_burst" default:"10" min:"1" max:"1000000" help:"with --client-auth passthrough, failed logins one source address may have in a row before --login-failures-per-second applies"`

	AuthCacheTTL time.Duration `flag:"auth-cache-ttl" env:"CQLGATE_AUTH_CACHE_TTL" yaml:"auth_cache_ttl" default:"1m" help:"with --client-auth passthrough, how long credentials that Cassandra accepted are accepted again without asking it (a changed password or dropped role takes effect after this); 0 asks Cassandra at every login"`

	BackendUsername string `flag:"backend-username" env:"CQLGATE_BACKEND_USERNAME" yaml:"backend_username" help:"user the proxy logs in to Cassandra as (PasswordAuthenticator): its control connection (topology, schema agreement) runs as this user, and so do the client requests unless --client-auth passthrough runs them as the client's role (--passthrough-identity)"`

	BackendPassword string `flag:"backend-password" env:"CQLGATE_BACKEND_PASSWORD" yaml:"backend_password" secret:"true" help:"password of --backend-username; give it in the config file or the environment, not as a flag, which other local users can see in the process list"`

	TLSCertFile string `flag:"tls-cert-file" env:"CQLGATE_TLS_CERT_FILE" yaml:"tls_cert_file" help:"PEM certificate (chain) clients see; with --tls-key-file it makes the listen addresses TLS-only. Re-read when the file changes"`

	TLSKeyFile string `flag:"tls-key-file" env:"CQLGATE_TLS_KEY_FILE" yaml:"tls_key_file" help:"PEM private key of --tls-cert-file"`

	TLSClientCAFile string `flag:"tls-client-ca-file" env:"CQLGATE_TLS_CLIENT_CA_FILE" yaml:"tls_client_ca_file" help:"PEM CA certificates for mutual TLS: every client must present a certificate signed by one of them"`

	BackendTLS bool `flag:"backend-tls" env:"CQLGATE_BACKEND_TLS" yaml:"backend_tls" help:"connect to Cassandra with TLS (client_encryption_options), checking the nodes' certificates against --backend-tls-ca-file or the system's CAs"`

	BackendTLSCAFile string `flag:"backend-tls-ca-file" env:"CQLGATE_BACKEND_TLS_CA_FILE" yaml:"backend_tls_ca_file" help:"PEM CA certificates the nodes' certificates must be signed by; empty uses the system's CAs"`

	BackendTLSServerName string `flag:"backend-tls-server-name" env:"CQLGATE_BACKEND_TLS_SERVER_NAME" yaml:"backend_tls_server_name" help:"name every node's certificate must carry; empty checks each node's certificate against the IP address or host it is dialled at"`

	BackendTLSCertFile string `flag:"backend-tls-cert-file" env:"CQLGATE_BACKEND_TLS_CERT_FILE" yaml:"backend_tls_cert_file" help:"PEM client certificate presented to nodes that require one (require_client_auth); re-read when the file changes"`

	BackendTLSKeyFile string `flag:"backend-tls-key-file" env:"CQLGATE_BACKEND_TLS_KEY_FILE" yaml:"backend_tls_key_file" help:"PEM private key of --backend-tls-cert-file"`

	BackendTLSInsecureSkipVerify bool `flag:"backend-tls-insecure-skip-verify" env:"CQLGATE_BACKEND_TLS_INSECURE_SKIP_VERIFY" yaml:"backend_tls_insecure_skip_verify" help:"accept any certificate from the nodes: traffic is encrypted but anyone in between can impersonate them. For tests only"`
}

// configSchema is Config's parsed tag set. It is computed once and never
// modified.
var configSchema = sync.OnceValue(func() *schema {
	s, err := newSchema(reflect.TypeFor[Config]())
	if err != nil {
		panic(err) // a broken tag; TestFields catches it
	}
	return s
})

// Default returns the configuration made of the defaults alone. It does not
// pass Validate, since ContactPoints has no default.
func Default() Config {
	return configSchema().defaults().Interface().(Config)
}

// Fields describes every setting, in declaration order, for documentation.
func Fields() []Field {
	return configSchema().publicFields()
}

// LogSafe returns the settings keyed by Field.Key, with durations as text and
// secret settings masked, for a startup log line.
func (c Config) LogSafe() map[string]any {
	return configSchema().logSafe(reflect.ValueOf(c))
}

// Load builds the configuration from, in increasing order of precedence, the
// defaults, the YAML file named by --config or $CQLGATE_CONFIG, the
// environment variables in env (os.Environ form) and the flags in args
// (without the program name). It returns a validated Config.
//
// When args ask for help, Load writes the usage text to usage and returns an
// error wrapping ErrHelp. When they contain --version it returns an error
// wrapping ErrVersion. Other errors describe every problem found, each naming
// the flag, variable or file line at fault.
func Load(args, env []string, usage io.Writer) (Config, error) {
	s := configSchema()
	pa, err := s.parseArgs(args)
	if errors.Is(err, flag.ErrHelp) {
		if _, werr := io.WriteString(usage, s.usage()); werr != nil {
			return Config{}, fmt.Errorf("writing usage: %w", werr)
		}
		return Config{}, fmt.Errorf("help requested: %w", ErrHelp)
	}
	if err != nil {
		return Config{}, err
	}
	if pa.version {
		return Config{}, fmt.Errorf("%s: %w", programName, ErrVersion)
	}

	v := s.defaults()
	envs := envMap(env)
	cf := s.fields[s.byName["ConfigFile"]]
	path := envs[cf.Env]
	if vals := pa.values[s.byName["ConfigFile"]]; len(vals) > 0 {
		path = vals[len(vals)-1]
	}
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return Config{}, fmt.Errorf("reading config file: %w", err)
		}
		if err := s.applyYAML(v, data); err != nil {
			return Config{}, fmt.Errorf("config file %s: %w", path, err)
		}
	}
	if err := errors.Join(s.applyEnv(v, envs), s.applyFlags(v, pa)); err != nil {
		return Config{}, err
	}

	cfg := v.Interface().(Config)
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// Validate reports every problem with c, joined with errors.Join, each
// starting with the flag it concerns, e.g.
//
//	--connections-per-node: must be between 1 and 64, got 0
//
// Required settings and the bounds in the min, max and above tags are
// checked from the tags; the messages come in the order of the fields.
//
// It also normalizes c: contact points become HOST:PORT with the default
// port added, AdvertiseAddress is filled from Listen when empty and written
// in canonical form, HostID is lower-cased, and LogLevel and LogFormat are
// lower-cased.
func (c *Config) Validate() error {
	p := problems{s: configSchema()}
	p.checkTags(reflect.ValueOf(c).Elem())

	// What the tags cannot say: parsing, relations between settings, and
	// bounds whose messages say what 0 means. The messages are sorted by
	// field at the end.
	c.validateAddresses(&p)
	if c.KeyspacePoolIdleTimeout != 0 && c.KeyspacePoolIdleTimeout < time.Second {
		p.add("KeyspacePoolIdleTimeout", "must be 0 (keep keyspace pools open) or at least 1s, got %v", c.KeyspacePoolIdleTimeout)
	}
	if c.HeartbeatInterval < 0 {
		p.add("HeartbeatInterval", "must not be negative (0 disables heartbeats), got %v", c.HeartbeatInterval)
	}
	if c.ReconnectBaseDelay > 0 && c.ReconnectMaxDelay > 0 && c.ReconnectMaxDelay < c.ReconnectBaseDelay {
		p.add("ReconnectMaxDelay", "must be at least --reconnect-base-delay (%v), got %v", c.ReconnectBaseDelay, c.ReconnectMaxDelay)
	}
	if c.HostID != "" {
		id, err := canonicalUUID(c.HostID)
		if err != nil {
			p.add("HostID", "%v", err)
		} else {
			c.HostID = id
		}
	}

	if _, err := ParseAddressMap(c.AddressMap); err != nil {
		p.add("AddressMap", "%v", err)
	}
	if _, err := ParseKeyspaceWeights(c.KeyspaceWeights); err != nil {
		p.add("KeyspaceWeights", "%v", err)
	} else if _, err := ParseWeights(c.KeyspaceWeights, c.RoleWeights); err != nil {
		p.add("RoleWeights", "%v", err)
	}
	if c.SpeculativeDelayMax < c.SpeculativeDelayMin {
		p.add("SpeculativeDelayMax", "must be at least --speculative-delay-min (%s), got %s", c.SpeculativeDelayMin, c.SpeculativeDelayMax)
	}
	if c.RulesFile != "" {
		if c.StatementStatsEntries == 0 {
			p.add("RulesFile", "needs statement statistics: rules match the statements they keep, so --statement-stats-entries must be above 0")
		} else if _, err := rules.Load(c.RulesFile); err != nil {
			p.add("RulesFile", "%v", err)
		}
	}
	if _, err := idempotency.ParseOverrides(c.SpeculativeIdempotent); err != nil {
		p.add("SpeculativeIdempotent", "%v", err)
	}
	if c.LimitMode != "adaptive" && c.LimitMode != "fleet" && c.LimitMode != "fixed" {
		p.add("LimitMode", "must be adaptive, fleet or fixed, got %q", c.LimitMode)
	}
	// A fleet limit under 1 paces requests through the queue (one at a
	// time, resting between them): without a queue it would refuse them.
	if c.LimitMode == "fleet" && c.QueueLength == 0 {
		p.add("QueueLength", "must be above 0 with --limit-mode fleet, whose limits below 1 pace requests through the queue; use --limit-mode fixed to reject without queueing")
	}
	// The most a node's connections carry at once.
	if hi := 32768 * max(1, c.ConnectionsPerNode); c.LimitMax < 1 || c.LimitMax > hi {
		p.add("LimitMax", "must be between 1 and %d, got %d", hi, c.LimitMax)
	}
	if c.LimitMax < c.LimitMin {
		p.add("LimitMax", "must be at least --limit-min (%d), got %d", c.LimitMin, c.LimitMax)
	}

	c.LogLevel = strings.ToLower(c.LogLevel)
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, c.LogLevel) {
		p.add("LogLevel", "must be debug, info, warn or error, got %q", c.LogLevel)
	}
	c.LogFormat = strings.ToLower(c.LogFormat)
	if !slices.Contains([]string{"json", "console"}, c.LogFormat) {
		p.add("LogFormat", "must be json or console, got %q", c.LogFormat)
	}
	c.validateSecurity(&p)

	return p.err()
}

// validateAddresses checks Listen, ContactPoints, AdminListen and
// AdvertiseAddress, and normalizes ContactPoints and AdvertiseAddress.
func (c *Config) validateAddresses(p *problems) {
	var firstListenHost *string
	seen := make(map[string]bool)
	if len(c.Listen) == 0 {
		p.add("Listen", "at least one HOST:PORT address is required")
	}
	for _, a := range c.Listen {
		host, err := checkListenAddr(a)
		if err != nil {
			p.add("Listen", "%v", err)
			continue
		}
		if seen[a] {
			p.add("Listen", "%q is listed twice", a)
		}
		seen[a] = true
		if firstListenHost == nil {
			firstListenHost = &host
		}
	}

	if len(c.ContactPoints) > 0 {
		points := make([]string, 0, len(c.ContactPoints))
		for _, cp := range c.ContactPoints {
			hp, err := normalizeHostPort(cp, DefaultCQLPort)
			if err != nil {
				p.add("ContactPoints", "%v", err)
				continue
			}
			if !slices.Contains(points, hp) {
				points = append(points, hp)
			}
		}
		c.ContactPoints = points
	}

	if c.AdminListen == "" {
		p.add("AdminListen", "required")
	} else if _, err := checkListenAddr(c.AdminListen); err != nil {
		p.add("AdminListen", "%v", err)
	}

	switch {
	case c.AdvertiseAddress != "":
		ip, err := parseIP(c.AdvertiseAddress)
		switch {
		case err != nil:
			p.add("AdvertiseAddress", "%q is not an IP address", c.AdvertiseAddress)
		case ip.IsUnspecified():
			p.add("AdvertiseAddress", "%s is unspecified; give the IP address drivers should connect to", ip)
		default:
			c.AdvertiseAddress = ip.String()
		}
	case firstListenHost != nil:
		host := *firstListenHost
		ip, err := parseIP(host)
		switch {
		case host == "" || (err == nil && ip.IsUnspecified()):
			p.add("AdvertiseAddress", "required when --listen binds all interfaces (%s): set it to the IP address drivers should connect to", c.Listen[0])
		case err != nil:
			p.add("AdvertiseAddress", "required when the --listen host %q is not an IP address: set it to the IP address drivers should connect to", host)
		default:
			c.AdvertiseAddress = ip.String()
		}
	}
}

// problems collects validation errors, prefixing each with its flag.
type problems struct {
	s    *schema
	errs []problem
}

type problem struct {
	field int // index into s.fields
	err   error
}

func (p *problems) add(fieldName, format string, args ...any) {
	i, ok := p.s.byName[fieldName]
	if !ok {
		panic("config: no field " + fieldName)
	}
	p.errs = append(p.errs, problem{i, fmt.Errorf("--%s: %s", p.s.fields[i].Flag, fmt.Sprintf(format, args...))})
}

// checkTags checks every setting of v against its required, min, max and
// above tags.
func (p *problems) checkTags(v reflect.Value) {
	for _, f := range p.s.fields {
		fv := v.Field(f.index)
		if f.Required && (fv.IsZero() || (f.kind == kindList && fv.Len() == 0)) {
			p.add(f.Name, "required (set it with this flag, $%s or %s in the config file)", f.Env, f.YAML)
		}
		if msg := f.outOfBounds(fv); msg != "" {
			p.add(f.Name, "%s", msg)
		}
	}
}

// err joins the problems in the order of the fields they concern; a field's
// own problems keep the order they were found in.
func (p *problems) err() error {
	slices.SortStableFunc(p.errs, func(a, b problem) int { return a.field - b.field })
	errs := make([]error, len(p.errs))
	for i, e := range p.errs {
		errs[i] = e.err
	}
	return errors.Join(errs...)
}

// checkListenAddr checks that a is HOST:PORT with a numeric port (0 picks a
// free one) and returns the host, which may be empty.
func checkListenAddr(a string) (string, error) {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return "", fmt.Errorf("invalid address %q: want HOST:PORT (%s)", a, addrErrCause(err))
	}
	if _, err := parsePort(port, true); err != nil {
		return "", fmt.Errorf("invalid address %q: %w", a, err)
	}
	return host, nil
}

// normalizeHostPort turns HOST[:PORT] into HOST:PORT, adding defPort when the
// port is missing. IPv6 addresses may be given bare (::1) or in brackets
// ([::1], [::1]:9042); with a port they need the brackets.
func normalizeHostPort(s, defPort string) (string, error) {
	var host, port string
	switch {
	case strings.Contains(s, "://"):
		return "", fmt.Errorf("invalid address %q: want HOST[:PORT], not a URL", s)
	case strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]"):
		host, port = s[1:len(s)-1], defPort
	case strings.HasPrefix(s, "["):
		h, p, err := net.SplitHostPort(s)
		if err != nil {
			return "", fmt.Errorf("invalid address %q: want HOST[:PORT] (%s)", s, addrErrCause(err))
		}
		host, port = h, p
	case strings.Count(s, ":") == 0:
		host, port = s, defPort
	case strings.Count(s, ":") == 1:
		h, p, err := net.SplitHostPort(s)
		if err != nil {
			return "", fmt.Errorf("invalid address %q: want HOST[:PORT] (%s)", s, addrErrCause(err))
		}
		host, port = h, p
	default:
		if _, err := netip.ParseAddr(s); err != nil {
			return "", fmt.Errorf("invalid address %q: an IPv6 address with a port goes in brackets, e.g. [::1]:9042", s)
		}
		host, port = s, defPort
	}
	if host == "" {
		return "", fmt.Errorf("invalid address %q: missing host", s)
	}
	if strings.ContainsAny(host, " \t/[]") {
		return "", fmt.Errorf("invalid address %q: bad host %q", s, host)
	}
	if strings.Contains(host, ":") {
		if _, err := netip.ParseAddr(host); err != nil {
			return "", fmt.Errorf("invalid address %q: bad IPv6 address %q", s, host)
		}
	}
	if _, err := parsePort(port, false); err != nil {
		return "", fmt.Errorf("invalid address %q: %w", s, err)
	}
	return net.JoinHostPort(host, port), nil
}

func parsePort(s string, allowZero bool) (int, error) {
	n, err := strconv.Atoi(s)
	lo := 1
	if allowZero {
		lo = 0
	}
	if err != nil || n < lo || n > 65535 {
		return 0, fmt.Errorf("port %q must be a number between %d and 65535", s, lo)
	}
	return n, nil
}

func addrErrCause(err error) string {
	var ae *net.AddrError
	if errors.As(err, &ae) {
		return ae.Err
	}
	return err.Error()
}

// parseIP parses an IP address, optionally in brackets, without a zone.
// IPv4-mapped IPv6 addresses become IPv4.
func parseIP(s string) (netip.Addr, error) {
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		s = s[1 : len(s)-1]
	}
	ip, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, err
	}
	if ip.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("IP address %q has a zone", s)
	}
	return ip.Unmap(), nil
}

// canonicalUUID checks that s is a UUID in 8-4-4-4-12 hex form and returns
// it lower-cased.
func canonicalUUID(s string) (string, error) {
	bad := fmt.Errorf("%q is not a UUID (want the form 123e4567-e89b-12d3-a456-426614174000)", s)
	if len(s) != 36 {
		return "", bad
	}
	for i := range len(s) {
		switch c := s[i]; {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return "", bad
			}
		case '0' <= c && c <= '9', 'a' <= c && c <= 'f', 'A' <= c && c <= 'F':
		default:
			return "", bad
		}
	}
	return strings.ToLower(s), nil
}

// Diff returns the flags of the settings whose values differ between c and
// next, split into those that may change while running and those that need
// a restart.
func (c Config) Diff(next Config) (reloadable, restart []string) {
	s := configSchema()
	a, b := reflect.ValueOf(c), reflect.ValueOf(next)
	for _, f := range s.fields {
		if reflect.DeepEqual(a.Field(f.index).Interface(), b.Field(f.index).Interface()) {
			continue
		}
		if f.Reloadable {
			reloadable = append(reloadable, f.Flag)
		} else {
			restart = append(restart, f.Flag)
		}
	}
	return reloadable, restart
}
