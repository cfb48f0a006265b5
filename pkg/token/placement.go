package token

// Placement is the replica table of one replication strategy on one ring:
// for every token range, the IDs of its replicas in Cassandra's order
// (primary first, then as the strategy walks the ring). It is immutable and
// safe for concurrent use.
type Placement struct {
	ring *Ring
	off  []int32 // replicas of range i: reps[off[i]:off[i+1]]
	reps []int
}

// Replicas returns the IDs of the replicas of tok, primary first. The slice
// is shared: callers must not modify it. Looking up is a binary search over
// the ring's tokens and does not allocate. Empty when the ring is empty or
// the replication names no data center of the ring.
func (p *Placement) Replicas(tok int64) []int {
	if len(p.ring.tokens) == 0 {
		return nil
	}
	i := p.ring.search(tok)
	lo, hi := p.off[i], p.off[i+1]
	return p.reps[lo:hi:hi]
}

// Placement computes the replicas of every token range of r under rep, as
// Cassandra 5.0's strategies do. It returns nil for LocalStrategy and for a
// zero Strategy: no node is a better choice than another for those.
func (r *Ring) Placement(rep Replication) *Placement {
	var pick func(start int, out []int) []int
	switch rep.Strategy {
	case SimpleStrategy:
		pick = r.simple(rep.Factor)
	case EverywhereStrategy:
		pick = r.simple(len(r.nodes))
	case NetworkTopologyStrategy:
		pick = r.networkTopology(rep)
	default:
		return nil
	}
	p := &Placement{ring: r, off: make([]int32, len(r.tokens)+1)}
	for i := range r.tokens {
		p.reps = pick(i, p.reps)
		p.off[i+1] = int32(len(p.reps))
	}
	p.reps = p.reps[:len(p.reps):len(p.reps)]
	return p
}

// simple returns SimpleStrategy's picker: the first rf distinct nodes met
// walking the ring from the range's token.
func (r *Ring) simple(rf int) func(int, []int) []int {
	rf = min(rf, len(r.nodes))
	seen := make([]bool, len(r.nodes))
	picked := make([]int32, 0, rf)
	return func(start int, out []int) []int {
		picked = picked[:0]
		for j := 0; j < len(r.tokens) && len(picked) < rf; j++ {
			n := r.owners[(start+j)%len(r.tokens)]
			if seen[n] {
				continue
			}
			seen[n] = true
			picked = append(picked, n)
			out = append(out, r.nodes[n].id)
		}
		for _, n := range picked {
			seen[n] = false
		}
		return out
	}
}

// networkTopology returns NetworkTopologyStrategy's picker, after Cassandra
// 5.0's NetworkTopologyStrategy.calculateNaturalReplicas: walking the ring
// from the range's token, each data center takes min(rf, its nodes) nodes;
// a node on a rack the data center already has is taken only while the
// data center may still repeat racks (rf minus its rack count times), so
// that every rack gets a replica before any rack gets two when racks are
// fewer than rf, and no rack gets two otherwise.
func (r *Ring) networkTopology(rep Replication) func(int, []int) []int {
	ndc := len(r.dcs)
	rf := make([]int, ndc)
	for d, name := range r.dcs {
		f, ok := rep.DCFactors[name]
		if !ok {
			f = rep.Factor
		}
		rf[d] = f
	}
	need := make([]int, ndc)
	repeats := make([]int, ndc)
	seenNode := make([]bool, len(r.nodes))
	seenRack := make([]bool, r.racks)
	var picked []int32
	return func(start int, out []int) []int {
		toFill := 0
		for d := range ndc {
			need[d] = min(rf[d], r.dcNodes[d])
			repeats[d] = rf[d] - r.dcRacks[d]
			if need[d] > 0 {
				toFill++
			}
		}
		picked = picked[:0]
		for j := 0; j < len(r.tokens) && toFill > 0; j++ {
			n := r.owners[(start+j)%len(r.tokens)]
			node := r.nodes[n]
			d := node.dc
			if need[d] == 0 || seenNode[n] {
				continue
			}
			if seenRack[node.rack] {
				if repeats[d] <= 0 {
					continue
				}
				repeats[d]--
			}
			seenRack[node.rack] = true
			seenNode[n] = true
			picked = append(picked, n)
			out = append(out, node.id)
			if need[d]--; need[d] == 0 {
				toFill--
			}
		}
		for _, n := range picked {
			seenNode[n] = false
			seenRack[r.nodes[n].rack] = false
		}
		return out
	}
}
