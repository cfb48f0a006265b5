package speculative

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Target is told when a hedge timer fires. The proxy's request implements
// it.
type Target interface {
	// Hedge is called on the Scheduler's goroutine when the timer armed
	// with token fires. It must return quickly and never block (send the
	// hedge, or hand it to another goroutine): all timers wait for it. It
	// may call Arm and Disarm, but not Stop.
	Hedge(token uint64)
}

// Timer is the state of one hedge timer, embedded by its owner (the
// request) so that arming allocates nothing. The zero value is ready to
// use; a Timer may be armed again after it fired or was disarmed, which
// is how a pooled request reuses it. A Timer must not be copied after first
// use.
type Timer struct {
	// state is gen<<2 | one of the states below. Every Arm starts a new
	// generation, so entries of earlier armings, still in the wheel, are
	// recognized as stale and dropped when they come due (lazy deletion).
	state atomic.Uint64
}

// Timer states (low two bits of Timer.state).
const (
	timerIdle     = 0
	timerArmed    = 1
	timerFired    = 2
	timerDisarmed = 3
)

// SchedulerConfig configures a Scheduler. The zero value of every field
// means its default.
type SchedulerConfig struct {
	// Resolution is the tick of the timing wheel: timers fire up to one
	// tick (plus scheduling latency) late, never early. Default 1ms.
	Resolution time.Duration
	// Slots is the number of ticks in the wheel, rounded up to a power of
	// two; timers further out than Slots ticks go round the wheel. Default
	// 1024 (about a second at 1ms).
	Slots int
	// Shards splits the wheel, each with its own lock, so that concurrent
	// Arm calls rarely contend. Default 4×GOMAXPROCS, rounded up to a power
	// of two, at most 64.
	Shards int
}

// Scheduler runs hedge timers on one goroutine, on a timing wheel: Arm
// appends an entry (deadline, timer, generation, target, token) to the
// wheel slot of its deadline under the slot's shard lock; Disarm is one
// compare-and-swap on the Timer and leaves the entry to be dropped when it
// comes due. Both are allocation-free once the wheel's slices have grown to
// the load. The goroutine ticks every Resolution while timers are pending
// and sleeps when there are none.
//
// The contract with the caller: Hedge(token) is called at most once per
// arming, and never for an arming whose Disarm returned true. A Disarm
// that returns false came too late: Hedge has been or is being called, and
// the caller resolves the race (an answer arriving while the hedge is
// sent) under its own lock. Arm before sending the request, so that an
// answer arriving at once finds the timer armed.
type Scheduler struct {
	clock Clock
	epoch time.Time
	res   int64 // ns per tick
	mask  int64 // slots - 1

	shards []shard

	_       [64]byte    // parked is read by every Arm: keep it off written lines
	parked  atomic.Bool // the goroutine waits for wake
	stopped atomic.Bool
	_       [64]byte
	wake    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
}

type shard struct {
	mu      sync.Mutex
	cursor  int64     // last tick processed; guarded by mu
	pending int       // entries in slots, stale ones included; guarded by mu
	slots   [][]entry // by tick & mask; nil when empty
	// free holds emptied slices for slots that get their first entry, so
	// that memory follows the slots in use (the delay span times the arming
	// rate), not the whole wheel.
	free [][]entry
	_    [64]byte // keep shards' locks on separate cache lines
}

// Bounds on what the free lists keep after a burst.
const (
	maxFreeSlices = 64
	maxFreeCap    = 1 << 14 // entries
)

type entry struct {
	deadline int64 // tick
	t        *Timer
	want     uint64 // the Timer's state while this arming is armed
	target   Target
	token    uint64
}

// NewScheduler starts a Scheduler. clock nil means the real clock; a fake
// one only changes what time the wheel reads, the goroutine still ticks in
// real time. Stop it when done.
func NewScheduler(cfg SchedulerConfig, clock Clock) (*Scheduler, error) {
	s, err := newScheduler(cfg, clock)
	if err != nil {
		return nil, err
	}
	go s.run()
	return s, nil
}

func newScheduler(cfg SchedulerConfig, clock Clock) (*Scheduler, error) {
	if cfg.Resolution < 0 || cfg.Slots < 0 || cfg.Shards < 0 {
		return nil, configError("negative value in scheduler config")
	}
	if cfg.Resolution == 0 {
		cfg.Resolution = time.Millisecond
	}
	if cfg.Resolution < 10*time.Microsecond {
		return nil, configError("scheduler resolution %s is below 10µs", cfg.Resolution)
	}
	if cfg.Slots == 0 {
		cfg.Slots = 1024
	}
	if cfg.Slots > 1<<20 {
		return nil, configError("%d scheduler slots, at most %d", cfg.Slots, 1<<20)
	}
	if cfg.Shards == 0 {
		cfg.Shards = 4 * runtime.GOMAXPROCS(0)
	}
	if cfg.Shards > 64 {
		cfg.Shards = 64
	}
	if clock == nil {
		clock = realClock{}
	}
	slots, shards := ceilPow2(cfg.Slots), ceilPow2(cfg.Shards)
	s := &Scheduler{
		clock:  clock,
		epoch:  clock.Now(),
		res:    int64(cfg.Resolution),
		mask:   int64(slots - 1),
		shards: make([]shard, shards),
		wake:   make(chan struct{}, 1),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	for i := range s.shards {
		s.shards[i].slots = make([][]entry, slots)
	}
	return s, nil
}

func ceilPow2(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}

// tickOf returns the tick at or after t.
func (s *Scheduler) tickOf(t time.Time) int64 {
	ns := int64(t.Sub(s.epoch))
	if ns <= 0 {
		return 0
	}
	return (ns + s.res - 1) / s.res
}

// Arm arms t to call target.Hedge(token) at deadline (by the Scheduler's
// clock; a deadline already past fires on the next tick). Arming an armed
// Timer re-arms it: the earlier arming will not fire. It returns false
// only after Stop, when nothing will fire.
func (s *Scheduler) Arm(t *Timer, deadline time.Time, target Target, token uint64) bool {
	if s.stopped.Load() {
		return false
	}
	var want uint64
	for {
		old := t.state.Load()
		want = (old>>2+1)<<2 | timerArmed
		if t.state.CompareAndSwap(old, want) {
			break
		}
	}
	tick := s.tickOf(deadline)
	sh := &s.shards[rand.Uint64()&uint64(len(s.shards)-1)]
	sh.mu.Lock()
	sh.pending++
	idx := max(tick, sh.cursor+1) & s.mask // a tick already processed goes to the next one
	if sh.slots[idx] == nil && len(sh.free) > 0 {
		sh.slots[idx] = sh.free[len(sh.free)-1]
		sh.free = sh.free[:len(sh.free)-1]
	}
	sh.slots[idx] = append(sh.slots[idx], entry{deadline: tick, t: t, want: want, target: target, token: token})
	sh.mu.Unlock()
	// The goroutine sets parked before it reads the shards' pending counts
	// under their locks; so either it saw this entry, or this sees parked.
	if s.parked.Load() && s.parked.CompareAndSwap(true, false) {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	return true
}

// Disarm stops t's current arming. It returns true when Hedge will not be
// called for it, false when the timer already fired (Hedge has been or is
// being called) or was not armed.
func (s *Scheduler) Disarm(t *Timer) bool {
	for {
		old := t.state.Load()
		if old&3 != timerArmed {
			return false
		}
		if t.state.CompareAndSwap(old, old&^3|timerDisarmed) {
			return true
		}
	}
}

// Stop ends the goroutine and waits for it; timers still armed never fire
// and later Arm calls return false. It may be called more than once, but
// not from Hedge.
func (s *Scheduler) Stop() {
	s.once.Do(func() {
		s.stopped.Store(true)
		close(s.stop)
	})
	<-s.done
}

// Pending returns the number of entries in the wheel, disarmed ones not yet
// dropped included.
func (s *Scheduler) Pending() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += sh.pending
		sh.mu.Unlock()
	}
	return n
}

// run is the Scheduler's goroutine: tick while entries are pending, park
// when there are none.
func (s *Scheduler) run() {
	defer close(s.done)
	ticker := time.NewTicker(time.Duration(s.res))
	defer ticker.Stop()
	for {
		if s.Pending() == 0 {
			ticker.Stop()
			s.parked.Store(true)
			// Arm counts its entry under a shard lock, then looks at
			// parked: either it sees parked and wakes us, or we see its
			// entry here.
			if s.Pending() == 0 {
				select {
				case <-s.wake:
				case <-s.stop:
					return
				}
			}
			s.parked.Store(false)
			ticker.Reset(time.Duration(s.res))
		}
		select {
		case <-ticker.C:
		case <-s.stop:
			return
		}
		s.advance(s.clock.Now())
	}
}

// advance fires every timer due at now.
func (s *Scheduler) advance(now time.Time) {
	nowTick := int64(now.Sub(s.epoch)) / s.res
	for i := range s.shards {
		s.advanceShard(&s.shards[i], nowTick)
	}
}

func (s *Scheduler) advanceShard(sh *shard, nowTick int64) {
	sh.mu.Lock()
	from := sh.cursor + 1
	sh.mu.Unlock()
	// After a long pause, one round of the wheel covers every slot.
	if nowTick-from > s.mask {
		from = nowTick - s.mask
	}
	for tick := from; tick <= nowTick; tick++ {
		sh.mu.Lock()
		sh.cursor = tick
		idx := tick & s.mask
		due := sh.slots[idx]
		if len(due) == 0 {
			sh.mu.Unlock()
			continue
		}
		sh.slots[idx] = nil
		sh.mu.Unlock()

		kept := due[:0]
		dropped := 0
		for _, e := range due {
			if e.t.state.Load() != e.want {
				dropped++ // disarmed or re-armed: a stale entry
				continue
			}
			if e.deadline > nowTick {
				kept = append(kept, e) // a later round of the wheel
				continue
			}
			dropped++
			if e.t.state.CompareAndSwap(e.want, e.want&^3|timerFired) {
				e.target.Hedge(e.token)
			}
		}
		clear(due[len(kept):]) // let the GC have timers and targets
		sh.mu.Lock()
		sh.pending -= dropped
		if len(kept) > 0 {
			sh.slots[idx] = append(sh.slots[idx], kept...)
			clear(kept)
		}
		if len(sh.free) < maxFreeSlices && cap(due) <= maxFreeCap {
			sh.free = append(sh.free, due[:0])
		}
		sh.mu.Unlock()
	}
	sh.mu.Lock()
	sh.cursor = max(sh.cursor, nowTick)
	sh.mu.Unlock()
}
