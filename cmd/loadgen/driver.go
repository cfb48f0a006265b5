package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/gocql/gocql"
)

// driver applies one workload to one session, in one of two load models:
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
type driver struct {
	session  *gocql.Session
	workload Workload
	workers  int     // closed loop: workers; open loop: most requests in flight
	rate     float64 // > 0: open loop at this many requests per second
	interval time.Duration
	// progress receives one line per interval; nil for none.
	progress io.Writer
	label    string // prefix of progress lines
	// hdrLog, when set, receives each interval's latency histogram.
	hdrLog *hdrhistogram.HistogramLogWriter
	// timeline collects one point per interval across measure calls.
	timeline []timelinePoint
	began    time.Time // first measure call: origin of timeline times
	// around, when set, is called right before the measured window opens
	// (start true) and right after it closes, e.g. to read the proxy's CPU.
	around func(start bool)
}

// measurement is the outcome of one measured window.
type measurement struct {
	recorded
	elapsed time.Duration // wall time of the measured window
	cpu     time.Duration // this process's user+sys CPU during the window
	cpuUser time.Duration
	cpuSys  time.Duration
	// unsent counts open-loop requests whose intended start was before the
	// end of the window but that were never sent: the generator's backlog.
	unsent int64
}

// requests counts completed requests, failed ones included.
func (m *measurement) requests() int64 { return m.latency.TotalCount() + m.errs.Total() }

// measure applies load for warmup (unrecorded), then records a window that
// lasts window or, when ops > 0 (closed loop only), until ops requests have
// completed. With window and ops both 0 it is a pure warm-up. It returns
// when every worker has stopped; a request in flight at the end of the
// window is awaited, but not counted.
func (d *driver) measure(ctx context.Context, warmup, window time.Duration, ops int64) (measurement, error) {
	open := d.rate > 0
	if open {
		ops = 0
	}
	rec := newRecorder(d.workers, open, ops)
	stop := make(chan struct{})
	if d.began.IsZero() {
		d.began = time.Now()
	}

	var (
		wg    sync.WaitGroup
		sched *schedule
		// claimed counts the measure phase's requests of a closed loop
		// with ops: no worker starts one beyond ops.
		claimed atomic.Int64
	)
	if open {
		sched = newSchedule(time.Now(), d.rate)
	}
	if open {
		wg.Go(func() { d.dispatch(ctx, rec, sched, stop, &wg) })
	} else {
		for id := range d.workers {
			wg.Go(func() { d.work(ctx, id, rec, ops, &claimed) })
		}
	}
	stopProgress := d.startProgress(rec)

	var m measurement
	err := sleepCtx(ctx, warmup)
	if err == nil && (window > 0 || ops > 0) {
		m, err = d.window(ctx, rec, window, ops > 0)
		if err == nil && open {
			m.unsent = sched.unsent(time.Now())
		}
	}
	rec.setPhase(phaseDone)
	close(stop)
	wg.Wait()
	stopProgress()
	if err != nil {
		return measurement{}, err
	}
	m.recorded = rec.snapshot()
	return m, nil
}

// window switches rec to the measure phase for w, or until rec's target is
// reached when byCount, and accounts wall and CPU time; the workers are
// already running.
func (d *driver) window(ctx context.Context, rec *recorder, w time.Duration, byCount bool) (measurement, error) {
	if d.around != nil {
		d.around(true)
	}
	u0, s0, err := selfCPU()
	if err != nil {
		return measurement{}, err
	}
	rec.setPhase(phaseMeasure)
	start := time.Now()
	if byCount {
		select {
		case <-rec.targetReached():
		case <-ctx.Done():
			err = fmt.Errorf("interrupted: %w", ctx.Err())
		}
	} else {
		err = sleepCtx(ctx, w)
	}
	rec.setPhase(phaseDone)
	elapsed := time.Since(start)
	if d.around != nil {
		d.around(false)
	}
	if err != nil {
		return measurement{}, err
	}
	u1, s1, err := selfCPU()
	if err != nil {
		return measurement{}, err
	}
	return measurement{elapsed: elapsed, cpu: u1 - u0 + s1 - s0, cpuUser: u1 - u0, cpuSys: s1 - s0}, nil
}

// work is one closed-loop worker's loop.
func (d *driver) work(ctx context.Context, id int, rec *recorder, ops int64, claimed *atomic.Int64) {
	w := d.workload.NewWorker(id)
	for !rec.done() && ctx.Err() == nil {
		// With ops, only the requests claimed in the measure phase count:
		// one that began in the warm-up and ends after the switch would
		// make the count one more than asked for.
		unclaimed := ops > 0
		if ops > 0 && rec.phase.Load() == phaseMeasure {
			if claimed.Add(1) > ops {
				return
			}
			unclaimed = false
		}
		start := time.Now()
		err := w.Do(ctx, d.session)
		took := time.Since(start)
		rec.record(id, outcome{latency: took, service: took, err: err, unmeasured: unclaimed})
		if err != nil && failsFast(err) {
			// Without a pause a worker whose request fails without
			// leaving the process (no host, no connection) spins and
			// burns the CPU the rest of the generator needs.
			_ = sleepCtx(ctx, time.Millisecond)
		}
	}
}

// dispatch runs an open loop: it hands each slot of the schedule, when due,
// to a free worker state and sends that request on a goroutine of its own.
// At most d.workers requests are outstanding: when none is free, the due
// slots wait, and their lateness is charged to their latency. One timer
// paces the whole loop, so idle senders cost neither timers nor
// goroutines. It returns at stop; sends still in flight are counted in wg.
func (d *driver) dispatch(ctx context.Context, rec *recorder, sched *schedule, stop <-chan struct{}, wg *sync.WaitGroup) {
	type sender struct {
		id int
		w  Worker
	}
	free := make(chan sender, d.workers)
	for id := range d.workers {
		free <- sender{id: id, w: d.workload.NewWorker(id)}
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
				err := snd.w.Do(ctx, d.session)
				end := time.Now()
				rec.record(snd.id, outcome{latency: end.Sub(intended), service: end.Sub(start), lag: start.Sub(intended), err: err})
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
	switch classifyError(err) {
	case ErrKindNoHosts, ErrKindNoStreams, ErrKindConnection:
		return true
	}
	return false
}

// timelinePoint is one interval of a run: what the progress line shows.
type timelinePoint struct {
	T          float64 `json:"t_s"` // end of the interval, seconds since the load started
	Phase      string  `json:"phase"`
	Throughput float64 `json:"ops_s"` // successful requests per second
	P50        int64   `json:"p50_us"`
	P99        int64   `json:"p99_us"`
	Max        int64   `json:"max_us"`
	Errors     int64   `json:"errors"`
	Late       int64   `json:"late"` // open loop: requests sent over 1 ms behind schedule
}

// startProgress records one timeline point per interval (and prints it,
// and logs its histogram, when asked) until the returned stop function is
// called.
func (d *driver) startProgress(rec *recorder) (stop func()) {
	every := d.interval
	if every <= 0 {
		every = time.Second
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(every)
		defer tick.Stop()
		hist := newLatencyHistogram()
		last := time.Now()
		for {
			select {
			case <-done:
				return
			case now := <-tick.C:
				iv := rec.takeInterval(hist)
				phase := "warmup"
				if rec.phase.Load() != phaseWarmup {
					phase = "measure"
				}
				p := timelinePoint{
					T:          now.Sub(d.began).Seconds(),
					Phase:      phase,
					Throughput: float64(hist.TotalCount()) / now.Sub(last).Seconds(),
					P50:        hist.ValueAtQuantile(50),
					P99:        hist.ValueAtQuantile(99),
					Max:        hist.Max(),
					Errors:     iv.errs,
					Late:       iv.late,
				}
				d.timeline = append(d.timeline, p)
				if d.hdrLog != nil {
					hist.SetStartTimeMs(last.UnixMilli())
					hist.SetEndTimeMs(now.UnixMilli())
					hist.SetTag(phase)
					// A failed log write must not stop the run; the
					// file's error shows when it is closed.
					_ = d.hdrLog.OutputIntervalHistogram(hist)
				}
				if d.progress != nil {
					fmt.Fprintln(d.progress, progressLine(d.label, p))
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

func progressLine(label string, p timelinePoint) string {
	line := fmt.Sprintf("loadgen: %s %3.0fs %-7s ops/s=%-9.0f p99=%-9s errors=%d",
		label, p.T, p.Phase, p.Throughput, micros(p.P99), p.Errors)
	if p.Late > 0 {
		line += fmt.Sprintf(" late=%d", p.Late)
	}
	return line
}

// micros formats a latency given in microseconds.
func micros(us int64) string {
	return (time.Duration(us) * time.Microsecond).String()
}

// sleepCtx sleeps for d or until ctx is done, whichever is first.
func sleepCtx(ctx context.Context, d time.Duration) error {
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
