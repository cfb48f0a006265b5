package limiter

import (
	"testing"
	"time"
)

// On a host starved of CPU (CPUPressure at fleetStarved or more) a lone
// sidecar takes the fixed NodeLimit at its first reading and holds it
// against the latencies, which carry the proxy's wait for a CPU; Cassandra's
// OVERLOADED still cuts it, and once the host has CPU to spare the law
// reads the latencies again (starvedBelow). The clients' demand is out of
// a probe's reach, as the seed experiment's is: 400 would be met whole.
func TestFleetLawOnAStarvedHostHoldsTheFixedLimit(t *testing.T) {
	fs := newFleetSim(t, 1, 2000, 16, 5*time.Millisecond)
	l := fs.ls[0]
	l.CPUPressure(0.6)
	fs.s.run(2 * time.Second)
	// Above NodeLimit a probe must gain, as anywhere: it may be open.
	if got := fs.limitSum(); got < DefaultNodeLimit || got > 2*DefaultNodeLimit {
		t.Fatalf("limit %.1f after 2 s on a starved host; want the fixed %d (or a probe's doubling of it)", got, DefaultNodeLimit)
	}
	fs.s.run(12 * time.Second)
	if got := fs.limitSum(); got < DefaultNodeLimit || got > 2*DefaultNodeLimit {
		t.Fatalf("limit %.1f after 10 s more of 2,000 clients queued in front of 16 threads; want it held at %d", got, DefaultNodeLimit)
	}
	fs.b.overloadAbove = 20
	fs.s.run(15 * time.Second)
	if got := fs.limitSum(); got > 40 {
		t.Errorf("limit %.1f after 3 s of OVERLOADED above 20 in flight; want it cut", got)
	}
	fs.b.overloadAbove = 0
	// Cassandra said where its limit is: the starved host's rules stay
	// off for fleetStarvedOff, and the law holds the limit near the node's
	// 16 threads.
	fs.s.run(25 * time.Second)
	if got := fs.limitSum(); got > 64 {
		t.Errorf("limit %.1f 10 s after the OVERLOADED answers ended; want the law's, not the fixed %d again", got, DefaultNodeLimit)
	}
	// After the hold-off, the first probe of the binding limit takes the
	// fixed limit again.
	fs.s.run(80 * time.Second)
	if got := fs.limitSum(); got < DefaultNodeLimit || got > 2*DefaultNodeLimit {
		t.Errorf("limit %.1f after the minute's hold-off on a host still starved; want the fixed %d again", got, DefaultNodeLimit)
	}

	fs = newFleetSim(t, 1, 2000, 16, 5*time.Millisecond)
	l = fs.ls[0]
	l.CPUPressure(0.6)
	fs.s.run(5 * time.Second)
	l.CPUPressure(0.1)
	fs.s.run(15 * time.Second)
	if got := fs.limitSum(); got > 64 {
		t.Errorf("limit %.1f 10 s after the host has CPU to spare, in front of 16 threads; want the law's cuts", got)
	}
}
