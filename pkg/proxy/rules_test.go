package proxy_test

// Tests of the rules (rules.go, --rules-file) against fake nodes.

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cqlgate/cqlgate/internal/fakenode"
	"github.com/cqlgate/cqlgate/internal/promtest"
	"github.com/cqlgate/cqlgate/internal/proxytest"
	"github.com/cqlgate/cqlgate/pkg/config"
	"github.com/cqlgate/cqlgate/pkg/frame"
	"github.com/cqlgate/cqlgate/pkg/rules"
)

func writeRules(t *testing.T, path, yaml string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
}

func ruleStat(t *testing.T, p *proxytest.Proxy, name string) rules.Stat {
	t.Helper()
	for _, s := range p.Proxy.Rules() {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no rule %q in %+v", name, p.Proxy.Rules())
	return rules.Stat{}
}

// TestRuleCapsTableWhileOthersFlow: a rule on ks.heavy lets exactly 2 of
// its requests reach the node at once, queues 3 and refuses the rest with
// OVERLOADED naming the rule, while requests on another table are
// answered at once. A reload keeps the rule's counters; a bad file is
// refused and the rules stay.
func TestRuleCapsTableWhileOthersFlow(t *testing.T) {
	const slow = 300 * time.Millisecond
	node := fakenode.Start(t, fakenode.Config{})
	node.SetTable("ks.heavy", kvCols, [][]byte{fakenode.Int(1), fakenode.Text("one")})
	node.SetTable("ks.light", kvCols, [][]byte{fakenode.Int(1), fakenode.Text("one")})
	var heavyAtNode atomic.Int64
	node.SetHook(func(r fakenode.Request) fakenode.Action {
		if strings.Contains(r.Query, "ks.heavy") {
			heavyAtNode.Add(1)
			return fakenode.Action{Delay: slow}
		}
		return fakenode.Action{}
	})
	file := filepath.Join(t.TempDir(), "rules.yaml")
	writeRules(t, file, `
rules:
  - name: heavy
    table: ks.heavy
    max_in_flight: 2
    queue_length: 3
    max_queue_wait: 5s
`)
	p := proxytest.Start(t, []string{node.Addr()}, func(c *config.Config) {
		c.RulesFile = file
		c.SpeculativeMaxExecutions = 0
	})
	c := dialClient(t, p.Addr)
	for i := range 10 {
		c.send(int16(1+i), "SELECT * FROM ks.heavy WHERE k = "+string(rune('0'+i)))
	}
	for i := range 20 {
		c.send(int16(100+i), "SELECT * FROM ks.light WHERE k = 1")
	}
	c.flush()

	const refusal = `cqlgate: rule "heavy" (ks.heavy): 2 in flight, queue full`
	var overloaded, light, heavyOK int
	for overloaded+light+heavyOK < 30 {
		b, err := c.rd.ReadFrame()
		if err != nil {
			t.Fatalf("after %d answers: %v", overloaded+light+heavyOK, err)
		}
		s, op := frame.Stream(b.B), frame.Opcode(b.B)
		var code int32
		var msg string
		if op == frame.OpError {
			code, msg, _ = frame.ErrorCode(frame.Body(b.B))
		}
		b.Release()
		switch {
		case s >= 100 && op == frame.OpResult:
			light++
			if light == 20 {
				// Every other request is answered while the heavy ones
				// are still at the node: 2 there, 3 queued.
				if heavyOK != 0 {
					t.Errorf("%d heavy requests answered before the light ones", heavyOK)
				}
				if got := heavyAtNode.Load(); got != 2 {
					t.Errorf("%d heavy requests at the node, want 2", got)
				}
				if st := ruleStat(t, p, "heavy"); st.InFlight != 2 || st.Queued != 3 {
					t.Errorf("while capped: %+v", st)
				}
			}
		case s < 100 && op == frame.OpError:
			if code != frame.ErrCodeOverloaded || msg != refusal {
				t.Errorf("stream %d: 0x%04x %q, want OVERLOADED %q", s, code, msg, refusal)
			}
			overloaded++
		case s < 100 && op == frame.OpResult:
			heavyOK++
		default:
			t.Fatalf("stream %d: unexpected %s 0x%04x %s", s, frame.OpcodeName(op), code, msg)
		}
	}
	if overloaded != 5 || heavyOK != 5 || light != 20 {
		t.Errorf("%d OVERLOADED, %d heavy and %d light answered; want 5, 5, 20", overloaded, heavyOK, light)
	}
	if got := heavyAtNode.Load(); got != 5 {
		t.Errorf("%d heavy requests reached the node, want 5", got)
	}
	st := ruleStat(t, p, "heavy")
	if st.InFlight != 0 || st.Queued != 0 || st.Admitted != 5 || st.Waited != 3 || st.RejectedQueueFull != 5 {
		t.Errorf("at the end: %+v", st)
	}
	// The statistics count the refusals as rejections of the statement.
	if rep := p.Proxy.Statements().Snapshot("rejected", 1); len(rep.Statements) != 1 || rep.Statements[0].Rejected != 5 || rep.Statements[0].Calls != 5 {
		t.Errorf("statement statistics: %+v", rep.Statements)
	}

	// A bad file is refused; the rule and its counters stay.
	writeRules(t, file, "rules: [{name: heavy, table: ks.heavy}]")
	if err := p.Proxy.ReloadRules(); err == nil || !strings.Contains(err.Error(), "max_in_flight required") {
		t.Errorf("bad file: %v", err)
	}
	// A changed limit keeps the counters.
	writeRules(t, file, "rules: [{name: heavy, table: ks.heavy, max_in_flight: 7}]")
	if err := p.Proxy.ReloadRules(); err != nil {
		t.Fatal(err)
	}
	if st := ruleStat(t, p, "heavy"); st.Limit != 7 || st.RejectedQueueFull != 5 || st.Admitted != 5 {
		t.Errorf("after reloading: %+v", st)
	}
	// Through Reload (SIGHUP's path) too: no rules file, no rules.
	next := config.Default()
	next.Listen = []string{"127.0.0.1:0"}
	next.ContactPoints = []string{node.Addr()}
	next.SpeculativeMaxExecutions = 0
	if _, err := p.Proxy.Reload(next); err != nil {
		t.Fatal(err)
	}
	if rs := p.Proxy.Rules(); len(rs) != 0 {
		t.Errorf("rules after reloading without a rules file: %+v", rs)
	}
}

// TestRuleHedgedRequestHoldsOnePermit: a hedged request holds one rule
// permit for all its attempts, until the last one ends; a second request
// waits for it.
func TestRuleHedgedRequestHoldsOnePermit(t *testing.T) {
	cl := fakenode.StartCluster(t, 2, fakenode.Config{})
	cl.SetTable("ks.kv", kvCols, [][]byte{fakenode.Int(1), fakenode.Text("one")})
	hang := hangFirst{delay: 2 * time.Second}
	cl.SetHook(hang.hook)
	file := filepath.Join(t.TempDir(), "rules.yaml")
	writeRules(t, file, "rules: [{name: kv, table: ks.kv, max_in_flight: 1, queue_length: 1, max_queue_wait: 8s}]")
	p := proxytest.Start(t, cl.Addrs(), func(c *config.Config) {
		c.RulesFile = file
		c.SpeculativeMaxExecutions = 1
		c.SpeculativeDelay = 20 * time.Millisecond
		c.SpeculativeBudget = 1
	})
	waitNodesUp(t, p, cl)
	c := dialRaw(t, p.Addr, frame.V4)
	meta := c.prepare(1, "SELECT * FROM ks.kv WHERE k = ?")
	// A latency class for the statement, and both nodes in the client's
	// pool, before the hedged request.
	for i := range 20 {
		if resp := c.roundTrip(execute(4, 2, meta.ID, nil, false, fakenode.Int(1))); frame.Opcode(resp) != frame.OpResult {
			t.Fatalf("warm-up EXECUTE %d: %s", i, describe(resp))
		}
	}

	// A hedge must win while the primary is held: on a loaded machine the
	// first try may go unhedged, so up to three tries.
	sent := 20
	for try := 1; ; try++ {
		// A warm-up hedge still at a node would be the request hangFirst
		// holds.
		waitFor(t, "the earlier attempts to end", func() bool { return ruleStat(t, p, "kv").InFlight == 0 })
		wins := metricValue(t, p, "cqlgate_speculative_wins_total")
		hang.done.Store(false)
		hang.on.Store(true)
		sent++
		if resp := c.roundTrip(execute(4, 3, meta.ID, nil, false, fakenode.Int(1))); frame.Opcode(resp) != frame.OpResult {
			t.Fatalf("hedged EXECUTE: %s", describe(resp))
		}
		if got := metricValue(t, p, "cqlgate_speculative_wins_total") - wins; got == 1 {
			break
		}
		text := grepLines(promtest.Text(t, p.Reg), "cqlgate_speculative")
		if try == 3 {
			t.Fatalf("no hedge won in %d tries: the test tests nothing\n%s", try, text)
		}
		t.Logf("try %d: no hedge won\n%s", try, text)
	}
	// The hedge answered; the primary is still at its node.
	if st := ruleStat(t, p, "kv"); st.InFlight != 1 {
		t.Errorf("a hedged request with two attempts out: %d permits held, want 1", st.InFlight)
	}
	c.send(execute(4, 4, meta.ID, nil, false, fakenode.Int(1)))
	waitFor(t, "the next request to queue behind the hedged one", func() bool { return ruleStat(t, p, "kv").Queued == 1 })
	if resp := c.read(); frame.Stream(resp) != 4 || frame.Opcode(resp) != frame.OpResult {
		t.Fatalf("queued EXECUTE: %s", describe(resp))
	}
	waitFor(t, "every permit back", func() bool { return ruleStat(t, p, "kv").InFlight == 0 })
	if st := ruleStat(t, p, "kv"); st.Admitted != uint64(sent+1) || st.Waited < 1 || st.Rejected != 0 {
		t.Errorf("at the end: %+v", st)
	}
}

// TestRuleResentRequestHoldsOnePermit: a request whose connection died
// before it was executed is sent again to the other node with the permit
// it holds, not a second one.
func TestRuleResentRequestHoldsOnePermit(t *testing.T) {
	cl := fakenode.StartCluster(t, 2, fakenode.Config{})
	cl.SetTable("ks.kv", kvCols, [][]byte{fakenode.Int(1), fakenode.Text("one")})
	var reset atomic.Bool
	cl.SetHook(func(_ *fakenode.Node, r fakenode.Request) fakenode.Action {
		if r.Opcode == frame.OpExecute && reset.CompareAndSwap(true, false) {
			return fakenode.Action{Fault: fakenode.Reset}
		}
		return fakenode.Action{}
	})
	file := filepath.Join(t.TempDir(), "rules.yaml")
	writeRules(t, file, "rules: [{name: kv, table: ks.kv, max_in_flight: 1, queue_length: 0}]")
	p := proxytest.Start(t, cl.Addrs(), func(c *config.Config) {
		c.RulesFile = file
		c.SpeculativeMaxExecutions = 0
	})
	waitNodesUp(t, p, cl)
	// v5: the proxy's own pool, connected to both nodes (it serves once
	// one is), so the other node is there to send the request again to.
	waitPoolsConnected(t, p, cl)
	c := dialRaw(t, p.Addr, frame.V5)
	meta := c.prepare(1, "SELECT * FROM ks.kv WHERE k = ?")
	for i := range 20 {
		if resp := c.roundTrip(execute(5, int16(10+i), meta.ID, meta.ResultMetadataID, false, fakenode.Int(1))); frame.Opcode(resp) != frame.OpResult {
			t.Fatalf("warm-up EXECUTE: %s", describe(resp))
		}
	}
	reset.Store(true)
	if resp := c.roundTrip(execute(5, 2, meta.ID, meta.ResultMetadataID, false, fakenode.Int(1))); frame.Opcode(resp) != frame.OpResult {
		t.Fatalf("re-sent EXECUTE: %s", describe(resp))
	}
	if reset.Load() {
		t.Fatal("no connection was reset: the test tests nothing")
	}
	if got := metricSum(t, p, "cqlgate_retries_total"); got < 1 {
		t.Logf("retries: %v", got)
	}
	if st := ruleStat(t, p, "kv"); st.InFlight != 0 || st.Admitted != 21 || st.Rejected != 0 {
		t.Errorf("after a re-sent request: %+v", st)
	}
	// With queue_length 0, the next request is admitted at once: the
	// permit came back.
	if resp := c.roundTrip(execute(5, 3, meta.ID, meta.ResultMetadataID, false, fakenode.Int(1))); frame.Opcode(resp) != frame.OpResult {
		t.Fatalf("next EXECUTE: %s", describe(resp))
	}
}

// TestRuleQueueWaitAndClientGone: requests that wait max_queue_wait get
// OVERLOADED saying so (the proxy's sweeper expires them) without reaching
// the node; a client that closes with requests queued leaves the queue,
// and every permit comes back.
func TestRuleQueueWaitAndClientGone(t *testing.T) {
	node := fakenode.Start(t, fakenode.Config{})
	node.SetTable("ks.heavy", kvCols, [][]byte{fakenode.Int(1), fakenode.Text("one")})
	var atNode atomic.Int64
	node.SetHook(func(r fakenode.Request) fakenode.Action {
		if strings.Contains(r.Query, "ks.heavy") {
			atNode.Add(1)
			return fakenode.Action{Delay: 500 * time.Millisecond}
		}
		return fakenode.Action{}
	})
	file := filepath.Join(t.TempDir(), "rules.yaml")
	writeRules(t, file, "rules: [{name: heavy, table: ks.heavy, max_in_flight: 1, queue_length: 4, max_queue_wait: 50ms}]")
	p := proxytest.Start(t, []string{node.Addr()}, func(c *config.Config) {
		c.RulesFile = file
		c.SpeculativeMaxExecutions = 0
	})
	c := dialClient(t, p.Addr)
	start := time.Now()
	for i := range 3 {
		c.send(int16(1+i), "SELECT * FROM ks.heavy WHERE k = 1")
	}
	c.flush()
	const waited = `cqlgate: rule "heavy" (ks.heavy): 1 in flight, waited 50ms in queue`
	for _, s := range []int16{2, 3} {
		if code, msg := c.errorOn(s); code != frame.ErrCodeOverloaded || msg != waited {
			t.Errorf("stream %d: 0x%04x %q, want OVERLOADED %q", s, code, msg, waited)
		}
	}
	if d := time.Since(start); d > 400*time.Millisecond {
		t.Errorf("queued requests answered after %v: not at their max_queue_wait", d)
	}
	if code, msg := c.errorOn(1); code != -1 {
		t.Errorf("the admitted request: 0x%04x %s", code, msg)
	}
	if got := atNode.Load(); got != 1 {
		t.Errorf("%d requests reached the node, want 1", got)
	}

	// A second client queues two requests behind a third's and leaves.
	c2 := dialClient(t, p.Addr)
	c3 := dialClient(t, p.Addr)
	writeRules(t, file, "rules: [{name: heavy, table: ks.heavy, max_in_flight: 1, queue_length: 4, max_queue_wait: 5s}]")
	if err := p.Proxy.ReloadRules(); err != nil {
		t.Fatal(err)
	}
	c3.send(1, "SELECT * FROM ks.heavy WHERE k = 1")
	c3.flush()
	waitFor(t, "the first request at the node", func() bool { return atNode.Load() == 2 })
	c2.send(1, "SELECT * FROM ks.heavy WHERE k = 1")
	c2.send(2, "SELECT * FROM ks.heavy WHERE k = 1")
	c2.flush()
	waitFor(t, "two requests queued", func() bool { return ruleStat(t, p, "heavy").Queued == 2 })
	c2.nc.Close()
	waitFor(t, "the gone client's requests to leave the queue", func() bool { return ruleStat(t, p, "heavy").Queued == 0 })
	if code, msg := c3.errorOn(1); code != -1 {
		t.Errorf("the admitted request: 0x%04x %s", code, msg)
	}
	waitFor(t, "every permit back", func() bool { return ruleStat(t, p, "heavy").InFlight == 0 })
	if got := atNode.Load(); got != 2 {
		t.Errorf("%d requests reached the node, want 2: the gone client's were sent", got)
	}
	if st := ruleStat(t, p, "heavy"); st.RejectedQueueTimeout != 2 || st.Admitted != 2 {
		t.Errorf("at the end: %+v", st)
	}
}
