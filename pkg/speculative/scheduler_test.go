package speculative

import (
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// recorder is a Target that remembers what fired.
type recorder struct {
	mu     sync.Mutex
	tokens []uint64
	ch     chan uint64 // if set, each token is also sent here
}

func (r *recorder) Hedge(token uint64) {
	r.mu.Lock()
	r.tokens = append(r.tokens, token)
	r.mu.Unlock()
	if r.ch != nil {
		r.ch <- token
	}
}

func (r *recorder) fired() []uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]uint64(nil), r.tokens...)
}

// newTestScheduler returns a Scheduler without its goroutine: the test
// calls advance itself.
func newTestScheduler(t *testing.T, cfg SchedulerConfig) (*Scheduler, *fakeClock) {
	t.Helper()
	clk := newFakeClock()
	s, err := newScheduler(cfg, clk)
	if err != nil {
		t.Fatal(err)
	}
	return s, clk
}

func TestSchedulerConfig(t *testing.T) {
	for _, bad := range []SchedulerConfig{{Resolution: -1}, {Resolution: time.Microsecond}, {Slots: -1}, {Shards: -1}, {Slots: 1 << 21}} {
		if _, err := NewScheduler(bad, nil); !errors.Is(err, ErrConfig) {
			t.Errorf("NewScheduler(%+v) error %v; want ErrConfig", bad, err)
		}
	}
	s, err := newScheduler(SchedulerConfig{Slots: 1000, Shards: 3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.mask != 1023 || len(s.shards) != 4 {
		t.Errorf("slots %d shards %d; want rounded up to 1024 and 4", s.mask+1, len(s.shards))
	}
}

// TestSchedulerFiresInOrderNeverEarly: each timer fires at the first tick at
// or after its deadline.
func TestSchedulerFiresInOrderNeverEarly(t *testing.T) {
	s, clk := newTestScheduler(t, SchedulerConfig{Resolution: time.Millisecond, Slots: 64, Shards: 4})
	var r recorder
	start := clk.Now()
	delays := []time.Duration{5 * time.Millisecond, 1 * time.Millisecond, 3500 * time.Microsecond, 200 * time.Millisecond, 64 * time.Millisecond, 0}
	timers := make([]Timer, len(delays))
	for i, d := range delays {
		if !s.Arm(&timers[i], start.Add(d), &r, uint64(i)) {
			t.Fatal("Arm returned false")
		}
	}
	if s.Pending() != len(delays) {
		t.Fatalf("pending %d", s.Pending())
	}
	fireAt := map[uint64]time.Duration{}
	for ms := 0; ms <= 250; ms++ {
		now := start.Add(time.Duration(ms) * time.Millisecond)
		clk.Advance(now.Sub(clk.Now()))
		before := len(r.fired())
		s.advance(now)
		for _, tok := range r.fired()[before:] {
			fireAt[tok] = time.Duration(ms) * time.Millisecond
		}
	}
	for i, d := range delays {
		got, ok := fireAt[uint64(i)]
		if !ok {
			t.Errorf("timer %d (%v) never fired", i, d)
			continue
		}
		// Fires at the first tick at or after the deadline; a deadline
		// already due at arming fires on the next tick.
		want := d.Round(time.Millisecond)
		if d%time.Millisecond != 0 {
			want = d.Truncate(time.Millisecond) + time.Millisecond
		}
		if d == 0 {
			want = time.Millisecond
		}
		if got != want {
			t.Errorf("timer %d (%v) fired at %v; want %v", i, d, got, want)
		}
	}
	if n := len(r.fired()); n != len(delays) {
		t.Errorf("%d firings for %d timers", n, len(delays))
	}
	if s.Pending() != 0 {
		t.Errorf("pending %d after all fired", s.Pending())
	}
}

func TestSchedulerDisarm(t *testing.T) {
	s, clk := newTestScheduler(t, SchedulerConfig{})
	var r recorder
	var a, b, c Timer
	now := clk.Now()
	s.Arm(&a, now.Add(2*time.Millisecond), &r, 1)
	s.Arm(&b, now.Add(2*time.Millisecond), &r, 2)
	if !s.Disarm(&a) {
		t.Error("Disarm of an armed timer returned false")
	}
	if s.Disarm(&a) {
		t.Error("second Disarm returned true")
	}
	if s.Disarm(&c) {
		t.Error("Disarm of a never-armed timer returned true")
	}
	s.advance(clk.Advance(5 * time.Millisecond))
	if got := r.fired(); len(got) != 1 || got[0] != 2 {
		t.Errorf("fired %v; want [2]", got)
	}
	if s.Disarm(&b) {
		t.Error("Disarm after firing returned true")
	}
	if s.Pending() != 0 {
		t.Errorf("pending %d: the disarmed entry was not dropped", s.Pending())
	}
}

// TestSchedulerRearm: a Timer armed again (a pooled request reused) fires
// only for its last arming.
func TestSchedulerRearm(t *testing.T) {
	s, clk := newTestScheduler(t, SchedulerConfig{})
	var r recorder
	var tm Timer
	now := clk.Now()
	s.Arm(&tm, now.Add(2*time.Millisecond), &r, 1)
	s.Arm(&tm, now.Add(4*time.Millisecond), &r, 2) // re-armed while armed
	s.advance(clk.Advance(3 * time.Millisecond))
	if got := r.fired(); len(got) != 0 {
		t.Fatalf("fired %v at 3ms", got)
	}
	s.advance(clk.Advance(2 * time.Millisecond))
	if got := r.fired(); len(got) != 1 || got[0] != 2 {
		t.Fatalf("fired %v; want [2]", got)
	}
	// Fired, then reused: disarmed before its deadline, armed again.
	now = clk.Now()
	s.Arm(&tm, now.Add(time.Millisecond), &r, 3)
	s.Disarm(&tm)
	s.Arm(&tm, now.Add(3*time.Millisecond), &r, 4)
	s.advance(clk.Advance(10 * time.Millisecond))
	if got := r.fired(); len(got) != 2 || got[1] != 4 {
		t.Fatalf("fired %v; want [2 4]", got)
	}
}

// TestSchedulerLongDelaysAndPauses: deadlines beyond one turn of the wheel
// wait their turn, and a goroutine that fell far behind catches up.
func TestSchedulerLongDelaysAndPauses(t *testing.T) {
	s, clk := newTestScheduler(t, SchedulerConfig{Slots: 16})
	var r recorder
	start := clk.Now()
	var near, far, farther Timer
	s.Arm(&near, start.Add(3*time.Millisecond), &r, 1)
	s.Arm(&far, start.Add(35*time.Millisecond), &r, 2) // two turns of 16
	s.Arm(&farther, start.Add(500*time.Millisecond), &r, 3)
	for ms := 1; ms <= 34; ms++ {
		s.advance(clk.Advance(time.Millisecond))
	}
	if got := r.fired(); len(got) != 1 || got[0] != 1 {
		t.Fatalf("at 34ms fired %v; want [1]", got)
	}
	s.advance(clk.Advance(time.Millisecond))
	if got := r.fired(); len(got) != 2 || got[1] != 2 {
		t.Fatalf("at 35ms fired %v; want [1 2]", got)
	}
	// A pause of a second: one advance covers it.
	s.advance(clk.Advance(time.Second))
	if got := r.fired(); len(got) != 3 || got[2] != 3 {
		t.Fatalf("after the pause fired %v; want [1 2 3]", got)
	}
	// A timer armed with a deadline in the past fires on the next advance.
	var late Timer
	s.Arm(&late, start, &r, 4)
	s.advance(clk.Advance(time.Millisecond))
	if got := r.fired(); len(got) != 4 {
		t.Fatalf("a past deadline did not fire: %v", got)
	}
}

// TestSchedulerRealTime: with its goroutine, timers fire about on time,
// the goroutine parks when idle and wakes for the next Arm, and Stop ends
// it (TestMain checks for leaks).
func TestSchedulerRealTime(t *testing.T) {
	s, err := NewScheduler(SchedulerConfig{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := recorder{ch: make(chan uint64, 10)}
	for round := range 3 {
		var tm Timer
		start := time.Now()
		s.Arm(&tm, start.Add(5*time.Millisecond), &r, uint64(round))
		select {
		case tok := <-r.ch:
			if el := time.Since(start); tok != uint64(round) || el < 5*time.Millisecond {
				t.Fatalf("round %d: token %d after %v", round, tok, el)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: the timer did not fire", round)
		}
		// Let it park.
		deadline := time.Now().Add(5 * time.Second)
		for !s.parked.Load() && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if !s.parked.Load() {
			t.Fatal("the goroutine does not park when idle")
		}
	}
	s.Stop()
	s.Stop() // twice is fine
	var tm Timer
	if s.Arm(&tm, time.Now(), &r, 9) {
		t.Error("Arm after Stop returned true")
	}
}

// TestSchedulerConcurrent: many goroutines arm and disarm; every arming
// fires at most once, and never after a Disarm that returned true (-race).
func TestSchedulerConcurrent(t *testing.T) {
	s, err := NewScheduler(SchedulerConfig{Shards: 4}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	const goroutines, perG = 4, 2000
	type req struct {
		tm       Timer
		fired    atomic.Int32
		disarmed atomic.Bool // Disarm returned true
	}
	reqs := make([]req, goroutines*perG)
	tgt := targetFunc(func(tok uint64) { reqs[tok].fired.Add(1) })
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for i := range perG {
				id := g*perG + i
				rq := &reqs[id]
				s.Arm(&rq.tm, time.Now().Add(time.Duration(rng.IntN(3000))*time.Microsecond), tgt, uint64(id))
				if rng.IntN(2) == 0 {
					time.Sleep(time.Duration(rng.IntN(1000)) * time.Microsecond / 100)
					rq.disarmed.Store(s.Disarm(&rq.tm))
				}
			}
		})
	}
	wg.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for s.Pending() > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if s.Pending() != 0 {
		t.Fatalf("%d entries still pending", s.Pending())
	}
	var fired, disarmed int
	for i := range reqs {
		f := reqs[i].fired.Load()
		switch {
		case f > 1:
			t.Fatalf("arming %d fired %d times", i, f)
		case f == 1 && reqs[i].disarmed.Load():
			t.Fatalf("arming %d fired after a successful Disarm", i)
		case f == 0 && !reqs[i].disarmed.Load():
			t.Fatalf("arming %d neither fired nor was disarmed", i)
		}
		fired += int(f)
		if reqs[i].disarmed.Load() {
			disarmed++
		}
	}
	t.Logf("%d fired, %d disarmed", fired, disarmed)
}

type targetFunc func(uint64)

func (f targetFunc) Hedge(tok uint64) { f(tok) }

// TestSchedulerHedgeMayArm: Hedge may arm another timer (a second hedge).
func TestSchedulerHedgeMayArm(t *testing.T) {
	s, clk := newTestScheduler(t, SchedulerConfig{})
	var first, second Timer
	var r recorder
	chain := targetFunc(func(tok uint64) {
		r.Hedge(tok)
		if tok == 1 {
			s.Arm(&second, clk.Now().Add(time.Millisecond), &r, 2)
		}
	})
	s.Arm(&first, clk.Now().Add(time.Millisecond), chain, 1)
	s.advance(clk.Advance(time.Millisecond))
	s.advance(clk.Advance(time.Millisecond))
	if got := r.fired(); len(got) != 2 {
		t.Errorf("fired %v; want [1 2]", got)
	}
}

func TestArmDisarmAllocs(t *testing.T) {
	s, clk := newTestScheduler(t, SchedulerConfig{})
	var tm Timer
	var r recorder
	// Once a slice has grown to the load it is reused: run a few ticks of
	// steady arming, then arming costs nothing.
	for range 5 {
		now := clk.Now()
		for range 20 {
			s.Arm(&tm, now.Add(time.Millisecond), &r, 1)
			s.Disarm(&tm)
		}
		s.advance(clk.Advance(time.Millisecond))
	}
	now := clk.Now()
	if n := testing.AllocsPerRun(10, func() {
		s.Arm(&tm, now.Add(time.Millisecond), &r, 1)
		s.Disarm(&tm)
	}); n != 0 {
		t.Errorf("Arm+Disarm: %v allocations", n)
	}
}
