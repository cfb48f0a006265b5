//go:build !race

package main

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/cqlgate/cqlgate/internal/proxytest"
	"github.com/cqlgate/cqlgate/pkg/config"
)

// TestSeedExperimentShrunk is the seed experiment shrunk for CI (make seed
// runs 50,000 x 200): one gocql session at default settings, 50,000
// goroutines at once, each reading one key twice, through a proxy. Every
// request must succeed: the excess waits in the proxy's queue instead of
// failing.
//
// It is built without the race detector only (scripts/test.sh runs it on
// its own after the -race run): it measures the proxy's queue against the
// node's real throughput, which the race detector divides several times
// over, and a closed loop of 50,000 waits 50,000 / throughput seconds.
// For the same reason the proxy's queue may wait 10 s (its default is 5 s;
// gocql's timeout is 11 s), and the node is warmed up first: CI's node is
// fresh, and a cold JVM serves a fraction of its throughput. The flood
// starts 2 s after the session (--settle): on a busy machine gocql had
// opened only the first of its two connections when 50,000 goroutines
// started, and errors of the client's own ("no streams available", "no
// hosts available in the pool") failed the test before a request reached
// the proxy's queue.
func TestSeedExperimentShrunk(t *testing.T) {
	seedThroughProxy(t, nil, "--settle", "2s")
}

// TestSeedExperimentTwoAddresses floods as published, at once after the
// session starts (no --settle), through a proxy listening on two addresses
// with one port: gocql sees two nodes and connects to both as it starts,
// and its pools end with four connections, twice the stream ids of one
// node's. That is the setting for a client that floods one session: with
// one address, gocql's own start-up and its convoy on its prepared-statement
// cache lock (docs/loadgen.md) can overfill a connection before any request
// reaches the proxy.
func TestSeedExperimentTwoAddresses(t *testing.T) {
	port := proxytest.FreePortOn(t, "127.0.0.1", "127.0.0.2")
	seedThroughProxy(t, []string{"127.0.0.1:" + port, "127.0.0.2:" + port})
}

// seedThroughProxy runs 50,000 goroutines x 2 reads through a proxy
// listening on listen (nil: one address) and fails on any error.
func seedThroughProxy(t *testing.T, listen []string, flags ...string) {
	addr := cassandraAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ks := "loadgen_seed_" + strconv.Itoa(os.Getpid())
	t.Cleanup(func() { dropKeyspace(t, addr, ks) })
	if code, _, stderr := runLoadgen(t, ctx, "setup", "--hosts", addr, "--keyspace", ks, "--rows", "500"); code != exitOK {
		t.Fatalf("setup exit %d: %s", code, stderr)
	}
	p := proxytest.Start(t, []string{addr}, func(c *config.Config) {
		if listen != nil {
			c.Listen = listen
		}
		c.QueueMaxWait = 10 * time.Second
	})
	if code, _, stderr := runLoadgen(t, ctx, "run", "--hosts", p.Addr, "--keyspace", ks, "--rows", "500",
		"--workers", "64", "--warmup", "0s", "--duration", "5s", "--quiet"); code != exitOK {
		t.Fatalf("warm-up exit %d: %s", code, stderr)
	}

	args := append([]string{"workers", "--hosts", p.Addr, "--keyspace", ks, "--rows", "500",
		"--workers", "50000", "--queries", "2", "--json", "--quiet"}, flags...)
	code, stdout, stderr := runLoadgen(t, ctx, args...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep workersReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("workers --json output: %v\n%s", err, stdout)
	}
	t.Logf("50,000 x 2 through the proxy on %d address(es): %d ok, %d errors in %.1fs", len(p.Addrs()),
		rep.Target.Ops, rep.Target.ErrorsTotal, rep.WallS)
	if rep.Target.Ops != 100_000 || rep.Target.ErrorsTotal != 0 {
		t.Errorf("%d ok, %d errors %v (%v); want 100000 ok and no error", rep.Target.Ops, rep.Target.ErrorsTotal,
			rep.Target.Errors, rep.Target.ErrorSamples)
	}
}
