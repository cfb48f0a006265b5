package deploy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/cqlgate/cqlgate/internal/docgen"
)

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

type ruleTests struct {
	Tests []struct {
		Name          string `yaml:"name"`
		AlertRuleTest []struct {
			Alertname string `yaml:"alertname"`
			ExpAlerts []any  `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

// checkMetricNames fails the test for every cqlgate_ series named in expr
// that docs/metrics.md does not document (as exported or planned).
func checkMetricNames(t *testing.T, where, expr string) {
	t.Helper()
	names, _, _ := documentedFamilies(t)
	for _, m := range metricName.FindAllString(expr, -1) {
		if !names[familyOf(m, names)] {
			t.Errorf("%s uses %s, which the proxy does not export (docs/metrics.md)", where, m)
		}
	}
}

// TestAlertingRules checks deploy/prometheus/alerts.yml with promtool,
// runs its unit tests, and checks that every alert uses exported metrics,
// has a severity, a summary and a runbook section in docs/alerts.md, and is
// tested firing.
func TestAlertingRules(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "deploy", "prometheus")
	promtool := tool(t, "promtool", "Debian's prometheus package")
	run(t, dir, promtool, "check", "rules", "alerts.yml")
	run(t, dir, promtool, "test", "rules", "alerts_test.yml")
	run(t, dir, promtool, "check", "config", "prometheus.yml")
	run(t, dir, promtool, "check", "config", "prometheus-local.yml")

	var rf ruleFile
	if err := yaml.Unmarshal(repoFile(t, "deploy/prometheus/alerts.yml"), &rf); err != nil {
		t.Fatal(err)
	}
	var tests ruleTests
	if err := yaml.Unmarshal(repoFile(t, "deploy/prometheus/alerts_test.yml"), &tests); err != nil {
		t.Fatal(err)
	}
	fired := make(map[string]bool)
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fired[a.Alertname] = true
			}
		}
	}
	runbook := string(repoFile(t, "docs/alerts.md"))
	var alerts int
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts++
			checkMetricNames(t, "alert "+r.Alert, r.Expr)
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("alert %s: severity %q, want warning or critical", r.Alert, s)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("alert %s: want summary and description annotations", r.Alert)
			}
			_, anchor, _ := strings.Cut(r.Annotations["runbook_url"], "docs/alerts.md#")
			if !slices.ContainsFunc(strings.Split(runbook, "\n"), func(l string) bool {
				h, ok := strings.CutPrefix(l, "## ")
				return ok && strings.ToLower(h) == anchor
			}) {
				t.Errorf("alert %s: runbook_url %q has no matching section in docs/alerts.md", r.Alert, r.Annotations["runbook_url"])
			}
			if !fired[r.Alert] {
				t.Errorf("alert %s: no test in alerts_test.yml shows it firing", r.Alert)
			}
		}
	}
	if alerts == 0 {
		t.Fatal("no alerts found")
	}
}

// dashboard is the part of a Grafana dashboard the tests read.
type dashboard struct {
	UID        string `json:"uid"`
	Title      string `json:"title"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	GridPos struct {
		X, Y, W, H int
	} `json:"gridPos"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // of a collapsed row
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	var d dashboard
	dec := json.NewDecoder(strings.NewReader(string(repoFile(t, "deploy/grafana/dashboards/cqlgate.json"))))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	return d
}

// allPanels flattens rows.
func allPanels(ps []panel) []panel {
	var out []panel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, allPanels(p.Panels)...)
	}
	return out
}

type dashQuery struct {
	panel, expr string
}

func (d dashboard) queries() []dashQuery {
	var out []dashQuery
	for _, p := range allPanels(d.Panels) {
		for _, tg := range p.Targets {
			out = append(out, dashQuery{p.Title, tg.Expr})
		}
	}
	return out
}

// promQL turns a dashboard query into plain PromQL: template variables
// match everything, and the rate interval is rateInterval.
func promQL(expr, rateInterval string) string {
	return strings.NewReplacer(
		"$__rate_interval", rateInterval,
		"$__interval", rateInterval,
		"$job", ".+",
		"$instance", ".+",
	).Replace(expr)
}

// TestGrafanaDashboard checks that the dashboard parses, that its panels are
// well formed, that every query is valid PromQL (promtool, through a rule
// file) naming only metrics the proxy exports, and that it shows what an
// operator needs to see backpressure at a glance.
func TestGrafanaDashboard(t *testing.T) {
	d := loadDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Error("the dashboard needs a uid and a title")
	}
	var vars []string
	for _, v := range d.Templating.List {
		vars = append(vars, v.Name)
	}
	for _, v := range []string{"datasource", "job", "instance"} {
		if !slices.Contains(vars, v) {
			t.Errorf("the dashboard has no $%s variable", v)
		}
	}
	ids := make(map[int]bool)
	for _, p := range allPanels(d.Panels) {
		if ids[p.ID] {
			t.Errorf("panel id %d is used twice", p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.X+p.GridPos.W > 24 || p.GridPos.W <= 0 || p.GridPos.H <= 0 {
			t.Errorf("panel %q: gridPos %+v does not fit the 24-column grid", p.Title, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: want the ${datasource} data source", p.Title)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
	}

	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	used := make(map[string]bool)
	for i, q := range d.queries() {
		checkMetricNames(t, "panel "+q.panel, q.expr)
		if !strings.Contains(q.expr, `job=~"$job", instance=~"$instance"`) {
			t.Errorf("panel %q: query %s does not filter on $job and $instance", q.panel, q.expr)
		}
		for _, m := range metricName.FindAllString(q.expr, -1) {
			used[m] = true
		}
		expr, err := json.Marshal(promQL(q.expr, "5m")) // a JSON string is a YAML string
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&rules, "      - record: dashboard:query_%d\n        expr: %s\n", i, expr)
	}
	// The list: backpressure at a glance.
	for _, m := range []string{
		"cqlgate_limiter_global_limit", "cqlgate_limiter_global_in_flight", // limit vs in flight
		"cqlgate_limiter_limit", "cqlgate_limiter_in_flight",
		"cqlgate_limiter_queue_depth", "cqlgate_limiter_queue_wait_seconds_bucket", // queue depth and wait
		"cqlgate_limiter_rejected_total",                                     // rejections
		"cqlgate_speculative_wins_total", "cqlgate_speculative_wasted_total", // hedges won and wasted
		"cqlgate_backend_request_duration_seconds_bucket", // per-node latency
		"cqlgate_client_connections",                      // client connections
	} {
		if !used[m] {
			t.Errorf("no panel shows %s", m)
		}
	}

	promtool := tool(t, "promtool", "Debian's prometheus package")
	path := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(path, []byte(rules.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, filepath.Dir(path), promtool, "check", "rules", path)
}

// TestDashboardQueriesReturnData runs the cqlgate binary in front of
// Cassandra, sends it some traffic, lets a real Prometheus scrape it, and
// runs every dashboard query (and the variables' label queries) against
// that Prometheus: each must return data when the metrics it names are on
// the proxy's /metrics page (families with no series yet, such as planned
// ones or counters by reason that never happened, may show "No data").
func TestDashboardQueriesReturnData(t *testing.T) {
	promBin := tool(t, "prometheus", "Debian's prometheus package")
	c := single.Get(t)
	b := startBinary(t, nil, "--contact-points", c.Addrs[0])
	exercise(t, b.CQLAddr)

	// Which families have series on the page.
	_, page := httpGet(b.AdminURL + "/metrics")
	served := make(map[string]bool)
	fams, err := docgen.ParseExposition(strings.NewReader(string(page)))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		served[f.Name] = true
	}

	promURL := startPrometheus(t, promBin, strings.TrimPrefix(b.AdminURL, "http://"))

	// A few scrapes with traffic in between, so that rates have two points.
	deadline := time.Now().Add(time.Minute)
	for {
		exercise(t, b.CQLAddr)
		res := promQuery(t, promURL, `count_over_time(cqlgate_build_info[1m])`)
		if len(res) > 0 && len(res[0].Value) == 2 {
			if n, err := strconv.ParseFloat(fmt.Sprint(res[0].Value[1]), 64); err == nil && n >= 4 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus did not scrape the proxy 4 times within a minute: %+v", res)
		}
		time.Sleep(500 * time.Millisecond)
	}

	names, _, _ := documentedFamilies(t)
	d := loadDashboard(t)
	for _, q := range d.queries() {
		expr := promQL(q.expr, "1m")
		res := promQuery(t, promURL, expr)
		missing := ""
		for _, m := range metricName.FindAllString(q.expr, -1) {
			if f := familyOf(m, names); !served[f] {
				missing = f
			}
		}
		switch {
		case len(res) == 0 && missing == "":
			t.Errorf("panel %q: %s returned no data from a live proxy", q.panel, expr)
		case len(res) == 0:
			t.Logf("panel %q: no data yet (%s has no series on the proxy's page)", q.panel, missing)
		}
	}
	for _, v := range []string{"job", "instance"} {
		u := fmt.Sprintf("%s/api/v1/label/%s/values?match[]=cqlgate_build_info", promURL, v)
		code, body := httpGet(u)
		var r struct{ Data []string }
		if code != 200 || json.Unmarshal(body, &r) != nil || len(r.Data) == 0 {
			t.Errorf("the dashboard's $%s variable (label_values(cqlgate_build_info, %s)) finds nothing: %d %s", v, v, code, body)
		}
	}
}

// startPrometheus runs a Prometheus server scraping target every second
// until the test ends, and returns its URL.
func startPrometheus(t *testing.T, bin, target string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := fmt.Sprintf("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: cqlgate\n    static_configs:\n      - targets: [%q]\n", target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address=127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	var logMu sync.Mutex
	var log strings.Builder
	listening := regexp.MustCompile(`Listening on.*address=([0-9.]+:[0-9]+)`)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logMu.Lock()
			log.WriteString(sc.Text() + "\n")
			logMu.Unlock()
			if m := listening.FindStringSubmatch(sc.Text()); m != nil && !strings.HasSuffix(m[1], ":0") {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			logMu.Lock()
			t.Logf("prometheus log:\n%s", log.String())
			logMu.Unlock()
		}
	})
	select {
	case a := <-addr:
		return "http://" + a
	case <-time.After(30 * time.Second):
		logMu.Lock()
		defer logMu.Unlock()
		t.Fatalf("prometheus did not start listening within 30s:\n%s", log.String())
	}
	return ""
}

type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  []any             `json:"value"`
}

// promQuery runs an instant query and returns its vector (a scalar result
// counts as one sample).
func promQuery(t *testing.T, promURL, expr string) []promSample {
	t.Helper()
	code, body := httpGet(promURL + "/api/v1/query?query=" + url.QueryEscape(expr))
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil || code != 200 || r.Status != "success" {
		t.Fatalf("query %s: status %d: %s %s", expr, code, r.Error, body)
	}
	if r.Data.ResultType == "scalar" {
		var v []any
		_ = json.Unmarshal(r.Data.Result, &v)
		return []promSample{{Value: v}}
	}
	var out []promSample
	if err := json.Unmarshal(r.Data.Result, &out); err != nil {
		t.Fatalf("query %s: %v", expr, err)
	}
	return out
}
