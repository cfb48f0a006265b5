package main

import (
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
)

func parseConfig(t *testing.T, cmd string, args ...string) (*Config, error) {
	t.Helper()
	cfg := defaultConfig()
	fs, err := cfg.flagSet(cmd, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	return cfg, cfg.validate(cmd)
}

func TestCompareFlags(t *testing.T) {
	cfg, err := parseConfig(t, cmdCompare,
		"--target", "direct=127.0.10.1:9042", "--target", "proxy=127.0.0.1:9043,127.0.0.2",
		"--workers", "16", "--duration", "5s", "--rounds", "4", "--proxy-metrics", "http://127.0.0.1:9180/metrics")
	if err != nil {
		t.Fatal(err)
	}
	want := []Endpoint{
		{Name: "direct", Hosts: []string{"127.0.10.1:9042"}},
		{Name: "proxy", Hosts: []string{"127.0.0.1:9043", "127.0.0.2"}},
	}
	if !reflect.DeepEqual(cfg.Targets, want) {
		t.Errorf("targets = %v; want %v", cfg.Targets, want)
	}
	if cfg.Workers != 16 || cfg.Duration != 5*time.Second || cfg.Rounds != 4 {
		t.Errorf("cfg = %+v", cfg)
	}
}

func TestConfigRejects(t *testing.T) {
	tests := []struct {
		cmd     string
		args    []string
		wantErr string
	}{
		{cmdRun, nil, "--hosts is required"},
		{cmdRun, []string{"--hosts", "h", "--workload", "scan"}, "unknown --workload"},
		{cmdRun, []string{"--hosts", "h", "--workload", "mixed", "--read-ratio", "1.5"}, "--read-ratio"},
		{cmdSetup, []string{"--hosts", "h", "--keyspace", "x; DROP"}, "not a plain CQL identifier"},
		{cmdCompare, []string{"--target", "a=h", "--target", "a=h2"}, "given twice"},
		{cmdCompare, []string{"--target", "a=h", "--proxy-pid", "1"}, `named "proxy"`},
		{cmdRun, []string{"--hosts", "h", "--rate", "100", "--ops", "5"}, "--ops is for the closed loop"},
		{cmdRun, []string{"--hosts", "h", "--keys", "hot"}, "unknown --keys"},
		{cmdRun, []string{"--hosts", "h", "--keys", "zipf", "--zipf-s", "1"}, "--zipf-s"},
		{cmdRun, []string{"--hosts", "h", "--consistency", "most"}, "--consistency"},
		{cmdSetup, []string{"--hosts", "h", "--replication", "dc1:3,dc2"}, "--replication"},
		{cmdSetup, []string{"--hosts", "h", "--replication", "dc'1:3"}, "--replication"},
		{cmdRateLimited, []string{"--hosts", "h", "--keys", "zipf"}, "serial or random"},
		{cmdMultiget, []string{"--hosts", "h", "--methods", "in,scan"}, `unknown multiget method "scan"`},
		{cmdMultiget, []string{"--hosts", "h", "--partitions", "10", "--total-partitions", "5"}, "--total-partitions"},
		{cmdWorkers, []string{"--hosts", "h", "--queries", "0"}, "--queries"},
	}
	for _, tt := range tests {
		_, err := parseConfig(t, tt.cmd, tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s %v: err = %v; want %q", tt.cmd, tt.args, err, tt.wantErr)
		}
	}
	if _, err := parseConfig(t, cmdCompare, "--target", "nohosts"); err == nil {
		t.Error("--target without '=': no error")
	}
}

// The scenarios start from the published experiments' settings: the
// workers flood at gocql's defaults, multiget's 100 x 50 at RF 3.
func TestScenarioDefaults(t *testing.T) {
	cfg, err := parseConfig(t, cmdWorkers, "--hosts", "h")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Workers != 50000 || cfg.Queries != 200 || cfg.Timeout != 0 || cfg.Consistency != "" || cfg.NumConns != 0 {
		t.Errorf("workers defaults: %d x %d, timeout %v, consistency %q, conns %d; want 50000 x 200 at gocql's defaults",
			cfg.Workers, cfg.Queries, cfg.Timeout, cfg.Consistency, cfg.NumConns)
	}
	cfg, err = parseConfig(t, cmdMultiget, "--hosts", "h", "--methods", "async,in")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Partitions != 100 || cfg.RowsPerPartition != 50 || cfg.RF != 3 || !reflect.DeepEqual(cfg.Methods, []string{"async", "in"}) {
		t.Errorf("multiget: %d x %d, rf %d, methods %v", cfg.Partitions, cfg.RowsPerPartition, cfg.RF, cfg.Methods)
	}
}

func TestReplicationMap(t *testing.T) {
	got, err := replicationMap("ks", 3, "")
	if want := "{'class': 'SimpleStrategy', 'replication_factor': 3}"; err != nil || got != want {
		t.Errorf("simple: %q, %v; want %q", got, err, want)
	}
	got, err = replicationMap("ks", 1, "dc1:3, dc2:2")
	if want := "{'class': 'NetworkTopologyStrategy', 'dc1': 3, 'dc2': 2}"; err != nil || got != want {
		t.Errorf("nts: %q, %v; want %q", got, err, want)
	}
}
