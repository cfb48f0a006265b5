package backend

import (
	"context"
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
