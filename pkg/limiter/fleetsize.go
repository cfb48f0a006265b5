package limiter

// The fleet's size: what the node's list of clients tells a sidecar of many.
//
// From latencies alone a sidecar cannot tell how many others share the
// node, and two things the fleet law needs depend on it:
//
//   - The sum of the fleet's limits. Each sidecar grows by
//     fleetGrowth*sqrt(limit) a Window, so K equal sidecars sharing C grow
//     by fleetGrowth*sqrt(C*K) together: the fleet's growth rises with its
//     size, and the proportional cuts balance it only on a standing queue
//     that rises with it too. 1,000 simulated sidecars held 1.5x the
//     node's threads where 8 held 1.2x.
//   - Fairness. The square-root growth pulls limits that chance set apart
//     back together by fleetGrowth/(2*sqrt(limit)) of their log-ratio a
//     Window: about 40 s at any K, while each window's cut carries the
//     noise of its own minimum. 8 sidecars of make fleet sat at Jain's
//     index 0.91-0.99 over five runs, 1,000 simulated closed loops at 0.87.
//
// Cassandra lists every connection in system_views.clients with the
// options its client sent in STARTUP, and the proxy sends one naming its
// own process (backend.InstanceOption). A reading of that list tells the
// sidecar K, the number of proxies connected to the node, and how much of
// what the node completed came through them (FleetShare). With K known:
//
//   - growth is scaled by sqrt(fleetSizeRef/K) past fleetSizeRef sidecars,
//     so that the fleet's growth no longer rises with its size;
//   - x, this sidecar's share of the fleet's requests times K, is 1 at a
//     fair share. Growth is divided by x and the cut multiplied by it: a
//     sidecar with twice its share grows half as fast and cuts twice as
//     much. That is a pull towards the fair share that does not wait for
//     the square root, and it does not move a fleet of equal sidecars.
//     The share is this sidecar's answer rate, smoothed over
//     fleetSizeOwnTau, over the node's rate at its last reading times
//     FleetShare: a node's count includes clients that do not come
//     through a proxy, and counting them would read every sidecar under
//     its share and let the fleet grow as if it were smaller;
//   - a run of cuts that the node's own counts end (it has room, or it got
//     slower: nodequeue.go, rebase) is taken back halfway, on a log scale,
//     to where it began: the cuts were not a queue's, and slower growth
//     would take tens of seconds to climb back. While its windows stand
//     over the target, a sidecar reads the node's counts every
//     K*fleetSizeRunSpacing (at least NodePoll), not every 20-30 s as its
//     share would have it: the cuts that follow a node that got slower go
//     on until those counts end them, and at 1,000 sidecars took the
//     fleet to 0.8x the threads and 18 s to converge (2.5 s with it). A
//     fleet then reads each node about 1/fleetSizeRunSpacing times a
//     second: a three-row virtual table, only while a standing wait lasts;
//   - in a fleet of more than fleetSizeRef, the target keeps
//     fleetSizeDead of the dead zone and one noise instead of two
//     (fleet.go). Both kept noise from cutting a sidecar, a small one most;
//     the pull towards the share now undoes such cuts, and they cost a
//     standing queue: 1,000 sidecars held 1.13-1.27x the threads, within
//     20% of them half the time; with them reduced, 1.11-1.16x (80-100% of
//     the time). 8 sidecars in the simulator went from 1.22x to 1.15x, but
//     8 real ones of make fleet, on a host whose stalls hold answers for
//     milliseconds, kept their node busy less: 0.93 and 0.90 of its
//     capacity at 2x and 5x, where they had served 0.94-0.97 and 0.96;
//   - slow start ends once the last reading's share (less chance) reaches
//     fleetSizeJoin times the fair one. A sidecar that joins a busy fleet
//     doubles by the clock until a window stands over the target, which
//     the fleet's standing wait hides: the 100 of the simulator's mixed
//     fleet of 1,000 that join mid-run took 1.65x their max-min fair
//     share, Jain's index 0.92 (1.27x, 0.95 with it). In slow start the
//     node is read every NodePoll.
//
// In the simulator, the sweep's 1,000 sidecars held 1.12-1.16x the
// threads, at Jain 0.95-0.98 and goodput 0.96-0.98 of capacity (1.5x,
// 0.87-0.95, 1.00 before); make fleet's twin on a busy host, 0.98-0.999
// over six seeds (0.925-0.982). Slower growth alone (without the pull)
// split fleets the square root had held together: 8 sidecars of 4 drifted
// to 0.83.
//
// A dominant sidecar (noderate.go) is alone on the node for this purpose
// and uses none of it. Until the first list is read, the law runs as if K
// were unknown. An idle sidecar counts in K: the others then read
// themselves over their share and grow more slowly than they could, a
// cost in the time to take back freed capacity, not in fairness.
//
// The list has a row per connection: a fleet of 1,000 sidecars with a few
// connections each makes it thousands of rows long. A sidecar reads it
// with its first reading of the node's counts and then every
// max(fleetSizePoll, K*fleetSizeSpacing), so that a fleet of any size
// reads it about 1/fleetSizeSpacing times a second per node at most; the
// second time after fleetSizePoll, for FleetShare, which takes two.

import (
	"math"
	"time"
)

const (
	// fleetSizeRef is the fleet size whose growth the law keeps: the
	// growth was set for 8 sidecars of make fleet.
	fleetSizeRef = 8
	// fleetSizeOwnTau is the time constant of the smoothed answer rate.
	fleetSizeOwnTau = 3 * time.Second
	// fleetSizeXMin and fleetSizeXMax bound x: a sidecar that just
	// started, or whose clients just went quiet, is far off its share
	// for reasons of its own.
	fleetSizeXMin, fleetSizeXMax = 0.25, 4
	// fleetSizePoll and fleetSizeSpacing set how often the list of
	// clients is read (see the file's comment).
	fleetSizePoll    = 30 * time.Second
	fleetSizeSpacing = 500 * time.Millisecond
	// fleetSizeRunSpacing sets how often the node's counts are read while
	// the windows stand over the target (see the file's comment).
	fleetSizeRunSpacing = time.Millisecond
	// fleetSizeDead is the share of the dead zone the target keeps, and
	// fleetSizeNoise its allowance for the minimum's noise, in noises.
	fleetSizeDead  = 0.5
	fleetSizeNoise = 1
	// fleetSizeJoin is the share of the node, over the fair one, at which
	// slow start ends.
	fleetSizeJoin = 1.5
)

// fleetSize is what the node's list of clients told the sidecar.
type fleetSize struct {
	k     int     // proxies connected to the node (0: not read yet)
	share float64 // of the node's completed requests, the proxies' (0: unknown)
	at    int64   // the last reading of the list
	// own is this sidecar's answer rate, smoothed; ownAt its answer count
	// when it was last updated.
	own   float64
	ownAt uint64
}

// sizeKnown reports whether the law uses the fleet's size: K is known and
// this sidecar is one of several.
func (f *fleet) sizeKnown() bool { return f.size.k >= 2 && !f.nr.dominant() }

// noteAnswers folds the answers of a window of elapsed ns into the smoothed
// answer rate.
func (s *fleetSize) noteAnswers(answers uint64, elapsed int64) {
	if elapsed <= 0 {
		return
	}
	rate := float64(answers-s.ownAt) / (float64(elapsed) / 1e9)
	s.ownAt = answers
	if s.own == 0 {
		s.own = rate
		return
	}
	s.own += (rate - s.own) * min(1, float64(elapsed)/float64(fleetSizeOwnTau))
}

// x is this sidecar's share of the fleet's requests times K: 1 at a fair
// share, 1 when unknown.
func (f *fleet) x() float64 {
	s := &f.size
	if !f.sizeKnown() || f.nr.rate <= 0 || s.own <= 0 {
		return 1
	}
	return min(max(f.overFair(s.own/f.nr.rate), fleetSizeXMin), fleetSizeXMax)
}

// overFair turns a share of the node's requests into the share of the
// proxies' requests times K: 1 at a fair share.
func (f *fleet) overFair(share float64) float64 {
	if f.size.share > 0 {
		share /= f.size.share
	}
	return share * float64(f.size.k)
}

// growthScale is what the growth per Window is multiplied by.
func (f *fleet) growthScale() float64 {
	if !f.sizeKnown() {
		return 1
	}
	return math.Sqrt(min(1, fleetSizeRef/float64(f.size.k))) / f.x()
}

// cutScale is what the share of the standing queue cut is multiplied by.
func (f *fleet) cutScale() float64 { return f.x() }

// takeBack takes a run of cuts that the node's counts ended halfway back
// (on a log scale) to where it began, when the fleet's size is known.
func (f *fleet) takeBack() {
	if f.sizeKnown() && f.refLimit > f.limit {
		f.limit = math.Sqrt(f.limit * f.refLimit)
	}
}

// sizeDue reports whether the next reading should include the node's list
// of clients.
func (f *fleet) sizeDue(now int64) bool {
	s := &f.size
	if s.k == 0 {
		return true
	}
	d := max(fleetSizePoll, time.Duration(s.k)*fleetSizeSpacing)
	if s.share == 0 {
		// The proxies' share of the node's requests takes two lists.
		d = fleetSizePoll
	}
	return now-s.at >= int64(d)
}

// readSize takes the list's figures from reading rd, if it has them.
func (f *fleet) readSize(now int64, rd NodeReading) {
	if rd.Sidecars <= 0 {
		return
	}
	s := &f.size
	s.k, s.at = rd.Sidecars, now
	if rd.FleetShare > 0 {
		s.share = min(rd.FleetShare, 1)
	}
}

// NodeSizeDue reports whether the caller's next reading of node id (when
// NodeReadingDue says one is due) should also read the node's list of
// clients, for NodeReading.Sidecars and FleetShare.
func (l *Limiter) NodeSizeDue(id NodeID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.cfg.Adaptive || l.cfg.Law != LawFleet || id < 0 || int(id) >= len(l.nodes) || !l.nodes[id].active {
		return false
	}
	return l.nodes[id].fl.sizeDue(l.now())
}

// deadZone is the standing wait the target allows before the noise.
func (f *fleet) deadZone(cfg *Config) float64 {
	d := max((cfg.Tolerance-1)*float64(f.base), float64(fleetMinWait))
	if f.manyKnown() {
		d *= fleetSizeDead
	}
	return d
}

// noiseAllowance is how many noises of the minimum the target allows.
func (f *fleet) noiseAllowance() float64 {
	if f.manyKnown() {
		return fleetSizeNoise
	}
	return 2
}

// manyKnown reports whether the fleet is known to be larger than
// fleetSizeRef: the target is tightened only there (see the file's
// comment).
func (f *fleet) manyKnown() bool { return f.sizeKnown() && f.size.k > fleetSizeRef }

// joined reports whether a sidecar in slow start already has more than its
// share of the node: it joined a busy fleet.
func (f *fleet) joined() bool {
	return f.sizeKnown() && f.nr.lastShare > 0 && f.overFair(f.nr.lastShare) >= fleetSizeJoin
}

// sizePoll is the wait d before the next reading of the node's counts, as
// the fleet's size changes it: every NodePoll in slow start, every
// K*fleetSizeRunSpacing while the windows stand over the target.
func (f *fleet) sizePoll(d time.Duration, cfg *Config) time.Duration {
	if f.slow && f.size.k >= 1 {
		// Once the list was read, whatever the fleet's size: a proxy the
		// node lists alone, its share estimated against the node's rate
		// at the last reading (other clients', while it sat idle), put the
		// reading that would show it alone seconds away, with the limit
		// at the floor meanwhile
		// (TestFleetLawLoneProxyReadsItsNodeWhenItsClientsCome).
		return min(d, cfg.NodePoll)
	}
	if !f.sizeKnown() {
		return d
	}
	if !f.calm && !f.wasCalm && f.refLimit != 0 {
		return min(d, max(time.Duration(f.size.k)*fleetSizeRunSpacing, cfg.NodePoll))
	}
	return d
}
