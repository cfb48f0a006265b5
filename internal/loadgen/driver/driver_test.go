package driver

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
		return Sleep(ctx, s.w.first)
	}
	return Sleep(ctx, s.w.rest)
}

// With --ops the window holds exactly ops requests, all begun in it: a
// request begun in the warm-up that ends after the switch is not one of
// them (CI once saw 778 for 777).
func TestMeasureByOpsCountsOnlyClaimedRequests(t *testing.T) {
	const first = 150 * time.Millisecond
	d := &Driver{Workload: straddleWorkload{first: first, rest: time.Millisecond}, Workers: 8, Interval: time.Hour}
	m, err := d.Measure(context.Background(), 30*time.Millisecond, 0, 101)
	if err != nil {
		t.Fatal(err)
	}
	n := m.Latency.TotalCount()
	for _, c := range m.Errs {
		n += c
	}
	if n != 101 {
		t.Errorf("measured %d requests; want exactly 101", n)
	}
	if max := time.Duration(m.Latency.Max()) * time.Microsecond; max >= first {
		t.Errorf("slowest measured request took %v: a warm-up request was counted", max)
	}
}

func TestScheduleDueAndUnsent(t *testing.T) {
	start := time.Unix(1000, 0)
	s := newSchedule(start, 1000) // one request per ms
	if got := s.at(5); !got.Equal(start.Add(5 * time.Millisecond)) {
		t.Errorf("at(5) = %v; want start+5ms", got.Sub(start))
	}
	// Requests 0..10 are due at start+10ms: 11 of them.
	if got := s.due(start.Add(10 * time.Millisecond)); got != 11 {
		t.Errorf("due(+10ms) = %d; want 11", got)
	}
	s.sent.Store(4)
	if got := s.unsent(start.Add(10*time.Millisecond + 500*time.Microsecond)); got != 7 {
		t.Errorf("unsent = %d; want 7 (11 due, 4 sent)", got)
	}
	s.sent.Store(50)
	if got := s.unsent(start.Add(10 * time.Millisecond)); got != 0 {
		t.Errorf("unsent when ahead = %d; want 0", got)
	}
}
