package main

import (
	"runtime"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/cqlgate/cqlgate/internal/loadgen/driver"
	"github.com/cqlgate/cqlgate/internal/loadgen/errclass"
	"github.com/cqlgate/cqlgate/internal/loadgen/stepstats"
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
	Errors         errclass.Counts   `json:"errors"`
	ErrorSamples   map[string]string `json:"error_samples"`
	ElapsedSeconds float64           `json:"elapsed_s"`
	Throughput     float64           `json:"throughput_ops_s"` // successful requests per second
	Latency        stepstats.Latency `json:"latency_us"`
	// Service is the open loop's time from send to answer; nil in the
	// closed loop, where it equals Latency.
	Service *stepstats.Latency `json:"service_time_us"`
	// ErrorLatency is the service time of failed requests, by kind, for
	// the kinds that occurred: how fast OVERLOADED answers come back.
	ErrorLatency      map[string]stepstats.Latency `json:"error_latency_us"`
	Schedule          *scheduleFigures             `json:"schedule"` // open loop only
	LoadgenCPUPerOp   float64                      `json:"loadgen_cpu_us_per_op"`
	LoadgenUserPerOp  float64                      `json:"loadgen_cpu_user_us_per_op"`
	LoadgenSysPerOp   float64                      `json:"loadgen_cpu_sys_us_per_op"`
	LoadgenCores      float64                      `json:"loadgen_cpu_cores"`
	LoadgenBottleneck bool                         `json:"loadgen_maybe_bottleneck"`
	Histograms        encodedHistograms            `json:"histograms"`
}

// scheduleFigures tell how well an open loop kept to its schedule.
type scheduleFigures struct {
	// Late counts requests sent more than recorder.LateThreshold (1 ms)
	// after their intended start: every sender was busy (--max-in-flight
	// reached) or the generator lacked CPU.
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
func figuresOf(ms ...driver.Measurement) figures {
	hist := stepstats.NewHistogram()
	var (
		f        figures
		service  *hdrhistogram.Histogram
		errLat   [errclass.NumKinds]*hdrhistogram.Histogram
		elapsed  time.Duration
		cpu      time.Duration
		user     time.Duration
		sys      time.Duration
		reqs     int64
		schedule scheduleFigures
	)
	f.ErrorSamples = map[string]string{}
	for _, m := range ms {
		hist.Merge(m.Latency)
		if m.Service != nil {
			if service == nil {
				service = stepstats.NewHistogram()
			}
			service.Merge(m.Service)
		}
		for k, h := range m.ErrLat {
			if h == nil {
				continue
			}
			if errLat[k] == nil {
				errLat[k] = stepstats.NewHistogram()
			}
			errLat[k].Merge(h)
		}
		f.Errors.Add(&m.Errs)
		for k, s := range m.Samples {
			name := errclass.Kind(k).String()
			if m.Errs[k] > 0 && f.ErrorSamples[name] == "" {
				f.ErrorSamples[name] = s
			}
		}
		elapsed += m.Elapsed
		cpu += m.CPU
		user += m.CPUUser
		sys += m.CPUSys
		reqs += m.Requests()
		schedule.Late += m.Late
		schedule.MaxLagUS = max(schedule.MaxLagUS, m.MaxLag.Microseconds())
		schedule.Unsent += m.Unsent
	}
	f.Ops = hist.TotalCount()
	f.ErrorsTotal = f.Errors.Total()
	f.ElapsedSeconds = elapsed.Seconds()
	f.Latency = stepstats.LatencyOf(hist)
	f.Histograms = encodedHistograms{Latency: encode(hist), Errors: map[string]string{}}
	f.ErrorLatency = map[string]stepstats.Latency{}
	for k, h := range errLat {
		if h != nil {
			name := errclass.Kind(k).String()
			f.ErrorLatency[name] = stepstats.LatencyOf(h)
			f.Histograms.Errors[name] = encode(h)
		}
	}
	if service != nil {
		s := stepstats.LatencyOf(service)
		f.Service = &s
		f.Histograms.Service = encode(service)
		schedule.LateShare = stepstats.LateShare(schedule.Late, reqs)
		schedule.Behind = stepstats.Behind(schedule.Late, schedule.Unsent, reqs, behindShare)
		f.Schedule = &schedule
	}
	f.Throughput = stepstats.Goodput(f.Ops, elapsed)
	if elapsed > 0 {
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
func throughputOf(m driver.Measurement) float64 {
	return stepstats.Goodput(m.Latency.TotalCount(), m.Elapsed)
}
