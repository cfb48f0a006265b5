package speculative

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Clock tells the time. Tests inject a fake one; nil means the real clock.
type Clock interface {
	Now() time.Time
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// ErrConfig is wrapped by the errors the constructors return for a config
// they refuse.
var ErrConfig = errors.New("speculative: invalid config")

func configError(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...)
}

// Defaults of the zero DelayConfig fields.
const (
	DefaultPercentile = 0.99
	DefaultWindow     = 10 * time.Second
	DefaultSubWindows = 4
	DefaultMinSamples = 100
	DefaultFloor      = time.Millisecond
	DefaultCap        = 250 * time.Millisecond
	DefaultMaxClasses = 256
	DefaultRefresh    = 100 * time.Millisecond
	maxSubWindows     = 16
	maxClasses        = 1 << 16
)

// DelayConfig configures a Delay. The zero value of every field means its
// default; negative values are errors. NewDelay copies it.
type DelayConfig struct {
	// Constant, when positive, is the hedge delay of every class: nothing is
	// measured and the fields below but MaxClasses are unused.
	Constant time.Duration
	// Percentile of recent latency that is the hedge delay, in (0, 1].
	// Default 0.99: about 1% of requests are hedged in steady state.
	Percentile float64
	// Window is how far back latencies count, in SubWindows steps: with the
	// defaults (10s, 4) the latencies of the last 7.5 to 10 s. At most 16
	// sub-windows.
	Window     time.Duration
	SubWindows int
	// MinSamples is how many latencies the window must hold before a class
	// is hedged at all (Delay.Get says ok=false until then). Default 100.
	MinSamples int
	// Floor and Cap bound the delay: Floor keeps a fast class from hedging
	// on noise, Cap keeps a class whose latency is dominated by a sick node
	// hedging at all. Defaults 1ms and 250ms.
	Floor, Cap time.Duration
	// MaxClasses bounds the classes tracked; beyond it the least recently
	// used class is forgotten. Default 256, at most 65536. Each class holds
	// about SubWindows*800 bytes.
	MaxClasses int
	// Refresh is how long a computed percentile is reused before Get
	// computes it again (about a microsecond of work). Default 100ms.
	Refresh time.Duration
}

func (c DelayConfig) normalized() (DelayConfig, error) {
	if c.Constant < 0 || c.Window < 0 || c.Floor < 0 || c.Cap < 0 || c.Refresh < 0 {
		return c, configError("negative duration in delay config")
	}
	if c.SubWindows < 0 || c.MinSamples < 0 || c.MaxClasses < 0 {
		return c, configError("negative count in delay config")
	}
	if c.Percentile == 0 {
		c.Percentile = DefaultPercentile
	}
	if !(c.Percentile > 0 && c.Percentile <= 1) {
		return c, configError("percentile %g is not in (0, 1]", c.Percentile)
	}
	if c.Window == 0 {
		c.Window = DefaultWindow
	}
	if c.SubWindows == 0 {
		c.SubWindows = DefaultSubWindows
	}
	if c.SubWindows > maxSubWindows {
		return c, configError("%d sub-windows, at most %d", c.SubWindows, maxSubWindows)
	}
	if c.Window/time.Duration(c.SubWindows) < time.Millisecond {
		return c, configError("window %s split in %d is below 1ms", c.Window, c.SubWindows)
	}
	if c.MinSamples == 0 {
		c.MinSamples = DefaultMinSamples
	}
	if c.Floor == 0 {
		c.Floor = DefaultFloor
	}
	if c.Cap == 0 {
		c.Cap = max(DefaultCap, c.Floor)
	}
	if c.Floor > c.Cap {
		return c, configError("floor %s is above cap %s", c.Floor, c.Cap)
	}
	if c.MaxClasses == 0 {
		c.MaxClasses = DefaultMaxClasses
	}
	if c.MaxClasses > maxClasses {
		return c, configError("%d classes, at most %d", c.MaxClasses, maxClasses)
	}
	if c.Refresh == 0 {
		c.Refresh = DefaultRefresh
	}
	return c, nil
}

// Delay estimates the hedge delay of each class of requests (a table, a
// prepared statement: the caller decides) from the latencies it is told.
// It is safe for concurrent use.
//
// Record and Get take the current time from the caller, who has it already
// (it measured the latency), which keeps Record to a few atomic operations;
// the times must come from the clock given to NewDelay.
type Delay struct {
	cfg   DelayConfig
	clock Clock
	epoch time.Time
	sub   int64 // sub-window length, ns

	stats []atomic.Pointer[classStats] // by class index; allocated on first use, never replaced

	mu    sync.Mutex // guards the registry below
	byKey map[uint64]uint32
	keys  []classKey // by class index
	tick  uint64     // LRU clock: bumped by each Class call
}

type classKey struct {
	key   uint64
	label string
	used  uint64 // tick of the last Class call
}

// classStats is one class's sliding window: SubWindows histograms used in
// turn, each tagged with the sub-window (time since epoch / sub) it counts.
type classStats struct {
	gen      atomic.Uint32 // bumped when the index is given to another key
	epochs   [maxSubWindows]atomic.Int64
	hists    []histogram
	cachedAt atomic.Int64 // when cached was computed, ns since epoch
	cached   atomic.Int64 // the delay in ns; -1 when there are too few samples
}

// Class is a handle on one class's statistics, from Delay.Class. The zero
// Class is valid and belongs to no class: nothing is recorded for it, and
// Get says ok=false (or returns the constant delay).
type Class struct {
	idx uint32
	gen uint32 // 0 for the zero Class; classes start at 1
}

// NewDelay returns a Delay for cfg. clock nil means the real clock.
func NewDelay(cfg DelayConfig, clock Clock) (*Delay, error) {
	cfg, err := cfg.normalized()
	if err != nil {
		return nil, err
	}
	if clock == nil {
		clock = realClock{}
	}
	return &Delay{
		cfg:   cfg,
		clock: clock,
		epoch: clock.Now(),
		sub:   int64(cfg.Window) / int64(cfg.SubWindows),
		stats: make([]atomic.Pointer[classStats], cfg.MaxClasses),
		byKey: make(map[uint64]uint32),
	}, nil
}

// Class returns the handle of the class key, registering it (with label,
// its name in metrics) when it is new. When MaxClasses are registered, the
// least recently used class is forgotten (the one whose latest latency is
// oldest; among those without any, the one looked up longest ago): handles
// to it go stale (Record ignores them, Get says ok=false, Stale says so)
// and its index is reused. It takes a mutex and a map lookup, so a caller
// may keep the handle (with its prepared statement, say) and look it up
// again only when Stale says so.
func (d *Delay) Class(key uint64, label string) Class {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.tick++
	if idx, ok := d.byKey[key]; ok {
		d.keys[idx].used = d.tick
		return Class{idx: idx, gen: d.stats[idx].Load().gen.Load()}
	}
	var idx uint32
	if len(d.keys) < d.cfg.MaxClasses {
		idx = uint32(len(d.keys))
		d.keys = append(d.keys, classKey{})
		cs := &classStats{hists: make([]histogram, d.cfg.SubWindows)}
		cs.reset()
		d.stats[idx].Store(cs)
	} else {
		idx = d.leastRecentlyUsed()
		delete(d.byKey, d.keys[idx].key)
		d.stats[idx].Load().reset()
	}
	d.keys[idx] = classKey{key: key, label: label, used: d.tick}
	d.byKey[key] = idx
	return Class{idx: idx, gen: d.stats[idx].Load().gen.Load()}
}

// leastRecentlyUsed returns the class to evict: the one whose latest
// sub-window with a latency is oldest, then the one looked up longest ago.
// Record does not touch the registry, so this is what keeps a class whose
// handle is kept (and looked up once) from looking unused. d.mu is held.
func (d *Delay) leastRecentlyUsed() uint32 {
	best, bestSW := uint32(0), int64(math.MaxInt64)
	for i := range d.keys {
		cs := d.stats[i].Load()
		sw := int64(-1)
		for h := range cs.hists {
			sw = max(sw, cs.epochs[h].Load())
		}
		if sw < bestSW || (sw == bestSW && d.keys[i].used < d.keys[best].used) {
			best, bestSW = uint32(i), sw
		}
	}
	return best
}

// Stale tells whether c no longer names a class (it was forgotten to make
// room for another): look the class up again. The zero Class is not stale.
func (d *Delay) Stale(c Class) bool { return c.gen != 0 && d.load(c) == nil }

// reset empties the statistics and makes older handles stale. A Record
// racing with it may leave one stale sample behind.
func (cs *classStats) reset() {
	cs.gen.Add(1)
	for i := range cs.epochs {
		cs.epochs[i].Store(-1) // no sub-window: cleared before first use
	}
	cs.cachedAt.Store(math.MinInt64 / 2)
	cs.cached.Store(-1)
}

// load returns the statistics of c, or nil for a stale or zero handle.
func (d *Delay) load(c Class) *classStats {
	if c.gen == 0 || int(c.idx) >= len(d.stats) {
		return nil
	}
	cs := d.stats[c.idx].Load()
	if cs == nil || cs.gen.Load() != c.gen {
		return nil
	}
	return cs
}

// since returns now as ns since the epoch (0 before it).
func (d *Delay) since(now time.Time) int64 { return max(int64(now.Sub(d.epoch)), 0) }

// Record adds a latency observed at now to c's window. It does not
// allocate, and takes no lock: a few atomic operations, plus clearing a
// histogram at the start of each sub-window. A handful of samples recorded
// concurrently with that clearing may be lost.
func (d *Delay) Record(c Class, latency time.Duration, now time.Time) {
	if d.cfg.Constant > 0 {
		return
	}
	cs := d.load(c)
	if cs == nil {
		return
	}
	sw := d.since(now) / d.sub
	h := int(sw % int64(len(cs.hists)))
	if e := cs.epochs[h].Load(); e != sw {
		if e > sw {
			return // a late sample for a sub-window already reused
		}
		if cs.epochs[h].CompareAndSwap(e, sw) {
			hist := &cs.hists[h]
			for i := range hist.counts {
				hist.counts[i].Store(0)
			}
		}
	}
	cs.hists[h].counts[bucketOf(latency)].Add(1)
}

// Get returns the hedge delay of class c at now: the configured percentile
// of its window's latencies, within [Floor, Cap]. ok is false, meaning do
// not hedge, while the window holds fewer than MinSamples latencies, and
// for a stale or zero handle. With Constant set it always returns that.
// The percentile is computed at most once per Refresh; in between Get is
// two atomic loads.
func (d *Delay) Get(c Class, now time.Time) (delay time.Duration, ok bool) {
	if d.cfg.Constant > 0 {
		return d.cfg.Constant, true
	}
	cs := d.load(c)
	if cs == nil {
		return 0, false
	}
	t := d.since(now)
	at := cs.cachedAt.Load()
	if t-at >= int64(d.cfg.Refresh) && cs.cachedAt.CompareAndSwap(at, t) {
		v, _ := d.compute(cs, t)
		cs.cached.Store(v)
	}
	v := cs.cached.Load()
	if v < 0 {
		return 0, false
	}
	return time.Duration(v), true
}

// compute returns the clamped percentile at t (-1 when there are too few
// samples) and the number of samples.
func (d *Delay) compute(cs *classStats, t int64) (int64, int) {
	sw := t / d.sub
	var sum [histBuckets]uint64
	total := uint64(0)
	for h := range cs.hists {
		e := cs.epochs[h].Load()
		if e < 0 || e > sw || e <= sw-int64(len(cs.hists)) {
			continue // unused, or older than the window
		}
		for i := range sum {
			n := uint64(cs.hists[h].counts[i].Load())
			sum[i] += n
			total += n
		}
	}
	if total < uint64(d.cfg.MinSamples) || total == 0 {
		return -1, int(total)
	}
	rank := uint64(math.Ceil(d.cfg.Percentile * float64(total)))
	rank = min(max(rank, 1), total)
	seen := uint64(0)
	b := histBuckets - 1
	for i, n := range sum {
		seen += n
		if seen >= rank {
			b = i
			break
		}
	}
	v := min(max(bucketUpper(b), d.cfg.Floor), d.cfg.Cap)
	return int64(v), int(total)
}

// ClassDelay is one class's state, as exported in metrics.
type ClassDelay struct {
	Key     uint64
	Label   string
	Delay   time.Duration // valid when OK
	OK      bool          // enough samples to hedge (always, with a constant delay)
	Samples int           // latencies in the window (0 with a constant delay)
}

// Stats returns the state of every registered class, computed now (by the
// Delay's clock). It allocates; it is meant for scrapes and tests.
func (d *Delay) Stats() []ClassDelay {
	d.mu.Lock()
	keys := append([]classKey(nil), d.keys...)
	d.mu.Unlock()
	t := d.since(d.clock.Now())
	out := make([]ClassDelay, 0, len(keys))
	for i, k := range keys {
		cd := ClassDelay{Key: k.key, Label: k.label}
		if d.cfg.Constant > 0 {
			cd.Delay, cd.OK = d.cfg.Constant, true
		} else if cs := d.stats[i].Load(); cs != nil {
			v, n := d.compute(cs, t)
			cd.Samples = n
			if v >= 0 {
				cd.Delay, cd.OK = time.Duration(v), true
			}
		}
		out = append(out, cd)
	}
	return out
}

// Config returns the configuration in use, defaults filled in.
func (d *Delay) Config() DelayConfig { return d.cfg }
