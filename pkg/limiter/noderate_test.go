package limiter

import (
	"testing"
	"time"
)

// probeState is a lone sidecar's fleet law at a limit of 100, past slow
// start, with a rate's noise of 0.1 and a probe to 200 just opened at a
// node rate of 10,000/s; readings come every 200 ms. bound says whether the
// probe's windows bind (the clients want more than 200).
type probeState struct {
	t     *testing.T
	f     fleet
	cfg   Config
	now   int64
	total uint64
}

func newProbeState(t *testing.T) *probeState {
	cfg, err := Config{Adaptive: true, Law: LawFleet}.normalized()
	if err != nil {
		t.Fatal(err)
	}
	p := &probeState{t: t, cfg: cfg}
	p.f.reset(&cfg, 0)
	p.f.slow, p.f.limit = false, 100
	p.f.nr.noise = 0.1
	p.read(10000) // the first reading: no rate yet
	p.read(10000)
	p.f.nr.bound = fleetProbeAfter
	if !p.f.probing(p.now) {
		t.Fatal("no probe opened")
	}
	p.f.limit = 200
	return p
}

// read takes a reading after 200 ms in which the node served rate/s, all
// of it this sidecar's, and returns the limit after it.
func (p *probeState) read(rate float64) float64 {
	p.now += int64(200 * time.Millisecond)
	done := uint64(rate / 5)
	p.total += done
	p.f.nr.answers += done
	p.f.reading(p.now, p.total, true, &p.cfg)
	return p.f.limit
}

// A probe that meets all of a closed loop's demand (its windows do not
// bind) and gains a little less than the noise allows in one reading is
// read again, and kept when the readings together pass: 128 readers on
// make bench's node gain a few percent from a limit just under 128, which
// one reading of a rate varying by a tenth cannot show. A probe that binds
// is judged at once: its queue in front of a full node would stand
// meanwhile.
func TestFleetProbeThatMeetsTheDemandIsReadAgain(t *testing.T) {
	p := newProbeState(t)
	p.f.nr.bound = 0
	if got := p.read(11400); got != 200 || p.f.nr.probeFrom != 100 {
		t.Fatalf("after one reading 14%% up: limit %v, probe from %v; want 200, still open", got, p.f.nr.probeFrom)
	}
	if got := p.read(11400); got != 200 || p.f.nr.probeFrom != 0 || p.f.nr.probed != 1 {
		t.Fatalf("after two readings 14%% up: limit %v, probe from %v, kept %d; want the probe kept at 200", got, p.f.nr.probeFrom, p.f.nr.probed)
	}

	p = newProbeState(t)
	p.f.nr.bound = 0
	p.read(11400)
	p.read(10100)
	if got := p.read(10100); got != 100 || p.f.nr.failed != 1 {
		t.Fatalf("three readings 14%%, 1%% and 1%% up: limit %v, failed %d; want taken back to 100", got, p.f.nr.failed)
	}

	p = newProbeState(t)
	p.f.nr.bound = 0
	if got := p.read(9900); got != 100 {
		t.Fatalf("one reading 1%% down: limit %v; want taken back to 100 at once", got)
	}

	p = newProbeState(t)
	p.f.nr.bound = fleetProbeAfter
	if got := p.read(11400); got != 100 {
		t.Fatalf("a probe that binds, one reading 14%% up: limit %v; want taken back to 100 at once", got)
	}
}
