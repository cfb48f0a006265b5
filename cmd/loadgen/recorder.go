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
// never outlive the range (gocql's timeout is far below a minute). One such
// histogram takes about 140 KiB.
const (
	histMinMicros = 1
	histMaxMicros = 60 * 1000 * 1000
	histSigFigs   = 3
)

func newLatencyHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(histMinMicros, histMaxMicros, histSigFigs)
}

// recordMicros records d, clamped into the histogram's range.
func recordMicros(h *hdrhistogram.Histogram, d time.Duration) {
	us := min(max(d.Microseconds(), histMinMicros), histMaxMicros)
	// RecordValue fails only outside the range, which was clamped away.
	_ = h.RecordValue(us)
}

// Phases of one measurement. Results are recorded by the phase in force
// when a request completes.
const (
	phaseWarmup  int32 = iota // feeds the progress line only
	phaseMeasure              // feeds the progress line and the result
	phaseDone                 // workers stop; late completions are dropped
)

// Shards bound lock contention: with a few shards per CPU, two workers
// rarely hold the same shard lock at once, yet 100k workers still cost only
// a few histograms instead of one per worker. maxShards caps the memory on
// large machines (64 shards x 3 histograms is about 27 MiB).
const (
	shardsPerCPU = 4
	maxShards    = 64
)

// lateThreshold is how far behind its intended start an open-loop request
// may be sent before it counts as late: the generator did not keep to its
// schedule, either because --max-in-flight requests were outstanding or
// because it lacked CPU.
const lateThreshold = time.Millisecond

// outcome is what one request gives the recorder.
type outcome struct {
	// latency is what the user of the endpoint waited: from the intended
	// start in the open loop (coordinated-omission corrected), from the
	// send in the closed loop.
	latency time.Duration
	// service is from the send to the answer.
	service time.Duration
	// lag is how late the request was sent (open loop only).
	lag time.Duration
	err error
	// unmeasured keeps a request out of the measure phase's figures even
	// when it completes in it (closed loop with --ops: it began earlier).
	unmeasured bool
}

// recorder collects latencies and errors from many workers. Worker i uses
// shard i % len(shards). Safe for concurrent use.
type recorder struct {
	phase    atomic.Int32
	openLoop bool
	shards   []recorderShard

	// measured counts requests completed in the measure phase; when it
	// reaches target, reached is closed (closed-loop --ops).
	measured atomic.Int64
	target   int64
	reached  chan struct{}
	once     sync.Once
}

type recorderShard struct {
	mu       sync.Mutex
	total    *hdrhistogram.Histogram                // successful requests' latency, measure phase
	service  *hdrhistogram.Histogram                // successful requests' service time, open loop only
	errLat   [numErrorKinds]*hdrhistogram.Histogram // failed requests' service time by kind, allocated on first use
	errs     ErrorCounts                            // failed requests, measure phase
	samples  [numErrorKinds]string                  // first message of each kind, any phase
	late     int64                                  // open loop: requests sent more than lateThreshold late
	maxLag   time.Duration
	interval *hdrhistogram.Histogram // successes since the last takeInterval
	ivErrs   int64                   // failures since the last takeInterval
	ivLate   int64

	// Keeps neighbouring shards' locks off one cache line.
	_ [64]byte
}

// newRecorder returns a recorder for workers workers; openLoop adds the
// service-time histograms. A positive target closes reached() once that
// many requests completed in the measure phase.
func newRecorder(workers int, openLoop bool, target int64) *recorder {
	n := min(workers, shardsPerCPU*runtime.GOMAXPROCS(0), maxShards)
	r := &recorder{
		openLoop: openLoop,
		shards:   make([]recorderShard, max(n, 1)),
		target:   target,
		reached:  make(chan struct{}),
	}
	for i := range r.shards {
		r.shards[i].total = newLatencyHistogram()
		r.shards[i].interval = newLatencyHistogram()
		if openLoop {
			r.shards[i].service = newLatencyHistogram()
		}
	}
	return r
}

func (r *recorder) setPhase(p int32) { r.phase.Store(p) }

func (r *recorder) done() bool { return r.phase.Load() == phaseDone }

// targetReached is closed when the measure phase has seen target requests.
func (r *recorder) targetReached() <-chan struct{} { return r.reached }

// record notes the outcome of one request of worker id. The latencies of
// failed requests go to a histogram of their kind, never into the
// successes' percentiles: a timeout's latency is the timeout setting, an
// OVERLOADED answer's is how fast the proxy sheds load, and mixing either
// into the percentiles would hide the error count.
func (r *recorder) record(id int, o outcome) {
	sh := &r.shards[id%len(r.shards)]
	sh.mu.Lock()
	// Read under the lock so that snapshot, which flips the phase and then
	// takes every lock, sees no measured request land after it.
	phase := r.phase.Load()
	if phase == phaseDone {
		sh.mu.Unlock()
		return
	}
	measuring := phase == phaseMeasure && !o.unmeasured
	if o.lag > lateThreshold {
		sh.ivLate++
		if measuring {
			sh.late++
			sh.maxLag = max(sh.maxLag, o.lag)
		}
	}
	if o.err != nil {
		k := classifyError(o.err)
		if sh.samples[k] == "" {
			sh.samples[k] = o.err.Error()
		}
		sh.ivErrs++
		if measuring {
			sh.errs[k]++
			if sh.errLat[k] == nil {
				sh.errLat[k] = newLatencyHistogram()
			}
			recordMicros(sh.errLat[k], o.service)
		}
	} else {
		recordMicros(sh.interval, o.latency)
		if measuring {
			recordMicros(sh.total, o.latency)
			if sh.service != nil {
				recordMicros(sh.service, o.service)
			}
		}
	}
	sh.mu.Unlock()
	if measuring && r.target > 0 && r.measured.Add(1) == r.target {
		r.once.Do(func() { close(r.reached) })
	}
}

// interval is what the recorder saw since the previous takeInterval.
type interval struct {
	errs, late int64
}

// takeInterval merges and resets the interval histograms and counts, for
// the progress line and the timeline.
func (r *recorder) takeInterval(into *hdrhistogram.Histogram) (iv interval) {
	into.Reset()
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.Lock()
		into.Merge(sh.interval)
		sh.interval.Reset()
		iv.errs += sh.ivErrs
		iv.late += sh.ivLate
		sh.ivErrs, sh.ivLate = 0, 0
		sh.mu.Unlock()
	}
	return iv
}

// recorded is what a recorder saw in its measure phase.
type recorded struct {
	latency *hdrhistogram.Histogram // successful requests, µs
	service *hdrhistogram.Histogram // open loop: successful requests' service time, µs; nil otherwise
	errLat  [numErrorKinds]*hdrhistogram.Histogram
	errs    ErrorCounts
	samples [numErrorKinds]string
	late    int64
	maxLag  time.Duration
}

// snapshot merges the shards. Call it after setPhase(phaseDone).
func (r *recorder) snapshot() recorded {
	out := recorded{latency: newLatencyHistogram()}
	if r.openLoop {
		out.service = newLatencyHistogram()
	}
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.Lock()
		out.latency.Merge(sh.total)
		if out.service != nil {
			out.service.Merge(sh.service)
		}
		for k, h := range sh.errLat {
			if h == nil {
				continue
			}
			if out.errLat[k] == nil {
				out.errLat[k] = newLatencyHistogram()
			}
			out.errLat[k].Merge(h)
		}
		out.errs.Add(&sh.errs)
		for k, s := range sh.samples {
			if out.samples[k] == "" {
				out.samples[k] = s
			}
		}
		out.late += sh.late
		out.maxLag = max(out.maxLag, sh.maxLag)
		sh.mu.Unlock()
	}
	return out
}
