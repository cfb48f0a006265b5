// Package driver applies a workload to a gocql session in a closed loop
// (a fixed number of workers) or an open loop (requests at a fixed rate,
// latency charged from each request's intended start), and measures
// windows of it: warm-up, measured window, progress lines, the timeline
// and the generator's own CPU.
//
// It owns the load models, pacing and the phases' timing. It must not
// know what a workload does (Workload does), classify or store outcomes
// (the recorder does), or format reports: callers turn a Measurement into
// figures.
package driver

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/gocql/gocql"

	"github.com/cqlgate/cqlgate/internal/loadgen/cputime"
	"github.com/cqlgate/cqlgate/internal/loadgen/errclass"
	"github.com/cqlgate/cqlgate/internal/loadgen/recorder"
	"github.com/cqlgate/cqlgate/internal/loadgen/stepstats"
)

// Driver applies one workload to one session, in one of two load models:
//
//   - closed loop (rate == 0): workers goroutines each send their next
//     request as soon as the previous one completes, so throughput is what
//     the endpoint sustains at that concurrency, and a slow answer delays
//     the requests behind it (latency is then measured from each send);
//   - open loop (rate > 0): requests are scheduled at rate per second,
//     whatever the answers do, with at most workers of them outstanding;
//     latency is measured from each request's intended start, so a stall
//     is charged to every request it delayed (no coordinated omission),
//     and the service time (from the actual send) is reported beside it.
type Driver struct {
	Session  *gocql.Session
	Workload Workload
	Workers  int     // closed loop: workers; open loop: most requests in flight
	Rate     float64 // > 0: open loop at this many requests per second
	Interval time.Duration
	// Progress receives one line per interval; nil for none.
	Progress io.Writer
	Label    string // prefix of progress lines
	// HDRLog, when set, receives each interval's latency histogram.
	HDRLog *hdrhistogram.HistogramLogWriter
	// Timeline collects one point per interval across Measure calls.
	Timeline []TimelinePoint
	Began    time.Time // first Measure call: origin of timeline times
	// Around, when set, is called right before the measured window opens
	// (start true) and right after it closes, e.g. to read the proxy's CPU.
	Around func(start bool)
}

// Measurement is the outcome of one measured window.
type Measurement struct {
	recorder.Recorded
	Elapsed time.Duration // wall time of the measured window
	CPU     time.Duration // this process's user+sys CPU during the window
	CPUUser time.Duration
	CPUSys  time.Duration
	// Unsent counts open-loop requests whose intended start was before the
	// end of the window but that were never sent: the generator's backlog.
	Unsent int64
}

// Requests counts completed requests, failed ones included.
func (m *Measurement) Requests() int64 { return m.Latency.TotalCount() + m.Errs.Total() }

// Measure applies load for warmup (unrecorded), then records a window that
// lasts window or, when ops > 0 (closed loop only), until ops requests have
// completed. With window and ops both 0 it is a pure warm-up. It returns
// when every worker has stopped; a request in flight at the end of the
// window is awaited, but not counted.
func (d *Driver) Measure(ctx context.Context, warmup, window time.Duration, ops int64) (Measurement, error) {
	open := d.Rate > 0
	if open {
		ops = 0
	}
	rec := recorder.New(d.Workers, open, ops)
	stop := make(chan struct{})
	if d.Began.IsZero() {
		d.Began = time.Now()
	}

	var (
		wg    sync.WaitGroup
		sched *schedule
		// claimed counts the measure phase's requests of a closed loop
		// with ops: no worker starts one beyond ops.
		claimed atomic.Int64
	)
	if open {
		sched = newSchedule(time.Now(), d.Rate)
	}
	if open {
		wg.Go(func() { d.dispatch(ctx, rec, sched, stop, &wg) })
	} else {
		for id := range d.Workers {
			wg.Go(func() { d.work(ctx, id, rec, ops, &claimed) })
		}
	}
	stopProgress := d.StartProgress(rec)

	var m Measurement
	err := Sleep(ctx, warmup)
	if err == nil && (window > 0 || ops > 0) {
		m, err = d.window(ctx, rec, window, ops > 0)
		if err == nil && open {
			m.Unsent = sched.unsent(time.Now())
		}
	}
	rec.SetPhase(recorder.Done)
	close(stop)
	wg.Wait()
	stopProgress()
	if err != nil {
		return Measurement{}, err
	}
	m.Recorded = rec.Snapshot()
	return m, nil
}

// window switches rec to the measure phase for w, or until rec's target is
// reached when byCount, and accounts wall and CPU time; the workers are
// already running.
func (d *Driver) window(ctx context.Context, rec *recorder.Recorder, w time.Duration, byCount bool) (Measurement, error) {
	if d.Around != nil {
		d.Around(true)
	}
	u0, s0, err := cputime.Self()
	if err != nil {
		return Measurement{}, err
	}
	rec.SetPhase(recorder.Measure)
	start := time.Now()
	if byCount {
		select {
		case <-rec.TargetReached():
		case <-ctx.Done():
			err = fmt.Errorf("interrupted: %w", ctx.Err())
		}
	} else {
		err = Sleep(ctx, w)
	}
	rec.SetPhase(recorder.Done)
	elapsed := time.Since(start)
	if d.Around != nil {
		d.Around(false)
	}
	if err != nil {
		return Measurement{}, err
	}
	u1, s1, err := cputime.Self()
	if err != nil {
		return Measurement{}, err
	}
	return Measurement{Elapsed: elapsed, CPU: u1 - u0 + s1 - s0, CPUUser: u1 - u0, CPUSys: s1 - s0}, nil
}

// work is one closed-loop worker's loop.
func (d *Driver) work(ctx context.Context, id int, rec *recorder.Recorder, ops int64, claimed *atomic.Int64) {
	w := d.Workload.NewWorker(id)
	for !rec.Done() && ctx.Err() == nil {
		// With ops, only the requests claimed in the measure phase count:
		// one that began in the warm-up and ends after the switch would
		// make the count one more than asked for.
		unclaimed := ops > 0
		if ops > 0 && rec.Phase() == recorder.Measure {
			if claimed.Add(1) > ops {
				return
			}
			unclaimed = false
		}
		start := time.Now()
		err := w.Do(ctx, d.Session)
		took := time.Since(start)
		rec.Record(id, recorder.Outcome{Latency: took, Service: took, Err: err, Unmeasured: unclaimed})
		if err != nil && failsFast(err) {
			// Without a pause a worker whose request fails without
			// leaving the process (no host, no connection) spins and
			// burns the CPU the rest of the generator needs.
			_ = Sleep(ctx, time.Millisecond)
		}
	}
}

// dispatch runs an open loop: it hands each slot of the schedule, when due,
// to a free worker state and sends that request on a goroutine of its own.
// At most d.Workers requests are outstanding: when none is free, the due
// slots wait, and their lateness is charged to their latency. One timer
// paces the whole loop, so idle senders cost neither timers nor
// goroutines. It returns at stop; sends still in flight are counted in wg.
func (d *Driver) dispatch(ctx context.Context, rec *recorder.Recorder, sched *schedule, stop <-chan struct{}, wg *sync.WaitGroup) {
	type sender struct {
		id int
		w  Worker
	}
	free := make(chan sender, d.Workers)
	for id := range d.Workers {
		free <- sender{id: id, w: d.Workload.NewWorker(id)}
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		for due := sched.due(time.Now()); sched.sent.Load() < due; {
			var snd sender
			select {
			case snd = <-free:
			case <-stop:
				return
			case <-ctx.Done():
				return
			}
			intended := sched.at(sched.sent.Add(1) - 1)
			wg.Go(func() {
				start := time.Now()
				err := snd.w.Do(ctx, d.Session)
				end := time.Now()
				rec.Record(snd.id, recorder.Outcome{Latency: end.Sub(intended), Service: end.Sub(start), Lag: start.Sub(intended), Err: err})
				free <- snd // never blocks: free holds every sender
			})
		}
		if wait := time.Until(sched.at(sched.sent.Load())); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-stop:
				return
			case <-ctx.Done():
				return
			}
		}
	}
}

// schedule holds the intended start times of an open loop: request i is
// due at start + i/rate. sent counts the requests handed to a sender.
type schedule struct {
	start  time.Time
	period float64 // nanoseconds between intended starts
	sent   atomic.Int64
}

func newSchedule(start time.Time, rate float64) *schedule {
	return &schedule{start: start, period: float64(time.Second) / rate}
}

// at is the intended start of request i.
func (s *schedule) at(i int64) time.Time {
	return s.start.Add(time.Duration(float64(i) * s.period))
}

// due is how many requests are due by now.
func (s *schedule) due(now time.Time) int64 {
	return int64(float64(now.Sub(s.start))/s.period) + 1
}

// unsent is how many requests were due by now but not yet sent.
func (s *schedule) unsent(now time.Time) int64 {
	return max(0, s.due(now)-s.sent.Load())
}

// failsFast reports whether gocql fails err without a round trip.
func failsFast(err error) bool {
	switch errclass.Classify(err) {
	case errclass.NoHosts, errclass.NoStreams, errclass.Connection:
		return true
	}
	return false
}

// TimelinePoint is one interval of a run: what the progress line shows.
// The JSON field names are part of loadgen's output contract.
type TimelinePoint struct {
	T          float64 `json:"t_s"` // end of the interval, seconds since the load started
	Phase      string  `json:"phase"`
	Throughput float64 `json:"ops_s"` // successful requests per second
	P50        int64   `json:"p50_us"`
	P99        int64   `json:"p99_us"`
	Max        int64   `json:"max_us"`
	Errors     int64   `json:"errors"`
	Late       int64   `json:"late"` // open loop: requests sent over 1 ms behind schedule
}

// StartProgress records one timeline point per interval (and prints it,
// and logs its histogram, when asked) until the returned stop function is
// called.
func (d *Driver) StartProgress(rec *recorder.Recorder) (stop func()) {
	every := d.Interval
	if every <= 0 {
		every = time.Second
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(every)
		defer tick.Stop()
		hist := stepstats.NewHistogram()
		last := time.Now()
		for {
			select {
			case <-done:
				return
			case now := <-tick.C:
				iv := rec.TakeInterval(hist)
				phase := "warmup"
				if rec.Phase() != recorder.Warmup {
					phase = "measure"
				}
				p := TimelinePoint{
					T:          now.Sub(d.Began).Seconds(),
					Phase:      phase,
					Throughput: float64(hist.TotalCount()) / now.Sub(last).Seconds(),
					P50:        hist.ValueAtQuantile(50),
					P99:        hist.ValueAtQuantile(99),
					Max:        hist.Max(),
					Errors:     iv.Errs,
					Late:       iv.Late,
				}
				d.Timeline = append(d.Timeline, p)
				if d.HDRLog != nil {
					hist.SetStartTimeMs(last.UnixMilli())
					hist.SetEndTimeMs(now.UnixMilli())
					hist.SetTag(phase)
					// A failed log write must not stop the run; the
					// file's error shows when it is closed.
					_ = d.HDRLog.OutputIntervalHistogram(hist)
				}
				if d.Progress != nil {
					fmt.Fprintln(d.Progress, progressLine(d.Label, p))
				}
				last = now
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

func progressLine(label string, p TimelinePoint) string {
	line := fmt.Sprintf("loadgen: %s %3.0fs %-7s ops/s=%-9.0f p99=%-9s errors=%d",
		label, p.T, p.Phase, p.Throughput, stepstats.Micros(p.P99), p.Errors)
	if p.Late > 0 {
		line += fmt.Sprintf(" late=%d", p.Late)
	}
	return line
}

// Sleep sleeps for d or until ctx is done, whichever is first; it returns
// an error wrapping ctx's when ctx ended it.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("interrupted: %w", ctx.Err())
	}
}
