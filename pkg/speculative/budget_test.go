package speculative

import (
	"errors"
	"sync"
	"testing"
	"time"
)

func newTestBudget(t *testing.T, cfg BudgetConfig) (*Budget, *fakeClock) {
	t.Helper()
	clk := newFakeClock()
	b, err := NewBudget(cfg, clk)
	if err != nil {
		t.Fatal(err)
	}
	return b, clk
}

func TestBudgetConfig(t *testing.T) {
	b, _ := newTestBudget(t, BudgetConfig{})
	if c := b.Config(); c.Ratio != 0.05 || c.MinHedges != 10 || c.Window != 10*time.Second {
		t.Errorf("defaults %+v", c)
	}
	for _, bad := range []BudgetConfig{{Ratio: 1.5}, {Ratio: -1}, {MinHedges: -1}, {Window: -1}, {Window: time.Microsecond}} {
		if _, err := NewBudget(bad, nil); !errors.Is(err, ErrConfig) {
			t.Errorf("NewBudget(%+v) error %v; want ErrConfig", bad, err)
		}
	}
}

func tryN(b *Budget, n int) int {
	ok := 0
	for range n {
		if b.TryHedge(b.clock.Now()) {
			ok++
		}
	}
	return ok
}

// TestBudgetFloor: a quiet proxy may hedge MinHedges per window.
func TestBudgetFloor(t *testing.T) {
	b, clk := newTestBudget(t, BudgetConfig{MinHedges: 3, Window: time.Second})
	if got := tryN(b, 10); got != 3 {
		t.Errorf("no requests: %d hedges allowed; want the floor 3", got)
	}
	// Two windows later the previous one no longer counts.
	clk.Advance(2 * time.Second)
	if got := tryN(b, 10); got != 3 {
		t.Errorf("two windows later: %d hedges; want 3", got)
	}
	if s := b.Stats(); s.Allowed != 6 || s.Denied != 14 {
		t.Errorf("stats %+v", s)
	}
}

// TestBudgetRatio: under load, hedges are capped at Ratio of requests.
func TestBudgetRatio(t *testing.T) {
	b, clk := newTestBudget(t, BudgetConfig{Ratio: 0.05, MinHedges: 1, Window: time.Second})
	for range 1000 {
		b.RecordRequest(clk.Now())
	}
	if got := tryN(b, 100); got != 50 {
		t.Errorf("1000 requests: %d hedges; want 50", got)
	}
	// Half a window later the previous window counts half: 500 requests
	// and 25 hedges of it, plus 1000 new requests → 75 allowed in all, 50
	// more.
	clk.Advance(1500 * time.Millisecond)
	for range 1000 {
		b.RecordRequest(clk.Now())
	}
	if got := tryN(b, 100); got < 49 || got > 51 {
		t.Errorf("sliding: %d hedges; want about 50", got)
	}
	// After a quiet spell only the new window counts.
	clk.Advance(10 * time.Second)
	for range 200 {
		b.RecordRequest(clk.Now())
	}
	if got := tryN(b, 1000); got != 10 {
		t.Errorf("after a quiet spell: %d hedges; want 10", got)
	}
}

func TestBudgetPause(t *testing.T) {
	b, clk := newTestBudget(t, BudgetConfig{MinHedges: 100})
	b.Pause(clk.Now().Add(time.Second))
	b.Pause(clk.Now().Add(time.Millisecond)) // does not shorten
	if b.TryHedge(clk.Now()) || !b.Paused(clk.Now()) {
		t.Error("hedge allowed while paused")
	}
	clk.Advance(500 * time.Millisecond)
	if b.TryHedge(clk.Now()) {
		t.Error("hedge allowed while still paused")
	}
	clk.Advance(500 * time.Millisecond)
	if !b.TryHedge(clk.Now()) || b.Paused(clk.Now()) {
		t.Error("no hedge after the pause")
	}
	if s := b.Stats(); s.DeniedPaused != 2 || s.Allowed != 1 {
		t.Errorf("stats %+v", s)
	}
}

// TestBudgetConcurrent: the cap holds with TryHedge racing (-race).
func TestBudgetConcurrent(t *testing.T) {
	b, clk := newTestBudget(t, BudgetConfig{Ratio: 0.1, MinHedges: 1, Window: time.Hour})
	var wg sync.WaitGroup
	var mu sync.Mutex
	allowed := 0
	for range 4 {
		wg.Go(func() {
			n := 0
			for range 10000 {
				b.RecordRequest(clk.Now())
				if b.TryHedge(clk.Now()) {
					n++
				}
			}
			mu.Lock()
			allowed += n
			mu.Unlock()
		})
	}
	wg.Wait()
	if allowed > 4000 || allowed < 3900 {
		t.Errorf("%d hedges for 40000 requests at 10%%", allowed)
	}
}

func TestBudgetAllocs(t *testing.T) {
	b, clk := newTestBudget(t, BudgetConfig{})
	if n := testing.AllocsPerRun(1000, func() { b.RecordRequest(clk.Now()); b.TryHedge(clk.Now()) }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}
