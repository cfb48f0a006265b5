package integration

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/cqlgate/cqlgate/internal/capnode"
)

func TestProbeFleet(t *testing.T) {
	c := singleCluster.Get(t)
	node := c.Addrs[0]
	model := capnode.Model{Threads: 16, ServiceFixed: 5 * time.Millisecond, ServiceExp: 5 * time.Millisecond, MaxInFlight: 512}
	emu := capnode.Start(t, "127.0.31.2:0", node, model, 1)
	dir := t.TempDir()
	bin := buildCqlgate(t, dir)
	ps := startFleetProxies(t, bin, dir, "127.0.31.2", 1, append(proxyArgs(os.Getenv("PROBE_MODE"), node, emu.Addr), "--log-level", "debug"))
	defer stopFleetProxies(ps)
	g := newOverloadGen(t, ps[0].Addr, 1, "SELECT v FROM it_fleet.kv WHERE k = 42")
	defer g.close()
	go g.conns[0].pace(400, 6*time.Second, 0)
	for range 12 {
		time.Sleep(500 * time.Millisecond)
		mfs, _ := scrape(context.Background(), "http://"+ps[0].Admin+"/metrics")
		for _, mf := range mfs {
			switch mf.GetName() {
			case "cqlgate_limiter_limit", "cqlgate_limiter_limit_changes_total", "cqlgate_limiter_in_flight", "cqlgate_limiter_queue_depth":
				for _, m := range mf.GetMetric() {
					t.Logf("%s %v %v", mf.GetName(), m.GetGauge().GetValue(), m.GetCounter().GetValue())
				}
			}
		}
		s, o := emu.Counts()
		t.Logf("emu served %d overloaded %d in %d", s, o, emu.InNode())
	}
	out, _ := os.ReadFile(dir + "/cqlgate-0.log")
	t.Logf("%s", out[:min(len(out), 4000)])
}
