package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A page shaped like the Go Prometheus client's default registry output.
const promPage = `# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 12
# HELP process_cpu_seconds_total_bogus A longer name sharing the prefix.
process_cpu_seconds_total_bogus 999
# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total %s
# HELP process_open_fds Number of open file descriptors.
process_open_fds 9
`

func TestPromCPUScrapesTheCounter(t *testing.T) {
	var value atomic.Value
	value.Store("12.34")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write([]byte(strings.Replace(promPage, "%s", value.Load().(string), 1)))
	}))
	defer srv.Close()

	src := newPromCPU(srv.URL + "/metrics")
	before, err := src.CPU(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	value.Store("1.4034e+01")
	after, err := src.CPU(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if before != 12340*time.Millisecond {
		t.Errorf("before = %v; want 12.34s", before)
	}
	if d := after - before; d < 1693*time.Millisecond || d > 1695*time.Millisecond {
		t.Errorf("delta = %v; want 1.694s", d)
	}
}

func TestParseMetricVariants(t *testing.T) {
	tests := []struct {
		name, page string
		want       float64
		wantErr    bool
	}{
		{"plain", "process_cpu_seconds_total 3.5\n", 3.5, false},
		{"timestamp", "process_cpu_seconds_total 3.5 1700000000000\n", 3.5, false},
		{"labels", `process_cpu_seconds_total{instance="a b",job="x"} 7` + "\n", 7, false},
		{"no trailing newline", "process_cpu_seconds_total 1", 1, false},
		{"missing", "go_goroutines 3\n", 0, true},
		{"prefix only", "process_cpu_seconds_total_other 3\n", 0, true},
		{"bad value", "process_cpu_seconds_total abc\n", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseMetric(strings.NewReader(tt.page), cpuMetric)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v; wantErr %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("got %v; want %v", got, tt.want)
			}
		})
	}
}

func TestPromCPUReportsHTTPErrors(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	if _, err := newPromCPU(srv.URL).CPU(context.Background()); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("err = %v; want a 404 error", err)
	}
}
