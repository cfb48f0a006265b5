package speculative

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/cqlgate/cqlgate/internal/promtest"
)

func TestMetrics(t *testing.T) {
	clk := newFakeClock()
	d, err := NewDelay(DelayConfig{MinSamples: 2, Cap: time.Second}, clk)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewBudget(BudgetConfig{MinHedges: 1}, clk)
	if err != nil {
		t.Fatal(err)
	}
	s, err := newScheduler(SchedulerConfig{}, clk)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(d, b, s))

	now := clk.Now()
	// Two statements of one table share its label; a third class is new.
	s1, s2, other := d.Class(1, "ks.t"), d.Class(2, "ks.t"), d.Class(3, "ks.u")
	for range 10 {
		d.Record(s1, 3*time.Millisecond, now)
		d.Record(s2, 100*time.Millisecond, now)
	}
	d.Record(other, time.Millisecond, now)
	b.TryHedge(now)
	b.TryHedge(now)
	b.Pause(now.Add(time.Second))
	b.TryHedge(now)
	var tm Timer
	s.Arm(&tm, now.Add(time.Second), nopTarget{}, 1)

	want := strings.Join([]string{
		"# TYPE cqlgate_speculative_budget_allowed_total counter",
		"cqlgate_speculative_budget_allowed_total 1",
		"# TYPE cqlgate_speculative_budget_denied_total counter",
		`cqlgate_speculative_budget_denied_total{reason="budget"} 1`,
		`cqlgate_speculative_budget_denied_total{reason="paused"} 1`,
		"# TYPE cqlgate_speculative_budget_paused gauge",
		"cqlgate_speculative_budget_paused 1",
		"# TYPE cqlgate_speculative_delay_samples gauge",
		`cqlgate_speculative_delay_samples{class="ks.t"} 20`,
		`cqlgate_speculative_delay_samples{class="ks.u"} 1`,
		"# TYPE cqlgate_speculative_delay_seconds gauge",
		`cqlgate_speculative_delay_seconds{class="ks.t"} 0.100663296`, // the top of 100ms's bucket, the slower statement
		"# TYPE cqlgate_speculative_timers_pending gauge",
		"cqlgate_speculative_timers_pending 1",
	}, "\n")
	got := promtest.Text(t, reg)
	if got != want {
		t.Errorf("metrics:\n%s\nwant:\n%s", got, want)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	// Nil parts are left out.
	reg2 := prometheus.NewRegistry()
	reg2.MustRegister(NewCollector(nil, b, nil))
	if g := promtest.Text(t, reg2); strings.Contains(g, "delay") || strings.Contains(g, "timers") {
		t.Errorf("metrics of nil parts:\n%s", g)
	}
}
