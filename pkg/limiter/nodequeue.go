package limiter

// The node's own queue: what ends a run of cuts on a node that got slower
// without being queued.
//
// A node that gets slower (compaction, a slower disk, a noisy neighbour)
// raises every latency without a queue, and the fleet law reads the rise
// as a standing wait and cuts. Where the node is busy its rate falls as it
// slows, and rebase (noderate.go) ends the cuts. Where its clients ask for
// less than it serves, its rate is their demand and does not fall: the cuts
// went on until the limits bound, and the sidecars' queues shed what the
// node had room for. In the simulator, with the fleet offering half the
// node's capacity and the node slowed 1.6x for 20 s (80% busy), 100
// sidecars answered 3.4% of their requests OVERLOADED with a client p99 12x
// the unloaded one, and 8 sidecars 1.2% at 14x, where fixed limits shed
// nothing.
//
// The node says whether it is queued. A reading that finds nothing waiting
// (for a native transport thread, nor in the stages that read and write)
// and at least a tenth of its threads free shows a node with room. A
// sidecar of many that takes such a reading during a run of cuts, its last
// window over the target, takes the wait for the node's speed: the last
// window's minimum becomes the baseline and the run ends, as in rebase, and
// the baseline goes back down with the first lower minimum once the node is
// fast again. A reading is one instant, but a node whose queue stands is
// not found empty with threads to spare: 1,000 sidecars holding 1.5x its
// threads kept 48 ± 18 requests queued.
//
// The reading is trusted only where the node's own counts account for the
// latency. By Little's law the node holds a request Active/rate on
// average, and the sidecar's mean latency may exceed that by half and by
// fleetFreeNet for the network and the proxy, no more. Further off, the
// wait is outside the node's pools (a congested network, or make fleet's
// emulator in front of a node that answers at once) and the node's threads
// say nothing about it.
//
// A sidecar that carries nearly all of the node's requests judges its cuts
// by the node's rate (noderate.go) and does not use this rule.

import "time"

const (
	// fleetFreeThreads is the most of its threads a node with room may
	// have busy.
	fleetFreeThreads = 0.9
	// fleetFreeSlack and fleetFreeNet: the sidecar's mean latency may be
	// at most fleetFreeSlack times what the node's counts account for,
	// plus fleetFreeNet.
	fleetFreeSlack = 1.5
	fleetFreeNet   = time.Millisecond
)

// notQueued reports whether reading rd shows a node with room whose own
// counts account for this sidecar's latency.
func (f *fleet) notQueued(rd NodeReading) bool {
	r := &f.nr
	if rd.Threads <= 0 || rd.Queued != 0 || float64(rd.Active) > fleetFreeThreads*float64(rd.Threads) || r.rate <= 0 || f.mean <= 0 {
		return false
	}
	held := float64(rd.Active) / r.rate * 1e9 // ns
	return float64(f.mean) <= fleetFreeSlack*held+float64(fleetFreeNet)
}

// waitIsNotAQueue ends a run of cuts on a node that has room: the last
// window's minimum becomes the baseline.
func (f *fleet) waitIsNotAQueue() {
	r := &f.nr
	// Not rebase's upBase, which takes the baseline back to the lowest
	// once the node's rate rises: the rate of a node with room is its
	// clients' demand, and rises with it. The first window whose minimum
	// is lower takes the baseline back down (fleet.update).
	f.base = max(f.base, r.lastMin)
	f.takeBack()
	f.refLimit, r.runLimit = 0, 0
	r.notQueued++
}
