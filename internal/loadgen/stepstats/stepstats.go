// Package stepstats turns what one measured step (a window of load at one
// setting) saw into figures: it fixes the latency histograms' range and
// resolution, records into them, and derives the percentiles, the goodput
// and whether an open loop kept to its schedule.
//
// Every load generator of the project (cmd/loadgen and the overload
// benchmark in test/integration) uses it, so that their figures mean the
// same thing. It must not collect from concurrent workers (package
// recorder does), send requests, or print: it is arithmetic over
// histograms and counts, safe to call from anywhere.
package stepstats

import (
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Latency histograms cover 1 µs to 60 s with 3 significant digits: every
// recorded latency is within 0.1% of the true value, and a request can
// never outlive the range (gocql's timeout is far below a minute). One such
// histogram takes about 140 KiB.
const (
	MinMicros = 1
	MaxMicros = 60 * 1000 * 1000
	SigFigs   = 3
)

// NewHistogram returns an empty latency histogram, in microseconds.
func NewHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(MinMicros, MaxMicros, SigFigs)
}

// Record records d in h, in microseconds, clamped into the histogram's
// range: a sub-microsecond answer counts as 1 µs, never as nothing.
func Record(h *hdrhistogram.Histogram, d time.Duration) {
	us := min(max(d.Microseconds(), MinMicros), MaxMicros)
	// RecordValue fails only outside the range, which was clamped away.
	_ = h.RecordValue(us)
}

// Latency summarizes a latency histogram; values in microseconds. The JSON
// field names are part of loadgen's output contract.
type Latency struct {
	Count int64   `json:"count"`
	P50   int64   `json:"p50"`
	P90   int64   `json:"p90"`
	P99   int64   `json:"p99"`
	P999  int64   `json:"p99_9"`
	Max   int64   `json:"max"`
	Mean  float64 `json:"mean"`
}

// LatencyOf summarizes h.
func LatencyOf(h *hdrhistogram.Histogram) Latency {
	return Latency{
		Count: h.TotalCount(),
		P50:   h.ValueAtQuantile(50),
		P90:   h.ValueAtQuantile(90),
		P99:   h.ValueAtQuantile(99),
		P999:  h.ValueAtQuantile(99.9),
		Max:   h.Max(),
		Mean:  h.Mean(),
	}
}

// Goodput is ok successful requests per second of elapsed; 0 when nothing
// elapsed.
func Goodput(ok int64, elapsed time.Duration) float64 {
	if elapsed <= 0 {
		return 0
	}
	return float64(ok) / elapsed.Seconds()
}

// LateShare is the share of requests sent late; 0 when none was sent.
func LateShare(late, requests int64) float64 {
	if requests <= 0 {
		return 0
	}
	return float64(late) / float64(requests)
}

// Behind tells whether an open loop fell behind its schedule: more than
// share of its requests were sent late, or any request due in the window
// was never sent. The offered load was then below the rate asked for, and
// the step describes the generator as much as the target. Late requests
// with none counted (answers lost with their connection) are behind too.
// What counts as late, and the share tolerated, are the generator's to
// choose.
func Behind(late, unsent, requests int64, share float64) bool {
	if requests <= 0 {
		return unsent > 0 || late > 0
	}
	return unsent > 0 || LateShare(late, requests) > share
}

// Micros formats a latency given in microseconds as a duration, e.g.
// "1.234ms".
func Micros(us int64) string {
	return (time.Duration(us) * time.Microsecond).String()
}
