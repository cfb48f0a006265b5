package backend

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cqlgate/cqlgate/pkg/frame"
)

// Node ids index small tables (the limiter's nodes, hedging's per-node
// latency, per-node metrics). Replaced nodes (pods that come and go) must
// give their ids back: with ids counting up forever, hedging stopped for
// good at the 64th node ever seen.
func TestReplacedNodesReuseTheirIDs(t *testing.T) {
	var gen atomic.Int32 // the current peer is 127.0.99.<gen>
	n := newFakeNode(t, func(r *fakeReq) fakeAction {
		q := r.Query()
		switch {
		case strings.HasPrefix(q, "SELECT * FROM system.local"):
			r.Answer(frame.OpResult, rowsBody(t, "local", []string{"key"}, []string{"local"}))
		case strings.HasPrefix(q, "SELECT * FROM system.peers"):
			peer := string([]byte{127, 0, 99, byte(gen.Load())})
			r.Answer(frame.OpResult, rowsBody(t, "peers_v2", []string{"peer"}, []string{peer}))
		default:
			return fakeVoid
		}
		return fakeHold // answered already
	})
	cl := connectCluster(t, Config{ContactPoints: []string{n.Addr()}})
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	for i := 1; i <= 100; i++ {
		gen.Store(int32(i))
		if err := cl.loadTopology(ctx); err != nil {
			t.Fatalf("refresh %d: %v", i, err)
		}
		nodes := cl.Nodes()
		if len(nodes) != 2 {
			t.Fatalf("refresh %d: %d nodes, want 2", i, len(nodes))
		}
		for _, nd := range nodes {
			if nd.ID > 1 {
				t.Fatalf("after %d node replacements: node %s has id %d; want ids 0 and 1 only", i, nd.Addr, nd.ID)
			}
		}
	}
}

// A pool still connecting when the topology changes must end up with the
// nodes the cluster has then, each once. It used to keep the node list it
// started with: a node discovered meanwhile was added to the pools that were
// ready and never to this one, and a node removed meanwhile stayed in it.
func TestPoolConnectingDuringTopologyChange(t *testing.T) {
	for _, tc := range []struct {
		name          string
		before, after []string // peers, as keys of the address map
	}{
		{"node added", nil, []string{"127.0.99.2"}},
		{"node removed", []string{"127.0.99.2"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var peers atomic.Pointer[[]string]
			peers.Store(&tc.before)
			useSeen := make(chan *fakeReq, 4)
			hook := func(r *fakeReq) fakeAction {
				q := r.Query()
				switch {
				case strings.HasPrefix(q, "SELECT * FROM system.local"):
					r.Answer(frame.OpResult, rowsBody(t, "local", []string{"key"}, []string{"local"}))
				case strings.HasPrefix(q, "SELECT * FROM system.peers"):
					var rows [][]string
					for _, p := range *peers.Load() {
						rows = append(rows, []string{string(net.ParseIP(p).To4())})
					}
					r.Answer(frame.OpResult, rowsBody(t, "peers_v2", []string{"peer"}, rows...))
				case strings.HasPrefix(q, "USE"):
					useSeen <- r
				default:
					return fakeVoid
				}
				return fakeHold
			}
			a, b := newFakeNode(t, hook), newFakeNode(t, hook)
			cl := connectCluster(t, Config{ContactPoints: []string{a.Addr()}, ConnectionsPerNode: 1,
				AddressMap: map[string]string{"127.0.99.2": b.Addr()}})
			ctx, cancel := context.WithTimeout(context.Background(), guard)
			defer cancel()
			type result struct {
				p   *Pool
				err error
			}
			if err := cl.loadTopology(ctx); err != nil {
				t.Fatal(err)
			}
			if n := len(cl.Nodes()); n != 1+len(tc.before) {
				t.Fatalf("%d nodes before the change; want %d", n, 1+len(tc.before))
			}
			done := make(chan result, 1)
			go func() {
				p, err := cl.Pool(ctx, frame.V4, "ks")
				done <- result{p, err}
			}()
			// The pool's first connection waits for its USE while the
			// topology changes.
			first := waitFor(t, useSeen, "the pool's USE")
			peers.Store(&tc.after)
			if err := cl.loadTopology(ctx); err != nil {
				t.Fatal(err)
			}
			first.AnswerVoid()
			go func() { // the other connections' USE, as they come
				for {
					select {
					case r := <-useSeen:
						r.AnswerVoid()
					case <-ctx.Done():
						return
					}
				}
			}()
			res := <-done
			if res.err != nil {
				t.Fatal(res.err)
			}
			want := map[string]bool{a.Addr(): true}
			if len(tc.after) > 0 {
				want[b.Addr()] = true
			}
			var got []string
			for _, np := range *res.p.nodes.Load() {
				got = append(got, np.node.Addr)
			}
			if len(got) != len(want) {
				t.Fatalf("pool nodes %v; want %v, each once", got, want)
			}
			for _, g := range got {
				if !want[g] {
					t.Fatalf("pool nodes %v; want %v, each once", got, want)
				}
			}
		})
	}
}
