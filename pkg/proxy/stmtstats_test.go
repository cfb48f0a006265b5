package proxy_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/datastax/go-cassandra-native-protocol/datatype"

	"github.com/cqlgate/cqlgate/internal/fakenode"
	"github.com/cqlgate/cqlgate/internal/proxytest"
	"github.com/cqlgate/cqlgate/pkg/config"
	"github.com/cqlgate/cqlgate/pkg/frame"
	"github.com/cqlgate/cqlgate/pkg/stmtstats"
)

// Requests through the proxy show up in its statement statistics: QUERY
// strings with different literals as one statement, with their calls,
// errors by code and rows; EXECUTEs under their prepared id; OVERLOADED
// rejections of the limiter; and GET /statements serves them sorted.
func TestStatementStatistics(t *testing.T) {
	node := fakenode.Start(t, fakenode.Config{})
	node.SetTable("ks.kv", []fakenode.Column{fakenode.Key("k", datatype.Int), fakenode.Col("v", datatype.Blob)},
		[][]byte{fakenode.Int(1), []byte("one")}, [][]byte{fakenode.Int(2), []byte("two")})
	node.SetHook(func(r fakenode.Request) fakenode.Action {
		switch r.Query {
		case "SELECT v FROM ks.kv WHERE k = 13":
			return fakenode.Action{Error: &fakenode.Error{Code: frame.ErrCodeInvalid, Message: "unlucky"}}
		case "SELECT v FROM ks.kv WHERE k = 99":
			return fakenode.Action{Delay: 300 * time.Millisecond}
		}
		return fakenode.Action{}
	})
	p := proxytest.Start(t, []string{node.Addr()}, func(cfg *config.Config) {
		cfg.LimitMode, cfg.NodeLimit = "fixed", 1
		cfg.QueueLength = 0 // the second request while one is in flight is rejected
		cfg.SpeculativeMaxExecutions = 0
	})
	c := dialRaw(t, p.Addr, frame.V4)
	for i := range 20 {
		resp := c.roundTrip(frame.AppendQuery(nil, frame.V4, 1, fmt.Sprintf("SELECT v FROM ks.kv WHERE k = %d", i), 0x0001, 0))
		if want := byte(frame.OpResult); i == 13 {
			if frame.Opcode(resp) != frame.OpError {
				t.Fatalf("k = 13: %s", describe(resp))
			}
		} else if frame.Opcode(resp) != want {
			t.Fatalf("k = %d: %s", i, describe(resp))
		}
	}
	meta := c.prepare(2, "SELECT v FROM ks.kv WHERE k = ?")
	for range 5 {
		if resp := c.roundTrip(execute(frame.V4, 3, meta.ID, nil, false, fakenode.Int(1))); frame.Opcode(resp) != frame.OpResult {
			t.Fatalf("EXECUTE: %s", describe(resp))
		}
	}
	// A slow request holds the only permit; the next one is rejected.
	c.send(frame.AppendQuery(nil, frame.V4, 4, "SELECT v FROM ks.kv WHERE k = 99", 0x0001, 0))
	time.Sleep(50 * time.Millisecond)
	c.send(frame.AppendQuery(nil, frame.V4, 5, "SELECT v FROM ks.other WHERE k = 1", 0x0001, 0))
	for range 2 {
		c.read()
	}

	r := p.Statements().Snapshot("calls", 0)
	byText := map[string]stmtstats.Stat{}
	for _, s := range r.Statements {
		if s.Kind == "query" {
			byText[s.Text] = s
		}
	}
	q := byText["SELECT v FROM ks.kv WHERE k = ?"]
	if q.Kind != "query" || q.Calls != 21 || q.Errors != 1 || q.ErrorCodes["0x2200"] != 1 || q.Keyspace != "ks" || q.Table != "kv" ||
		q.Statement != "SELECT" || !q.Idempotent || q.BytesIn == 0 || q.BytesOut == 0 || q.MaxMs < 250 {
		t.Errorf("QUERY statistics: %+v", q)
	}
	if q.Rows != 2*20 { // the fake node answers every SELECT of ks.kv with its 2 rows
		t.Errorf("rows %d, want 40", q.Rows)
	}
	var prepared stmtstats.Stat
	for _, s := range r.Statements {
		if s.Kind == "prepared" {
			prepared = s
		}
	}
	if prepared.Calls != 5 || prepared.Rows != 10 || prepared.Text != "SELECT v FROM ks.kv WHERE k = ?" || prepared.ID == "" {
		t.Errorf("EXECUTE statistics: %+v", prepared)
	}
	other := byText["SELECT v FROM ks.other WHERE k = ?"]
	if other.Rejected != 1 || other.Errors != 1 || other.ErrorCodes["0x1001"] != 1 || other.Calls != 0 {
		t.Errorf("rejected statement: %+v", other)
	}

	srv := httptest.NewServer(p.StatementsHandler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/statements?sort=p99&limit=1")
	if err != nil {
		t.Fatal(err)
	}
	var got stmtstats.Report
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(got.Statements) != 1 || got.Statements[0].Text != q.Text || got.Sort != "p99" {
		t.Errorf("GET /statements?sort=p99&limit=1: %+v", got)
	}
	resp, err = http.Post(srv.URL+"/statements/reset", "", bytes.NewReader(nil))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("POST /statements/reset: %v %v", resp, err)
	}
	if n := p.Statements().Len(); n != 0 {
		t.Errorf("%d statements after a reset", n)
	}
}

// A USE, which the proxy handles itself (it moves the client to the
// keyspace's pool) before forwarding it, is one statement with its text, as
// every other QUERY: drivers send one per session, so it shows up on every
// status page.
func TestStatementStatisticsUse(t *testing.T) {
	node := fakenode.Start(t, fakenode.Config{})
	p := proxytest.Start(t, []string{node.Addr()}, nil)
	c := dialRaw(t, p.Addr, frame.V4)
	for i := range 3 {
		if resp := c.roundTrip(frame.AppendQuery(nil, frame.V4, int16(i+1), `USE "ks"`, 0x0001, 0)); frame.Opcode(resp) != frame.OpResult {
			t.Fatalf("USE: %s", describe(resp))
		}
	}
	r := p.Statements().Snapshot("calls", 0)
	if len(r.Statements) != 1 {
		t.Fatalf("%d statements, want the USE: %+v", len(r.Statements), r.Statements)
	}
	if s := r.Statements[0]; s.Text != `USE "ks"` || s.Calls != 3 || s.Keyspace != "ks" {
		t.Errorf("USE statistics: %+v", s)
	}
}

// The slow-statement log names slow statements and never their values.
func TestSlowStatementLog(t *testing.T) {
	node := fakenode.Start(t, fakenode.Config{})
	node.SetTable("ks.kv", []fakenode.Column{fakenode.Key("k", datatype.Int), fakenode.Col("v", datatype.Blob)})
	node.SetHook(func(r fakenode.Request) fakenode.Action {
		if r.Query == "SELECT v FROM ks.kv WHERE k = 424242" {
			return fakenode.Action{Delay: 100 * time.Millisecond}
		}
		return fakenode.Action{}
	})
	p := proxytest.Start(t, []string{node.Addr()}, func(cfg *config.Config) {
		cfg.SlowStatementThreshold = 50 * time.Millisecond
	})
	c := dialRaw(t, p.Addr, frame.V4)
	c.roundTrip(frame.AppendQuery(nil, frame.V4, 1, "SELECT v FROM ks.kv WHERE k = 1", 0x0001, 0))
	c.roundTrip(frame.AppendQuery(nil, frame.V4, 1, "SELECT v FROM ks.kv WHERE k = 424242", 0x0001, 0))
	logs := p.Logs.String()
	if !bytes.Contains([]byte(logs), []byte("slow statement")) || !bytes.Contains([]byte(logs), []byte("SELECT v FROM ks.kv WHERE k = ?")) {
		t.Errorf("no slow-statement line:\n%s", logs)
	}
	if bytes.Contains([]byte(logs), []byte("424242")) {
		t.Errorf("the log shows a value:\n%s", logs)
	}
	if n := bytes.Count([]byte(logs), []byte("slow statement")); n != 1 {
		t.Errorf("%d slow-statement lines, want 1", n)
	}
}
