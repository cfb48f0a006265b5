package statuspage

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cqlgate/cqlgate/pkg/stmtstats"
)

func TestPage(t *testing.T) {
	reg := prometheus.NewRegistry()
	up := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "cqlgate_backend_node_up", Help: "h"}, []string{"node"})
	lim := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "cqlgate_limiter_limit", Help: "h"}, []string{"node"})
	rej := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cqlgate_limiter_rejected_total", Help: "h"}, []string{"reason"})
	ruleInFlight := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "cqlgate_rule_in_flight", Help: "h"}, []string{"rule"})
	ruleRej := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cqlgate_rule_rejected_total", Help: "h"}, []string{"rule", "reason"})
	reg.MustRegister(up, lim, rej, ruleInFlight, ruleRej)
	ruleInFlight.WithLabelValues("reports").Set(3)
	ruleRej.WithLabelValues("reports", "queue_full").Add(41)
	up.WithLabelValues("10.0.0.1:9042").Set(1)
	up.WithLabelValues("10.0.0.2:9042").Set(0)
	lim.WithLabelValues("10.0.0.1:9042").Set(1024)
	rej.WithLabelValues("queue_full").Add(7)
	tb := stmtstats.New(stmtstats.Config{})
	tb.Query([]byte("SELECT * FROM shop.orders WHERE id = 7"), "shop").Record(&stmtstats.Sample{Now: time.Now(), Latency: time.Millisecond})
	srv := httptest.NewServer(New(reg, func() *stmtstats.Table { return tb }))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(body)
	for _, want := range []string{"10.0.0.1:9042", `class="down">down`, "1024", "rejected: queue_full", "SELECT * FROM shop.orders WHERE id = ?", "shop.orders", "<script>", `id="rules"`, "<td class=\"l\">reports</td><td>3</td>", "<td>41</td>"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "http://") || strings.Contains(page, "https://") {
		t.Error("the page refers to an outside address")
	}
}
