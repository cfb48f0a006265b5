package speculative

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of the zero BudgetConfig fields.
const (
	DefaultBudgetRatio     = 0.05
	DefaultBudgetMinHedges = 10
	DefaultBudgetWindow    = 10 * time.Second
)

// BudgetConfig configures a Budget. The zero value of every field means its
// default; negative values are errors. NewBudget copies it.
type BudgetConfig struct {
	// Ratio caps hedges at this share of requests over the window, in
	// (0, 1]. Default 0.05: at most 5% more executions than requests.
	Ratio float64
	// MinHedges is the floor: this many hedges are allowed per window even
	// when Ratio of the requests is fewer, so a quiet proxy still hedges.
	// Default 10.
	MinHedges int
	// Window is how far back requests and hedges count. Default 10s.
	Window time.Duration
}

func (c BudgetConfig) normalized() (BudgetConfig, error) {
	if c.Window < 0 || c.MinHedges < 0 || c.Ratio < 0 {
		return c, configError("negative value in budget config")
	}
	if c.Ratio == 0 {
		c.Ratio = DefaultBudgetRatio
	}
	if !(c.Ratio > 0 && c.Ratio <= 1) {
		return c, configError("budget ratio %g is not in (0, 1]", c.Ratio)
	}
	if c.MinHedges == 0 {
		c.MinHedges = DefaultBudgetMinHedges
	}
	if c.Window == 0 {
		c.Window = DefaultBudgetWindow
	}
	if c.Window < time.Millisecond {
		return c, configError("budget window %s is below 1ms", c.Window)
	}
	return c, nil
}

// Budget caps hedges at a share of requests over a sliding window, and can
// be paused. It is safe for concurrent use.
//
// It counts requests and hedges per window of Window and estimates the
// last Window's counts as the current window's plus the previous one's
// weighted by how much of it is still within the last Window (the sliding
// window counter of rate limiters). Both methods take the time from the
// caller, who has it at hand; RecordRequest is then a division, an atomic
// load and an atomic add.
//
// failsafe-go's budget (failsafe-go/budget, v0.9.8) was evaluated first:
// it is as cheap (see BenchmarkFailsafeBudget) but caps the share of hedges
// among executions in flight rather than over time, needs every execution
// released, its permit methods are not part of its exported interface,
// and it cannot be paused.
type Budget struct {
	cfg   BudgetConfig
	clock Clock
	epoch time.Time

	requests atomic.Int64 // this window's requests
	hedges   atomic.Int64 // this window's hedges

	mu        sync.Mutex   // guards rotation
	window    atomic.Int64 // index of the current window
	prevReq   atomic.Int64
	prevHedge atomic.Int64

	pausedUntil atomic.Int64 // ns since epoch; TryHedge refuses before it

	allowed, denied, deniedPaused atomic.Uint64
}

// NewBudget returns a Budget for cfg. clock nil means the real clock.
func NewBudget(cfg BudgetConfig, clock Clock) (*Budget, error) {
	cfg, err := cfg.normalized()
	if err != nil {
		return nil, err
	}
	if clock == nil {
		clock = realClock{}
	}
	b := &Budget{cfg: cfg, clock: clock, epoch: clock.Now()}
	b.pausedUntil.Store(math.MinInt64)
	return b, nil
}

// RecordRequest counts one request that could be hedged (whether it is or
// not), received at now (by the Budget's clock). Call it once per
// hedgeable request, not per execution.
func (b *Budget) RecordRequest(now time.Time) {
	if idx := b.since(now) / int64(b.cfg.Window); idx > b.window.Load() {
		b.rotate(idx)
	}
	b.requests.Add(1)
}

func (b *Budget) since(now time.Time) int64 { return max(int64(now.Sub(b.epoch)), 0) }

// TryHedge tells whether a hedge may be sent at now (by the Budget's
// clock), and counts it if so. It refuses while paused, and when hedges
// over the last Window would exceed max(MinHedges, Ratio × requests).
func (b *Budget) TryHedge(now time.Time) bool {
	t := b.since(now)
	if t < b.pausedUntil.Load() {
		b.deniedPaused.Add(1)
		return false
	}
	w := int64(b.cfg.Window)
	if idx := t / w; idx > b.window.Load() {
		b.rotate(idx)
	}
	// The share of the previous window still within the last Window.
	weight := 1 - float64(t%w)/float64(w)
	reqs := float64(b.prevReq.Load())*weight + float64(b.requests.Load())
	limit := max(float64(b.cfg.MinHedges), b.cfg.Ratio*reqs)
	prevHedges := float64(b.prevHedge.Load()) * weight
	for {
		h := b.hedges.Load()
		if prevHedges+float64(h)+1 > limit {
			b.denied.Add(1)
			return false
		}
		if b.hedges.CompareAndSwap(h, h+1) {
			b.allowed.Add(1)
			return true
		}
	}
}

// rotate starts window idx.
func (b *Budget) rotate(idx int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	cur := b.window.Load()
	if idx <= cur {
		return // another goroutine did it
	}
	reqs, hedges := b.requests.Swap(0), b.hedges.Swap(0)
	if idx-cur > 1 {
		reqs, hedges = 0, 0 // the previous window was empty
	}
	b.prevReq.Store(reqs)
	b.prevHedge.Store(hedges)
	b.window.Store(idx)
}

// Pause makes TryHedge refuse until the given time (by the Budget's
// clock), for instance while the limiter is rejecting requests: hedges then
// only add load. A pause never shortens an earlier, longer one.
func (b *Budget) Pause(until time.Time) {
	t := int64(until.Sub(b.epoch))
	for {
		cur := b.pausedUntil.Load()
		if t <= cur || b.pausedUntil.CompareAndSwap(cur, t) {
			return
		}
	}
}

// Paused tells whether TryHedge refuses at now because of Pause.
func (b *Budget) Paused(now time.Time) bool {
	return int64(now.Sub(b.epoch)) < b.pausedUntil.Load()
}

// BudgetStats counts TryHedge's answers since the Budget was made.
type BudgetStats struct {
	Allowed      uint64 // hedges allowed
	Denied       uint64 // refused for lack of budget
	DeniedPaused uint64 // refused while paused
	Paused       bool   // paused now, by the Budget's clock
}

// Stats returns the counters.
func (b *Budget) Stats() BudgetStats {
	return BudgetStats{
		Allowed:      b.allowed.Load(),
		Denied:       b.denied.Load(),
		DeniedPaused: b.deniedPaused.Load(),
		Paused:       b.Paused(b.clock.Now()),
	}
}

// Config returns the configuration in use, defaults filled in.
func (b *Budget) Config() BudgetConfig { return b.cfg }
