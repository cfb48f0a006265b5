package browser

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/gocql/gocql"

	"github.com/cqlgate/cqlgate/internal/proxytest"
	"github.com/cqlgate/cqlgate/pkg/admin"
	"github.com/cqlgate/cqlgate/pkg/config"
	"github.com/cqlgate/cqlgate/pkg/statuspage"
)

// pageTables is what the status page shows, read from the DOM: each table
// as rows of cell texts, header rows included.
type pageTables struct {
	At         string     `json:"at"`
	Nodes      [][]string `json:"nodes"`
	Limiter    [][]string `json:"limiter"`
	Hedging    [][]string `json:"hedging"`
	Statements [][]string `json:"statements"`
}

const readTables = `(() => {
  const rows = id => Array.from(document.querySelectorAll('#' + id + ' tr'))
    .map(tr => Array.from(tr.children).map(c => c.innerText.trim()));
  return {at: document.getElementById('at').innerText, nodes: rows('nodes'),
    limiter: rows('limiter'), hedging: rows('hedging'), statements: rows('statements')};
})()`

// startAdmin serves the proxy's status page and /statements on a free
// loopback port, as cmd/proxy wires them on --admin-listen.
func startAdmin(t *testing.T, p *proxytest.Proxy) string {
	t.Helper()
	adm := admin.New("127.0.0.1:0", p.Reg, nil, nil)
	h := p.StatementsHandler()
	adm.Handle("GET /statements", h)
	adm.Handle("POST /statements/reset", h)
	adm.Handle("GET /{$}", statuspage.New(p.Reg, p.Statements))
	if err := adm.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = adm.Shutdown(ctx)
	})
	return "http://" + adm.Addr().String() + "/"
}

// TestStatusPageInBrowser sends traffic through the proxy to a real node,
// loads the status page in headless Chromium, lets it refresh itself, and
// checks that the page shows the node, the limiter's figures and the
// statements sent, with their calls. A screenshot is kept.
func TestStatusPageInBrowser(t *testing.T) {
	b := newBrowser(t, 1280, 1000)
	cluster := single.Get(t)
	// A fixed limit: the page's limiter figures are checked at zero on an
	// idle proxy, and fleet mode (the default) queues a fresh proxy's
	// first requests while its limit grows from --limit-floor (68 of the
	// driver's first requests waited).
	p := proxytest.Start(t, cluster.Addrs, func(c *config.Config) { c.LimitMode = "fixed" })
	url := startAdmin(t, p)

	cc := gocql.NewCluster(p.Addr)
	cc.Timeout = 10 * time.Second
	s, err := cc.CreateSession()
	if err != nil {
		t.Fatalf("gocql session to the proxy: %v", err)
	}
	defer s.Close()
	exec := func(q string, args ...any) {
		t.Helper()
		if err := s.Query(q, args...).Exec(); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec("CREATE KEYSPACE IF NOT EXISTS browser_status WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
	exec("CREATE TABLE IF NOT EXISTS browser_status.kv (k int PRIMARY KEY, v text)")
	exec("TRUNCATE browser_status.kv")

	// The traffic: rows written, a cheap point read many times, and a slower
	// statement (a count over every partition) a few times.
	const (
		rows       = 400
		insert     = "INSERT INTO browser_status.kv (k, v) VALUES (?, ?)"
		pointRead  = "SELECT v FROM browser_status.kv WHERE k = ?"
		countAll   = "SELECT count(*) FROM browser_status.kv"
		pointCalls = 60
		countCalls = 4
		lateRead   = "SELECT k, v FROM browser_status.kv WHERE k = ?"
		lateCalls  = 7
	)
	for i := range rows {
		exec(insert, i, strings.Repeat("x", 100))
	}
	for i := range pointCalls {
		var v string
		if err := s.Query(pointRead, i).Scan(&v); err != nil {
			t.Fatalf("%s: %v", pointRead, err)
		}
	}
	for range countCalls {
		var n int64
		if err := s.Query(countAll).Scan(&n); err != nil || n != rows {
			t.Fatalf("%s: %d rows, %v", countAll, n, err)
		}
	}

	ctx, cancel := context.WithTimeout(b.ctx, 25*time.Second)
	defer cancel()
	// Wait for the statements' rows with a predicate, not a DOM node: the
	// page replaces its content every two seconds.
	if err := chromedp.Do(ctx, chromedp.Navigate(url),
		chromedp.Poll[chromedp.Void](`document.querySelector('#statements td') !== null`,
			chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("loading %s: %v", url, err)
	}
	first, err := chromedp.Run(ctx, chromedp.Evaluate[pageTables](readTables))
	if err != nil {
		t.Fatal(err)
	}

	// A statement sent after the page loaded appears only if the page
	// refreshes itself.
	for i := range lateCalls {
		exec(lateRead, i)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](
		fmt.Sprintf(`document.getElementById('at').innerText !== %q && document.getElementById('statements').innerText.includes(%q)`, first.At, lateRead),
		chromedp.WithPollingInterval(200*time.Millisecond), chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("the page did not refresh itself to show %q within 10 s (as of %s): %v", lateRead, first.At, err)
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[pageTables](readTables))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("page as of %s (first load %s)", got.At, first.At)
	b.screenshot(t, "status-page.png")

	// Nodes: the node is up, with a limit and a latency.
	if len(got.Nodes) != 2 {
		t.Fatalf("node rows %v, want a header and the one node", got.Nodes)
	}
	col := columns(got.Nodes[0])
	node := got.Nodes[1]
	if node[col["node"]] != cluster.Addrs[0] || node[col["state"]] != "up" {
		t.Errorf("node row %v, want %s up", node, cluster.Addrs[0])
	}
	if v := number(t, node[col["limit"]]); v < 1 {
		t.Errorf("node limit %v", v)
	}
	if v := number(t, node[col["mean ms"]]); v <= 0 {
		t.Errorf("node mean latency %v ms", v)
	}

	// Limiter: requests/s since the previous render (the late reads came
	// between the two), queue depth, waits and rejections.
	lim := keyed(got.Limiter)
	if v := number(t, lim["requests/s"]); v <= 0 {
		t.Errorf("requests/s = %v after the page refreshed over %d requests", v, lateCalls)
	}
	for _, k := range []string{"queue depth", "admitted after waiting", "OVERLOADED/s", "rejected"} {
		if v := number(t, lim[k]); v != 0 {
			t.Errorf("limiter %s = %v on an idle proxy", k, v)
		}
	}
	if v := number(t, lim["longest wait allowed s"]); v <= 0 {
		t.Errorf("limiter: longest wait allowed %v s", v)
	}
	hedge := keyed(got.Hedging)
	if _, ok := hedge["hedges sent"]; !ok {
		t.Errorf("hedging table %v", got.Hedging)
	}

	// Statements: each statement sent, with its calls and its table.
	if len(got.Statements) < 2 {
		t.Fatalf("statement rows %v", got.Statements)
	}
	col = columns(got.Statements[0])
	byText := map[string][]string{}
	for _, r := range got.Statements[1:] {
		byText[r[col["statement"]]] = r
	}
	for _, want := range []struct {
		text  string
		calls int
	}{{insert, rows}, {pointRead, pointCalls}, {countAll, countCalls}, {lateRead, lateCalls}} {
		r, ok := byText[want.text]
		if !ok {
			t.Errorf("statement %q not on the page; it shows %v", want.text, got.Statements)
			continue
		}
		if c := number(t, r[col["calls"]]); c != float64(want.calls) {
			t.Errorf("%q: %v calls, want %d", want.text, c, want.calls)
		}
		if r[col["table"]] != "browser_status.kv" || number(t, r[col["errors"]]) != 0 || number(t, r[col["max ms"]]) <= 0 {
			t.Errorf("%q: row %v", want.text, r)
		}
	}
	// The count reads every partition, the point read one: it is slower.
	if c, r := byText[countAll], byText[pointRead]; c != nil && r != nil &&
		number(t, c[col["mean ms"]]) <= number(t, r[col["mean ms"]]) {
		t.Errorf("the count (mean %s ms) is not slower than the point read (mean %s ms)", c[col["mean ms"]], r[col["mean ms"]])
	}
	if errs := b.pageErrors(); len(errs) > 0 {
		t.Errorf("the page threw or logged errors: %v", errs)
	}
}

// columns maps a header row's names to their indexes.
func columns(header []string) map[string]int {
	m := map[string]int{}
	for i, h := range header {
		m[h] = i
	}
	return m
}

// keyed maps a two-column table's first cells to its second ones.
func keyed(rows [][]string) map[string]string {
	m := map[string]string{}
	for _, r := range rows {
		if len(r) == 2 {
			m[r[0]] = r[1]
		}
	}
	return m
}

// number parses a figure as the page prints it.
func number(t *testing.T, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		t.Errorf("%q is not a number", s)
		return -1
	}
	return f
}
