package backend

import (
	"sync"
	"testing"
)

// A connection that has just died must never be picked, even in the moment
// between its requests being failed (its in-flight count dropping to zero,
// so that it looks least loaded) and the pool dropping it.
func TestPickSkipsDeadConn(t *testing.T) {
	reqs := make(chan *fakeReq, 4)
	n := newFakeNode(t, func(r *fakeReq) fakeAction {
		reqs <- r
		return fakeHold
	})
	// The pool notices a dead connection in onClose; hold that until the
	// test has picked.
	closing := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	healthy := dialFake(t, n, DialConfig{}, nil)
	hc := waitFor(t, n.accepted, "accepted connection")
	doomed := dialFake(t, n, DialConfig{}, func(*Conn, error) {
		once.Do(func() { close(closing) })
		<-release
	})
	dc := waitFor(t, n.accepted, "accepted connection")
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()

	node := &Node{Addr: n.Addr()}
	node.up.Store(true)
	p := &Pool{}
	np := &NodePool{pool: p, node: node, wake: make(chan struct{}, 1)}
	nps := []*NodePool{np}
	p.nodes.Store(&nps)
	np.add(healthy)
	np.add(doomed)

	// One request in flight on the healthy connection, three on the
	// doomed one.
	hr := newRecorder(1)
	if err := healthy.Send(queryFrame("SELECT 1"), hr); err != nil {
		t.Fatal(err)
	}
	dr := newRecorder(3)
	for i := 0; i < 3; i++ {
		if err := doomed.Send(queryFrame("SELECT 2"), dr); err != nil {
			t.Fatal(err)
		}
	}
	if got := doomed.InFlight(); got != 3 {
		t.Fatalf("doomed InFlight = %d, want 3", got)
	}
	var healthyReq *fakeReq
	for i := 0; i < 4; i++ {
		if r := waitFor(t, reqs, "request at the node"); r.conn == hc {
			healthyReq = r
		}
	}
	dc.Close()
	for i := 0; i < 3; i++ {
		f := waitFor(t, dr.failures, "OnFailure of a request on the dead connection")
		if !f.sent {
			t.Errorf("request written before the connection died reported unsent")
		}
	}
	waitFor(t, closing, "onClose")
	for i := 0; i < 100; i++ {
		if c, _ := p.Pick(nil); c != healthy {
			t.Fatalf("Pick %d returned %s, want the healthy connection", i, describe(c, healthy, doomed))
		}
	}
	if c := p.OnNode(node); c != healthy {
		t.Fatalf("OnNode returned the dead connection")
	}
	close(release)
	healthyReq.AnswerVoid()
	waitFor(t, hr.responses, "answer on the healthy connection").Release()
}

func describe(c, healthy, doomed *Conn) string {
	switch c {
	case nil:
		return "nil"
	case healthy:
		return "the healthy connection"
	case doomed:
		return "the dead connection"
	}
	return "an unknown connection"
}
