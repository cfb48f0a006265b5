package limiter

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/cqlgate/cqlgate/internal/promtest"
)

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	clk := newFakeClock()
	l, err := New(Config{NodeLimit: 1, QueueLength: 1}, clk, reg)
	if err != nil {
		t.Fatal(err)
	}
	l.SetNodes([]NodeID{0, 1})
	a, b := &rec{t: t}, &rec{t: t}
	l.Acquire(a, 1, 0, nil, time.Time{})
	l.Acquire(b, 1, 0, nil, time.Time{})
	w := &rec{t: t}
	l.Acquire(w, 1, 0, nil, time.Time{}) // queued
	full := &rec{t: t}
	l.Acquire(full, 1, 0, nil, time.Time{}) // queue full
	clk.Advance(30 * time.Millisecond)
	a.permit.Release(Success, time.Millisecond) // admits w after 30ms

	got := promtest.Text(t, reg)
	for _, want := range []string{
		"# TYPE cqlgate_limiter_admitted_total counter\ncqlgate_limiter_admitted_total 3",
		"# TYPE cqlgate_limiter_global_in_flight gauge\ncqlgate_limiter_global_in_flight 2",
		"# TYPE cqlgate_limiter_global_limit gauge\ncqlgate_limiter_global_limit 2",
		"# TYPE cqlgate_limiter_in_flight gauge\ncqlgate_limiter_in_flight{node=\"0\"} 1\ncqlgate_limiter_in_flight{node=\"1\"} 1",
		"# TYPE cqlgate_limiter_limit gauge\ncqlgate_limiter_limit{node=\"0\"} 1\ncqlgate_limiter_limit{node=\"1\"} 1",
		"# TYPE cqlgate_limiter_queue_depth gauge\ncqlgate_limiter_queue_depth 0",
		"cqlgate_limiter_rejected_total{reason=\"queue_full\"} 1",
		"cqlgate_limiter_rejected_total{reason=\"queue_timeout\"} 0",
		"cqlgate_limiter_rejected_total{reason=\"standing_queue\"} 0",
		"# TYPE cqlgate_limiter_queue_wait_seconds histogram",
		"cqlgate_limiter_queue_wait_seconds_bucket{le=\"0.032\"} 1",
		"cqlgate_limiter_queue_wait_seconds_count 1",
		"cqlgate_limiter_limit_changes_total{node=\"0\"} 0",
		"cqlgate_limiter_double_releases_total 0",
		"cqlgate_limiter_standing_queue 0",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("metrics lack\n%s\ngot:\n%s", want, got)
		}
	}
	mfs, _ := reg.Gather()
	if problems, err := promlint.NewWithMetricFamilies(mfs).Lint(); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
	// Close unregisters, so a new Limiter can register again.
	l.Close()
	l2, err := New(Config{}, clk, reg)
	if err != nil {
		t.Fatalf("New after Close on the same registry: %v", err)
	}
	l2.Close()
	b.permit.Release(Success, 0)
	w.permit.Release(Success, 0)
}
