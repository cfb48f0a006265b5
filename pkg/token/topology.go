package token

// Topology is the replica placement of every keyspace on one ring: an
// immutable snapshot, safe for concurrent use. Build a new one when the
// ring (a node's tokens, data center or rack) or a keyspace's replication
// changes, and publish it with an atomic.Pointer; lookups never lock.
type Topology struct {
	ring      *Ring
	keyspaces map[string]*Placement
}

// NewTopology builds the ring of nodes and the placement of each keyspace
// (by name) under its replication. Keyspaces with the same replication
// share one placement. A keyspace whose placement is nil (LocalStrategy) is
// left out: Replicas gives nil for it, as for an unknown keyspace. It fails
// only if the ring cannot be built (see NewRing).
func NewTopology(nodes []Node, keyspaces map[string]Replication) (*Topology, error) {
	ring, err := NewRing(nodes)
	if err != nil {
		return nil, err
	}
	t := &Topology{ring: ring, keyspaces: make(map[string]*Placement, len(keyspaces))}
	shared := map[string]*Placement{}
	for name, rep := range keyspaces {
		k := rep.key()
		p, ok := shared[k]
		if !ok {
			p = ring.Placement(rep)
			shared[k] = p
		}
		if p != nil {
			t.keyspaces[name] = p
		}
	}
	return t, nil
}

// Ring returns the ring the topology was built on.
func (t *Topology) Ring() *Ring { return t.ring }

// Placement returns the placement of keyspace, or nil if the keyspace is
// unknown or has no token-aware placement.
func (t *Topology) Placement(keyspace string) *Placement { return t.keyspaces[keyspace] }

// Replicas returns the IDs of the replicas of tok in keyspace, primary
// first, or nil if the keyspace is unknown or has no token-aware placement
// (the request may go to any node then). The slice is shared: callers must
// not modify it. It does not allocate.
func (t *Topology) Replicas(keyspace string, tok int64) []int {
	p := t.keyspaces[keyspace]
	if p == nil {
		return nil
	}
	return p.Replicas(tok)
}
