package idempotency_test

import (
	"fmt"

	"github.com/cqlgate/cqlgate/pkg/idempotency"
)

func ExampleClassify() {
	for _, q := range []string{
		"SELECT * FROM shop.orders WHERE id = ?",
		"UPDATE shop.orders SET items = items + ? WHERE id = ?",
		"INSERT INTO shop.orders (id, placed) VALUES (?, toTimestamp(now()))",
		"UPDATE shop.orders SET status = 'paid' WHERE id = ? IF status = 'open'",
	} {
		st := idempotency.Classify(q, "", nil)
		fmt.Printf("%-6s %s.%s idempotent=%v reason=%s\n", st.Kind, st.Keyspace, st.Table, st.Idempotent, st.Reason)
	}
	// With the bind types of the PREPARED metadata (0x0022: a set),
	// "items = items + ?" is a set addition.
	st := idempotency.Classify("UPDATE shop.orders SET items = items + ? WHERE id = ?", "", []uint16{0x0022, 0x0009})
	fmt.Println("with types:", st.Idempotent)
	// Output:
	// select shop.orders idempotent=true reason=none
	// update shop.orders idempotent=false reason=unknown_bind_type
	// insert shop.orders idempotent=false reason=non_deterministic_function
	// update shop.orders idempotent=false reason=lwt
	// with types: true
}

func ExampleParseOverrides() {
	o, err := idempotency.ParseOverrides([]string{
		"idempotent:shop.events",                    // a table whose writes use a deterministic UDF
		"not-idempotent:re:^UPDATE .* SET visits =", // never hedge these
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	c := idempotency.NewClassifier(o)
	st := c.Classify("INSERT INTO events (id, h) VALUES (?, shop.hash(?))", "shop", nil)
	fmt.Println(st.Idempotent, st.Reason, st.Detail)
	st = c.Classify("UPDATE shop.pages SET visits = ? WHERE id = ?", "", nil)
	fmt.Println(st.Idempotent, st.Reason, st.Detail)

	_, err = idempotency.ParseOverrides([]string{"idempotnt:shop.events"})
	fmt.Println(err)
	// Output:
	// true override idempotent:shop.events
	// false override not-idempotent:re:^UPDATE .* SET visits =
	// speculative: invalid idempotency override 1 "idempotnt:shop.events": verdict "idempotnt" is neither idempotent nor not-idempotent
}
