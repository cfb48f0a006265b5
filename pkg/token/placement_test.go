package token

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// tokens formats ints as the system tables store tokens.
func tokens(ts ...int64) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = strconv.FormatInt(t, 10)
	}
	return out
}

// smallRing is, in ring order: -100 A, 0 B, 100 C, 200 A, 300 B.
func smallRing(t testing.TB) *Ring {
	t.Helper()
	r, err := NewRing([]Node{
		{ID: 10, DC: "dc1", Rack: "r1", Tokens: tokens(200, -100)},
		{ID: 11, DC: "dc1", Rack: "r1", Tokens: tokens(0, 300)},
		{ID: 12, DC: "dc1", Rack: "r1", Tokens: tokens(100)},
		{ID: 13, DC: "dc1", Rack: "r1"}, // joining: no tokens, owns nothing
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestSimpleStrategyWalksTheRing(t *testing.T) {
	r := smallRing(t)
	if r.Len() != 5 || r.Nodes() != 3 {
		t.Fatalf("ring has %d tokens, %d nodes; want 5, 3", r.Len(), r.Nodes())
	}
	rf2 := r.Placement(Replication{Strategy: SimpleStrategy, Factor: 2})
	rf3 := r.Placement(Replication{Strategy: SimpleStrategy, Factor: 3})
	rf9 := r.Placement(Replication{Strategy: SimpleStrategy, Factor: 9})
	every := r.Placement(Replication{Strategy: EverywhereStrategy})
	for _, c := range []struct {
		tok      int64
		rf2, rf3 []int
	}{
		{-150, []int{10, 11}, []int{10, 11, 12}},
		{-100, []int{10, 11}, []int{10, 11, 12}}, // a range includes its end
		{-99, []int{11, 12}, []int{11, 12, 10}},
		{100, []int{12, 10}, []int{12, 10, 11}},
		{150, []int{10, 11}, []int{10, 11, 12}},
		{250, []int{11, 10}, []int{11, 10, 12}}, // wraps around
		{301, []int{10, 11}, []int{10, 11, 12}}, // past the last token: the first range
		{-1 << 63, []int{10, 11}, []int{10, 11, 12}},
		{1<<63 - 1, []int{10, 11}, []int{10, 11, 12}},
	} {
		if got := rf2.Replicas(c.tok); !slices.Equal(got, c.rf2) {
			t.Errorf("RF=2 Replicas(%d) = %v; want %v", c.tok, got, c.rf2)
		}
		if got := rf3.Replicas(c.tok); !slices.Equal(got, c.rf3) {
			t.Errorf("RF=3 Replicas(%d) = %v; want %v", c.tok, got, c.rf3)
		}
		if got := rf9.Replicas(c.tok); !slices.Equal(got, c.rf3) {
			t.Errorf("RF=9 Replicas(%d) = %v; want all nodes %v", c.tok, got, c.rf3)
		}
		if got := every.Replicas(c.tok); !slices.Equal(got, c.rf3) {
			t.Errorf("Everywhere Replicas(%d) = %v; want %v", c.tok, got, c.rf3)
		}
		if got := r.Primary(c.tok); got != c.rf2[0] {
			t.Errorf("Primary(%d) = %d; want %d", c.tok, got, c.rf2[0])
		}
	}
}

func TestReplicasIsCappedAndShared(t *testing.T) {
	p := smallRing(t).Placement(Replication{Strategy: SimpleStrategy, Factor: 2})
	got := p.Replicas(0)
	if cap(got) != len(got) {
		t.Errorf("Replicas has capacity %d > length %d: an append would overwrite the next range", cap(got), len(got))
	}
	if n := testing.AllocsPerRun(100, func() { p.Replicas(42) }); n != 0 {
		t.Errorf("Replicas allocates %.0f times; want 0", n)
	}
}

func TestNoTokenAwareness(t *testing.T) {
	r := smallRing(t)
	if p := r.Placement(Replication{Strategy: LocalStrategy}); p != nil {
		t.Errorf("LocalStrategy placement = %v; want nil", p)
	}
	if p := r.Placement(Replication{}); p != nil {
		t.Errorf("zero Replication placement = %v; want nil", p)
	}
	p := r.Placement(Replication{Strategy: NetworkTopologyStrategy, DCFactors: map[string]int{"elsewhere": 3}})
	if got := p.Replicas(0); len(got) != 0 {
		t.Errorf("NTS for a data center not on the ring: Replicas = %v; want none", got)
	}
	empty, err := NewRing(nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := empty.Placement(Replication{Strategy: SimpleStrategy, Factor: 3}).Replicas(5); got != nil {
		t.Errorf("empty ring: Replicas = %v; want nil", got)
	}
	if got := empty.Primary(5); got != -1 {
		t.Errorf("empty ring: Primary = %d; want -1", got)
	}
}

func TestNewRingErrors(t *testing.T) {
	if _, err := NewRing([]Node{{ID: 1, Tokens: []string{"12a"}}}); err == nil {
		t.Error("NewRing accepted a token that is not a Murmur3 token")
	}
	if _, err := NewRing([]Node{{ID: 1, Tokens: tokens(1)}, {ID: 1, Tokens: tokens(2)}}); err == nil {
		t.Error("NewRing accepted two nodes with one id")
	}
	r, err := NewRing([]Node{{ID: 1, Tokens: tokens(5)}, {ID: 2, Tokens: tokens(5, 9)}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Len() != 2 || r.Primary(5) != 1 {
		t.Errorf("shared token: %d tokens, owner %d; want 2 tokens, owner 1 (listed first)", r.Len(), r.Primary(5))
	}
}

// TestNetworkTopologyRacks checks rack-aware placement on a hand-built
// ring. dc1 in ring order: 0 a/r1, 10 b/r1, 20 c/r2, 30 d/r2, 40 e/r3;
// dc2: 5 x/r1, 15 y/r1.
func TestNetworkTopologyRacks(t *testing.T) {
	r, err := NewRing([]Node{
		{ID: 1, DC: "dc1", Rack: "r1", Tokens: tokens(0)},
		{ID: 2, DC: "dc1", Rack: "r1", Tokens: tokens(10)},
		{ID: 3, DC: "dc1", Rack: "r2", Tokens: tokens(20)},
		{ID: 4, DC: "dc1", Rack: "r2", Tokens: tokens(30)},
		{ID: 5, DC: "dc1", Rack: "r3", Tokens: tokens(40)},
		{ID: 6, DC: "dc2", Rack: "r1", Tokens: tokens(5)},
		{ID: 7, DC: "dc2", Rack: "r1", Tokens: tokens(15)},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		factors map[string]int
		tok     int64
		want    []int
	}{
		// Three racks, RF 3: one node per rack; b and d are skipped.
		{map[string]int{"dc1": 3}, 0, []int{1, 3, 5}},
		{map[string]int{"dc1": 3}, 10, []int{2, 3, 5}},
		{map[string]int{"dc1": 3}, 25, []int{4, 5, 1}},
		// RF 2 < 3 racks: the first two racks met.
		{map[string]int{"dc1": 2}, 0, []int{1, 3}},
		{map[string]int{"dc1": 2}, 35, []int{5, 1}},
		// RF 4 > 3 racks: one repeat allowed, taken as soon as met.
		{map[string]int{"dc1": 4}, 0, []int{1, 2, 3, 5}},
		{map[string]int{"dc1": 4}, 20, []int{3, 4, 5, 1}},
		// RF 5 = all nodes of dc1.
		{map[string]int{"dc1": 5}, 30, []int{4, 5, 1, 2, 3}},
		// Two data centers, interleaved in ring order; dc2 has one rack.
		{map[string]int{"dc1": 2, "dc2": 2}, 0, []int{1, 6, 7, 3}},
		{map[string]int{"dc1": 1, "dc2": 1}, 12, []int{7, 3}},
		// More replicas than dc2 has nodes: all of them.
		{map[string]int{"dc2": 5}, 6, []int{7, 6}},
	} {
		p := r.Placement(Replication{Strategy: NetworkTopologyStrategy, DCFactors: c.factors})
		if got := p.Replicas(c.tok); !slices.Equal(got, c.want) {
			t.Errorf("NTS %v Replicas(%d) = %v; want %v", c.factors, c.tok, got, c.want)
		}
	}
	// A "replication_factor" default covers data centers not listed.
	p := r.Placement(Replication{Strategy: NetworkTopologyStrategy, Factor: 1, DCFactors: map[string]int{"dc1": 2}})
	if got, want := p.Replicas(0), []int{1, 6, 3}; !slices.Equal(got, want) {
		t.Errorf("NTS with default factor: Replicas(0) = %v; want %v", got, want)
	}
}

// refNetworkTopology is an independent model of NetworkTopologyStrategy's
// replica set: per data center, the older algorithm that sets aside nodes
// on already used racks and takes them, in ring order, once every rack has
// a replica. It yields the same set as Cassandra 5.0's (in another order).
func refNetworkTopology(nodes []Node, rep Replication, tok int64) map[int]bool {
	type owned struct {
		tok int64
		n   Node
	}
	var ring []owned
	for _, n := range nodes {
		for _, s := range n.Tokens {
			v, _ := strconv.ParseInt(s, 10, 64)
			ring = append(ring, owned{v, n})
		}
	}
	slices.SortStableFunc(ring, func(a, b owned) int {
		if a.tok < b.tok {
			return -1
		}
		if a.tok > b.tok {
			return 1
		}
		return 0
	})
	start := 0
	for start < len(ring) && ring[start].tok < tok {
		start++
	}
	out := map[int]bool{}
	dcs := map[string]bool{}
	for _, n := range nodes {
		dcs[n.DC] = true
	}
	for dc := range dcs {
		rf, ok := rep.DCFactors[dc]
		if !ok {
			rf = rep.Factor
		}
		racks := map[string]bool{}
		count := 0
		for _, n := range nodes {
			if n.DC == dc {
				racks[n.Rack] = true
				count++
			}
		}
		need := min(rf, count)
		seen := map[string]bool{}
		taken := map[int]bool{}
		var skipped []int
		got := 0
		for j := 0; j < len(ring) && got < need; j++ {
			n := ring[(start+j)%len(ring)].n
			if n.DC != dc || taken[n.ID] {
				continue
			}
			switch {
			case !seen[n.Rack]:
				seen[n.Rack] = true
				taken[n.ID] = true
				got++
				if len(seen) == len(racks) {
					for _, s := range skipped {
						if got < need {
							taken[s] = true
							got++
						}
					}
					skipped = nil
				}
			case len(seen) == len(racks):
				taken[n.ID] = true
				got++
			default:
				if !slices.Contains(skipped, n.ID) {
					skipped = append(skipped, n.ID)
				}
			}
		}
		for id := range taken {
			out[id] = true
		}
	}
	return out
}

// randomNodes returns n nodes with vnodes tokens each, spread over dcs data
// centers with up to racks racks each.
func randomNodes(rng *rand.Rand, n, vnodes, dcs, racks int) []Node {
	nodes := make([]Node, n)
	for i := range nodes {
		nodes[i] = Node{
			ID:   100 + i,
			DC:   fmt.Sprintf("dc%d", rng.IntN(dcs)),
			Rack: fmt.Sprintf("r%d", rng.IntN(racks)),
		}
		for range vnodes {
			nodes[i].Tokens = append(nodes[i].Tokens, strconv.FormatInt(int64(rng.Uint64()), 10))
		}
	}
	return nodes
}

func TestNetworkTopologyMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		nodes := randomNodes(rng, 1+rng.IntN(12), 1+rng.IntN(8), 1+rng.IntN(3), 1+rng.IntN(4))
		rep := Replication{Strategy: NetworkTopologyStrategy, DCFactors: map[string]int{}}
		for d := range 3 {
			if rng.IntN(4) > 0 {
				rep.DCFactors[fmt.Sprintf("dc%d", d)] = rng.IntN(6)
			}
		}
		r, err := NewRing(nodes)
		if err != nil {
			t.Fatal(err)
		}
		p := r.Placement(rep)
		for range 20 {
			tok := int64(rng.Uint64())
			got := p.Replicas(tok)
			want := refNetworkTopology(nodes, rep, tok)
			gotSet := map[int]bool{}
			for _, id := range got {
				if gotSet[id] {
					t.Fatalf("trial %d: Replicas(%d) = %v repeats node %d", trial, tok, got, id)
				}
				gotSet[id] = true
			}
			if len(gotSet) != len(want) || !subset(gotSet, want) {
				t.Fatalf("trial %d: nodes %v, replication %v: Replicas(%d) = %v; want the set %v", trial, nodes, rep.DCFactors, tok, got, want)
			}
			if len(got) > 0 && got[0] != r.Primary(tok) && !primaryInOtherDC(nodes, rep, r.Primary(tok)) {
				t.Fatalf("trial %d: Replicas(%d) = %v does not start with the primary %d", trial, tok, got, r.Primary(tok))
			}
		}
	}
}

func subset(a, b map[int]bool) bool {
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

// primaryInOtherDC reports whether the ring owner id is in a data center
// the replication leaves out (so it is not a replica at all).
func primaryInOtherDC(nodes []Node, rep Replication, id int) bool {
	for _, n := range nodes {
		if n.ID == id {
			f, ok := rep.DCFactors[n.DC]
			return !ok || f == 0
		}
	}
	return false
}

func TestTopologySharesPlacements(t *testing.T) {
	nodes := []Node{
		{ID: 0, DC: "dc1", Rack: "r1", Tokens: tokens(-5, 50)},
		{ID: 1, DC: "dc1", Rack: "r1", Tokens: tokens(7)},
	}
	topo, err := NewTopology(nodes, map[string]Replication{
		"a":      {Strategy: SimpleStrategy, Factor: 1},
		"b":      {Strategy: SimpleStrategy, Factor: 1},
		"c":      {Strategy: SimpleStrategy, Factor: 2},
		"system": {Strategy: LocalStrategy},
	})
	if err != nil {
		t.Fatal(err)
	}
	if topo.Placement("a") != topo.Placement("b") || topo.Placement("a") == topo.Placement("c") {
		t.Error("keyspaces with equal replication should share one placement, and only those")
	}
	if got := topo.Replicas("c", 0); !slices.Equal(got, []int{1, 0}) {
		t.Errorf("Replicas(c, 0) = %v; want [1 0]", got)
	}
	if got := topo.Replicas("system", 0); got != nil {
		t.Errorf("LocalStrategy keyspace: Replicas = %v; want nil", got)
	}
	if got := topo.Replicas("nope", 0); got != nil {
		t.Errorf("unknown keyspace: Replicas = %v; want nil", got)
	}
	if topo.Ring().Len() != 3 {
		t.Errorf("ring has %d tokens; want 3", topo.Ring().Len())
	}
	if n := testing.AllocsPerRun(100, func() { topo.Replicas("a", 99) }); n != 0 {
		t.Errorf("Topology.Replicas allocates %.0f times; want 0", n)
	}
}

// benchRing is a large cluster: 60 nodes with 256 vnodes in 3 data centers
// of 3 racks (15,360 token ranges).
func benchRing(b *testing.B) ([]Node, Replication) {
	rng := rand.New(rand.NewPCG(3, 4))
	nodes := randomNodes(rng, 60, 256, 3, 3)
	return nodes, Replication{Strategy: NetworkTopologyStrategy, DCFactors: map[string]int{"dc0": 3, "dc1": 3, "dc2": 3}}
}

func BenchmarkReplicas(b *testing.B) {
	nodes, nts := benchRing(b)
	r, err := NewRing(nodes)
	if err != nil {
		b.Fatal(err)
	}
	p := r.Placement(nts)
	small, _ := NewRing(randomNodes(rand.New(rand.NewPCG(5, 6)), 3, 16, 1, 1))
	ps := small.Placement(Replication{Strategy: SimpleStrategy, Factor: 2})
	toks := make([]int64, 1024)
	for i := range toks {
		toks[i] = Murmur3([]byte{byte(i), byte(i >> 8)})
	}
	b.Run("3nodes-16vnodes-SimpleRF2", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			ps.Replicas(toks[i&1023])
			i++
		}
	})
	b.Run("60nodes-256vnodes-NTS3x3", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			p.Replicas(toks[i&1023])
			i++
		}
	})
}

func BenchmarkNewTopology(b *testing.B) {
	nodes, nts := benchRing(b)
	kss := map[string]Replication{"ks": nts, "simple": {Strategy: SimpleStrategy, Factor: 3}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewTopology(nodes, kss); err != nil {
			b.Fatal(err)
		}
	}
}
