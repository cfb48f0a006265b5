package integration

// Speculative execution against a real 3-node cluster (RF=3) with one node
// made slow by a fault injector (+250 ms on its path).

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/cqlgate/cqlgate/pkg/config"
)

// TestHedgingSlowNode: reads keep succeeding, hedges are sent and win, and
// they stay within the budget.
func TestHedgingSlowNode(t *testing.T) {
	_, p, inj, s := faultSetup(t, nil)
	// Warm up: the hedge delay needs samples from healthy nodes first.
	warm := startReads(t, s, 8)
	time.Sleep(2 * time.Second)
	warm.finish(t, "warm-up")
	if err := inj.Latency(250*time.Millisecond, 0); err != nil {
		t.Fatal(err)
	}
	load := startReads(t, s, 16)
	time.Sleep(4 * time.Second)
	load.finish(t, "slow node, hedging on")
	inj.Clear()
	checkQuiet(t, p)

	started := metricSum(t, p.Reg, "cqlgate_speculative_executions_total")
	won := metricSum(t, p.Reg, "cqlgate_speculative_wins_total")
	reqs := metricSeries(t, p.Reg, "cqlgate_requests_total")["opcode=EXECUTE"]
	t.Logf("EXECUTE requests %v, hedges %v, won %v, skipped %v", reqs, started, won, metricSeries(t, p.Reg, "cqlgate_speculative_skipped_total"))
	if started == 0 || won == 0 {
		t.Errorf("no hedge sent or won with a node 250 ms slow: started %v, won %v", started, won)
	}
	// cqlgate_requests_total counts hedges too; the budget allows 5% of
	// the hedgeable requests plus a floor of 10 per window.
	if limit := 0.05*(reqs-started) + 30; started > limit {
		t.Errorf("%v hedges for %v requests: over the 5%% budget (%v)", started, reqs-started, limit)
	}
}

// TestHedgingIsSafeForNonIdempotentWrites: counter increments, LWTs and
// list appends through the proxy with one slow node have exactly the
// effect of running each once, and are never hedged.
func TestHedgingIsSafeForNonIdempotentWrites(t *testing.T) {
	const perWorker, workers = 40, 8
	c, p, inj, s := faultSetup(t, func(cc *config.Config) { cc.SpeculativeDelay = time.Millisecond })
	direct := newSession(t, c.Addrs, nil)
	mustExec(t, direct, "CREATE TABLE it_faults.hits (k int PRIMARY KEY, n counter)")
	mustExec(t, direct, "CREATE TABLE it_faults.lists (k int PRIMARY KEY, l list<int>)")
	mustExec(t, direct, "CREATE TABLE it_faults.once (k int PRIMARY KEY, v int)")
	if err := inj.Latency(250*time.Millisecond, 0); err != nil {
		t.Fatal(err)
	}
	var failed atomic.Int64
	var firstErr atomic.Value
	// Cassandra's own timeouts (the coordinator heard from too few replicas
	// in time: on a busy 2-core host now and then, with one node 250 ms
	// slow) leave a write's effect unknown, applied or not. They are the
	// node's answer, passed on: each effect must lie between the writes
	// less those timeouts and the writes, so a write the proxy ran twice
	// still shows unless a timed-out one happened not to apply.
	var unknown [3]atomic.Int64 // counter, list, LWT
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perWorker; i++ {
				k := w*perWorker + i
				errs := []error{
					s.Query("UPDATE it_faults.hits SET n = n + 1 WHERE k = 1").Exec(),
					s.Query("UPDATE it_faults.lists SET l = l + ? WHERE k = 1", []int{k}).Exec(),
				}
				_, err := s.Query("INSERT INTO it_faults.once (k, v) VALUES (?, ?) IF NOT EXISTS", k, k).ScanCAS()
				errs = append(errs, err)
				for j, err := range errs {
					switch {
					case err == nil:
					case isServerTimeout(err):
						unknown[j].Add(1)
					default:
						failed.Add(1)
						firstErr.CompareAndSwap(nil, err)
					}
				}
			}
		}()
	}
	wg.Wait()
	inj.Clear()
	checkQuiet(t, p)
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d writes failed; first: %v", n, firstErr.Load())
	}
	total := workers * perWorker
	uc, ul, uw := int(unknown[0].Load()), int(unknown[1].Load()), int(unknown[2].Load())
	if uc+ul+uw > total/10 {
		t.Fatalf("Cassandra timed out %d counter, %d list and %d LWT writes of %d each: too many to judge", uc, ul, uw, total)
	}
	var n int64
	if err := direct.Query("SELECT n FROM it_faults.hits WHERE k = 1").Consistency(gocql.All).Scan(&n); err != nil {
		t.Fatal(err)
	}
	var l []int
	if err := direct.Query("SELECT l FROM it_faults.lists WHERE k = 1").Consistency(gocql.All).Scan(&l); err != nil {
		t.Fatal(err)
	}
	var rows int
	if err := direct.Query("SELECT count(*) FROM it_faults.once").Consistency(gocql.All).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if n > int64(total) || n < int64(total-uc) || len(l) > total || len(l) < total-ul || rows > total || rows < total-uw {
		t.Errorf("after %d of each (Cassandra timed out %d, %d and %d): counter %d, list length %d, LWT rows %d; want %d each, less at most the timeouts",
			total, uc, ul, uw, n, len(l), rows, total)
	}
	if started := metricSum(t, p.Reg, "cqlgate_speculative_executions_total"); started != 0 {
		t.Errorf("%v hedges sent for non-idempotent writes", started)
	}
	if skipped := metricSeries(t, p.Reg, "cqlgate_speculative_skipped_total")["reason=not_idempotent"]; skipped < float64(3*total) {
		t.Errorf("cqlgate_speculative_skipped_total{reason=not_idempotent} = %v; want at least %d", skipped, 3*total)
	}
}

// BenchmarkSlowNodeHedging prints, from one run, the read latency and
// throughput at a fixed worker count with all nodes healthy, with one node
// 250 ms slow and hedging off, and with it on:
//
//	go test -run '^$' -bench SlowNodeHedging -benchtime 1x ./test/integration/
func BenchmarkSlowNodeHedging(b *testing.B) {
	const workers, window = 16, 5 * time.Second
	for i := 0; i < b.N; i++ {
		for _, run := range []struct {
			name  string
			slow  bool
			extra int
		}{{"healthy", false, 1}, {"slow-unhedged", true, 0}, {"slow-hedged", true, 1}} {
			b.Run(run.name, func(b *testing.B) {
				_, p, inj, s := faultSetup(b, func(cc *config.Config) { cc.SpeculativeMaxExecutions = run.extra })
				measure(b, s, workers, 2*time.Second) // warm up
				if run.slow {
					if err := inj.Latency(250*time.Millisecond, 0); err != nil {
						b.Fatal(err)
					}
				}
				lat, ops := measure(b, s, workers, window)
				inj.Clear()
				hedges := metricSum(b, p.Reg, "cqlgate_speculative_executions_total")
				// Hedges as a share of all reads since the proxy started.
				share := 100 * hedges / max(metricSeries(b, p.Reg, "cqlgate_requests_total")["opcode=EXECUTE"]-hedges, 1)
				b.ReportMetric(float64(ops)/window.Seconds(), "reads/s")
				b.ReportMetric(float64(pct(lat, 0.50).Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(pct(lat, 0.99).Microseconds())/1000, "p99-ms")
				b.ReportMetric(share, "hedged-%")
				fmt.Printf("%-14s reads/s %8.0f  p50 %6.1f ms  p99 %7.1f ms  hedges %5.0f (%.1f%% of reads)\n", run.name,
					float64(ops)/window.Seconds(), float64(pct(lat, 0.50).Microseconds())/1000, float64(pct(lat, 0.99).Microseconds())/1000, hedges, share)
			})
		}
	}
}

func pct(lat []time.Duration, q float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	return lat[int(q*float64(len(lat)-1))]
}

// measure runs reads from workers goroutines for d and returns the sorted
// latencies.
func measure(tb testing.TB, s *gocql.Session, workers int, d time.Duration) ([]time.Duration, int) {
	var mu sync.Mutex
	var all []time.Duration
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	var failed atomic.Int64
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for i := w; time.Now().Before(end); i += workers {
				start := time.Now()
				var v int
				if err := s.Query("SELECT v FROM it_faults.kv WHERE k = ?", i%200).Scan(&v); err != nil {
					failed.Add(1)
					continue
				}
				mine = append(mine, time.Since(start))
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		tb.Errorf("%d reads failed", n)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	return all, len(all)
}

// TestHedgingPausedNode: one node stops (SIGSTOP) for 400 ms of every
// second, like a node in long GC pauses. Reads see no error, and hedges
// answer for the requests caught on it.
func TestHedgingPausedNode(t *testing.T) {
	c, p, _, s := faultSetup(t, nil)
	warm := startReads(t, s, 8)
	time.Sleep(2 * time.Second)
	warm.finish(t, "warm-up")
	won := metricSum(t, p.Reg, "cqlgate_speculative_wins_total")
	load := startReads(t, s, 16)
	for i := 0; i < 6; i++ {
		if err := c.PauseNode(faultVictim); err != nil {
			t.Fatal(err)
		}
		time.Sleep(400 * time.Millisecond)
		if err := c.ResumeNode(faultVictim); err != nil {
			t.Fatal(err)
		}
		time.Sleep(600 * time.Millisecond)
	}
	load.finish(t, "paused node, hedging on")
	checkQuiet(t, p)
	if got := metricSum(t, p.Reg, "cqlgate_speculative_wins_total") - won; got == 0 {
		t.Errorf("no hedge won while a node paused 400 ms of every second")
	}
}

// isServerTimeout reports whether err is Cassandra's own read or write
// timeout (the coordinator heard from too few replicas in time).
func isServerTimeout(err error) bool {
	var wt *gocql.RequestErrWriteTimeout
	var rt *gocql.RequestErrReadTimeout
	return errors.As(err, &wt) || errors.As(err, &rt)
}
