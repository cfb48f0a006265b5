package speculative

import (
	"testing"
	"time"
)

// Benchmarks of everything on the request path. Run with
//
//	go test -run '^$' -bench . -benchmem ./pkg/speculative/

func BenchmarkDelayRecord(b *testing.B) {
	d, err := NewDelay(DelayConfig{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	c := d.Class(1, "tbl")
	now := time.Now()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		d.Record(c, time.Duration(i&1023)*10*time.Microsecond, now)
		i++
	}
}

// BenchmarkDelayRecordParallel: one class recorded from every P, the
// worst case for its counters' cache lines.
func BenchmarkDelayRecordParallel(b *testing.B) {
	d, err := NewDelay(DelayConfig{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	c := d.Class(1, "tbl")
	now := time.Now()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			d.Record(c, time.Duration(i&1023)*10*time.Microsecond, now)
			i++
		}
	})
}

// BenchmarkDelayClassRecordGet: what a request does when it looks its class
// up each time: Class, Get when sent, Record when answered.
func BenchmarkDelayClassRecordGet(b *testing.B) {
	d, err := NewDelay(DelayConfig{MinSamples: 1}, nil)
	if err != nil {
		b.Fatal(err)
	}
	for k := range uint64(100) {
		d.Class(k, "tbl")
	}
	now := time.Now()
	b.ReportAllocs()
	i := uint64(0)
	for b.Loop() {
		c := d.Class(i%100, "tbl")
		d.Get(c, now)
		d.Record(c, time.Millisecond, now)
		i++
	}
}

// BenchmarkBudget: every request recorded, one in 20 tries a hedge.
func BenchmarkBudget(b *testing.B) {
	bu, err := NewBudget(BudgetConfig{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		bu.RecordRequest(now)
		if i%20 == 0 {
			bu.TryHedge(now)
		}
		i++
	}
}

func BenchmarkBudgetParallel(b *testing.B) {
	bu, err := NewBudget(BudgetConfig{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			bu.RecordRequest(now)
			if i%20 == 0 {
				bu.TryHedge(now)
			}
			i++
		}
	})
}

type nopTarget struct{}

func (nopTarget) Hedge(uint64) {}

// BenchmarkArmDisarm: a request arms its hedge timer when sent and disarms
// it when answered, with the Scheduler's goroutine running. The deadline
// (2ms ahead) is never reached by most armings, as in a proxy where 99% of
// answers beat the hedge delay. The clock is read once per 256 armings:
// the proxy has the send time at hand (and on some virtual machines
// time.Now alone costs more than Arm).
func BenchmarkArmDisarm(b *testing.B) {
	s, err := NewScheduler(SchedulerConfig{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Stop()
	var tm Timer
	var deadline time.Time
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i&255 == 0 {
			deadline = time.Now().Add(2 * time.Millisecond)
		}
		s.Arm(&tm, deadline, nopTarget{}, 1)
		s.Disarm(&tm)
		i++
	}
}

func BenchmarkArmDisarmParallel(b *testing.B) {
	s, err := NewScheduler(SchedulerConfig{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Stop()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var tm Timer
		var deadline time.Time
		i := 0
		for pb.Next() {
			if i&255 == 0 {
				deadline = time.Now().Add(2 * time.Millisecond)
			}
			s.Arm(&tm, deadline, nopTarget{}, 1)
			s.Disarm(&tm)
			i++
		}
	})
}

// BenchmarkTimeNow is the cost of reading the clock here, for scale.
func BenchmarkTimeNow(b *testing.B) {
	var t time.Time
	for b.Loop() {
		t = time.Now()
	}
	_ = t
}

// BenchmarkAfterFuncStop is the naive alternative BenchmarkArmDisarm
// replaces: a runtime timer per request.
func BenchmarkAfterFuncStop(b *testing.B) {
	b.ReportAllocs()
	f := func() {}
	for b.Loop() {
		t := time.AfterFunc(2*time.Millisecond, f)
		t.Stop()
	}
}
