package main

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocql/gocql"
)

// straddleWorkload's first request per worker is slow, so that it begins in
// the warm-up and ends in the measured window; later ones are quick.
type straddleWorkload struct{ first, rest time.Duration }

func (straddleWorkload) Name() string { return "straddle" }
func (w straddleWorkload) NewWorker(int) Worker {
	return &straddleWorker{w: w}
}

type straddleWorker struct {
	w     straddleWorkload
	calls atomic.Int64
}

func (s *straddleWorker) Do(ctx context.Context, _ *gocql.Session) error {
	if s.calls.Add(1) == 1 {
		return sleepCtx(ctx, s.w.first)
	}
	return sleepCtx(ctx, s.w.rest)
}

// With --ops the window holds exactly ops requests, all begun in it: a
// request begun in the warm-up that ends after the switch is not one of
// them (CI once saw 778 for 777).
func TestMeasureByOpsCountsOnlyClaimedRequests(t *testing.T) {
	const first = 150 * time.Millisecond
	d := &driver{workload: straddleWorkload{first: first, rest: time.Millisecond}, workers: 8, interval: time.Hour}
	m, err := d.measure(context.Background(), 30*time.Millisecond, 0, 101)
	if err != nil {
		t.Fatal(err)
	}
	n := m.recorded.latency.TotalCount()
	for _, c := range m.recorded.errs {
		n += c
	}
	if n != 101 {
		t.Errorf("measured %d requests; want exactly 101", n)
	}
	if max := time.Duration(m.recorded.latency.Max()) * time.Microsecond; max >= first {
		t.Errorf("slowest measured request took %v: a warm-up request was counted", max)
	}
}
