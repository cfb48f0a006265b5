package integration

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/cqlgate/cqlgate/internal/capnode"
	"github.com/cqlgate/cqlgate/internal/fleetsim"
	"github.com/cqlgate/cqlgate/internal/loadgen/stepstats"
	"github.com/cqlgate/cqlgate/pkg/frame"
)

// fleetSpec is one run of BenchmarkFleet: n proxies in mode, offering load
// times the emulated node's capacity in total, for d, with the node's
// slowdown following steps; figures are taken after warm.
type fleetSpec struct {
	mode    string
	n       int
	load    float64
	d, warm time.Duration
	steps   []fleetsim.Step
}

func (s fleetSpec) slowAt(t time.Duration) float64 {
	f := 1.0
	for _, st := range s.steps {
		if st.At <= t {
			f = st.Slow
		}
	}
	return f
}

// fleetOut is a run's figures, named as fleetsim.Result's where they mean
// the same.
type fleetOut struct {
	GoodCap, GoodTarget float64
	// Client latencies are from the generator's write to its read (the
	// proxy's queue included); backend ones from the request's arrival at
	// the emulated node to its answer. Ratios divide each latency by the
	// unloaded p99 times the node's slowdown at the moment.
	OKP99, BackendP99, OverP99 time.Duration
	ClientRatio, BackendRatio  float64
	OverShare, NodeOverShare   float64
	Jain                       float64
	PerProxy                   []int64         // successes after warm-up, per proxy (Jain's input)
	LimitPerProxy              []float64       // mean limit after warm-up, per proxy
	BasePerProxy               []time.Duration // the fleet law's baseline at the end, per proxy
	// RoomPerProxy counts, per proxy, the runs of cuts that a reading of
	// the node with room ended: none is expected here, since the emulator
	// holds the requests in front of a real node that answers at once,
	// and its counts do not account for the latency (nodequeue.go).
	RoomPerProxy       []float64
	Converge           []float64
	LimitSum           float64 // mean sum of the proxies' limits / the node's threads
	Late, Unsent, Sent int64
	LateP99            time.Duration // of the generators' sends after their scheduled time
	Plot               *fleetsim.Result
}

const (
	fleetBin    = 100 * time.Millisecond // goodput, in-node and limit series
	fleetLatBin = 500 * time.Millisecond // p99 series, as fleetsim's latencyBin
)

// fleetRecorder collects a run's answers: the generators' (client side)
// and the emulated node's (backend side).
type fleetRecorder struct {
	spec          fleetSpec
	unloadedC     float64 // µs, the client's unloaded p99 (0: calibrating)
	unloadedB     float64 // µs, the node's
	warmNs        int64
	mu            sync.Mutex
	ok, over      []int64 // per fleetBin, all sidecars
	perCar        []int64 // successes after warm-up
	okLat, okNorm *hdrhistogram.Histogram
	overLat       *hdrhistogram.Histogram
	late          *hdrhistogram.Histogram
	beLat, beNorm *hdrhistogram.Histogram
	beBins        [][]float64 // per fleetLatBin: backend latency / (unloaded p99 x slowdown)
	epoch         time.Time
}

func newFleetRecorder(spec fleetSpec, unloadedC, unloadedB float64) *fleetRecorder {
	bins := int(spec.d/fleetBin) + 20
	return &fleetRecorder{spec: spec, unloadedC: unloadedC, unloadedB: unloadedB, warmNs: int64(spec.warm),
		ok: make([]int64, bins), over: make([]int64, bins), perCar: make([]int64, spec.n),
		okLat: stepstats.NewHistogram(), okNorm: stepstats.NewHistogram(), overLat: stepstats.NewHistogram(), late: stepstats.NewHistogram(),
		beLat: stepstats.NewHistogram(), beNorm: stepstats.NewHistogram(), beBins: make([][]float64, int(spec.d/fleetLatBin)+4)}
}

// client records sidecar i's answer at now (ns since the run's start).
func (r *fleetRecorder) client(i int, now, sent, intended int64, op byte, code uint32) {
	b := int(now / int64(fleetBin))
	lat := time.Duration(now - sent)
	slow := r.spec.slowAt(time.Duration(now))
	r.mu.Lock()
	defer r.mu.Unlock()
	if b >= len(r.ok) {
		return
	}
	if intended >= r.warmNs {
		stepstats.Record(r.late, time.Duration(sent-intended))
	}
	switch {
	case op == frame.OpResult:
		r.ok[b]++
		if now >= r.warmNs {
			r.perCar[i]++
			stepstats.Record(r.okLat, lat)
			stepstats.Record(r.okNorm, time.Duration(float64(lat)/slow))
		}
	case op == frame.OpError && code == uint32(frame.ErrCodeOverloaded):
		r.over[b]++
		if now >= r.warmNs {
			stepstats.Record(r.overLat, lat)
		}
	}
}

// backend records a request served by the emulated node.
func (r *fleetRecorder) backend(done time.Time, in time.Duration) {
	t := done.Sub(r.epoch)
	if t < 0 {
		return
	}
	slow := r.spec.slowAt(t)
	r.mu.Lock()
	defer r.mu.Unlock()
	if i := int(t / fleetLatBin); i < len(r.beBins) && r.unloadedB > 0 {
		r.beBins[i] = append(r.beBins[i], float64(in.Microseconds())/slow/r.unloadedB)
	}
	if t >= r.spec.warm {
		stepstats.Record(r.beLat, in)
		stepstats.Record(r.beNorm, time.Duration(float64(in)/slow))
	}
}

// runFleet runs one spec: an emulated node of model in front of the real
// node at node, spec.n proxies of bin, one open-loop generator of two
// connections per proxy, and returns its figures.
func runFleet(tb testing.TB, spec fleetSpec, model capnode.Model, bin, dir, host, node, query string, unloadedC, unloadedB float64) *fleetOut {
	rec := newFleetRecorder(spec, unloadedC, unloadedB)
	emu := capnode.Start(tb, host+":0", node, model, uint64(spec.n)*1000+uint64(spec.load*10))
	emu.Observe = rec.backend
	defer emu.Stop()
	ps := startFleetProxies(tb, bin, dir, host, spec.n, proxyArgs(spec.mode, node, emu.Addr))
	defer stopFleetProxies(ps)
	gens := make([]*overloadGen, spec.n)
	for i, p := range ps {
		gens[i] = newObservedGen(tb, p.Addr, 2, query, func(now, sent, intended int64, op byte, code uint32) {
			rec.client(i, now, sent, intended, op, code)
		})
	}
	defer func() {
		for _, g := range gens {
			g.close()
		}
	}()

	capacity := model.Capacity(1)
	perConn := spec.load * capacity / float64(2*spec.n)
	bins := int(spec.d / fleetBin)
	inNode := make([]float64, bins)
	limits := make([]float64, bins)
	// Each proxy's mean limit after the warm-up, and its baseline at the
	// end: where Jain's index falls short, these tell why.
	limitMean := make([]float64, spec.n)
	limitReads := 0
	start := time.Now()
	rec.epoch = start
	for _, g := range gens {
		g.epoch = start
	}
	var timers []*time.Timer
	for _, st := range spec.steps {
		timers = append(timers, time.AfterFunc(st.At, func() { emu.SetSlow(st.Slow) }))
	}
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() { // in-node every bin
		t := time.NewTicker(fleetBin)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case now := <-t.C:
				if i := int(now.Sub(start)/fleetBin) - 1; i >= 0 && i < bins {
					inNode[i] = float64(emu.InNode())
				}
			}
		}
	})
	sampler.Go(func() { // the limits every latency bin, held for its bins
		t := time.NewTicker(fleetLatBin)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case now := <-t.C:
				per := gauges(ps, "cqlgate_limiter_limit")
				warm := now.Sub(start) >= spec.warm
				v := 0.0
				for k, x := range per {
					v += x
					if warm {
						limitMean[k] += x
					}
				}
				if warm {
					limitReads++
				}
				i := int(now.Sub(start) / fleetBin)
				for j := max(i-int(fleetLatBin/fleetBin), 0); j < min(i, bins); j++ {
					limits[j] = v
				}
			}
		}
	})
	var late, unsent atomic.Int64
	var wg sync.WaitGroup
	for _, g := range gens {
		for _, c := range g.conns {
			wg.Go(func() {
				u, l := c.pace(perConn, spec.d, int64(spec.warm))
				unsent.Add(u)
				late.Add(l)
			})
		}
	}
	wg.Wait()
	close(stop)
	sampler.Wait()
	for k := range limitMean {
		limitMean[k] /= float64(max(limitReads, 1))
	}
	baselines := gauges(ps, "cqlgate_limiter_baseline_seconds")
	room := decisions(ps, "room")
	for _, t := range timers {
		t.Stop()
	}
	// Answers still due (the proxies' queues hold them at most a second)
	// land past the run and are not counted.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		var n int64
		for _, g := range gens {
			for _, c := range g.conns {
				n += c.inflight.Load()
			}
		}
		if n == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	served, nodeOver := emu.Counts()
	out := rec.figures(model, inNode, limits, capacity*spec.load)
	out.Late, out.Unsent = late.Load(), unsent.Load()
	out.LimitPerProxy = limitMean
	out.RoomPerProxy = room
	for _, b := range baselines {
		out.BasePerProxy = append(out.BasePerProxy, time.Duration(b*1e9))
	}
	out.NodeOverShare = float64(nodeOver) / math.Max(float64(served+nodeOver), 1)
	return out
}

// figures computes a run's figures from what was recorded, the way
// fleetsim.Result does for a simulated run.
func (r *fleetRecorder) figures(model capnode.Model, inNode, limits []float64, offered float64) *fleetOut {
	r.mu.Lock()
	defer r.mu.Unlock()
	spec := r.spec
	dt := fleetBin.Seconds()
	warm := int(spec.warm / fleetBin)
	end := int(spec.d / fleetBin)
	out := &fleetOut{}
	plot := &fleetsim.Result{Name: fleetName(spec), K: spec.n, Threads: model.Threads}
	var ok, capSum, targetSum, limSum, overSum, all float64
	for i := range end {
		t := time.Duration(i) * fleetBin
		c := model.Capacity(spec.slowAt(t))
		plot.T = append(plot.T, float64(i+1)*dt)
		plot.Goodput = append(plot.Goodput, float64(r.ok[i])/dt)
		plot.Capacity = append(plot.Capacity, c)
		plot.Limits = append(plot.Limits, limits[i])
		plot.InNode = append(plot.InNode, inNode[i])
		ans := float64(r.ok[i] + r.over[i])
		plot.Over = append(plot.Over, float64(r.over[i])/math.Max(ans, 1))
		if i < warm {
			continue
		}
		ok += float64(r.ok[i])
		overSum += float64(r.over[i])
		all += ans
		capSum += c * dt
		targetSum += min(c, offered) * dt
		limSum += limits[i] / float64(model.Threads)
	}
	out.GoodCap, out.GoodTarget = ok/capSum, ok/targetSum
	out.LimitSum = limSum / float64(end-warm)
	out.OverShare = overSum / math.Max(all, 1)
	out.Sent = int64(all)
	out.OKP99 = time.Duration(r.okLat.ValueAtQuantile(99)) * time.Microsecond
	out.OverP99 = time.Duration(r.overLat.ValueAtQuantile(99)) * time.Microsecond
	out.BackendP99 = time.Duration(r.beLat.ValueAtQuantile(99)) * time.Microsecond
	out.LateP99 = time.Duration(r.late.ValueAtQuantile(99)) * time.Microsecond
	if r.unloadedC > 0 {
		out.ClientRatio = float64(r.okNorm.ValueAtQuantile(99)) / r.unloadedC
		out.BackendRatio = float64(r.beNorm.ValueAtQuantile(99)) / r.unloadedB
	}
	out.Jain, out.PerProxy = jainIndex(r.perCar), r.perCar
	for i := range len(r.beBins) {
		plot.TL = append(plot.TL, float64(i+1)*fleetLatBin.Seconds())
		plot.Ratio = append(plot.Ratio, p99(r.beBins[i]))
	}
	plot.TL, plot.Ratio = plot.TL[:int(spec.d/fleetLatBin)], plot.Ratio[:int(spec.d/fleetLatBin)]
	for i, st := range spec.steps {
		plot.StepsAt = append(plot.StepsAt, st.At.Seconds())
		next := spec.d
		if i+1 < len(spec.steps) {
			next = spec.steps[i+1].At
		}
		out.Converge = append(out.Converge, r.converge(model, st.At, next, offered))
	}
	out.Plot = plot
	return out
}

// converge is fleetsim's: the seconds from a step at from until goodput
// stayed >= 90% of min(capacity, offered) and the backend p99 ratio <= 2 for
// 2 s (or until to), on fleetLatBin boundaries; NaN if never.
func (r *fleetRecorder) converge(model capnode.Model, from, to time.Duration, offered float64) float64 {
	const hold = 2 * time.Second
	good := func(t time.Duration) bool {
		i := int(t / fleetLatBin)
		if i >= len(r.beBins) || len(r.beBins[i]) == 0 || p99(r.beBins[i]) > 2 {
			return false
		}
		var ok, target float64
		for j := int(t / fleetBin); j < int((t+fleetLatBin)/fleetBin); j++ {
			ok += float64(r.ok[j])
			target += min(model.Capacity(r.spec.slowAt(time.Duration(j)*fleetBin)), offered) * fleetBin.Seconds()
		}
		return ok >= 0.9*target
	}
	return fleetsim.Converge(from, to, fleetLatBin, hold, good)
}

// p99 of v (NaN when empty); sorts v.
func p99(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	slices.Sort(v)
	return v[min(int(math.Ceil(0.99*float64(len(v))))-1, len(v)-1)]
}

// jainIndex is Jain's fairness index of x: 1 when all are equal, 1/n when
// one has everything. Every sidecar offers the same load, so each one's
// fair share is the same and the index is taken on the counts themselves.
func jainIndex(x []int64) float64 {
	var sum, sq float64
	for _, v := range x {
		sum += float64(v)
		sq += float64(v) * float64(v)
	}
	if sq == 0 {
		return math.NaN()
	}
	return sum * sum / (float64(len(x)) * sq)
}
