package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/gocql/gocql"
)

// driver runs closed-loop workers against one session: each worker sends
// its next request as soon as the previous one completes, so throughput is
// what the endpoint sustains at that concurrency.
type driver struct {
	session  *gocql.Session
	workload Workload
	workers  int
	// progress receives one line per second; nil for none.
	progress io.Writer
	label    string // prefix of progress lines
}

// measurement is the outcome of one measured window.
type measurement struct {
	recorded
	elapsed time.Duration // wall time of the measured window
	cpu     time.Duration // this process's user+sys CPU during the window
}

// requests counts completed requests, failed ones included.
func (m *measurement) requests() int64 { return m.latency.TotalCount() + m.errs.Total() }

// measure applies load for warmup (unrecorded), then for window (recorded).
// A window of 0 makes it a pure warm-up. It returns when every worker has
// stopped; a request in flight at the end of the window is awaited, but not
// counted.
func (d *driver) measure(ctx context.Context, warmup, window time.Duration) (measurement, error) {
	rec := newRecorder(d.workers)
	var wg sync.WaitGroup
	for id := range d.workers {
		wg.Go(func() { d.work(ctx, id, rec) })
	}
	stopProgress := d.startProgress(rec)

	var m measurement
	err := sleepCtx(ctx, warmup)
	if err == nil && window > 0 {
		m, err = d.window(ctx, rec, window)
	}
	rec.setPhase(phaseDone)
	wg.Wait()
	stopProgress()
	if err != nil {
		return measurement{}, err
	}
	m.recorded = rec.snapshot()
	return m, nil
}

// window switches rec to the measure phase for w and accounts wall and CPU
// time; the workers are already running.
func (d *driver) window(ctx context.Context, rec *recorder, w time.Duration) (measurement, error) {
	cpu0, err := selfCPU()
	if err != nil {
		return measurement{}, err
	}
	rec.setPhase(phaseMeasure)
	start := time.Now()
	err = sleepCtx(ctx, w)
	rec.setPhase(phaseDone)
	elapsed := time.Since(start)
	if err != nil {
		return measurement{}, err
	}
	cpu1, err := selfCPU()
	if err != nil {
		return measurement{}, err
	}
	return measurement{elapsed: elapsed, cpu: cpu1 - cpu0}, nil
}

// work is one worker's loop.
func (d *driver) work(ctx context.Context, id int, rec *recorder) {
	w := d.workload.NewWorker(id)
	for !rec.done() && ctx.Err() == nil {
		start := time.Now()
		err := w.Do(ctx, d.session)
		rec.record(id, time.Since(start), err)
		if err != nil && failsFast(err) {
			// Without a pause a worker whose request fails without
			// leaving the process (no host, no connection) spins and
			// burns the CPU the rest of the generator needs.
			_ = sleepCtx(ctx, time.Millisecond)
		}
	}
}

// failsFast reports whether gocql fails err without a round trip.
func failsFast(err error) bool {
	switch classifyError(err) {
	case ErrKindNoHosts, ErrKindNoStreams, ErrKindConnection:
		return true
	}
	return false
}

// startProgress prints one line per second until the returned stop
// function is called.
func (d *driver) startProgress(rec *recorder) (stop func()) {
	if d.progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		hist := newLatencyHistogram()
		last, began := time.Now(), time.Now()
		for {
			select {
			case <-done:
				return
			case now := <-tick.C:
				errs := rec.takeInterval(hist)
				phase := "warmup"
				if rec.phase.Load() != phaseWarmup {
					phase = "measure"
				}
				fmt.Fprintln(d.progress, progressLine(d.label, phase, now.Sub(began), now.Sub(last), hist, errs))
				last = now
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

func progressLine(label, phase string, at, interval time.Duration, h *hdrhistogram.Histogram, errs int64) string {
	rate := float64(h.TotalCount()) / interval.Seconds()
	return fmt.Sprintf("loadgen: %s %3.0fs %-7s ops/s=%-9.0f p99=%-9s errors=%d",
		label, at.Seconds(), phase, rate, micros(h.ValueAtQuantile(99)), errs)
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
