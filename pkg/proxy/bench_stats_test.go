package proxy_test

import (
	"slices"
	"testing"

	"github.com/cqlgate/cqlgate/internal/proxytest"
	"github.com/cqlgate/cqlgate/pkg/config"
	"github.com/cqlgate/cqlgate/pkg/frame"
)

// BenchmarkStatsCost measures what statement statistics add to the proxy's
// CPU per request, paired so that a machine whose load drifts (other
// processes, CPU frequency) weighs on both sides alike: one fake node, the
// client directly, a proxy with statistics and one without, all in this
// process, and rounds in which each of the three runs a short burst of
// pipelined requests in turn (the order rotating). Per round the proxy's
// cost is the burst's process CPU per request less the direct burst's;
// statistics' share is (with - without) / without. It reports the
// medians: cost-ns/op and nostats-cost-ns/op, the proxy's own CPU per
// request with and without, and stats-%, the share. BenchmarkForward
// measures the three separately, one after the other, which a busy
// machine turns into noise larger than the difference.
//
//	go test -run '^$' -bench BenchmarkStatsCost -benchtime 40x ./pkg/proxy/
//
// b.N is the number of rounds; each burst is 50,000 requests.
func BenchmarkStatsCost(b *testing.B) {
	const burst, conns, depth = 50_000, 2, 64
	n := benchNode(b)
	defer n.Close()
	with := proxytest.Start(b, []string{n.Addr()}, nil)
	defer with.Stop()
	without := proxytest.Start(b, []string{n.Addr()}, func(cfg *config.Config) {
		cfg.StatementStatsEntries = 0
	})
	defer without.Stop()
	arms := []*pipelinedConns{
		dialPipelined(b, n.Addr(), frame.V4, conns),
		dialPipelined(b, with.Addr, frame.V4, conns),
		dialPipelined(b, without.Addr, frame.V4, conns),
	}
	// Warm every path (the statement's entry, the pools, the runtime's
	// caches) before anything counts.
	for _, a := range arms {
		if err := a.run(burst/conns, depth); err != nil {
			b.Fatal(err)
		}
	}
	var costWith, costWithout, share []float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var perReq [3]float64
		for k := range arms {
			j := (k + i) % len(arms)
			start := cpuTime()
			if err := arms[j].run(burst/conns, depth); err != nil {
				b.Fatal(err)
			}
			perReq[j] = float64(cpuTime()-start) / burst
		}
		w, wo := perReq[1]-perReq[0], perReq[2]-perReq[0]
		costWith, costWithout = append(costWith, w), append(costWithout, wo)
		share = append(share, (w-wo)/wo*100)
	}
	b.ReportMetric(median(costWith), "cost-ns/op")
	b.ReportMetric(median(costWithout), "nostats-cost-ns/op")
	b.ReportMetric(median(share), "stats-%")
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
