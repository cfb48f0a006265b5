package rules

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cqlgate/cqlgate/internal/promtest"
)

const sample = `
rules:
  - name: reports
    table: KS.Events
    max_in_flight: 2
    queue_length: 1
    max_queue_wait: 50ms
  - name: one-statement
    statement: 0xA1B2C3D4
    max_in_flight: 1
`

func mustParse(t *testing.T, s string) []Def {
	t.Helper()
	defs, err := Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return defs
}

func TestParse(t *testing.T) {
	defs := mustParse(t, sample)
	want := []Def{
		{Name: "reports", Keyspace: "ks", Table: "events", MaxInFlight: 2, QueueLength: 1, MaxQueueWait: 50 * time.Millisecond},
		{Name: "one-statement", Statement: "a1b2c3d4", MaxInFlight: 1, QueueLength: DefaultQueueLength, MaxQueueWait: DefaultMaxQueueWait},
	}
	if len(defs) != len(want) {
		t.Fatalf("got %d rules, want %d", len(defs), len(want))
	}
	for i := range want {
		if defs[i] != want[i] {
			t.Errorf("rule %d: got %+v, want %+v", i, defs[i], want[i])
		}
	}
	if got := mustParse(t, `rules: [{name: q, table: '"MyKs"."My.Table"', max_in_flight: 1}]`)[0]; got.Keyspace != "MyKs" || got.Table != "My.Table" {
		t.Errorf("quoted table: got %q.%q", got.Keyspace, got.Table)
	}
	if defs := mustParse(t, ""); len(defs) != 0 {
		t.Errorf("empty file: %d rules", len(defs))
	}
}

func TestParseRejects(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{`rules: [{name: a, table: ks.t}]`, "max_in_flight required"},
		{`rules: [{name: a, table: ks.t, max_in_flight: 0}]`, "max_in_flight 0"},
		{`rules: [{name: a, max_in_flight: 1}]`, "statement or table required"},
		{`rules: [{name: a, table: ks.t, statement: ab, max_in_flight: 1}]`, "not both"},
		{`rules: [{name: a, table: kst, max_in_flight: 1}]`, "keyspace.table required"},
		{`rules: [{name: a, statement: xyz, max_in_flight: 1}]`, "hex id"},
		{`rules: [{name: "a b", table: ks.t, max_in_flight: 1}]`, "name:"},
		{`rules: [{name: a, table: ks.t, max_in_flight: 1, max_queue_wait: 2m}]`, "at most 1m0s"},
		{`rules: [{name: a, table: ks.t, max_in_flight: 1, queue_length: -1}]`, "queue_length -1"},
		{`rules: [{name: a, table: ks.t, max_in_flight: 1, limit: 3}]`, "field limit not found"},
		{`rules: [{name: a, table: ks.t, max_in_flight: 1}, {name: a, table: ks.u, max_in_flight: 1}]`, `name "a" used twice`},
		{`rules: [{name: a, table: ks.t, max_in_flight: 1}, {name: b, table: KS.T, max_in_flight: 1}]`, `matched by rule "a"`},
	} {
		_, err := Parse([]byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error with %q", c.yaml, err, c.want)
		}
	}
}

func TestMatchPrecedence(t *testing.T) {
	var m Manager
	if m.Current() != nil {
		t.Fatal("a zero Manager has rules")
	}
	m.Apply(mustParse(t, sample+`
  - name: events-statement
    statement: ff00
    max_in_flight: 3
`), time.Now())
	s := m.Current()
	for _, c := range []struct{ id, ks, table, want string }{
		{"0000", "ks", "events", "reports"},
		{"a1b2c3d4", "other", "x", "one-statement"},
		{"ff00", "ks", "events", "events-statement"}, // the statement's rule wins over its table's
		{"0000", "ks", "other", ""},
		{"0000", "ks", "", ""},
	} {
		r := s.Match(c.id, c.ks, c.table)
		got := ""
		if r != nil {
			got = r.Name()
		}
		if got != c.want {
			t.Errorf("Match(%s, %s.%s) = %q, want %q", c.id, c.ks, c.table, got, c.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { s.Match("0000", "ks", "events") }); n != 0 {
		t.Errorf("Match allocates %v times", n)
	}
	m.Apply(nil, time.Now())
	if m.Current() != nil {
		t.Error("no rules after Apply(nil), but Current is not nil")
	}
}

// waiter records what a rule did with it.
type waiter struct {
	mu       sync.Mutex
	permit   Permit
	admitted int
	rejected []string
}

func (w *waiter) RuleAdmitted(p Permit, _ time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.permit = p
	w.admitted++
}

func (w *waiter) RuleRejected(msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.rejected = append(w.rejected, msg)
}

func (w *waiter) state() (int, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.admitted, append([]string(nil), w.rejected...)
}

func ruleOf(t *testing.T, m *Manager, name string) *Rule {
	t.Helper()
	for _, r := range m.Current().Rules() {
		if r.Name() == name {
			return r
		}
	}
	t.Fatalf("no rule %q", name)
	return nil
}

func TestSemaphoreAndQueue(t *testing.T) {
	var m Manager
	now := time.Unix(1000, 0)
	m.Apply(mustParse(t, sample), now)
	r := ruleOf(t, &m, "reports") // 2 in flight, queue 1, 50ms

	var ws [4]waiter
	var ps [4]Permit
	var res [4]Result
	var msg string
	for i := range ws {
		ps[i], res[i], msg = r.Acquire(&ws[i], uint64(i), now, 0)
	}
	if res != [4]Result{Granted, Granted, Queued, Rejected} {
		t.Fatalf("results %v, want granted, granted, queued, rejected", res)
	}
	if want := `cqlgate: rule "reports" (ks.events): 2 in flight, queue full`; msg != want {
		t.Errorf("message %q, want %q", msg, want)
	}
	// Releasing hands the permit to the waiter; releasing again does nothing.
	ps[0].Release(now)
	ps[0].Release(now)
	if n, _ := ws[2].state(); n != 1 {
		t.Fatalf("waiter admitted %d times, want 1", n)
	}
	if st := r.Stat(); st.InFlight != 2 || st.Queued != 0 || st.Admitted != 3 || st.Waited != 1 || st.RejectedQueueFull != 1 {
		t.Errorf("after a hand-off: %+v", st)
	}
	ps[1].Release(now)
	ws[2].permit.Release(now)
	if st := r.Stat(); st.InFlight != 0 {
		t.Errorf("in flight %d after every permit was released", st.InFlight)
	}

	// A queued wait expires after max_queue_wait, or at the request's own
	// earlier deadline.
	var a, b, c, d waiter
	pa, _, _ := r.Acquire(&a, 1, now, 0)
	pb, _, _ := r.Acquire(&b, 1, now, 0)
	if _, res, _ := r.Acquire(&c, 1, now, 0); res != Queued {
		t.Fatalf("third: %v, want queued", res)
	}
	m.Sweep(now.Add(49 * time.Millisecond))
	if _, rej := c.state(); len(rej) != 0 {
		t.Fatalf("rejected before max_queue_wait: %q", rej)
	}
	m.Sweep(now.Add(50 * time.Millisecond))
	if _, rej := c.state(); len(rej) != 1 || rej[0] != `cqlgate: rule "reports" (ks.events): 2 in flight, waited 50ms in queue` {
		t.Fatalf("after max_queue_wait: %q", rej)
	}
	if _, res, _ := r.Acquire(&d, 1, now, now.Add(10*time.Millisecond).UnixNano()); res != Queued {
		t.Fatal("not queued")
	}
	m.Sweep(now.Add(10 * time.Millisecond))
	if _, rej := d.state(); len(rej) != 1 {
		t.Fatalf("not rejected at the request's deadline: %q", rej)
	}
	if st := r.Stat(); st.RejectedQueueTimeout != 2 || st.Queued != 0 || st.InFlight != 2 {
		t.Errorf("after expiry: %+v", st)
	}
	pa.Release(now)
	pb.Release(now)
}

func TestCancelFlow(t *testing.T) {
	var m Manager
	now := time.Now()
	m.Apply(mustParse(t, `rules: [{name: r, table: ks.t, max_in_flight: 1, queue_length: 3}]`), now)
	r := ruleOf(t, &m, "r")
	var w0, w1, w2 waiter
	p0, _, _ := r.Acquire(&w0, 7, now, 0)
	r.Acquire(&w1, 7, now, 0)
	r.Acquire(&w2, 8, now, 0)
	m.CancelFlow(7)
	if _, rej := w1.state(); len(rej) != 1 || rej[0] != "" {
		t.Errorf("flow 7's wait: %q, want one cancellation", rej)
	}
	p0.Release(now)
	if n, rej := w2.state(); n != 1 || len(rej) != 0 {
		t.Errorf("flow 8's wait: admitted %d, rejected %q", n, rej)
	}
	w2.permit.Release(now)
	if st := r.Stat(); st.InFlight != 0 || st.Queued != 0 {
		t.Errorf("%+v", st)
	}
}

func TestReloadKeepsState(t *testing.T) {
	var m Manager
	now := time.Now()
	m.Apply(mustParse(t, sample), now)
	r := ruleOf(t, &m, "reports")
	var ws [3]waiter
	p0, _, _ := r.Acquire(&ws[0], 1, now, 0)
	p1, _, _ := r.Acquire(&ws[1], 1, now, 0)
	r.Acquire(&ws[2], 1, now, 0) // queued
	var extra waiter
	r.Acquire(&extra, 1, now, 0) // rejected: queue full

	// The same file again: nothing changes, the state is kept.
	ch := m.Apply(mustParse(t, sample), now)
	if len(ch.Kept) != 2 || len(ch.Added)+len(ch.Changed)+len(ch.Removed) != 0 {
		t.Errorf("same file: %+v", ch)
	}
	if ruleOf(t, &m, "reports") != r {
		t.Fatal("an unchanged rule was replaced")
	}
	if st := r.Stat(); st.InFlight != 2 || st.Queued != 1 || st.RejectedQueueFull != 1 {
		t.Errorf("after reloading the same rules: %+v", st)
	}

	// A raised limit admits the queued request at once, with the counters
	// kept.
	raised := strings.Replace(sample, "max_in_flight: 2", "max_in_flight: 4", 1)
	ch = m.Apply(mustParse(t, raised), now)
	if len(ch.Changed) != 1 || ch.Changed[0] != "reports" {
		t.Errorf("raised: %+v", ch)
	}
	if n, _ := ws[2].state(); n != 1 {
		t.Fatal("a raised limit did not admit the queued request")
	}
	if st := r.Stat(); st.InFlight != 3 || st.Limit != 4 || st.RejectedQueueFull != 1 {
		t.Errorf("after raising: %+v", st)
	}

	// A lowered limit lets the requests in flight finish first.
	lowered := strings.Replace(sample, "max_in_flight: 2", "max_in_flight: 1", 1)
	m.Apply(mustParse(t, lowered), now)
	var late waiter
	if _, res, _ := r.Acquire(&late, 1, now, 0); res != Queued {
		t.Fatalf("over a lowered limit: %v, want queued", res)
	}
	p0.Release(now)
	p1.Release(now)
	if n, _ := late.state(); n != 0 {
		t.Fatal("admitted while still over the lowered limit")
	}
	ws[2].permit.Release(now)
	if n, _ := late.state(); n != 1 {
		t.Fatal("not admitted once under the lowered limit")
	}

	// A removed rule caps nothing: its queue goes, its permits still
	// release into it.
	var q waiter
	r.Acquire(&q, 1, now, 0)
	ch = m.Apply(mustParse(t, `rules: [{name: other, table: ks.x, max_in_flight: 1}]`), now)
	if len(ch.Removed) != 2 || len(ch.Added) != 1 {
		t.Errorf("replaced: %+v", ch)
	}
	if n, _ := q.state(); n != 1 {
		t.Error("a removed rule kept its queue")
	}
	late.permit.Release(now)
	q.permit.Release(now)
	if st := r.Stat(); st.InFlight != 0 {
		t.Errorf("a removed rule's permits: %d in flight after release", st.InFlight)
	}
	if m.Current().Match("0", "ks", "events") != nil {
		t.Error("a removed rule still matches")
	}
}

// TestConcurrentCap runs many goroutines through one rule and checks that
// no more than its limit ever hold a permit, and every permit comes back.
func TestConcurrentCap(t *testing.T) {
	var m Manager
	m.Apply(mustParse(t, `rules: [{name: r, table: ks.t, max_in_flight: 3, queue_length: 1000, max_queue_wait: 1m}]`), time.Now())
	r := ruleOf(t, &m, "r")
	var holding, peak atomic.Int64
	var wg sync.WaitGroup
	work := func(p Permit) {
		n := holding.Add(1)
		for {
			old := peak.Load()
			if n <= old || peak.CompareAndSwap(old, n) {
				break
			}
		}
		time.Sleep(50 * time.Microsecond)
		holding.Add(-1)
		p.Release(time.Now())
	}
	const workers, each = 16, 200
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				done := make(chan struct{})
				w := &chanWaiter{done: done, work: work}
				p, res, _ := r.Acquire(w, uint64(g), time.Now(), 0)
				switch res {
				case Granted:
					work(p)
				case Queued:
					<-done
				case Rejected:
					t.Error("rejected with a queue of 1000")
				}
			}
		}()
	}
	wg.Wait()
	if peak.Load() > 3 {
		t.Errorf("%d held permits at once, limit 3", peak.Load())
	}
	if st := r.Stat(); st.InFlight != 0 || st.Admitted != workers*each {
		t.Errorf("at the end: %+v", st)
	}
}

type chanWaiter struct {
	done chan struct{}
	work func(Permit)
}

func (w *chanWaiter) RuleAdmitted(p Permit, _ time.Time) {
	go func() { w.work(p); close(w.done) }()
}
func (w *chanWaiter) RuleRejected(string) { close(w.done) }

func TestCollector(t *testing.T) {
	var m Manager
	m.Apply(mustParse(t, sample), time.Now())
	r := ruleOf(t, &m, "reports")
	var w waiter
	p, _, _ := r.Acquire(&w, 1, time.Now(), 0)
	defer p.Release(time.Now())
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(&m))
	text := promtest.Text(t, reg)
	for _, want := range []string{
		"# TYPE cqlgate_rule_in_flight gauge",
		`cqlgate_rule_in_flight{rule="one-statement"} 0`,
		`cqlgate_rule_in_flight{rule="reports"} 1`,
		`cqlgate_rule_limit{rule="reports"} 2`,
		`cqlgate_rule_admitted_total{rule="reports"} 1`,
		`cqlgate_rule_rejected_total{reason="queue_full",rule="reports"} 0`,
		`cqlgate_rule_queued{rule="reports"} 0`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no %s in\n%s", want, text)
		}
	}
}
