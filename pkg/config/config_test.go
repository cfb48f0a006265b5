package config

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// minimal is the smallest valid command line.
var minimal = []string{"--contact-points=10.0.0.1"}

func mustLoad(t *testing.T, args, env []string) Config {
	t.Helper()
	cfg, err := Load(args, env, &bytes.Buffer{})
	if err != nil {
		t.Fatalf("Load(%q, %q): %v", args, env, err)
	}
	return cfg
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cqlgate.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestDefault(t *testing.T) {
	want := Config{
		Listen:                         []string{"127.0.0.1:9042"},
		AdminListen:                    "127.0.0.1:9180",
		ConnectionsPerNode:             1,
		MaxFrameBytes:                  16 << 20,
		ConnectTimeout:                 5 * time.Second,
		HeartbeatInterval:              30 * time.Second,
		KeyspacePoolIdleTimeout:        10 * time.Minute,
		ReconnectBaseDelay:             200 * time.Millisecond,
		ReconnectMaxDelay:              30 * time.Second,
		RequestTimeout:                 15 * time.Second,
		DrainTimeout:                   20 * time.Second,
		SpeculativeMaxExecutions:       1,
		SpeculativePercentile:          0.99,
		SpeculativeDelayMin:            time.Millisecond,
		SpeculativeDelayMax:            200 * time.Millisecond,
		SpeculativeBudget:              0.05,
		MaxClientConnections:           4096,
		ClientWriteBufferBytes:         64 << 20,
		HandshakeTimeout:               10 * time.Second,
		MaxPendingHandshakes:           1024,
		MaxPendingHandshakesPerAddress: 256,
		MaxBufferedBytes:               1 << 30,
		MaxOrphansPerConnection:        1024,
		PreparedCacheEntries:           20000,
		StatementStatsEntries:          5000,
		SlowStatementSampleRate:        1,
		ProtocolVersionMax:             5,
		MaxProcs:                       1,
		LimitMode:                      "fleet",
		NodeLimit:                      1024,
		LimitMin:                       16,
		LimitFloor:                     0.1,
		LimitNodePoll:                  200 * time.Millisecond,
		LimitMax:                       4096,
		LimitTolerance:                 1.5,
		QueueLength:                    131072,
		QueueMaxWait:                   5 * time.Second,
		LogLevel:                       "info",
		LogFormat:                      "json",
		ClientAuth:                     "none",
		LoginFailuresPerSecond:         1,
		LoginFailureBurst:              10,
		PassthroughIdentity:            "role",
		MaxRolePools:                   64,
		RolePoolIdleTimeout:            time.Minute,
		MaxRoleSeries:                  20,
		AuthCacheTTL:                   time.Minute,
	}
	if got := Default(); !reflect.DeepEqual(got, want) {
		t.Errorf("Default() =\n%+v\nwant\n%+v", got, want)
	}
	// Each call returns fresh slices.
	a := Default()
	a.Listen[0] = "changed"
	if Default().Listen[0] != "127.0.0.1:9042" {
		t.Error("Default shares slices between calls")
	}
}

// TestFields checks that every field of Config is a described setting and
// that names follow one convention: flag kebab-case, env CQLGATE_ plus the
// flag in upper snake case, YAML key the flag in snake case.
func TestFields(t *testing.T) {
	fields := Fields()
	typ := reflect.TypeFor[Config]()
	if len(fields) != typ.NumField() {
		t.Fatalf("Fields() has %d entries, Config has %d fields", len(fields), typ.NumField())
	}
	for i, f := range fields {
		if f.Name != typ.Field(i).Name {
			t.Errorf("Fields()[%d].Name = %s, want %s", i, f.Name, typ.Field(i).Name)
		}
		snake := strings.ReplaceAll(f.Flag, "-", "_")
		if want := "CQLGATE_" + strings.ToUpper(snake); f.Env != want {
			t.Errorf("%s: env %s, want %s", f.Name, f.Env, want)
		}
		if f.YAML != snake && !(f.Name == "ConfigFile" && f.YAML == "") {
			t.Errorf("%s: yaml key %q, want %q", f.Name, f.YAML, snake)
		}
		if f.Key() != snake {
			t.Errorf("%s: Key() = %q, want %q", f.Name, f.Key(), snake)
		}
		if f.Help == "" || strings.HasSuffix(f.Help, ".") {
			t.Errorf("%s: help %q should be a phrase without a final period", f.Name, f.Help)
		}
	}
	if fields[0].Flag != "listen" || fields[0].Default != "127.0.0.1:9042" || fields[0].Type != "list" {
		t.Errorf("Fields()[0] = %+v", fields[0])
	}
	// Callers get a copy.
	fields[0].Flag = "x"
	if Fields()[0].Flag != "listen" {
		t.Error("Fields returns shared state")
	}
}

func TestHelpListsEveryFlag(t *testing.T) {
	var out bytes.Buffer
	_, err := Load([]string{"--help"}, nil, &out)
	if !errors.Is(err, ErrHelp) || !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err = %v, want ErrHelp", err)
	}
	// Unwrap the word-wrapping to match phrases across lines.
	text := strings.Join(strings.Fields(out.String()), " ")
	for _, f := range Fields() {
		for _, want := range []string{"--" + f.Flag + " ", "env " + f.Env} {
			if !strings.Contains(text, want) {
				t.Errorf("usage lacks %q", want)
			}
		}
		if f.Default != "" && !strings.Contains(text, "default "+f.Default+")") {
			t.Errorf("usage lacks the default of --%s (%s)", f.Flag, f.Default)
		}
		if f.YAML != "" && !strings.Contains(text, "yaml "+f.YAML) {
			t.Errorf("usage lacks yaml key %s", f.YAML)
		}
	}
	for _, want := range []string{"--help", "--version", "--contact-points list (required)"} {
		if !strings.Contains(text, want) {
			t.Errorf("usage lacks %q", want)
		}
	}
	for _, args := range [][]string{{"-h"}, {"-help"}, {"--contact-points=x", "--help"}} {
		if _, err := Load(args, nil, &bytes.Buffer{}); !errors.Is(err, ErrHelp) {
			t.Errorf("%q: err = %v, want ErrHelp", args, err)
		}
	}
}

func TestVersion(t *testing.T) {
	// --version works without any other setting and ignores bad ones.
	for _, args := range [][]string{{"--version"}, {"-version"}, {"--connections-per-node=0", "--version"}} {
		var out bytes.Buffer
		if _, err := Load(args, nil, &out); !errors.Is(err, ErrVersion) {
			t.Errorf("%q: err = %v, want ErrVersion", args, err)
		}
		if out.Len() != 0 {
			t.Errorf("%q wrote %q", args, out.String())
		}
	}
}

func TestCommandLineErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--no-such-flag"}, "command line: flag provided but not defined: --no-such-flag"},
		{[]string{"-no-such-flag=1"}, "flag provided but not defined"},
		{[]string{"--contact-points=a", "extra"}, `unexpected argument "extra"`},
		{[]string{"--contact-points"}, "flag needs an argument: --contact-points"},
		{[]string{"--contact-points=a", "--connect-timeout=5"}, `--connect-timeout: invalid duration "5"`},
		{[]string{"--contact-points=a", "--connections-per-node=two"}, `--connections-per-node: invalid integer "two"`},
	}
	for _, tt := range tests {
		_, err := Load(tt.args, nil, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: err = %v, want it to contain %q", tt.args, err, tt.want)
		}
	}
}

func TestPrecedence(t *testing.T) {
	file := writeFile(t, `
contact_points: [file1, file2]
connections_per_node: 3
connect_timeout: 1s
request_timeout: 20s
data_center: file-dc
log_level: debug
`)
	env := []string{
		"CQLGATE_CONFIG=" + file,
		"CQLGATE_CONNECTIONS_PER_NODE=4",
		"CQLGATE_CONNECT_TIMEOUT=2s",
		"CQLGATE_DATA_CENTER=env-dc",
	}
	args := []string{"--connections-per-node=5", "--log-format", "console"}
	cfg := mustLoad(t, args, env)

	checks := []struct {
		name      string
		got, want any
	}{
		{"contact points (file)", cfg.ContactPoints, []string{"file1:9042", "file2:9042"}},
		{"connections per node (flag over env over file)", cfg.ConnectionsPerNode, 5},
		{"connect timeout (env over file)", cfg.ConnectTimeout, 2 * time.Second},
		{"request timeout (file over default)", cfg.RequestTimeout, 20 * time.Second},
		{"data center (env over file)", cfg.DataCenter, "env-dc"},
		{"log level (file)", cfg.LogLevel, "debug"},
		{"log format (flag over default)", cfg.LogFormat, "console"},
		{"heartbeat (default)", cfg.HeartbeatInterval, 30 * time.Second},
		{"config file recorded", cfg.ConfigFile, file},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}

	// --config overrides $CQLGATE_CONFIG, and a list flag replaces the
	// file's list.
	other := writeFile(t, "contact_points: other\n")
	cfg = mustLoad(t, []string{"--config", other}, env)
	if !slices.Equal(cfg.ContactPoints, []string{"other:9042"}) || cfg.ConfigFile != other {
		t.Errorf("--config did not win: %+v", cfg)
	}
	cfg = mustLoad(t, []string{"--contact-points=a", "--contact-points", "b,c"}, env)
	if !slices.Equal(cfg.ContactPoints, []string{"a:9042", "b:9042", "c:9042"}) {
		t.Errorf("repeated list flag: %q", cfg.ContactPoints)
	}
}

func TestConfigFileErrors(t *testing.T) {
	tests := []struct {
		name, doc, want string
	}{
		{"unknown key", "contact_points: [a]\nconections_per_node: 3\n", `line 2: unknown key "conections_per_node"`},
		{"flag spelling", "contact-points: [a]\n", `did you mean "contact_points"?`},
		{"config key", "config: x.yaml\n", "config can only be set with --config or $CQLGATE_CONFIG"},
		{"malformed duration", "contact_points: [a]\nheartbeat_interval: 30\n", `line 2: heartbeat_interval: invalid duration "30"`},
		{"bad int", "connections_per_node: many\n", `line 1: connections_per_node: invalid integer "many"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, tt.doc)
			_, err := Load([]string{"--config", path}, nil, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("err = %v, want it to name %s and contain %q", err, path, tt.want)
			}
		})
	}
	_, err := Load([]string{"--config", filepath.Join(t.TempDir(), "missing.yaml")}, nil, &bytes.Buffer{})
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: err = %v, want os.ErrNotExist", err)
	}
}

func TestValidateMessages(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string // each must appear, in this order
	}{
		{"missing contact points", nil, []string{
			"--contact-points: required (set it with this flag, $CQLGATE_CONTACT_POINTS or contact_points in the config file)"}},
		{"connections per node", []string{"--connections-per-node=0"}, []string{
			"--connections-per-node: must be between 1 and 64, got 0"}},
		{"connections per node high", []string{"--connections-per-node=65"}, []string{
			"--connections-per-node: must be between 1 and 64, got 65"}},
		{"max frame", []string{"--max-frame-bytes=1024"}, []string{
			"--max-frame-bytes: must be between 65536 and 268435456, got 1024"}},
		{"protocol", []string{"--protocol-version-max=6"}, []string{
			"--protocol-version-max: must be between 3 and 5, got 6"}},
		{"prepared cache", []string{"--prepared-cache-entries=99"}, []string{
			"--prepared-cache-entries: must be at least 100, got 99"}},
		{"durations", []string{"--connect-timeout=0", "--request-timeout=-1s", "--heartbeat-interval=-1s", "--reconnect-base-delay=0s"}, []string{
			"--connect-timeout: must be positive, got 0s",
			"--heartbeat-interval: must not be negative (0 disables heartbeats), got -1s",
			"--reconnect-base-delay: must be positive, got 0s",
			"--request-timeout: must be positive, got -1s",
		}},
		{"reconnect order", []string{"--reconnect-base-delay=2s", "--reconnect-max-delay=1s"}, []string{
			"--reconnect-max-delay: must be at least --reconnect-base-delay (2s), got 1s"}},
		{"host id", []string{"--host-id=not-a-uuid"}, []string{`--host-id: "not-a-uuid" is not a UUID`}},
		{"host id bad hex", []string{"--host-id=123e4567-e89b-12d3-a456-42661417400g"}, []string{"--host-id:"}},
		{"keyspace pool idle timeout", []string{"--keyspace-pool-idle-timeout=500ms"}, []string{
			"--keyspace-pool-idle-timeout: must be 0 (keep keyspace pools open) or at least 1s, got 500ms"}},
		{"limit tolerance", []string{"--limit-tolerance=1"}, []string{"--limit-tolerance: must be in (1, 10], got 1"}},
		{"fleet without a queue", []string{"--queue-length=0"}, []string{
			"--queue-length: must be above 0 with --limit-mode fleet, whose limits below 1 pace requests through the queue"}},
		{"log level", []string{"--log-level=verbose"}, []string{`--log-level: must be debug, info, warn or error, got "verbose"`}},
		{"log format", []string{"--log-format=text"}, []string{`--log-format: must be json or console, got "text"`}},
		{"listen without port", []string{"--listen=127.0.0.1"}, []string{`--listen: invalid address "127.0.0.1": want HOST:PORT (missing port in address)`}},
		{"listen bad port", []string{"--listen=127.0.0.1:99999"}, []string{`--listen: invalid address "127.0.0.1:99999": port "99999" must be a number between 0 and 65535`}},
		{"listen empty", []string{"--listen="}, []string{"--listen: at least one HOST:PORT address is required"}},
		{"listen twice", []string{"--listen=127.0.0.1:1,127.0.0.1:1"}, []string{`--listen: "127.0.0.1:1" is listed twice`}},
		{"listen unspecified", []string{"--listen=0.0.0.0:9042"}, []string{
			"--advertise-address: required when --listen binds all interfaces (0.0.0.0:9042): set it to the IP address drivers should connect to"}},
		{"listen empty host", []string{"--listen=:9042"}, []string{"--advertise-address: required when --listen binds all interfaces (:9042)"}},
		{"listen ipv6 unspecified", []string{"--listen=[::]:9042"}, []string{"--advertise-address: required when --listen binds all interfaces"}},
		{"listen hostname", []string{"--listen=localhost:9042"}, []string{`--advertise-address: required when the --listen host "localhost" is not an IP address`}},
		{"advertise not ip", []string{"--advertise-address=proxy.example"}, []string{`--advertise-address: "proxy.example" is not an IP address`}},
		{"advertise unspecified", []string{"--advertise-address=0.0.0.0"}, []string{"--advertise-address: 0.0.0.0 is unspecified"}},
		{"admin listen", []string{"--admin-listen=9180"}, []string{`--admin-listen: invalid address "9180"`}},
		{"admin listen empty", []string{"--admin-listen="}, []string{"--admin-listen: required"}},
		{"contact point url", []string{"--contact-points=http://a:9042"}, []string{`--contact-points: invalid address "http://a:9042": want HOST[:PORT], not a URL`}},
		{"contact point ipv6 no brackets", []string{"--contact-points=fe80::1:9042:x"}, []string{"an IPv6 address with a port goes in brackets"}},
		{"contact point port", []string{"--contact-points=a:0"}, []string{`--contact-points: invalid address "a:0": port "0" must be a number between 1 and 65535`}},
		{"contact point empty host", []string{"--contact-points=:9042"}, []string{"missing host"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			if tt.name != "missing contact points" {
				args = append(slices.Clone(minimal), args...)
			}
			_, err := Load(args, nil, &bytes.Buffer{})
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			pos := 0
			for _, want := range tt.want {
				i := strings.Index(msg[pos:], want)
				if i < 0 {
					t.Fatalf("error\n%s\ndoes not contain (in order)\n%s", msg, want)
				}
				pos += i + len(want)
			}
			for line := range strings.SplitSeq(msg, "\n") {
				if !strings.HasPrefix(line, "--") {
					t.Errorf("line %q does not start with a flag name", line)
				}
			}
		})
	}
}

func TestValidateReportsEverything(t *testing.T) {
	c := Default()
	c.ConnectionsPerNode = 0
	c.LogLevel = "loud"
	err := c.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 3 {
		t.Errorf("want 3 problems, got %q", lines)
	}
}

func TestNormalization(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{"cass1", "cass1:9042"},
		{"cass1:9043", "cass1:9043"},
		{"10.0.0.1", "10.0.0.1:9042"},
		{"10.0.0.1:19042", "10.0.0.1:19042"},
		{"::1", "[::1]:9042"},
		{"fe80::1%eth0", "[fe80::1%eth0]:9042"},
		{"[::1]", "[::1]:9042"},
		{"[2001:db8::1]:9043", "[2001:db8::1]:9043"},
	}
	for _, tt := range tests {
		got, err := normalizeHostPort(tt.in, DefaultCQLPort)
		if err != nil || got != tt.want {
			t.Errorf("normalizeHostPort(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}

	cfg := mustLoad(t, []string{
		"--contact-points= b , a:9042,a, [::1] ",
		"--listen=[::1]:9042,127.0.0.1:9043",
		"--host-id=123E4567-E89B-12D3-A456-426614174000",
		"--log-level=WARN",
	}, nil)
	if want := []string{"b:9042", "a:9042", "[::1]:9042"}; !slices.Equal(cfg.ContactPoints, want) {
		t.Errorf("contact points %q, want %q", cfg.ContactPoints, want)
	}
	if cfg.AdvertiseAddress != "::1" {
		t.Errorf("advertise address %q, want ::1 (from the first --listen)", cfg.AdvertiseAddress)
	}
	if cfg.HostID != "123e4567-e89b-12d3-a456-426614174000" || cfg.LogLevel != "warn" {
		t.Errorf("not normalized: %q %q", cfg.HostID, cfg.LogLevel)
	}

	cfg = mustLoad(t, []string{"--contact-points=a", "--listen=0.0.0.0:9042", "--advertise-address=[::ffff:10.1.2.3]",
		"--client-auth=passthrough", "--backend-username=u", "--backend-password=p"}, nil)
	if cfg.AdvertiseAddress != "10.1.2.3" {
		t.Errorf("advertise address %q, want 10.1.2.3", cfg.AdvertiseAddress)
	}
}

func TestEnvOnly(t *testing.T) {
	env := []string{
		"CQLGATE_CONTACT_POINTS=a,b:9999",
		"CQLGATE_LISTEN=127.0.0.2:9042,127.0.0.3:9042",
		"CQLGATE_HEARTBEAT_INTERVAL=0",
		"CQLGATE_MAX_FRAME_BYTES=65536",
		"CQLGATE_PROTOCOL_VERSION_MAX=4",
	}
	cfg := mustLoad(t, nil, env)
	if !slices.Equal(cfg.ContactPoints, []string{"a:9042", "b:9999"}) ||
		!slices.Equal(cfg.Listen, []string{"127.0.0.2:9042", "127.0.0.3:9042"}) ||
		cfg.AdvertiseAddress != "127.0.0.2" ||
		cfg.HeartbeatInterval != 0 || cfg.MaxFrameBytes != 65536 || cfg.ProtocolVersionMax != 4 {
		t.Errorf("got %+v", cfg)
	}
	_, err := Load(nil, []string{"CQLGATE_CONTACT_POINTS=a", "CQLGATE_REQUEST_TIMEOUT=soon"}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), `$CQLGATE_REQUEST_TIMEOUT: invalid duration "soon"`) {
		t.Errorf("err = %v", err)
	}
}

func TestLogSafe(t *testing.T) {
	cfg := mustLoad(t, minimal, nil)
	m := cfg.LogSafe()
	if len(m) != len(Fields()) {
		t.Errorf("LogSafe has %d keys, want %d", len(m), len(Fields()))
	}
	if m["connect_timeout"] != "5s" || m["connections_per_node"] != int64(1) || m["config"] != "" {
		t.Errorf("LogSafe = %v", m)
	}
	if cp, ok := m["contact_points"].([]string); !ok || !slices.Equal(cp, []string{"10.0.0.1:9042"}) {
		t.Errorf("contact_points = %#v", m["contact_points"])
	}
	// The map does not alias the config.
	m["contact_points"].([]string)[0] = "x"
	if cfg.ContactPoints[0] != "10.0.0.1:9042" {
		t.Error("LogSafe aliases the config's slices")
	}
}

func TestParseAddressMap(t *testing.T) {
	m, err := ParseAddressMap([]string{"10.0.0.5:9042=127.0.0.1:19042", "10.0.0.6 = 127.0.0.1:19043", "[::1]:9042=[::1]:19042", "node7=localhost"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"10.0.0.5:9042": "127.0.0.1:19042",
		"10.0.0.6":      "127.0.0.1:19043",
		"[::1]:9042":    "[::1]:19042",
		"node7":         "localhost:9042",
	}
	if fmt.Sprint(m) != fmt.Sprint(want) {
		t.Errorf("got %v; want %v", m, want)
	}
	for _, bad := range [][]string{{"10.0.0.5"}, {"=1.2.3.4"}, {"a=b", "a=c"}, {"a=b:0"}} {
		if _, err := ParseAddressMap(bad); err == nil {
			t.Errorf("ParseAddressMap(%q) succeeded; want an error", bad)
		}
	}
}

func TestParseKeyspaceWeights(t *testing.T) {
	kw, err := ParseKeyspaceWeights([]string{"orders=8", "analytics=1", "*=2"})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(kw.Weights) != "[2 8 1]" || kw.Class["orders"] != 1 || kw.Class["analytics"] != 2 {
		t.Errorf("got %+v", kw)
	}
	for _, bad := range [][]string{{"orders"}, {"orders=0"}, {"orders=1001"}, {"a=1", "a=2"}, {"*=1", "*=2"}} {
		if _, err := ParseKeyspaceWeights(bad); err == nil {
			t.Errorf("ParseKeyspaceWeights(%q) succeeded; want an error", bad)
		}
	}
}

func TestDiffSplitsReloadableSettings(t *testing.T) {
	a := Default()
	b := a
	b.NodeLimit = 7
	b.QueueMaxWait = time.Second
	b.ConnectionsPerNode = 3
	b.KeyspaceWeights = []string{"a=2"}
	re, restart := a.Diff(b)
	if fmt.Sprint(re) != "[keyspace-weights node-limit queue-max-wait]" || fmt.Sprint(restart) != "[connections-per-node]" {
		t.Errorf("Diff = %v, %v", re, restart)
	}
	if re, restart := a.Diff(a); re != nil || restart != nil {
		t.Errorf("Diff of equal configs = %v, %v", re, restart)
	}
}

func TestParseWeightsRoles(t *testing.T) {
	kw, err := ParseWeights([]string{"orders=8"}, []string{"checkout=4", "*=2"})
	if err != nil {
		t.Fatal(err)
	}
	if kw.Weights[0] != 2 || kw.Weights[kw.Class["orders"]] != 8 || kw.Weights[kw.RoleClass["checkout"]] != 4 {
		t.Errorf("ParseWeights: %+v", kw)
	}
	for _, bad := range [][2][]string{
		{{"*=2"}, {"*=3"}},
		{nil, {"checkout"}},
		{nil, {"a=1", "a=2"}},
		{nil, {"a=0"}},
	} {
		if _, err := ParseWeights(bad[0], bad[1]); err == nil {
			t.Errorf("ParseWeights(%q, %q) succeeded; want an error", bad[0], bad[1])
		}
	}
}
