package recorder

import (
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/cqlgate/cqlgate/internal/loadgen/errclass"
	"github.com/cqlgate/cqlgate/internal/loadgen/stepstats"
)

func TestRecorderShardsAreBounded(t *testing.T) {
	for _, workers := range []int{1, 3, 100_000} {
		r := New(workers, false, 0)
		want := min(workers, shardsPerCPU*runtime.GOMAXPROCS(0), maxShards)
		if len(r.shards) != want {
			t.Errorf("New(%d): %d shards; want %d", workers, len(r.shards), want)
		}
	}
}

// Every worker's measured samples end up in the merged histogram, whatever
// shard they landed in, and samples outside the measure phase do not.
func TestRecorderMergesShardsAndHonoursPhases(t *testing.T) {
	const workers, perWorker = 37, 200
	r := New(workers, false, 0)

	// Warm-up samples: must not count.
	for id := range workers {
		r.Record(id, ok(50*time.Second))
		r.Record(id, fail(time.Millisecond, gocql.ErrTimeoutNoResponse))
	}

	r.SetPhase(Measure)
	var wg sync.WaitGroup
	for id := range workers {
		wg.Go(func() {
			for i := range perWorker {
				// Worker id records (id+1) ms; every 10th request fails.
				if i%10 == 0 {
					r.Record(id, fail(0, gocql.ErrNoStreams))
					continue
				}
				r.Record(id, ok(time.Duration(id+1)*time.Millisecond))
			}
		})
	}
	wg.Wait()
	r.SetPhase(Done)
	r.Record(0, ok(40*time.Second)) // late completion: dropped
	r.Record(0, fail(0, errors.New("late")))

	got := r.Snapshot()
	okPerWorker := perWorker - perWorker/10
	if n := got.Latency.TotalCount(); n != int64(workers*okPerWorker) {
		t.Errorf("merged count = %d; want %d", n, workers*okPerWorker)
	}
	if max := got.Latency.Max(); !got.Latency.ValuesAreEquivalent(max, int64(workers)*1000) {
		t.Errorf("merged max = %dµs; want ~%dµs (slowest worker, not warm-up or late samples)", max, workers*1000)
	}
	if p50 := got.Latency.ValueAtQuantile(50); !got.Latency.ValuesAreEquivalent(p50, 19*1000) {
		t.Errorf("merged p50 = %dµs; want ~19000µs (median of 1..37 ms)", p50)
	}
	want := errclass.Counts{}
	want[errclass.NoStreams] = int64(workers * perWorker / 10)
	if got.Errs != want {
		t.Errorf("errors = %v; want %v (no warm-up timeouts, no late errors)", got.Errs, want)
	}
	if got.Samples[errclass.NoStreams] == "" {
		t.Errorf("no sample message for no_streams")
	}
}

func TestRecorderClampsOutOfRangeLatencies(t *testing.T) {
	r := New(1, false, 0)
	r.SetPhase(Measure)
	r.Record(0, ok(0))
	r.Record(0, ok(10*time.Minute))
	got := r.Snapshot().Latency
	if got.TotalCount() != 2 {
		t.Fatalf("count = %d; want 2 (out-of-range values clamped, not dropped)", got.TotalCount())
	}
	if !got.ValuesAreEquivalent(got.Max(), stepstats.MaxMicros) {
		t.Errorf("max = %d; want %d", got.Max(), stepstats.MaxMicros)
	}
}

func TestTakeIntervalResets(t *testing.T) {
	r := New(4, false, 0)
	for id := range 4 {
		r.Record(id, ok(time.Millisecond))
	}
	r.Record(1, fail(0, gocql.ErrNoConnections))
	h := stepstats.NewHistogram()
	if iv := r.TakeInterval(h); iv.Errs != 1 || h.TotalCount() != 4 {
		t.Errorf("first interval: %d ops, %d errors; want 4, 1", h.TotalCount(), iv.Errs)
	}
	if iv := r.TakeInterval(h); iv.Errs != 0 || h.TotalCount() != 0 {
		t.Errorf("second interval: %d ops, %d errors; want 0, 0", h.TotalCount(), iv.Errs)
	}
}

// Pooling keeps 100k workers cheap: the histograms of a recorder for 100k
// workers stay within a few MiB.
func TestRecorderMemoryIsIndependentOfWorkers(t *testing.T) {
	r := New(100_000, false, 0)
	var bytes int
	for i := range r.shards {
		bytes += r.shards[i].total.ByteSize() + r.shards[i].interval.ByteSize()
	}
	if limit := 64 << 20; bytes > limit {
		t.Errorf("histograms take %d bytes; want <= %d", bytes, limit)
	}
}

// ok is the outcome of a successful closed-loop request that took d.
func ok(d time.Duration) Outcome { return Outcome{Latency: d, Service: d} }

// fail is the outcome of a request that failed with err after d.
func fail(d time.Duration, err error) Outcome { return Outcome{Latency: d, Service: d, Err: err} }
