package main

import (
	"runtime"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// bottleneckShare is the share of the machine's CPUs above which the
// generator itself may be what limits throughput. Half the CPUs is the fair
// share when loadgen and the system under test share a machine (as in
// scripts/bench.sh); 0.8 of that leaves headroom for scheduling noise.
const bottleneckShare = 0.8 * 0.5

// figures summarizes one or more measured windows against one endpoint.
// The JSON field names are part of loadgen's output contract (see
// report.go).
type figures struct {
	Ops               int64             `json:"ops"` // successful requests
	ErrorsTotal       int64             `json:"errors_total"`
	Errors            ErrorCounts       `json:"errors"`
	ErrorSamples      map[string]string `json:"error_samples"`
	ElapsedSeconds    float64           `json:"elapsed_s"`
	Throughput        float64           `json:"throughput_ops_s"` // successful requests per second
	Latency           latencyFigures    `json:"latency_us"`
	LoadgenCPUPerOp   float64           `json:"loadgen_cpu_us_per_op"`
	LoadgenCores      float64           `json:"loadgen_cpu_cores"`
	LoadgenBottleneck bool              `json:"loadgen_maybe_bottleneck"`
}

// latencyFigures are in microseconds, of successful requests only.
type latencyFigures struct {
	P50  int64   `json:"p50"`
	P90  int64   `json:"p90"`
	P99  int64   `json:"p99"`
	P999 int64   `json:"p99_9"`
	Max  int64   `json:"max"`
	Mean float64 `json:"mean"`
}

func latencyOf(h *hdrhistogram.Histogram) latencyFigures {
	return latencyFigures{
		P50:  h.ValueAtQuantile(50),
		P90:  h.ValueAtQuantile(90),
		P99:  h.ValueAtQuantile(99),
		P999: h.ValueAtQuantile(99.9),
		Max:  h.Max(),
		Mean: h.Mean(),
	}
}

// figuresOf adds up measurements, e.g. every round of one target.
func figuresOf(ms ...measurement) figures {
	hist := newLatencyHistogram()
	var (
		f       figures
		elapsed time.Duration
		cpu     time.Duration
		reqs    int64
	)
	f.ErrorSamples = map[string]string{}
	for _, m := range ms {
		hist.Merge(m.latency)
		f.Errors.Add(&m.errs)
		for k, s := range m.samples {
			name := ErrorKind(k).String()
			if m.errs[k] > 0 && f.ErrorSamples[name] == "" {
				f.ErrorSamples[name] = s
			}
		}
		elapsed += m.elapsed
		cpu += m.cpu
		reqs += m.requests()
	}
	f.Ops = hist.TotalCount()
	f.ErrorsTotal = f.Errors.Total()
	f.ElapsedSeconds = elapsed.Seconds()
	f.Latency = latencyOf(hist)
	if elapsed > 0 {
		f.Throughput = float64(f.Ops) / elapsed.Seconds()
		f.LoadgenCores = cpu.Seconds() / elapsed.Seconds()
	}
	// CPU is charged to every completed request, failed ones included:
	// the generator did the work of sending them.
	if reqs > 0 {
		f.LoadgenCPUPerOp = float64(cpu.Microseconds()) / float64(reqs)
	}
	f.LoadgenBottleneck = f.LoadgenCores > bottleneckShare*float64(runtime.NumCPU())
	return f
}

// throughputOf is the successful requests per second of one measurement.
func throughputOf(m measurement) float64 {
	if m.elapsed <= 0 {
		return 0
	}
	return float64(m.latency.TotalCount()) / m.elapsed.Seconds()
}
