package integration

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/cqlgate/cqlgate/pkg/config"
	"github.com/cqlgate/cqlgate/pkg/rules"
)

// TestRuleCapsTable: gocql through the proxy against real Cassandra. A rule
// on it_rules.heavy holds its whole-partition reads to 2 in flight (2 more
// queued, the rest refused with OVERLOADED naming the rule) while reads of
// it_rules.light all succeed; reloading the file changes the limit and
// keeps the counters.
func TestRuleCapsTable(t *testing.T) {
	c := singleCluster.Get(t)
	file := filepath.Join(t.TempDir(), "rules.yaml")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("rules:\n  - {name: heavy, table: it_rules.heavy, max_in_flight: 2, queue_length: 2, max_queue_wait: 2s}\n")
	var cfg config.Config
	p := startProxy(t, c.Addrs, func(c *config.Config) {
		c.RulesFile = file
		cfg = *c
	})
	s := proxySession(t, p, func(cc *gocql.ClusterConfig) {
		// Every refusal reaches the test: the counts must add up.
		cc.RetryPolicy = &gocql.SimpleRetryPolicy{NumRetries: 0}
		cc.Timeout = 20 * time.Second
		cc.NumConns = 4
	})
	recreateKeyspace(t, s, "it_rules", 1,
		"CREATE TABLE it_rules.heavy (k int, c int, v text, PRIMARY KEY (k, c))",
		"CREATE TABLE it_rules.light (k int PRIMARY KEY, v int)")
	pad := strings.Repeat("x", 512)
	for i := range 2000 {
		mustExec(t, s, "INSERT INTO it_rules.heavy (k, c, v) VALUES (1, ?, ?)", i, pad)
	}
	mustExec(t, s, "INSERT INTO it_rules.light (k, v) VALUES (1, 1)")
	base := ruleStats(t, p, "heavy")

	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if st := ruleStats(t, p, "heavy"); int64(st.InFlight) > peak.Load() {
				peak.Store(int64(st.InFlight))
			}
			time.Sleep(200 * time.Microsecond)
		}
	}()
	const heavy, light = 40, 40
	var heavyOK, refused, lightOK atomic.Int64
	var mu sync.Mutex
	other := map[string]int{}
	var wg sync.WaitGroup
	for range heavy {
		wg.Add(1)
		go func() {
			defer wg.Done()
			iter := s.Query("SELECT c, v FROM it_rules.heavy WHERE k = 1").PageSize(5000).Iter()
			n := iter.NumRows()
			err := iter.Close()
			switch {
			case err == nil && n == 2000:
				heavyOK.Add(1)
			case err != nil && strings.Contains(err.Error(), `cqlgate: rule "heavy" (it_rules.heavy): 2 in flight`):
				refused.Add(1)
			default:
				mu.Lock()
				other[err.Error()]++
				mu.Unlock()
			}
		}()
	}
	for range light {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var v int
			if err := s.Query("SELECT v FROM it_rules.light WHERE k = 1").Scan(&v); err == nil && v == 1 {
				lightOK.Add(1)
			} else {
				mu.Lock()
				other["light: "+err.Error()]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-sampled
	st := ruleStats(t, p, "heavy")
	t.Logf("heavy: %d answered, %d refused; light: %d answered; peak in flight %d; rule %+v",
		heavyOK.Load(), refused.Load(), lightOK.Load(), peak.Load(), st)
	if len(other) > 0 {
		t.Errorf("unexpected outcomes: %v", other)
	}
	if lightOK.Load() != light {
		t.Errorf("%d of %d reads of the other table answered", lightOK.Load(), light)
	}
	if heavyOK.Load()+refused.Load() != heavy || refused.Load() == 0 {
		t.Errorf("heavy: %d answered + %d refused, want %d with some refused", heavyOK.Load(), refused.Load(), heavy)
	}
	if got := int64(st.Admitted - base.Admitted); got != heavyOK.Load() {
		t.Errorf("rule admitted %d, gocql got %d answers", got, heavyOK.Load())
	}
	if got := int64(st.Rejected - base.Rejected); got != refused.Load() {
		t.Errorf("rule rejected %d, gocql got %d refusals", got, refused.Load())
	}
	if peak.Load() > 2 || st.InFlight != 0 || st.Queued != 0 {
		t.Errorf("peak in flight %d (limit 2); at the end %d in flight, %d queued", peak.Load(), st.InFlight, st.Queued)
	}

	// SIGHUP's path: the configuration reloaded with an edited file.
	write("rules:\n  - {name: heavy, table: it_rules.heavy, max_in_flight: 4}\n")
	if _, err := p.Proxy.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	if got := ruleStats(t, p, "heavy"); got.Limit != 4 || got.Rejected != st.Rejected || got.Admitted != st.Admitted {
		t.Errorf("after reload: %+v, want limit 4 and the counters of %+v", got, st)
	}
	write("rules:\n  - {name: heavy, table: it_rules.heavy, max_in_flight: -1}\n")
	if _, err := p.Proxy.Reload(cfg); err == nil {
		t.Error("a bad rules file was accepted")
	}
	if got := ruleStats(t, p, "heavy"); got.Limit != 4 {
		t.Errorf("after a refused reload: %+v", got)
	}
}

func ruleStats(t testing.TB, p *testProxy, name string) rules.Stat {
	for _, s := range p.Proxy.Rules() {
		if s.Name == name {
			return s
		}
	}
	t.Errorf("no rule %q", name)
	return rules.Stat{}
}
