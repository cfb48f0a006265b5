package integration

// Faults between the proxy and one node of three, injected by a real fault
// injector (toxiproxy) that the proxy reaches through its address map, and a
// node killed outright. Reads are idempotent: they must see no error at
// all. Every request is answered, and nothing leaks.

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/cqlgate/cqlgate/internal/faultinject"
	"github.com/cqlgate/cqlgate/pkg/config"
)

// faultVictim is the node faults are injected at: not the contact point,
// which holds the proxy's control connection.
const faultVictim = 1

// readLoad runs prepared single-partition reads at CL=ONE from workers
// goroutines until stop is closed.
type readLoad struct {
	ok, failed atomic.Int64
	firstErr   atomic.Value
	wg         sync.WaitGroup
	stop       chan struct{}
}

func startReads(t *testing.T, s *gocql.Session, workers int) *readLoad {
	l := &readLoad{stop: make(chan struct{})}
	for w := 0; w < workers; w++ {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := w; ; i += workers {
				select {
				case <-l.stop:
					return
				default:
				}
				var v int
				err := s.Query("SELECT v FROM it_faults.kv WHERE k = ?", i%200).Scan(&v)
				if err != nil {
					l.failed.Add(1)
					l.firstErr.CompareAndSwap(nil, err)
					continue
				}
				l.ok.Add(1)
			}
		}()
	}
	return l
}

// finish stops the load and fails the test if any read failed.
func (l *readLoad) finish(t *testing.T, what string) {
	t.Helper()
	close(l.stop)
	l.wg.Wait()
	t.Logf("%s: %d reads succeeded, %d failed", what, l.ok.Load(), l.failed.Load())
	if n := l.failed.Load(); n > 0 {
		t.Errorf("%s: %d of %d reads failed; first: %v", what, n, n+l.ok.Load(), l.firstErr.Load())
	}
	if l.ok.Load() == 0 {
		t.Errorf("%s: no read succeeded", what)
	}
}

// faultSetup creates the table and starts a proxy that reaches the victim
// through a fault injector.
func faultSetup(t testing.TB, mod func(*config.Config)) (*testCluster, *testProxy, *faultinject.Fault, *gocql.Session) {
	c := cluster3.Get(t)
	direct := newSession(t, c.Addrs, nil)
	recreateKeyspace(t, direct, "it_faults", 3, "CREATE TABLE it_faults.kv (k int PRIMARY KEY, v int)")
	for k := 0; k < 200; k++ {
		mustExec(t, direct, "INSERT INTO it_faults.kv (k, v) VALUES (?, ?)", k, k)
	}
	direct.Close()
	inj := faultinject.New(t, "127.0.0.1:0", c.Addrs[faultVictim])
	p := startProxy(t, c.Addrs[:1], func(cc *config.Config) {
		cc.AddressMap = []string{c.Addrs[faultVictim] + "=" + inj.Addr}
		cc.HeartbeatInterval = 500 * time.Millisecond
		cc.ReconnectMaxDelay = time.Second
		if mod != nil {
			mod(cc)
		}
	})
	waitNodesUp(t, p, 3)
	s := proxySession(t, p, func(cc *gocql.ClusterConfig) {
		cc.Consistency = gocql.One
		cc.Timeout = 20 * time.Second
	})
	return c, p, inj, s
}

func waitNodesUp(t testing.TB, p *testProxy, n int) {
	t.Helper()
	waitFor(t, 60*time.Second, fmt.Sprintf("%d nodes up at the proxy", n), func() (bool, string) {
		up := metricSum(t, p.Reg, "cqlgate_backend_node_up")
		return up == float64(n), fmt.Sprintf("cqlgate_backend_node_up sums to %v", up)
	})
}

// checkQuiet waits until the proxy has nothing in flight: no backend
// request, no limiter permit, no queued request.
func checkQuiet(t testing.TB, p *testProxy) {
	t.Helper()
	waitFor(t, 30*time.Second, "the proxy to have nothing in flight", func() (bool, string) {
		back := metricSum(t, p.Reg, "cqlgate_backend_in_flight_requests")
		lim := metricSum(t, p.Reg, "cqlgate_limiter_in_flight")
		queued := metricSum(t, p.Reg, "cqlgate_limiter_queue_depth")
		return back == 0 && lim == 0 && queued == 0, fmt.Sprintf("backend in flight %v, limiter in flight %v, queued %v", back, lim, queued)
	})
}

// TestFaultSlowNodeKeepsServing: +250 ms on one node's path. Reads keep
// succeeding, and the node's latency shows in the per-node histogram.
func TestFaultSlowNodeKeepsServing(t *testing.T) {
	_, p, inj, s := faultSetup(t, nil)
	if err := inj.Latency(250*time.Millisecond, 0); err != nil {
		t.Fatal(err)
	}
	load := startReads(t, s, 16)
	time.Sleep(3 * time.Second)
	load.finish(t, "slow node")
	inj.Clear()
	checkQuiet(t, p)
	if n := metricSeries(t, p.Reg, "cqlgate_backend_request_duration_seconds")["node="+inj.Addr]; n == 0 {
		t.Errorf("no latency recorded for the slow node %s: %v", inj.Addr, metricSeries(t, p.Reg, "cqlgate_backend_request_duration_seconds"))
	}
}

// TestFaultConnectionResetRetriesReads: every connection to one node is
// reset. Reads in flight there are sent again to another replica, the node
// is marked down and avoided, and comes back once the fault is cleared.
func TestFaultConnectionResetRetriesReads(t *testing.T) {
	_, p, inj, s := faultSetup(t, nil)
	load := startReads(t, s, 16)
	time.Sleep(time.Second)
	if err := inj.Reset(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the reset node to be marked down", func() (bool, string) {
		up := metricSeries(t, p.Reg, "cqlgate_backend_node_up")["node="+inj.Addr]
		return up == 0, fmt.Sprintf("node_up %v", up)
	})
	time.Sleep(time.Second)
	inj.Clear()
	waitNodesUp(t, p, 3)
	time.Sleep(time.Second)
	load.finish(t, "connection reset")
	checkQuiet(t, p)
}

// TestFaultBlackholedNodeIsDetected: one node stops answering without
// closing anything. Heartbeats find out within two intervals, the
// connection is closed, reads in flight there are sent elsewhere, and a
// counter increment (not idempotent) is never applied twice.
func TestFaultBlackholedNodeIsDetected(t *testing.T) {
	c, p, inj, s := faultSetup(t, func(cc *config.Config) { cc.RequestTimeout = 10 * time.Second })
	direct := newSession(t, c.Addrs, nil)
	mustExec(t, direct, "CREATE TABLE it_faults.counters (k int PRIMARY KEY, n counter)")
	load := startReads(t, s, 16)

	// Increments from 4 goroutines, each counted when it succeeded, or as
	// uncertain when the proxy could not tell whether it ran.
	var applied, uncertain atomic.Int64
	stopIncr := make(chan struct{})
	var incr sync.WaitGroup
	for w := 0; w < 4; w++ {
		incr.Add(1)
		go func() {
			defer incr.Done()
			for {
				select {
				case <-stopIncr:
					return
				default:
				}
				if err := s.Query("UPDATE it_faults.counters SET n = n + 1 WHERE k = 1").Exec(); err != nil {
					uncertain.Add(1)
				} else {
					applied.Add(1)
				}
			}
		}()
	}
	time.Sleep(time.Second)
	if err := inj.Blackhole(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the black-holed node to be marked down", func() (bool, string) {
		up := metricSeries(t, p.Reg, "cqlgate_backend_node_up")["node="+inj.Addr]
		return up == 0, fmt.Sprintf("node_up %v", up)
	})
	time.Sleep(time.Second)
	close(stopIncr)
	incr.Wait()
	load.finish(t, "black-holed node")
	inj.Clear()
	waitNodesUp(t, p, 3)
	checkQuiet(t, p)

	var n int64
	if err := direct.Query("SELECT n FROM it_faults.counters WHERE k = 1").Consistency(gocql.All).Scan(&n); err != nil {
		t.Fatal(err)
	}
	t.Logf("counter %d: %d increments succeeded, %d uncertain", n, applied.Load(), uncertain.Load())
	if n < applied.Load() || n > applied.Load()+uncertain.Load() {
		t.Errorf("counter = %d; want between %d (succeeded) and %d (succeeded + uncertain): an increment was applied twice or lost", n, applied.Load(), applied.Load()+uncertain.Load())
	}
}

// TestNodeKilledUnderLoad: SIGKILL one node of three while reads run. No
// read fails, every request is answered, and nothing stays in flight.
func TestNodeKilledUnderLoad(t *testing.T) {
	const victim = 2
	c := cluster3.Get(t)
	direct := newSession(t, c.Addrs, nil)
	recreateKeyspace(t, direct, "it_faults", 3, "CREATE TABLE it_faults.kv (k int PRIMARY KEY, v int)")
	for k := 0; k < 200; k++ {
		mustExec(t, direct, "INSERT INTO it_faults.kv (k, v) VALUES (?, ?)", k, k)
	}
	direct.Close()
	p := startProxy(t, c.Addrs[:1], nil)
	waitNodesUp(t, p, 3)
	s := proxySession(t, p, func(cc *gocql.ClusterConfig) {
		cc.Consistency = gocql.One
		cc.Timeout = 20 * time.Second
	})
	load := startReads(t, s, 32)
	time.Sleep(time.Second)
	pid, err := c.PID(victim)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := c.StartNode(ctx, victim); err != nil {
			t.Errorf("restarting node %d: %v", victim, err)
		}
	})
	waitFor(t, 30*time.Second, "the killed node to be marked down", func() (bool, string) {
		up := metricSum(t, p.Reg, "cqlgate_backend_node_up")
		return up == 2, fmt.Sprintf("nodes up %v", up)
	})
	time.Sleep(2 * time.Second)
	load.finish(t, "node killed")
	checkQuiet(t, p)
}
