package limiter_test

import (
	"fmt"
	"time"

	"github.com/cqlgate/cqlgate/pkg/limiter"
)

// request stands for the proxy's per-request state; it is its own Waiter,
// so queueing it allocates nothing.
type request struct {
	name   string
	permit limiter.Permit
}

func (r *request) Admitted(p limiter.Permit, _ time.Time) {
	r.permit = p
	fmt.Printf("%s: send to node %d\n", r.name, p.Node())
}

func (r *request) Rejected(why limiter.Reason) {
	fmt.Printf("%s: answer OVERLOADED: cqlgate: %s\n", r.name, why)
}

func Example() {
	l, err := limiter.New(limiter.Config{NodeLimit: 1, QueueLength: 1}, nil, nil)
	if err != nil {
		panic(err)
	}
	defer l.Close()
	l.SetNodes([]limiter.NodeID{0})

	a, b, c := &request{name: "a"}, &request{name: "b"}, &request{name: "c"}
	l.Acquire(a, 1, 0, nil, time.Time{}) // admitted at once
	l.Acquire(b, 2, 0, nil, time.Time{}) // queued
	l.Acquire(c, 3, 0, nil, time.Time{}) // queue full: rejected at once

	a.permit.Release(limiter.Success, 2*time.Millisecond) // b is admitted from here
	b.permit.Release(limiter.Success, 3*time.Millisecond)
	// Output:
	// a: send to node 0
	// c: answer OVERLOADED: cqlgate: queue full: 1 requests waiting (--queue-length)
	// b: send to node 0
}
