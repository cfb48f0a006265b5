package main

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Latency histograms cover 1 µs to 60 s with 3 significant digits: every
// recorded latency is within 0.1% of the true value, and a request can
// never outlive the range (gocql's timeout is far below a minute).
const (
	histMinMicros = 1
	histMaxMicros = 60 * 1000 * 1000
	histSigFigs   = 3
)

func newLatencyHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(histMinMicros, histMaxMicros, histSigFigs)
}

// Phases of one measurement. Results are recorded by the phase in force
// when a request completes.
const (
	phaseWarmup  int32 = iota // feeds the progress line only
	phaseMeasure              // feeds the progress line and the result
	phaseDone                 // workers stop; late completions are dropped
)

// shardsPerCPU bounds lock contention: with a few shards per CPU, two
// workers rarely hold the same shard lock at once, yet 100k workers still
// cost only a few histograms (each is ~100 KiB) instead of one per worker.
const shardsPerCPU = 4

// recorder collects latencies and errors from many workers. Worker i uses
// shard i % len(shards). Safe for concurrent use.
type recorder struct {
	phase  atomic.Int32
	shards []recorderShard
}

type recorderShard struct {
	mu       sync.Mutex
	total    *hdrhistogram.Histogram // successful requests, measure phase
	errs     ErrorCounts             // failed requests, measure phase
	samples  [numErrorKinds]string   // first message of each kind, any phase
	interval *hdrhistogram.Histogram // successes since the last takeInterval
	ivErrs   int64                   // failures since the last takeInterval

	// Keeps neighbouring shards' locks off one cache line.
	_ [64]byte
}

func newRecorder(workers int) *recorder {
	n := min(workers, shardsPerCPU*runtime.GOMAXPROCS(0))
	r := &recorder{shards: make([]recorderShard, max(n, 1))}
	for i := range r.shards {
		r.shards[i].total = newLatencyHistogram()
		r.shards[i].interval = newLatencyHistogram()
	}
	return r
}

func (r *recorder) setPhase(p int32) { r.phase.Store(p) }

func (r *recorder) done() bool { return r.phase.Load() == phaseDone }

// record notes the outcome of one request of worker id. Latencies of failed
// requests are not recorded: a timeout's latency is the timeout setting,
// and mixing it into the percentiles would hide the error count.
func (r *recorder) record(id int, latency time.Duration, err error) {
	sh := &r.shards[id%len(r.shards)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	// Read under the lock so that snapshot, which flips the phase and then
	// takes every lock, sees no measured request land after it.
	phase := r.phase.Load()
	if phase == phaseDone {
		return
	}
	if err != nil {
		k := classifyError(err)
		if sh.samples[k] == "" {
			sh.samples[k] = err.Error()
		}
		sh.ivErrs++
		if phase == phaseMeasure {
			sh.errs[k]++
		}
		return
	}
	us := min(max(latency.Microseconds(), histMinMicros), histMaxMicros)
	// RecordValue fails only outside the range, which was clamped away.
	_ = sh.interval.RecordValue(us)
	if phase == phaseMeasure {
		_ = sh.total.RecordValue(us)
	}
}

// takeInterval merges and resets the interval histograms and error counts,
// for the progress line.
func (r *recorder) takeInterval(into *hdrhistogram.Histogram) (errs int64) {
	into.Reset()
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.Lock()
		into.Merge(sh.interval)
		sh.interval.Reset()
		errs += sh.ivErrs
		sh.ivErrs = 0
		sh.mu.Unlock()
	}
	return errs
}

// recorded is what a recorder saw in its measure phase.
type recorded struct {
	latency *hdrhistogram.Histogram // successful requests, µs
	errs    ErrorCounts
	samples [numErrorKinds]string
}

// snapshot merges the shards. Call it after setPhase(phaseDone).
func (r *recorder) snapshot() recorded {
	out := recorded{latency: newLatencyHistogram()}
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.Lock()
		out.latency.Merge(sh.total)
		out.errs.Add(&sh.errs)
		for k, s := range sh.samples {
			if out.samples[k] == "" {
				out.samples[k] = s
			}
		}
		sh.mu.Unlock()
	}
	return out
}
