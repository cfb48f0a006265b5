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

// behindShare is the share of late open-loop requests above which the
// generator says it fell behind its schedule.
const behindShare = 0.01

// figures summarizes one or more measured windows against one endpoint.
// The JSON field names are part of loadgen's output contract (see
// report.go).
type figures struct {
	Ops            int64             `json:"ops"` // successful requests
	ErrorsTotal    int64             `json:"errors_total"`
	Errors         ErrorCounts       `json:"errors"`
	ErrorSamples   map[string]string `json:"error_samples"`
	ElapsedSeconds float64           `json:"elapsed_s"`
	Throughput     float64           `json:"throughput_ops_s"` // successful requests per second
	Latency        latencyFigures    `json:"latency_us"`
	// Service is the open loop's time from send to answer; nil in the
	// closed loop, where it equals Latency.
	Service *latencyFigures `json:"service_time_us"`
	// ErrorLatency is the service time of failed requests, by kind, for
	// the kinds that occurred: how fast OVERLOADED answers come back.
	ErrorLatency      map[string]latencyFigures `json:"error_latency_us"`
	Schedule          *scheduleFigures          `json:"schedule"` // open loop only
	LoadgenCPUPerOp   float64                   `json:"loadgen_cpu_us_per_op"`
	LoadgenUserPerOp  float64                   `json:"loadgen_cpu_user_us_per_op"`
	LoadgenSysPerOp   float64                   `json:"loadgen_cpu_sys_us_per_op"`
	LoadgenCores      float64                   `json:"loadgen_cpu_cores"`
	LoadgenBottleneck bool                      `json:"loadgen_maybe_bottleneck"`
	Histograms        encodedHistograms         `json:"histograms"`
}

// latencyFigures are in microseconds.
type latencyFigures struct {
	Count int64   `json:"count"`
	P50   int64   `json:"p50"`
	P90   int64   `json:"p90"`
	P99   int64   `json:"p99"`
	P999  int64   `json:"p99_9"`
	Max   int64   `json:"max"`
	Mean  float64 `json:"mean"`
}

// scheduleFigures tell how well an open loop kept to its schedule.
type scheduleFigures struct {
	// Late counts requests sent more than lateThreshold (1 ms) after their
	// intended start: every sender was busy (--max-in-flight reached) or
	// the generator lacked CPU.
	Late      int64   `json:"late_requests"`
	LateShare float64 `json:"late_share"`
	MaxLagUS  int64   `json:"max_lag_us"`
	// Unsent counts requests due before the end of the window that were
	// never sent.
	Unsent int64 `json:"unsent"`
	// Behind is set when over 1% of requests were late or any was unsent:
	// the offered load was below the requested rate.
	Behind bool `json:"behind"`
}

// encodedHistograms are the merged histograms in HdrHistogram's V2
// compressed format, base64 (what hdrhistogram.Decode and the Java
// HistogramLogProcessor read); values in microseconds.
type encodedHistograms struct {
	Latency string            `json:"latency"`
	Service string            `json:"service_time,omitempty"`
	Errors  map[string]string `json:"errors"`
}

func latencyOf(h *hdrhistogram.Histogram) latencyFigures {
	return latencyFigures{
		Count: h.TotalCount(),
		P50:   h.ValueAtQuantile(50),
		P90:   h.ValueAtQuantile(90),
		P99:   h.ValueAtQuantile(99),
		P999:  h.ValueAtQuantile(99.9),
		Max:   h.Max(),
		Mean:  h.Mean(),
	}
}

// encode returns h in V2 compressed base64, or "" if it cannot be encoded
// (which only a broken histogram would cause).
func encode(h *hdrhistogram.Histogram) string {
	b, err := h.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
	if err != nil {
		return ""
	}
	return string(b)
}

// figuresOf adds up measurements, e.g. every round of one target.
func figuresOf(ms ...measurement) figures {
	hist := newLatencyHistogram()
	var (
		f        figures
		service  *hdrhistogram.Histogram
		errLat   [numErrorKinds]*hdrhistogram.Histogram
		elapsed  time.Duration
		cpu      time.Duration
		user     time.Duration
		sys      time.Duration
		reqs     int64
		schedule scheduleFigures
	)
	f.ErrorSamples = map[string]string{}
	for _, m := range ms {
		hist.Merge(m.latency)
		if m.service != nil {
			if service == nil {
				service = newLatencyHistogram()
			}
			service.Merge(m.service)
		}
		for k, h := range m.errLat {
			if h == nil {
				continue
			}
			if errLat[k] == nil {
				errLat[k] = newLatencyHistogram()
			}
			errLat[k].Merge(h)
		}
		f.Errors.Add(&m.errs)
		for k, s := range m.samples {
			name := ErrorKind(k).String()
			if m.errs[k] > 0 && f.ErrorSamples[name] == "" {
				f.ErrorSamples[name] = s
			}
		}
		elapsed += m.elapsed
		cpu += m.cpu
		user += m.cpuUser
		sys += m.cpuSys
		reqs += m.requests()
		schedule.Late += m.late
		schedule.MaxLagUS = max(schedule.MaxLagUS, m.maxLag.Microseconds())
		schedule.Unsent += m.unsent
	}
	f.Ops = hist.TotalCount()
	f.ErrorsTotal = f.Errors.Total()
	f.ElapsedSeconds = elapsed.Seconds()
	f.Latency = latencyOf(hist)
	f.Histograms = encodedHistograms{Latency: encode(hist), Errors: map[string]string{}}
	f.ErrorLatency = map[string]latencyFigures{}
	for k, h := range errLat {
		if h != nil {
			name := ErrorKind(k).String()
			f.ErrorLatency[name] = latencyOf(h)
			f.Histograms.Errors[name] = encode(h)
		}
	}
	if service != nil {
		s := latencyOf(service)
		f.Service = &s
		f.Histograms.Service = encode(service)
		if reqs > 0 {
			schedule.LateShare = float64(schedule.Late) / float64(reqs)
		}
		schedule.Behind = schedule.LateShare > behindShare || schedule.Unsent > 0
		f.Schedule = &schedule
	}
	if elapsed > 0 {
		f.Throughput = float64(f.Ops) / elapsed.Seconds()
		f.LoadgenCores = cpu.Seconds() / elapsed.Seconds()
	}
	// CPU is charged to every completed request, failed ones included:
	// the generator did the work of sending them.
	if reqs > 0 {
		f.LoadgenCPUPerOp = float64(cpu.Nanoseconds()) / 1e3 / float64(reqs)
		f.LoadgenUserPerOp = float64(user.Nanoseconds()) / 1e3 / float64(reqs)
		f.LoadgenSysPerOp = float64(sys.Nanoseconds()) / 1e3 / float64(reqs)
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
