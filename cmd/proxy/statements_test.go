package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cqlgate/cqlgate/pkg/rules"
	"github.com/cqlgate/cqlgate/pkg/stmtstats"
)

func TestStatementsCommand(t *testing.T) {
	tb := stmtstats.New(stmtstats.Config{})
	e := tb.Query([]byte("SELECT * FROM shop.orders WHERE id = 7"), "shop")
	e.Record(&stmtstats.Sample{Now: time.Now(), Latency: 3 * time.Millisecond, Rows: 2})
	var gotQuery string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotQuery = r.URL.RawQuery
		_ = json.NewEncoder(w).Encode(report{Report: tb.Snapshot(r.URL.Query().Get("sort"), 0),
			Rules: []rules.Stat{{Name: "reports", Match: "shop.events", Limit: 4, InFlight: 3, Queued: 1, QueueLength: 16, MaxQueueWaitMs: 100, Admitted: 9, Rejected: 5, RejectedQueueFull: 5}}})
	}))
	defer srv.Close()
	var out, errb bytes.Buffer
	code := app{}.run(context.Background(), []string{"statements", "--admin", strings.TrimPrefix(srv.URL, "http://"), "--sort", "p99", "--limit", "5"}, nil, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if gotQuery != "sort=p99&limit=5" {
		t.Errorf("asked %q", gotQuery)
	}
	for _, want := range []string{"1 statements", "shop.orders", "SELECT * FROM shop.orders WHERE id = ?", "(1 rows)", "p99 ms", "rules", "reports", "shop.events"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	code = app{}.run(context.Background(), []string{"statements", "--admin", "127.0.0.1:1"}, nil, &out, &errb)
	if code != exitRuntime {
		t.Errorf("unreachable admin address: exit %d", code)
	}
}
