package integration

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gocql2 "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/apache/cassandra-gocql-driver/v2/lz4"
	"github.com/gocql/gocql"

	"github.com/cqlgate/cqlgate/pkg/config"
)

// burst runs n concurrent SELECTs of one row through s and returns the
// errors by message.
func burst(t *testing.T, s *gocql.Session, n int) (ok int, errs map[string]int, codes map[int]int) {
	return burstOf(t, n, func() (int, error) {
		var v int
		err := s.Query("SELECT v FROM it_lim.kv WHERE k = ?", 1).Scan(&v)
		return v, err
	}, requestErrorCode)
}

// burstOf runs read n times concurrently; a read succeeds when it returns
// 1. Errors are counted by message and by the code errCode finds.
func burstOf(t *testing.T, n int, read func() (int, error), errCode func(error) (int, bool)) (ok int, errs map[string]int, codes map[int]int) {
	t.Helper()
	var mu sync.Mutex
	errs, codes = map[string]int{}, map[int]int{}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			v, err := read()
			mu.Lock()
			defer mu.Unlock()
			if err == nil && v == 1 {
				ok++
				return
			}
			code, _ := errCode(err)
			codes[code]++
			errs[fmt.Sprintf("%v (v=%d)", err, v)]++
		}()
	}
	close(start)
	wg.Wait()
	return ok, errs, codes
}

// limitedProxy starts a proxy that admits one request at a time to the
// single node (mod adjusts the rest) and a session through it, with
// it_lim.kv holding the row (1, 1) that burst reads.
func limitedProxy(t *testing.T, mod func(*config.Config)) (*testProxy, *gocql.Session) {
	t.Helper()
	c := singleCluster.Get(t)
	p := startProxy(t, c.Addrs, func(cfg *config.Config) {
		cfg.LimitMode, cfg.NodeLimit = "fixed", 1
		mod(cfg)
	})
	s := proxySession(t, p, nil)
	recreateKeyspace(t, s, "it_lim", 1, "CREATE TABLE it_lim.kv (k int PRIMARY KEY, v int)")
	mustExec(t, s, "INSERT INTO it_lim.kv (k, v) VALUES (?, ?)", 1, 1)
	return p, s
}

// TestLimiterQueuesExcess: with one request allowed in flight per node, a
// burst of 500 concurrent requests waits in the proxy's queue and every one
// succeeds: the client sees latency, not errors.
func TestLimiterQueuesExcess(t *testing.T) {
	p, s := limitedProxy(t, func(cfg *config.Config) { cfg.QueueMaxWait = 30e9 })

	ok, errs, _ := burst(t, s, 500)
	if ok != 500 {
		t.Errorf("%d of 500 succeeded; errors: %v", ok, errs)
	}
	if waited := metricSum(t, p.Reg, "cqlgate_limiter_queue_wait_seconds"); waited == 0 {
		t.Errorf("cqlgate_limiter_queue_wait_seconds is empty: nothing was queued")
	}
}

// TestLimiterRejectsWithOverloaded: with no queue, requests beyond the
// limit are answered at once with OVERLOADED (0x1001) naming the limit, on
// their own stream; nothing else fails and the connection stays usable.
func TestLimiterRejectsWithOverloaded(t *testing.T) {
	p, s := limitedProxy(t, func(cfg *config.Config) { cfg.QueueLength = 0 })

	ok, errs, codes := burst(t, s, 300)
	if codes[0x1001] == 0 {
		t.Fatalf("no OVERLOADED answer in a burst of 300 with a limit of 1 and no queue (ok=%d, errors %v)", ok, errs)
	}
	if ok+codes[0x1001] != 300 {
		t.Errorf("ok %d + overloaded %d != 300; errors: %v", ok, codes[0x1001], errs)
	}
	for msg := range errs {
		if !strings.Contains(msg, "queue") {
			t.Errorf("rejection message %q does not name the limit", msg)
		}
	}
	if got := metricSum(t, p.Reg, "cqlgate_overloaded_rejections_total"); got != float64(codes[0x1001]) {
		t.Errorf("cqlgate_overloaded_rejections_total = %v; want %d", got, codes[0x1001])
	}
	var v int
	if err := s.Query("SELECT v FROM it_lim.kv WHERE k = ?", 1).Scan(&v); err != nil || v != 1 {
		t.Errorf("after the burst: v=%d err=%v; want 1 <nil>", v, err)
	}
}

// The same rejections under protocol v5 with LZ4, where each OVERLOADED
// answer travels in a compressed segment, with the driver that speaks v5.
func TestLimiterRejectsWithOverloadedV5LZ4(t *testing.T) {
	p, _ := limitedProxy(t, func(cfg *config.Config) { cfg.QueueLength = 0 })
	s := newSession2(t, p.Addr, func(cc *gocql2.ClusterConfig) { cc.Compressor = lz4.LZ4Compressor{} })

	read := func() (int, error) {
		var v int
		err := s.Query("SELECT v FROM it_lim.kv WHERE k = ?", 1).Scan(&v)
		return v, err
	}
	errCode := func(err error) (int, bool) {
		var re gocql2.RequestError
		if errors.As(err, &re) {
			return re.Code(), true
		}
		return 0, false
	}
	ok, errs, codes := burstOf(t, 300, read, errCode)
	if codes[0x1001] == 0 || ok+codes[0x1001] != 300 {
		t.Fatalf("ok %d, overloaded %d of 300 (want some of each and nothing else); errors: %v", ok, codes[0x1001], errs)
	}
	for msg := range errs {
		if !strings.Contains(msg, "--queue-length") {
			t.Errorf("rejection message %q does not name the limit", msg)
		}
	}
	if v, err := read(); err != nil || v != 1 {
		t.Errorf("after the burst: v=%d err=%v; want 1 <nil>", v, err)
	}
}

// TestFleetModeReadsTheNodesCount: in fleet mode the proxy reads the
// node's own count of completed requests (system_views.thread_pools) and
// the limiter turns it into the node's rate, which covers at least the
// reads sent through the proxy meanwhile; the metrics show the node's
// threads, the requests they serve and its queue from the same reading.
func TestFleetModeReadsTheNodesCount(t *testing.T) {
	p, s := limitedProxy(t, func(cfg *config.Config) {
		cfg.LimitMode = "fleet"
		cfg.LimitNodePoll = 100e6
	})
	deadline := time.Now().Add(10 * time.Second)
	var rate float64
	for time.Now().Before(deadline) {
		var v int
		for range 50 {
			if err := s.Query("SELECT v FROM it_lim.kv WHERE k = ?", 1).Scan(&v); err != nil {
				t.Fatal(err)
			}
		}
		if rate = metricSum(t, p.Reg, "cqlgate_limiter_node_rate"); rate > 0 {
			break
		}
	}
	if rate <= 0 {
		t.Fatalf("cqlgate_limiter_node_rate = %v after 10s of reads; want the node's rate", rate)
	}
	// The same reading gives the node's threads and queue. The reading is
	// itself a request the node serves, so at least one is active; the
	// local node keeps Cassandra's 128 threads, and a few reads in turn
	// queue nothing.
	threads := metricSum(t, p.Reg, "cqlgate_backend_node_request_threads")
	active := metricSum(t, p.Reg, "cqlgate_backend_node_active_requests")
	queued := metricSeries(t, p.Reg, "cqlgate_backend_node_queued_requests")
	stages := metricSeries(t, p.Reg, "cqlgate_backend_node_stage_queued_requests")
	if threads != 128 || active < 1 || active > threads || len(queued) != 1 || len(stages) != 1 {
		t.Errorf("node threads %v, active %v, queued %v, queued at the stages %v; want 128, 1..128, one series each", threads, active, queued, stages)
	}
}

// TestFleetModeCountsTheProxies: every connection of a proxy names its
// process in STARTUP (CQLGATE_INSTANCE), and Cassandra lists it among the
// connection's client_options in system_views.clients; in fleet mode a
// proxy reads that list and counts the proxies connected to the node. A
// second proxy, started while the first is connected, counts both (and
// more, if another test's proxy is still connected), and the first is
// still one of them. Both run on one host: the count is by instance, not
// by address.
func TestFleetModeCountsTheProxies(t *testing.T) {
	fleet := func(cfg *config.Config) {
		cfg.LimitMode = "fleet"
		cfg.LimitNodePoll = 100e6
	}
	first, s1 := limitedProxy(t, fleet)
	second, s2 := limitedProxy(t, fleet)
	deadline := time.Now().Add(10 * time.Second)
	var proxies float64
	for time.Now().Before(deadline) {
		var v int
		for _, s := range []*gocql.Session{s1, s2} {
			if err := s.Query("SELECT v FROM it_lim.kv WHERE k = ?", 1).Scan(&v); err != nil {
				t.Fatal(err)
			}
		}
		if proxies = metricSum(t, second.Reg, "cqlgate_limiter_node_proxies"); proxies >= 2 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if proxies < 2 {
		t.Fatalf("the second proxy counts %v proxies on the node; want at least 2", proxies)
	}
	if n := metricSum(t, first.Reg, "cqlgate_limiter_node_proxies"); n < 1 {
		t.Errorf("the first proxy counts %v proxies on the node; want at least itself", n)
	}
	// What the node itself lists: each proxy's connections under one
	// instance name, which is not the other's.
	var instances []string
	iter := s1.Query("SELECT client_options FROM system_views.clients").Iter()
	var opts map[string]string
	for iter.Scan(&opts) {
		if opts["DRIVER_NAME"] == "cqlgate" && opts["CQLGATE_INSTANCE"] != "" && !slices.Contains(instances, opts["CQLGATE_INSTANCE"]) {
			instances = append(instances, opts["CQLGATE_INSTANCE"])
		}
	}
	if err := iter.Close(); err != nil {
		t.Fatal(err)
	}
	if len(instances) < 2 {
		t.Errorf("system_views.clients lists proxy instances %v; want at least the two proxies'", instances)
	}
}
