package proxy

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cqlgate/cqlgate/pkg/config"
	"github.com/cqlgate/cqlgate/pkg/frame"
	"github.com/cqlgate/cqlgate/pkg/idempotency"
)

func payloadFrame(entries map[string]string) []byte {
	body := []byte{0, byte(len(entries))}
	for k, v := range entries {
		body = append(body, 0, byte(len(k)))
		body = append(body, k...)
		body = append(body, 0, 0, 0, byte(len(v)))
		body = append(body, v...)
	}
	body = append(body, frame.Body(frame.AppendQuery(nil, 4, 1, "SELECT 1", 1, 0))...)
	return frame.AppendFrame(nil, 4, false, frame.FlagCustomPayload, 1, frame.OpExecute, body)
}

func TestPayloadVerdict(t *testing.T) {
	for _, tc := range []struct {
		entries        map[string]string
		idempotent, ok bool
	}{
		{map[string]string{idempotency.PayloadKey: "true"}, true, true},
		{map[string]string{"other": "x", idempotency.PayloadKey: "FALSE"}, false, true},
		{map[string]string{idempotency.PayloadKey: "maybe"}, false, false},
		{map[string]string{"other": "true"}, false, false},
	} {
		idem, ok := payloadVerdict(payloadFrame(tc.entries))
		if idem != tc.idempotent || ok != tc.ok {
			t.Errorf("payload %v: got %v, %v; want %v, %v", tc.entries, idem, ok, tc.idempotent, tc.ok)
		}
	}
	if _, ok := payloadVerdict(frame.AppendQuery(nil, 4, 1, "SELECT 1", 1, 0)); ok {
		t.Error("a frame without a custom payload has a verdict")
	}
	f := payloadFrame(map[string]string{idempotency.PayloadKey: "true"})
	for n := frame.HeaderLen; n < len(f); n++ {
		payloadVerdict(f[:n]) // truncated: must not panic
	}
}

func TestClassFollowsTheStatementsKeyspace(t *testing.T) {
	p := &Proxy{}
	kw, err := config.ParseKeyspaceWeights([]string{"orders=8", "analytics=1"})
	if err != nil {
		t.Fatal(err)
	}
	p.keyspaceWeights.Store(&kw)
	c := &client{p: p}
	ks := "analytics"
	c.keyspace.Store(&ks)
	req := &request{c: c}
	if got := p.priorityClass(req); got != kw.Class["analytics"] {
		t.Errorf("client keyspace analytics: class %d; want %d", got, kw.Class["analytics"])
	}
	req.st = &statement{routeKS: "orders"}
	if got := p.priorityClass(req); got != kw.Class["orders"] {
		t.Errorf("statement on orders: class %d; want %d", got, kw.Class["orders"])
	}
	req.st = &statement{routeKS: "other"}
	if got := p.priorityClass(req); got != 0 {
		t.Errorf("unlisted keyspace: class %d; want 0", got)
	}
}

// A listed role's class wins over its keyspace's, so one role cannot starve
// another in the keyspaces they share; unlisted roles keep the keyspace's.
func TestClassFollowsTheRole(t *testing.T) {
	p := &Proxy{}
	kw, err := config.ParseWeights([]string{"orders=8"}, []string{"checkout=8", "reporting=1"})
	if err != nil {
		t.Fatal(err)
	}
	p.keyspaceWeights.Store(&kw)
	ks := "orders"
	for role, want := range map[string]int{"checkout": kw.RoleClass["checkout"], "reporting": kw.RoleClass["reporting"], "someone": kw.Class["orders"], "": kw.Class["orders"]} {
		c := &client{p: p}
		c.keyspace.Store(&ks)
		c.who.name = role
		if got := p.priorityClass(&request{c: c}); got != want {
			t.Errorf("role %q in orders: class %d, want %d", role, got, want)
		}
	}
	if len(kw.Weights) != 4 || kw.Weights[kw.RoleClass["reporting"]] != 1 {
		t.Errorf("weights %v, want * orders checkout reporting", kw.Weights)
	}
}

// The first --max-role-series roles get their own series, later ones
// "other".
func TestRoleSeriesBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := newRoleSeries(reg, 2)
	for _, r := range []string{"a", "b", "c", "a", "d"} {
		req, _ := s.counters(r)
		req.Inc()
	}
	got := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "cqlgate_role_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			got[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	want := map[string]float64{"a": 2, "b": 1, otherRoles: 2}
	if len(got) != len(want) {
		t.Errorf("series %v, want %v", got, want)
	}
	for label, w := range want {
		if got[label] != w {
			t.Errorf("role=%q: %v, want %v", label, got[label], w)
		}
	}
}
