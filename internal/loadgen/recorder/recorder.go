// Package recorder collects the outcomes of many concurrent requests into
// latency histograms and error counts, by phase (warm-up, measure, done),
// and hands out per-interval figures for progress lines and the merged
// figures of the measured window.
//
// It owns the sharding that keeps recording cheap with 100k workers, the
// phase rules (a request counts in the phase in force when it completes)
// and what counts as sent late. It must not send requests, pace them,
// keep time or print: the driver does that, and stepstats and the
// reports turn its figures into numbers.
package recorder

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/cqlgate/cqlgate/internal/loadgen/errclass"
	"github.com/cqlgate/cqlgate/internal/loadgen/stepstats"
)

// Phase is a phase of one measurement. Results are recorded by the phase
// in force when a request completes.
type Phase int32

const (
	Warmup  Phase = iota // feeds the intervals (progress line) only
	Measure              // feeds the intervals and the result
	Done                 // workers stop; late completions are dropped
)

// Shards bound lock contention: with a few shards per CPU, two workers
// rarely hold the same shard lock at once, yet 100k workers still cost only
// a few histograms instead of one per worker. maxShards caps the memory on
// large machines (64 shards x 3 histograms is about 27 MiB).
const (
	shardsPerCPU = 4
	maxShards    = 64
)

// LateThreshold is how far behind its intended start an open-loop request
// may be sent before it counts as late: the generator did not keep to its
// schedule, either because --max-in-flight requests were outstanding or
// because it lacked CPU.
const LateThreshold = time.Millisecond

// Outcome is what one request gives the recorder.
type Outcome struct {
	// Latency is what the user of the endpoint waited: from the intended
	// start in the open loop (coordinated-omission corrected), from the
	// send in the closed loop.
	Latency time.Duration
	// Service is from the send to the answer.
	Service time.Duration
	// Lag is how late the request was sent (open loop only).
	Lag time.Duration
	Err error
	// Unmeasured keeps a request out of the measure phase's figures even
	// when it completes in it (closed loop with --ops: it began earlier).
	Unmeasured bool
}

// Recorder collects latencies and errors from many workers. Worker i uses
// shard i % len(shards). Safe for concurrent use.
type Recorder struct {
	phase    atomic.Int32
	openLoop bool
	shards   []shard

	// measured counts requests completed in the measure phase; when it
	// reaches target, reached is closed (closed-loop --ops).
	measured atomic.Int64
	target   int64
	reached  chan struct{}
	once     sync.Once
}

type shard struct {
	mu       sync.Mutex
	total    *hdrhistogram.Histogram                    // successful requests' latency, measure phase
	service  *hdrhistogram.Histogram                    // successful requests' service time, open loop only
	errLat   [errclass.NumKinds]*hdrhistogram.Histogram // failed requests' service time by kind, allocated on first use
	errs     errclass.Counts                            // failed requests, measure phase
	samples  [errclass.NumKinds]string                  // first message of each kind, any phase
	late     int64                                      // open loop: requests sent more than LateThreshold late
	maxLag   time.Duration
	interval *hdrhistogram.Histogram // successes since the last TakeInterval
	ivErrs   int64                   // failures since the last TakeInterval
	ivLate   int64

	// Keeps neighbouring shards' locks off one cache line.
	_ [64]byte
}

// New returns a Recorder for workers workers; openLoop adds the
// service-time histograms. A positive target closes TargetReached() once that
// many requests completed in the measure phase.
func New(workers int, openLoop bool, target int64) *Recorder {
	n := min(workers, shardsPerCPU*runtime.GOMAXPROCS(0), maxShards)
	r := &Recorder{
		openLoop: openLoop,
		shards:   make([]shard, max(n, 1)),
		target:   target,
		reached:  make(chan struct{}),
	}
	for i := range r.shards {
		r.shards[i].total = stepstats.NewHistogram()
		r.shards[i].interval = stepstats.NewHistogram()
		if openLoop {
			r.shards[i].service = stepstats.NewHistogram()
		}
	}
	return r
}

// SetPhase switches the recorder to p; requests completing from now on
// are recorded under p.
func (r *Recorder) SetPhase(p Phase) { r.phase.Store(int32(p)) }

// Done reports whether the measurement is over: workers stop.
func (r *Recorder) Done() bool { return Phase(r.phase.Load()) == Done }

// Phase returns the phase in force.
func (r *Recorder) Phase() Phase { return Phase(r.phase.Load()) }

// TargetReached is closed when the measure phase has seen target requests.
func (r *Recorder) TargetReached() <-chan struct{} { return r.reached }

// Record notes the outcome of one request of worker id. The latencies of
// failed requests go to a histogram of their kind, never into the
// successes' percentiles: a timeout's latency is the timeout setting, an
// OVERLOADED answer's is how fast the proxy sheds load, and mixing either
// into the percentiles would hide the error count.
func (r *Recorder) Record(id int, o Outcome) {
	sh := &r.shards[id%len(r.shards)]
	sh.mu.Lock()
	// Read under the lock so that Snapshot, which flips the phase and then
	// takes every lock, sees no measured request land after it.
	phase := Phase(r.phase.Load())
	if phase == Done {
		sh.mu.Unlock()
		return
	}
	measuring := phase == Measure && !o.Unmeasured
	if o.Lag > LateThreshold {
		sh.ivLate++
		if measuring {
			sh.late++
			sh.maxLag = max(sh.maxLag, o.Lag)
		}
	}
	if o.Err != nil {
		k := errclass.Classify(o.Err)
		if sh.samples[k] == "" {
			sh.samples[k] = o.Err.Error()
		}
		sh.ivErrs++
		if measuring {
			sh.errs[k]++
			if sh.errLat[k] == nil {
				sh.errLat[k] = stepstats.NewHistogram()
			}
			stepstats.Record(sh.errLat[k], o.Service)
		}
	} else {
		stepstats.Record(sh.interval, o.Latency)
		if measuring {
			stepstats.Record(sh.total, o.Latency)
			if sh.service != nil {
				stepstats.Record(sh.service, o.Service)
			}
		}
	}
	sh.mu.Unlock()
	if measuring && r.target > 0 && r.measured.Add(1) == r.target {
		r.once.Do(func() { close(r.reached) })
	}
}

// Interval is what the recorder saw since the previous TakeInterval:
// failed requests, and open-loop requests sent late, in any phase.
type Interval struct {
	Errs, Late int64
}

// TakeInterval merges and resets the interval histograms and counts, for
// the progress line and the timeline.
func (r *Recorder) TakeInterval(into *hdrhistogram.Histogram) (iv Interval) {
	into.Reset()
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.Lock()
		into.Merge(sh.interval)
		sh.interval.Reset()
		iv.Errs += sh.ivErrs
		iv.Late += sh.ivLate
		sh.ivErrs, sh.ivLate = 0, 0
		sh.mu.Unlock()
	}
	return iv
}

// Recorded is what a recorder saw in its measure phase.
type Recorded struct {
	Latency *hdrhistogram.Histogram // successful requests, µs
	Service *hdrhistogram.Histogram // open loop: successful requests' service time, µs; nil otherwise
	// ErrLat is the service time of failed requests by kind, µs; nil for
	// the kinds that did not occur.
	ErrLat  [errclass.NumKinds]*hdrhistogram.Histogram
	Errs    errclass.Counts
	Samples [errclass.NumKinds]string // the first message of each kind, any phase
	Late    int64                     // open loop: requests sent more than LateThreshold late
	MaxLag  time.Duration
}

// Snapshot merges the shards. Call it after SetPhase(Done).
func (r *Recorder) Snapshot() Recorded {
	out := Recorded{Latency: stepstats.NewHistogram()}
	if r.openLoop {
		out.Service = stepstats.NewHistogram()
	}
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.Lock()
		out.Latency.Merge(sh.total)
		if out.Service != nil {
			out.Service.Merge(sh.service)
		}
		for k, h := range sh.errLat {
			if h == nil {
				continue
			}
			if out.ErrLat[k] == nil {
				out.ErrLat[k] = stepstats.NewHistogram()
			}
			out.ErrLat[k].Merge(h)
		}
		out.Errs.Add(&sh.errs)
		for k, s := range sh.samples {
			if out.Samples[k] == "" {
				out.Samples[k] = s
			}
		}
		out.Late += sh.late
		out.MaxLag = max(out.MaxLag, sh.maxLag)
		sh.mu.Unlock()
	}
	return out
}
