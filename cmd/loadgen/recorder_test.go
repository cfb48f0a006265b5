package main

import (
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/gocql/gocql"
)

func TestRecorderShardsAreBounded(t *testing.T) {
	for _, workers := range []int{1, 3, 100_000} {
		r := newRecorder(workers, false, 0)
		want := min(workers, shardsPerCPU*runtime.GOMAXPROCS(0), maxShards)
		if len(r.shards) != want {
			t.Errorf("newRecorder(%d): %d shards; want %d", workers, len(r.shards), want)
		}
	}
}

// Every worker's measured samples end up in the merged histogram, whatever
// shard they landed in, and samples outside the measure phase do not.
func TestRecorderMergesShardsAndHonoursPhases(t *testing.T) {
	const workers, perWorker = 37, 200
	r := newRecorder(workers, false, 0)

	// Warm-up samples: must not count.
	for id := range workers {
		r.record(id, ok(50*time.Second))
		r.record(id, fail(time.Millisecond, gocql.ErrTimeoutNoResponse))
	}

	r.setPhase(phaseMeasure)
	var wg sync.WaitGroup
	for id := range workers {
		wg.Go(func() {
			for i := range perWorker {
				// Worker id records (id+1) ms; every 10th request fails.
				if i%10 == 0 {
					r.record(id, fail(0, gocql.ErrNoStreams))
					continue
				}
				r.record(id, ok(time.Duration(id+1)*time.Millisecond))
			}
		})
	}
	wg.Wait()
	r.setPhase(phaseDone)
	r.record(0, ok(40*time.Second)) // late completion: dropped
	r.record(0, fail(0, errors.New("late")))

	got := r.snapshot()
	okPerWorker := perWorker - perWorker/10
	if n := got.latency.TotalCount(); n != int64(workers*okPerWorker) {
		t.Errorf("merged count = %d; want %d", n, workers*okPerWorker)
	}
	if max := got.latency.Max(); !got.latency.ValuesAreEquivalent(max, int64(workers)*1000) {
		t.Errorf("merged max = %dµs; want ~%dµs (slowest worker, not warm-up or late samples)", max, workers*1000)
	}
	if p50 := got.latency.ValueAtQuantile(50); !got.latency.ValuesAreEquivalent(p50, 19*1000) {
		t.Errorf("merged p50 = %dµs; want ~19000µs (median of 1..37 ms)", p50)
	}
	want := ErrorCounts{}
	want[ErrKindNoStreams] = int64(workers * perWorker / 10)
	if got.errs != want {
		t.Errorf("errors = %v; want %v (no warm-up timeouts, no late errors)", got.errs, want)
	}
	if got.samples[ErrKindNoStreams] == "" {
		t.Errorf("no sample message for no_streams")
	}
}

func TestRecorderClampsOutOfRangeLatencies(t *testing.T) {
	r := newRecorder(1, false, 0)
	r.setPhase(phaseMeasure)
	r.record(0, ok(0))
	r.record(0, ok(10*time.Minute))
	got := r.snapshot().latency
	if got.TotalCount() != 2 {
		t.Fatalf("count = %d; want 2 (out-of-range values clamped, not dropped)", got.TotalCount())
	}
	if !got.ValuesAreEquivalent(got.Max(), histMaxMicros) {
		t.Errorf("max = %d; want %d", got.Max(), histMaxMicros)
	}
}

func TestTakeIntervalResets(t *testing.T) {
	r := newRecorder(4, false, 0)
	for id := range 4 {
		r.record(id, ok(time.Millisecond))
	}
	r.record(1, fail(0, gocql.ErrNoConnections))
	h := newLatencyHistogram()
	if iv := r.takeInterval(h); iv.errs != 1 || h.TotalCount() != 4 {
		t.Errorf("first interval: %d ops, %d errors; want 4, 1", h.TotalCount(), iv.errs)
	}
	if iv := r.takeInterval(h); iv.errs != 0 || h.TotalCount() != 0 {
		t.Errorf("second interval: %d ops, %d errors; want 0, 0", h.TotalCount(), iv.errs)
	}
}

// Pooling keeps 100k workers cheap: the histograms of a recorder for 100k
// workers stay within a few MiB.
func TestRecorderMemoryIsIndependentOfWorkers(t *testing.T) {
	r := newRecorder(100_000, false, 0)
	var bytes int
	for i := range r.shards {
		bytes += r.shards[i].total.ByteSize() + r.shards[i].interval.ByteSize()
	}
	if limit := 64 << 20; bytes > limit {
		t.Errorf("histograms take %d bytes; want <= %d", bytes, limit)
	}
}

// ok is the outcome of a successful closed-loop request that took d.
func ok(d time.Duration) outcome { return outcome{latency: d, service: d} }

// fail is the outcome of a request that failed with err after d.
func fail(d time.Duration, err error) outcome { return outcome{latency: d, service: d, err: err} }
