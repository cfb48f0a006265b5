package speculative_test

import (
	"fmt"
	"time"

	"github.com/cqlgate/cqlgate/pkg/speculative"
)

type request struct{ fired chan uint64 }

func (r *request) Hedge(token uint64) { r.fired <- token }

func ExampleScheduler() {
	s, err := speculative.NewScheduler(speculative.SchedulerConfig{}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Stop()
	r := &request{fired: make(chan uint64, 1)}
	var answered, slow speculative.Timer

	// Answered before the delay: no hedge.
	s.Arm(&answered, time.Now().Add(50*time.Millisecond), r, 1)
	fmt.Println("disarmed in time:", s.Disarm(&answered))

	// Not answered: Hedge is called.
	s.Arm(&slow, time.Now().Add(time.Millisecond), r, 2)
	fmt.Println("hedge for token", <-r.fired)
	fmt.Println("disarmed in time:", s.Disarm(&slow))
	// Output:
	// disarmed in time: true
	// hedge for token 2
	// disarmed in time: false
}
