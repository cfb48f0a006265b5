package speculative

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

func TestBucketBounds(t *testing.T) {
	prevUpper := time.Duration(0)
	for i := 0; i < histBuckets; i++ {
		up := bucketUpper(i)
		if up <= prevUpper {
			t.Fatalf("bucket %d upper %v not above bucket %d's %v", i, up, i-1, prevUpper)
		}
		// The values just below the upper bound and at the lower bound
		// land in the bucket.
		if got := bucketOf(up - 1); got != i {
			t.Fatalf("bucketOf(%v) = %d; want %d", up-1, got, i)
		}
		if got := bucketOf(prevUpper); got != i {
			t.Fatalf("bucketOf(%v) = %d; want %d", prevUpper, got, i)
		}
		// At most 12.5% wide (beyond the linear first buckets).
		if i >= histSub*2 && float64(up-prevUpper)/float64(prevUpper) > 0.1251 {
			t.Fatalf("bucket %d [%v, %v) is wider than 12.5%%", i, prevUpper, up)
		}
		prevUpper = up
	}
	for _, d := range []time.Duration{-1, 0, 500, time.Hour, 1<<63 - 1} {
		if b := bucketOf(d); b < 0 || b >= histBuckets {
			t.Errorf("bucketOf(%v) = %d out of range", d, b)
		}
	}
	if bucketOf(time.Hour) != histBuckets-1 {
		t.Error("an hour is not in the last bucket")
	}
}

func TestDelayConfig(t *testing.T) {
	d, err := NewDelay(DelayConfig{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := d.Config()
	if c.Percentile != 0.99 || c.Window != 10*time.Second || c.SubWindows != 4 || c.MinSamples != 100 ||
		c.Floor != time.Millisecond || c.Cap != 250*time.Millisecond || c.MaxClasses != 256 || c.Refresh != 100*time.Millisecond {
		t.Errorf("defaults: %+v", c)
	}
	for _, bad := range []DelayConfig{
		{Percentile: 1.5}, {Percentile: -0.5}, {Window: -1}, {SubWindows: 17}, {SubWindows: -1},
		{Floor: time.Second, Cap: time.Millisecond}, {MaxClasses: 1 << 20}, {Constant: -1},
		{Window: time.Millisecond, SubWindows: 4}, {MinSamples: -1}, {Refresh: -1},
	} {
		if _, err := NewDelay(bad, nil); !errors.Is(err, ErrConfig) {
			t.Errorf("NewDelay(%+v) error %v; want ErrConfig", bad, err)
		}
	}
	if d, err := NewDelay(DelayConfig{Floor: time.Second}, nil); err != nil || d.Config().Cap != time.Second {
		t.Errorf("floor above the default cap: cap %v, %v; want the cap raised to the floor", d.Config().Cap, err)
	}
}

func newTestDelay(t *testing.T, cfg DelayConfig) (*Delay, *fakeClock) {
	t.Helper()
	clk := newFakeClock()
	d, err := NewDelay(cfg, clk)
	if err != nil {
		t.Fatal(err)
	}
	return d, clk
}

// TestDelayPercentile: the delay is the top of the bucket holding the
// percentile, so at least the wanted share of requests answers before it.
func TestDelayPercentile(t *testing.T) {
	d, clk := newTestDelay(t, DelayConfig{MinSamples: 10, Cap: time.Second})
	c := d.Class(1, "t")
	now := clk.Now()
	// 990 fast requests (1ms-2ms), 10 slow ones (200ms).
	for i := range 990 {
		d.Record(c, time.Millisecond+time.Duration(i)*time.Microsecond, now)
	}
	for range 10 {
		d.Record(c, 200*time.Millisecond, now)
	}
	got, ok := d.Get(c, now)
	if !ok {
		t.Fatal("no delay with 1000 samples")
	}
	// p99 is the 990th sample, 1.989ms; its bucket ends at most 12.5% above.
	if got < 1989*time.Microsecond || got > 2240*time.Microsecond {
		t.Errorf("p99 delay %v; want about 2ms", got)
	}
	// p99.5 falls among the slow ones.
	d2, clk2 := newTestDelay(t, DelayConfig{MinSamples: 10, Percentile: 0.995, Cap: time.Second})
	c2 := d2.Class(1, "t")
	for i := range 990 {
		d2.Record(c2, time.Millisecond+time.Duration(i)*time.Microsecond, clk2.Now())
	}
	for range 10 {
		d2.Record(c2, 200*time.Millisecond, clk2.Now())
	}
	if got, _ := d2.Get(c2, clk2.Now()); got < 200*time.Millisecond || got > 225*time.Millisecond {
		t.Errorf("p99.5 delay %v; want about 200ms", got)
	}
}

func TestDelayMinSamplesFloorCap(t *testing.T) {
	d, clk := newTestDelay(t, DelayConfig{MinSamples: 50, Floor: 2 * time.Millisecond, Cap: 50 * time.Millisecond, Refresh: time.Nanosecond})
	c := d.Class(1, "t")
	now := clk.Now()
	for range 49 {
		d.Record(c, 10*time.Millisecond, now)
	}
	if _, ok := d.Get(c, now); ok {
		t.Error("hedging with 49 samples of 50 needed")
	}
	d.Record(c, 10*time.Millisecond, now)
	now = clk.Advance(time.Millisecond)
	if v, ok := d.Get(c, now); !ok || v < 10*time.Millisecond || v > 11250*time.Microsecond {
		t.Errorf("with 50 samples of 10ms: %v, %v", v, ok)
	}
	// A sick node: everything is slow. The cap holds.
	for range 1000 {
		d.Record(c, 3*time.Second, now)
	}
	now = clk.Advance(time.Millisecond)
	if v, ok := d.Get(c, now); !ok || v != 50*time.Millisecond {
		t.Errorf("all slow: %v, %v; want the cap 50ms", v, ok)
	}
	// Very fast: the floor holds.
	d3, clk3 := newTestDelay(t, DelayConfig{MinSamples: 1, Floor: 2 * time.Millisecond})
	c3 := d3.Class(1, "t")
	d3.Record(c3, 100*time.Microsecond, clk3.Now())
	if v, ok := d3.Get(c3, clk3.Now()); !ok || v != 2*time.Millisecond {
		t.Errorf("fast: %v, %v; want the floor 2ms", v, ok)
	}
}

// TestDelayWindowSlides: latencies older than the window stop counting.
func TestDelayWindowSlides(t *testing.T) {
	d, clk := newTestDelay(t, DelayConfig{MinSamples: 10, Window: 4 * time.Second, SubWindows: 4, Refresh: time.Nanosecond, Cap: time.Second})
	c := d.Class(7, "t")
	for range 100 {
		d.Record(c, 100*time.Millisecond, clk.Now())
	}
	clk.Advance(time.Second)
	for range 100 {
		d.Record(c, 5*time.Millisecond, clk.Now())
	}
	if v, _ := d.Get(c, clk.Now()); v < 100*time.Millisecond {
		t.Errorf("slow samples 1s old ignored: %v", v)
	}
	// 3.x seconds later the slow sub-window is out, the fast one still in.
	now := clk.Advance(3*time.Second + 100*time.Millisecond)
	if v, ok := d.Get(c, now); !ok || v > 6*time.Millisecond {
		t.Errorf("after the slow samples left the window: %v, %v; want about 5ms", v, ok)
	}
	// And then the fast one is gone too: too few samples.
	now = clk.Advance(time.Second)
	if _, ok := d.Get(c, now); ok {
		t.Error("still hedging with an empty window")
	}
	// A sub-window slot reused later starts empty.
	for range 20 {
		d.Record(c, 50*time.Millisecond, now)
	}
	now = now.Add(time.Millisecond)
	if v, ok := d.Get(c, now); !ok || v < 50*time.Millisecond || v > 57*time.Millisecond {
		t.Errorf("after reuse: %v, %v; want about 50ms", v, ok)
	}
	// A sample stamped in an already recycled sub-window is dropped.
	d.Record(c, time.Second, now.Add(-8*time.Second))
	if v, _ := d.Get(c, now.Add(time.Millisecond)); v > 57*time.Millisecond {
		t.Errorf("late sample counted: %v", v)
	}
}

// TestDelayRefresh: the computed value is reused for Refresh.
func TestDelayRefresh(t *testing.T) {
	d, clk := newTestDelay(t, DelayConfig{MinSamples: 1, Refresh: 100 * time.Millisecond, Cap: time.Second})
	c := d.Class(1, "t")
	d.Record(c, 10*time.Millisecond, clk.Now())
	v1, _ := d.Get(c, clk.Now())
	for range 100 {
		d.Record(c, 500*time.Millisecond, clk.Now())
	}
	if v, _ := d.Get(c, clk.Advance(50*time.Millisecond)); v != v1 {
		t.Errorf("recomputed before Refresh: %v, was %v", v, v1)
	}
	if v, _ := d.Get(c, clk.Advance(50*time.Millisecond)); v < 500*time.Millisecond {
		t.Errorf("not recomputed after Refresh: %v", v)
	}
}

func TestDelayConstant(t *testing.T) {
	d, clk := newTestDelay(t, DelayConfig{Constant: 7 * time.Millisecond})
	c := d.Class(1, "t")
	d.Record(c, time.Second, clk.Now())
	for _, cl := range []Class{c, {}} {
		if v, ok := d.Get(cl, clk.Now()); !ok || v != 7*time.Millisecond {
			t.Errorf("constant: %v, %v", v, ok)
		}
	}
	if s := d.Stats(); len(s) != 1 || !s[0].OK || s[0].Delay != 7*time.Millisecond {
		t.Errorf("constant stats %+v", s)
	}
}

// TestDelayClassesLRU: the registry is bounded; the least recently looked
// up class goes, and its stale handles stop counting.
func TestDelayClassesLRU(t *testing.T) {
	d, clk := newTestDelay(t, DelayConfig{MaxClasses: 3, MinSamples: 1, Refresh: time.Nanosecond})
	now := clk.Now()
	a, b, c := d.Class(1, "a"), d.Class(2, "b"), d.Class(3, "c")
	if a == b || b == c || a.idx > 2 || b.idx > 2 || c.idx > 2 {
		t.Fatalf("classes %v %v %v", a, b, c)
	}
	if again := d.Class(1, "ignored"); again != a {
		t.Fatalf("Class(1) again = %v; want %v", again, a)
	}
	// None has a latency yet, and key 1 was looked up again: key 2 is the
	// least recently used.
	e := d.Class(4, "e")
	if e.idx != b.idx || e == b {
		t.Fatalf("new class %v did not take the LRU slot of %v", e, b)
	}
	if _, ok := d.Get(b, now); ok || !d.Stale(b) || d.Stale(a) || d.Stale(Class{}) {
		t.Error("a stale handle still gets a delay, or Stale is wrong")
	}
	d.Record(b, 10*time.Millisecond, now) // ignored
	if _, ok := d.Get(e, now.Add(time.Millisecond)); ok {
		t.Error("the new class inherited samples of the evicted one")
	}
	labels := map[string]bool{}
	for _, s := range d.Stats() {
		labels[s.Label] = true
	}
	if len(labels) != 3 || !labels["a"] || !labels["c"] || !labels["e"] {
		t.Errorf("labels after eviction: %v", labels)
	}
	if _, ok := d.Get(Class{}, now); ok {
		t.Error("the zero Class gets a delay")
	}
	// Latencies count as use: a handle kept and recorded into, never looked
	// up again, outlives classes looked up later but idle.
	d.Record(c, time.Millisecond, now.Add(20*time.Second))
	d.Class(1, "a")
	d.Class(4, "e")
	f := d.Class(5, "f")
	if f.idx == c.idx || d.Stale(c) {
		t.Errorf("class c, recorded into last, was evicted")
	}
	if !d.Stale(a) && !d.Stale(e) {
		t.Errorf("neither idle class was evicted")
	}
	d.Record(Class{}, time.Second, now) // no panic, no effect
	d.Record(Class{idx: 99, gen: 1}, time.Second, now)
}

// TestDelayConcurrent: Record, Get and Class from many goroutines, under
// -race.
func TestDelayConcurrent(t *testing.T) {
	d, err := NewDelay(DelayConfig{MaxClasses: 8, MinSamples: 10, Refresh: time.Microsecond, Window: 40 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for i := range 20000 {
				c := d.Class(uint64(r.IntN(12)), fmt.Sprint("class", g))
				now := time.Now()
				d.Record(c, time.Duration(r.IntN(5000))*time.Microsecond, now)
				if i%10 == 0 {
					d.Get(c, now)
				}
			}
		})
	}
	wg.Go(func() {
		for range 50 {
			d.Stats()
			time.Sleep(time.Millisecond)
		}
	})
	wg.Wait()
	if n := len(d.Stats()); n != 8 {
		t.Errorf("%d classes; want 8", n)
	}
}

func TestDelayRecordAllocs(t *testing.T) {
	d, clk := newTestDelay(t, DelayConfig{MinSamples: 1})
	c := d.Class(1, "t")
	now := clk.Now()
	if n := testing.AllocsPerRun(1000, func() { d.Record(c, time.Millisecond, now); d.Get(c, now) }); n != 0 {
		t.Errorf("Record+Get: %v allocations", n)
	}
}
