package limiter

import (
	"testing"
	"time"
)

// The node's list of clients is long in a large fleet: each sidecar reads
// it with its first reading of the node's counts, then every
// max(fleetSizePoll, K*fleetSizeSpacing), so that the fleet reads it about
// twice a second per node whatever its size; the second time after
// fleetSizePoll, since the proxies' share of the node takes two lists.
func TestFleetSizeListIsReadRarely(t *testing.T) {
	for _, c := range []struct {
		k    int
		wait time.Duration
	}{{2, 30 * time.Second}, {100, 50 * time.Second}, {1000, 500 * time.Second}} {
		clk := newFakeClock()
		l, err := New(Config{Adaptive: true, Law: LawFleet}, clk, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.SetNodes([]NodeID{0}); err != nil {
			t.Fatal(err)
		}
		if !l.NodeSizeDue(0) {
			t.Fatalf("K=%d: the list is not due before it was first read", c.k)
		}
		l.NodeRead(0, NodeReading{Completed: 10})
		if !l.NodeSizeDue(0) {
			t.Fatalf("K=%d: a reading without the list made it not due", c.k)
		}
		l.NodeRead(0, NodeReading{Completed: 20, Sidecars: c.k})
		clk.Advance(fleetSizePoll)
		if !l.NodeSizeDue(0) {
			t.Fatalf("K=%d: the second list, for the proxies' share, is not due after %s", c.k, fleetSizePoll)
		}
		l.NodeRead(0, NodeReading{Completed: 30, Sidecars: c.k, FleetShare: 0.5})
		clk.Advance(c.wait - time.Millisecond)
		if l.NodeSizeDue(0) {
			t.Errorf("K=%d: the list is due again after %s; want %s", c.k, c.wait-time.Millisecond, c.wait)
		}
		clk.Advance(time.Millisecond)
		if !l.NodeSizeDue(0) {
			t.Errorf("K=%d: the list is not due after %s", c.k, c.wait)
		}
		l.Close()
	}
}

// x, a sidecar's share of the fleet's requests times K, scales the growth
// down and the cut up where the sidecar has more than its share. It counts
// only the requests that came through proxies (FleetShare), is bounded,
// and is 1 where K is unknown or the sidecar carries nearly all of the
// node's requests.
func TestFleetSizeShare(t *testing.T) {
	var f fleet
	f.nr.rate = 1000 // the node's requests/s
	f.size.own = 20  // this sidecar's answers/s
	if x := f.x(); x != 1 {
		t.Errorf("x %.2f with K unknown; want 1", x)
	}
	f.size.k = 100
	if x := f.x(); x != 2 {
		t.Errorf("x %.2f at 20 of 1,000 requests/s, K=100; want 2", x)
	}
	if g := f.growthScale(); g < 0.14 || g > 0.145 { // sqrt(8/100)/2
		t.Errorf("growth scale %.3f; want sqrt(8/100)/2 = 0.141", g)
	}
	f.size.share = 0.5 // half the node's requests come from elsewhere
	if x := f.x(); x != 4 {
		t.Errorf("x %.2f with half the node's requests from other clients; want 4", x)
	}
	f.size.own = 1000
	if x := f.x(); x != fleetSizeXMax {
		t.Errorf("x %.2f far over the share; want the bound %v", x, fleetSizeXMax)
	}
	f.nr.ours, f.nr.share = true, 0.9 // dominant
	if x := f.x(); x != 1 {
		t.Errorf("x %.2f for a dominant sidecar; want 1", x)
	}
}

// A proxy the node lists alone sat idle while other clients kept the node
// busy (make demo's direct rounds: 20,000 requests/s), but for its driver's
// session setup, then 64 closed-loop clients came. Its share, estimated
// against the node's rate at its last reading, looked like 0.5% and put its
// next reading seconds away, so its limit grew by slow start's clock alone:
// make demo's proxy served 85 and then 716 requests/s behind 64 workers, at
// a p99 of a second, for its first two seconds. Read every NodePoll, its
// smoothed share still took a second to rise from the setup's 0.2% to a
// dominant one's. In slow start it now reads the node every NodePoll, and
// leaves the floor fourfold a reading from the first reading at which most
// of the node's answers were its own.
func TestFleetLawLoneProxyReadsItsNodeWhenItsClientsCome(t *testing.T) {
	if raceEnabled {
		t.Skip("a single-goroutine simulation: runs without -race")
	}
	clk := newFakeClock()
	s := newSim(clk, 1)
	b := &backend{s: s, capacity: 32, service: time.Millisecond}
	l, err := New(Config{Adaptive: true, Law: LawFleet, MaxWait: time.Minute, DebugPermits: true}, clk, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	if err := l.SetNodes([]NodeID{0}); err != nil {
		t.Fatal(err)
	}
	const start = 2 * time.Second
	s.every(time.Millisecond, func() {
		if s.now < start {
			b.completed += 20 // the other clients'
		}
	})
	s.every(DefaultTickInterval, l.Sweep)
	s.every(l.NodePoll(), func() {
		if l.NodeReadingDue(0) {
			rd := NodeReading{Completed: b.completed}
			if l.NodeSizeDue(0) {
				rd.Sidecars, rd.FleetShare = 1, 0.01
			}
			l.NodeRead(0, rd)
		}
	})
	// The driver's session setup went through the proxy while the other
	// clients were busy: a share of about 5% at one reading.
	paused := false
	setup := &simClient{l: l, s: s, nodes: []*backend{b}, paused: &paused}
	s.after(start/2, setup.acquire)
	s.after(start/2+100*time.Millisecond, func() { paused = true })
	var cs []*simClient
	for j := range 64 {
		c := &simClient{l: l, s: s, nodes: []*backend{b}, flow: uint64(j % 8)}
		cs = append(cs, c)
		s.after(start+time.Duration(j)*time.Microsecond, c.acquire)
	}
	s.run(start + 3*time.Second)
	served := 0
	for _, c := range cs {
		served += c.done
	}
	// The node serves 32,000 requests/s: 96,000 in the 3 s.
	if frac := float64(served) / 96000; frac < 0.65 {
		t.Errorf("served %d requests in the clients' first 3 s (%.2f of the node's capacity), limit %.1f; want 0.65 and more (0.13 before, 0.51 with the readings alone)",
			served, frac, l.Stats().LimitExact)
	}
}
