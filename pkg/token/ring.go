package token

import (
	"cmp"
	"fmt"
	"slices"
)

// Node is one node of the ring as the system tables describe it.
type Node struct {
	// ID is the caller's id for the node (the proxy's dense backend node
	// id); Replicas returns these.
	ID   int
	DC   string // data_center
	Rack string // rack
	// Tokens are the node's tokens as system.local and system.peers_v2
	// store them (decimal Murmur3 tokens). A node without tokens (not yet
	// joined) owns nothing and is left out of the ring.
	Tokens []string
}

// Ring is the token ring: every token of every node, sorted. It is
// immutable and safe for concurrent use.
type Ring struct {
	tokens []int64 // sorted, distinct
	owners []int32 // owners[i] is the index in nodes of the owner of tokens[i]
	nodes  []ringNode
	dcs    []string // data center names, by index
	// dcNodes and dcRacks count the nodes and distinct racks of each data
	// center; racks counts (data center, rack) pairs.
	dcNodes, dcRacks []int
	racks            int
}

type ringNode struct {
	id   int
	dc   int32 // index in Ring.dcs
	rack int32 // index of the (data center, rack) pair
}

// NewRing builds the ring of nodes. It fails if a token does not parse as
// a Murmur3 token (another partitioner's ring) or two nodes share an ID.
// Should two nodes claim the same token (as peers may show briefly while a
// node is replaced), the one listed first owns it.
func NewRing(nodes []Node) (*Ring, error) {
	r := &Ring{}
	type owned struct {
		tok   int64
		owner int32
	}
	var all []owned
	dcIndex := map[string]int32{}
	rackIndex := map[[2]string]int32{}
	ids := map[int]bool{}
	for _, n := range nodes {
		if ids[n.ID] {
			return nil, fmt.Errorf("token: node id %d given twice", n.ID)
		}
		ids[n.ID] = true
		if len(n.Tokens) == 0 {
			continue
		}
		dc, ok := dcIndex[n.DC]
		if !ok {
			dc = int32(len(r.dcs))
			dcIndex[n.DC] = dc
			r.dcs = append(r.dcs, n.DC)
			r.dcNodes = append(r.dcNodes, 0)
			r.dcRacks = append(r.dcRacks, 0)
		}
		rack, ok := rackIndex[[2]string{n.DC, n.Rack}]
		if !ok {
			rack = int32(len(rackIndex))
			rackIndex[[2]string{n.DC, n.Rack}] = rack
			r.dcRacks[dc]++
		}
		r.dcNodes[dc]++
		idx := int32(len(r.nodes))
		r.nodes = append(r.nodes, ringNode{id: n.ID, dc: dc, rack: rack})
		for _, s := range n.Tokens {
			t, err := Parse(s)
			if err != nil {
				return nil, fmt.Errorf("token: node %d: token %q is not a Murmur3 token: %w", n.ID, s, err)
			}
			all = append(all, owned{t, idx})
		}
	}
	r.racks = len(rackIndex)
	// A stable sort keeps the first-listed node of a shared token first.
	slices.SortStableFunc(all, func(a, b owned) int { return cmp.Compare(a.tok, b.tok) })
	r.tokens = make([]int64, 0, len(all))
	r.owners = make([]int32, 0, len(all))
	for i, o := range all {
		if i > 0 && o.tok == all[i-1].tok {
			continue
		}
		r.tokens = append(r.tokens, o.tok)
		r.owners = append(r.owners, o.owner)
	}
	return r, nil
}

// Len returns the number of tokens on the ring.
func (r *Ring) Len() int { return len(r.tokens) }

// Nodes returns the number of nodes that own tokens.
func (r *Ring) Nodes() int { return len(r.nodes) }

// search returns the index of the token range that holds tok: the first
// ring token >= tok, wrapping to 0 past the last. Ranges are (previous
// token, token], owned by the owner of their end.
func (r *Ring) search(tok int64) int {
	lo, hi := 0, len(r.tokens)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if r.tokens[m] < tok {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == len(r.tokens) {
		return 0
	}
	return lo
}

// Primary returns the ID of the node that owns tok (the first replica under
// any strategy), or -1 on an empty ring.
func (r *Ring) Primary(tok int64) int {
	if len(r.tokens) == 0 {
		return -1
	}
	return r.nodes[r.owners[r.search(tok)]].id
}
