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
		{cmdCompare, []string{"--target", "proxy=h", "--proxy-pid", "1", "--proxy-metrics", "u"}, "alternatives"},
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
