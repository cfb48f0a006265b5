package speculative_test

import (
	"fmt"
	"time"

	"github.com/cqlgate/cqlgate/pkg/speculative"
)

func ExampleClassify() {
	for _, q := range []string{
		"SELECT * FROM shop.orders WHERE id = ?",
		"UPDATE shop.orders SET items = items + ? WHERE id = ?",
		"INSERT INTO shop.orders (id, placed) VALUES (?, toTimestamp(now()))",
		"UPDATE shop.orders SET status = 'paid' WHERE id = ? IF status = 'open'",
	} {
		st := speculative.Classify(q, "", nil)
		fmt.Printf("%-6s %s.%s idempotent=%v reason=%s\n", st.Kind, st.Keyspace, st.Table, st.Idempotent, st.Reason)
	}
	// With the bind types of the PREPARED metadata (0x0022: a set),
	// "items = items + ?" is a set addition.
	st := speculative.Classify("UPDATE shop.orders SET items = items + ? WHERE id = ?", "", []uint16{0x0022, 0x0009})
	fmt.Println("with types:", st.Idempotent)
	// Output:
	// select shop.orders idempotent=true reason=none
	// update shop.orders idempotent=false reason=unknown_bind_type
	// insert shop.orders idempotent=false reason=non_deterministic_function
	// update shop.orders idempotent=false reason=lwt
	// with types: true
}

func ExampleParseOverrides() {
	o, err := speculative.ParseOverrides([]string{
		"idempotent:shop.events",                    // a table whose writes use a deterministic UDF
		"not-idempotent:re:^UPDATE .* SET visits =", // never hedge these
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	c := speculative.NewClassifier(o)
	st := c.Classify("INSERT INTO events (id, h) VALUES (?, shop.hash(?))", "shop", nil)
	fmt.Println(st.Idempotent, st.Reason, st.Detail)
	st = c.Classify("UPDATE shop.pages SET visits = ? WHERE id = ?", "", nil)
	fmt.Println(st.Idempotent, st.Reason, st.Detail)

	_, err = speculative.ParseOverrides([]string{"idempotnt:shop.events"})
	fmt.Println(err)
	// Output:
	// true override idempotent:shop.events
	// false override not-idempotent:re:^UPDATE .* SET visits =
	// speculative: invalid idempotency override 1 "idempotnt:shop.events": verdict "idempotnt" is neither idempotent nor not-idempotent
}

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
