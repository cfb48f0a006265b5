package limiter

import (
	"testing"
	"time"
)

// A node with room is one that queues nothing and has a tenth of its
// threads free, and whose counts account for the sidecar's latency.
func TestNotQueuedTrustsOnlyANodeThatAccountsForTheLatency(t *testing.T) {
	ms := func(v float64) int64 { return int64(v * float64(time.Millisecond)) }
	for _, c := range []struct {
		name string
		rd   NodeReading
		rate float64
		mean int64
		want bool
	}{
		// The simulator's node slowed 1.6x at 80% busy: 100 of its 128
		// threads at 12,800/s hold a request 7.8 ms; the sidecar sees 8.5.
		{"slower node with room", NodeReading{Active: 100, Threads: 128}, 12800, ms(8.5), true},
		{"threads not read", NodeReading{Active: 100}, 12800, ms(8.5), false},
		{"a request waits for a thread", NodeReading{Active: 100, Threads: 128, Queued: 1}, 12800, ms(8.5), false},
		{"a read waits for its stage", NodeReading{Active: 60, Threads: 128, Queued: 3}, 7000, ms(8.5), false},
		{"threads nearly all busy", NodeReading{Active: 120, Threads: 128}, 15000, ms(8.5), false},
		// make fleet's emulator holds the requests in front of a real node
		// that answers in a fraction of a millisecond.
		{"the wait is outside the node", NodeReading{Active: 1, Threads: 128}, 3200, ms(10), false},
		{"no rate yet", NodeReading{Active: 100, Threads: 128}, 0, ms(8.5), false},
	} {
		f := &fleet{mean: c.mean}
		f.nr.rate = c.rate
		if got := f.notQueued(c.rd); got != c.want {
			t.Errorf("%s: notQueued %v; want %v", c.name, got, c.want)
		}
	}
}

// A sidecar of many in a run of cuts that reads a node with room ends the
// run: its last minimum becomes the baseline, so that the law stops
// cutting; a sidecar whose last window was under the target, or that is
// not cutting, keeps its baseline.
func TestAReadingOfANodeWithRoomEndsTheCuts(t *testing.T) {
	cfg, err := Config{Adaptive: true, Law: LawFleet}.normalized()
	if err != nil {
		t.Fatal(err)
	}
	setup := func(calm bool, refLimit float64) *fleet {
		f := &fleet{limit: 4, base: int64(2700 * time.Microsecond), lowest: int64(2700 * time.Microsecond), mean: int64(8500 * time.Microsecond), calm: calm, refLimit: refLimit}
		f.nr = nodeRate{noise: fleetRateNoise, share: 0.01, lastMin: int64(4300 * time.Microsecond)}
		// Two readings 1 s apart, 12,800 requests between them, 10 of
		// them this sidecar's.
		f.reading(int64(time.Second), NodeReading{Completed: 1000}, false, 4, &cfg)
		f.nr.answers += 10
		return f
	}
	room := NodeReading{Completed: 13800, Active: 100, Threads: 128}
	f := setup(false, 4)
	f.reading(int64(2*time.Second), room, false, 4, &cfg)
	if f.base != f.nr.lastMin || f.refLimit != 0 || f.nr.notQueued != 1 {
		t.Errorf("in a run of cuts: baseline %v, run from %v, ended %d; want the last minimum %v, no run, 1",
			time.Duration(f.base), f.refLimit, f.nr.notQueued, time.Duration(f.nr.lastMin))
	}
	for _, c := range []struct {
		name     string
		calm     bool
		refLimit float64
		rd       NodeReading
	}{
		{"under the target", true, 4, room},
		{"no run of cuts", false, 0, room},
		{"a queue in the node", false, 4, NodeReading{Completed: 13800, Active: 128, Threads: 128, Queued: 20}},
	} {
		f := setup(c.calm, c.refLimit)
		f.reading(int64(2*time.Second), c.rd, false, 4, &cfg)
		if f.base != int64(2700*time.Microsecond) || f.nr.notQueued != 0 {
			t.Errorf("%s: baseline %v, ended %d; want 2.7ms, 0", c.name, time.Duration(f.base), f.nr.notQueued)
		}
	}
}
