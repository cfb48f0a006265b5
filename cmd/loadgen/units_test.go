package main

import (
	"math/rand/v2"
	"strings"
	"testing"
)

func TestKeyDistributions(t *testing.T) {
	const rows = 1000
	seq, err := newKeySource(keysSequential, rows, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Two workers share the sequence: together they take 0, 1, 2, ...
	a, b := seq.forWorker(nil), seq.forWorker(nil)
	for i := range int64(2*rows + 3) {
		g := a
		if i%2 == 1 {
			g = b
		}
		if k := g.Next(); k != i%rows {
			t.Fatalf("sequential key %d = %d; want %d", i, k, i%rows)
		}
	}

	zipf, err := newKeySource(keysZipf, rows, 1.5)
	if err != nil {
		t.Fatal(err)
	}
	uni, err := newKeySource(keysUniform, rows, 0)
	if err != nil {
		t.Fatal(err)
	}
	count := func(src keySource) (hot int, inRange bool) {
		g := src.forWorker(rand.New(rand.NewPCG(1, 2)))
		inRange = true
		for range 10000 {
			k := g.Next()
			if k < 0 || k >= rows {
				inRange = false
			}
			if k < 10 {
				hot++
			}
		}
		return hot, inRange
	}
	zhot, zok := count(zipf)
	uhot, uok := count(uni)
	if !zok || !uok {
		t.Fatalf("keys out of [0, %d)", rows)
	}
	// The 10 hottest of 1000 keys: ~1% of uniform draws, most zipf draws.
	if uhot > 300 || zhot < 5000 {
		t.Errorf("keys 0..9 drawn %d times (uniform), %d (zipf s=1.5) of 10000; want ~100 and most", uhot, zhot)
	}
	if _, err := newKeySource(keysZipf, rows, 1); err == nil {
		t.Errorf("zipf s=1 accepted; rand.NewZipf needs s > 1")
	}
}

func TestParseVmRSS(t *testing.T) {
	status := "Name:\tcqlgate\nVmPeak:\t 2000 kB\nVmRSS:\t   65536 kB\nThreads:\t9\n"
	got, err := parseVmRSS([]byte(status))
	if err != nil || got != 64<<20 {
		t.Errorf("parseVmRSS = %d, %v; want %d", got, err, 64<<20)
	}
	if _, err := parseVmRSS([]byte("Name:\tx\n")); err == nil {
		t.Errorf("no VmRSS line: no error")
	}
}

func TestProxyFiguresAdd(t *testing.T) {
	var f proxyFigures
	f.add(proxyFigures{RSSBefore: 10, RSSPeak: 50, RSSAfter: 20,
		Counters: map[string]float64{"cqlgate_limiter_admitted_total": 100},
		Gauges:   map[string]gaugeFigures{"cqlgate_limiter_queue_depth": {Peak: 7, After: 0}}})
	f.add(proxyFigures{RSSBefore: 20, RSSPeak: 40, RSSAfter: 30,
		Counters: map[string]float64{"cqlgate_limiter_admitted_total": 50, `cqlgate_limiter_rejected_total{reason="queue_full"}`: 3},
		Gauges:   map[string]gaugeFigures{"cqlgate_limiter_queue_depth": {Peak: 9, After: 1}}})
	if f.RSSBefore != 10 || f.RSSPeak != 50 || f.RSSAfter != 30 {
		t.Errorf("rss before/peak/after = %d/%d/%d; want 10/50/30", f.RSSBefore, f.RSSPeak, f.RSSAfter)
	}
	if f.Counters["cqlgate_limiter_admitted_total"] != 150 || f.Counters[`cqlgate_limiter_rejected_total{reason="queue_full"}`] != 3 {
		t.Errorf("counters = %v", f.Counters)
	}
	if q := f.queueDepthPeak(); q != 9 {
		t.Errorf("queue depth peak = %v; want 9", q)
	}
	var b strings.Builder
	writeProxyFigures(&b, &f)
	for _, want := range []string{"cqlgate_limiter_admitted_total", "+150", "peak 9, after 1"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("proxy figures lack %q:\n%s", want, b.String())
		}
	}
}
