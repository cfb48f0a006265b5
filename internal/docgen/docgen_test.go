package docgen

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cqlgate/cqlgate/pkg/config"
)

func TestParseDesc(t *testing.T) {
	tests := []struct {
		desc       *prometheus.Desc
		name, help string
		labels     []string
	}{
		{prometheus.NewDesc("a_total", "Plain.", nil, nil), "a_total", "Plain.", nil},
		{prometheus.NewDesc("b", `Quotes " and {braces}, commas.`, []string{"node", "reason"}, nil),
			"b", `Quotes " and {braces}, commas.`, []string{"node", "reason"}},
		{prometheus.NewDesc("c_info", "Const.", []string{"x"}, prometheus.Labels{"version": "v1,2}", "goversion": `go"1`}),
			"c_info", "Const.", []string{"x", "goversion", "version"}},
		{prometheus.V2.NewDesc("d", "Constrained.", prometheus.ConstrainedLabels{{Name: "l", Constraint: strings.ToLower}}, nil),
			"d", "Constrained.", []string{"l"}},
	}
	for _, tt := range tests {
		got, err := parseDesc(tt.desc.String())
		if err != nil {
			t.Errorf("parseDesc(%s): %v", tt.desc, err)
			continue
		}
		if got.name != tt.name || got.help != tt.help || !slices.Equal(got.labels, tt.labels) {
			t.Errorf("parseDesc(%s) = %q, %q, %q; want %q, %q, %q", tt.desc, got.name, got.help, got.labels, tt.name, tt.help, tt.labels)
		}
	}
	if _, err := parseDesc("Desc{something else}"); err == nil {
		t.Error("parseDesc of an unknown format: got nil error")
	}
}

// customCollector exports one gauge family only when it has a value, like
// the proxy's per-node collectors.
type customCollector struct {
	desc *prometheus.Desc
	emit bool
}

func (c customCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }
func (c customCollector) Collect(ch chan<- prometheus.Metric) {
	if c.emit {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, 1, "n1")
	}
}

func TestRecorderFamiliesIncludeVectorsWithoutChildren(t *testing.T) {
	reg := prometheus.NewRegistry()
	rec := &Recorder{Next: reg}
	rec.MustRegister(
		prometheus.NewCounter(prometheus.CounterOpts{Name: "x_total", Help: "X."}),
		prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "y_seconds", Help: "Y."}, []string{"node"}),
		customCollector{desc: prometheus.NewDesc("z", "Z.", []string{"node"}, nil), emit: true},
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "w", Help: "W."}, func() float64 { return 1 }),
	)
	got, err := rec.Families()
	if err != nil {
		t.Fatal(err)
	}
	want := []Family{
		{Name: "w", Type: "gauge", Help: "W."},
		{Name: "x_total", Type: "counter", Help: "X."},
		{Name: "y_seconds", Type: "histogram", Labels: []string{"node"}, Help: "Y."},
		{Name: "z", Type: "gauge", Labels: []string{"node"}, Help: "Z."},
	}
	if !slices.EqualFunc(got, want, familyEqual) {
		t.Errorf("Families() = %+v\nwant %+v", got, want)
	}

	// Registration errors pass through and are not recorded.
	if err := rec.Register(prometheus.NewCounter(prometheus.CounterOpts{Name: "x_total", Help: "X."})); err == nil {
		t.Error("registering a duplicate: got nil error")
	}
	if got, _ := rec.Families(); len(got) != len(want) {
		t.Errorf("after a failed registration: %d families, want %d", len(got), len(want))
	}
}

func TestRecorderFamiliesUnknownType(t *testing.T) {
	rec := &Recorder{Next: prometheus.NewRegistry()}
	rec.MustRegister(
		customCollector{desc: prometheus.NewDesc("quiet", "Q.", []string{"node"}, nil)},
		prometheus.NewCounter(prometheus.CounterOpts{Name: "x_total", Help: "X."}),
	)
	got, err := rec.Families()
	var ue *UntypedError
	if !errors.As(err, &ue) || !slices.Equal(ue.Names, []string{"quiet"}) {
		t.Errorf("Families() error = %v, want an UntypedError naming quiet", err)
	}
	if len(got) != 1 || got[0].Name != "x_total" {
		t.Errorf("Families() = %+v, want the typed family x_total", got)
	}
}

func familyEqual(a, b Family) bool {
	return a.Name == b.Name && a.Type == b.Type && a.Help == b.Help && a.Planned == b.Planned && slices.Equal(a.Labels, b.Labels)
}

func TestParseExpositionAndMerge(t *testing.T) {
	page := `# HELP cqlgate_build_info Build.
# TYPE cqlgate_build_info gauge
cqlgate_build_info{goversion="go1",revision="r",version="v"} 1
# HELP h_seconds H.
# TYPE h_seconds histogram
h_seconds_bucket{node="a",le="1"} 1
h_seconds_bucket{node="a",le="+Inf"} 1
h_seconds_sum{node="a"} 0.5
h_seconds_count{node="a"} 1
`
	got, err := ParseExposition(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	want := []Family{
		{Name: "cqlgate_build_info", Type: "gauge", Labels: []string{"goversion", "revision", "version"}, Help: "Build."},
		{Name: "h_seconds", Type: "histogram", Labels: []string{"node"}, Help: "H."},
	}
	if !slices.EqualFunc(got, want, familyEqual) {
		t.Errorf("ParseExposition = %+v\nwant %+v", got, want)
	}
	merged := Merge([]Family{{Name: "h_seconds", Type: "histogram", Help: "From code."}}, got)
	if len(merged) != 2 || merged[1].Help != "From code." || !slices.Equal(merged[1].Labels, []string{"node"}) {
		t.Errorf("Merge kept %+v, want the first set's help with the second set's labels", merged)
	}
}

func TestMetricsPlannedUntilExported(t *testing.T) {
	exported := []Family{
		{Name: "cqlgate_limiter_queue_depth", Type: "gauge", Help: "Waiting."},
		{Name: "cqlgate_speculative_wins_total", Type: "counter", Help: "From the code."},
		{Name: "go_goroutines", Type: "gauge", Help: "Goroutines."},
	}
	planned := []Family{
		{Name: "cqlgate_speculative_wins_total", Type: "counter", Help: "Announced."},
		{Name: "cqlgate_speculative_wasted_total", Type: "counter", Help: "Announced | piped."},
	}
	doc, err := Metrics(exported, planned)
	if err != nil {
		t.Fatal(err)
	}
	names, plan := DocumentedMetrics(doc)
	for _, n := range []string{"cqlgate_limiter_queue_depth", "cqlgate_speculative_wins_total", "cqlgate_speculative_wasted_total"} {
		if !names[n] {
			t.Errorf("%s not documented:\n%s", n, doc)
		}
	}
	if names["go_goroutines"] {
		t.Errorf("go_goroutines documented one by one, want by prefix only")
	}
	if !plan["cqlgate_speculative_wasted_total"] || plan["cqlgate_speculative_wins_total"] {
		t.Errorf("planned = %v, want only the family not exported yet", plan)
	}
	for _, s := range []string{"From the code.", `Announced \| piped.`, "`go_*`"} {
		if !strings.Contains(string(doc), s) {
			t.Errorf("document lacks %q:\n%s", s, doc)
		}
	}
	if strings.Contains(string(doc), "Announced.") {
		t.Errorf("an exported family kept its planned description:\n%s", doc)
	}
}

// TestExampleConfigLoads proves that every key of the generated example is
// one the loader accepts, with a valid default.
func TestExampleConfigLoads(t *testing.T) {
	ex, err := ExampleConfig(config.Fields())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "cqlgate.yaml")
	if err := os.WriteFile(path, []byte(ex), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load([]string{"--config", path, "--contact-points", "127.0.0.1"}, nil, io.Discard)
	if err != nil {
		t.Fatalf("loading the example config: %v\n%s", err, ex)
	}
	def := config.Default()
	if cfg.QueueLength != def.QueueLength || cfg.RequestTimeout != def.RequestTimeout {
		t.Errorf("example config changed defaults: queue %d timeout %v, want %d %v", cfg.QueueLength, cfg.RequestTimeout, def.QueueLength, def.RequestTimeout)
	}
}

func TestSettingsListsEveryField(t *testing.T) {
	doc, err := Settings(config.Fields())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range config.Fields() {
		if !strings.Contains(string(doc), "| `--"+f.Flag+"` | `"+f.Env+"` |") {
			t.Errorf("settings document lacks a row for --%s", f.Flag)
		}
	}
}

func TestScanErrors(t *testing.T) {
	root := t.TempDir()
	src := `package p

import ("fmt"; "frame")

type client struct{}
type Error struct{ Code int32; Message string }

func (c *client) handle(n int) {
	c.reject(1, frame.ErrCodeProtocol, "Unknown opcode "+name(n))
	c.fail(frame.ErrCodeOverloaded, fmt.Sprintf("cqlgate: queue full (%d, 100%%)", n))
	c.count(frame.ErrCodeServer) // a metric, not an answer
	if code == frame.ErrCodeServer {
	}
	_ = &Error{Code: frame.ErrCodeBadCredentials, Message: msg}
}

func other() { reject(frame.ErrCodeProtocol, "Unknown opcode "+x) }
`
	if err := os.MkdirAll(filepath.Join(root, "pkg", "p"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"p.go": src, "p_test.go": "package p\nfunc f() { g(frame.ErrCodeInvalid, \"test only\") }\n"} {
		if err := os.WriteFile(filepath.Join(root, "pkg", "p", name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ScanErrors(root, "pkg")
	if err != nil {
		t.Fatal(err)
	}
	want := []ErrorSite{
		{Code: 0x000A, Name: "PROTOCOL_ERROR", Message: "Unknown opcode …", Where: []string{"pkg/p/p.go: (*client).handle", "pkg/p/p.go: other"}},
		{Code: 0x0100, Name: "BAD_CREDENTIALS", Message: "…", Where: []string{"pkg/p/p.go: (*client).handle"}},
		{Code: 0x1001, Name: "OVERLOADED", Message: "cqlgate: queue full (…, 100%)", Where: []string{"pkg/p/p.go: (*client).handle"}},
	}
	if !slices.EqualFunc(got, want, func(a, b ErrorSite) bool {
		return a.Code == b.Code && a.Name == b.Name && a.Message == b.Message && slices.Equal(a.Where, b.Where)
	}) {
		t.Errorf("ScanErrors = %+v\nwant %+v", got, want)
	}

	// A code the prose does not describe is an error.
	_, err = Errors([]ErrorSite{{Code: 0x2200, Name: "INVALID", Message: "x"}})
	if err == nil || !strings.Contains(err.Error(), "0x2200") {
		t.Errorf("Errors with an undescribed code: error = %v, want one naming 0x2200", err)
	}
	// An unknown constant is an error too.
	if err := os.WriteFile(filepath.Join(root, "pkg", "p", "q.go"), []byte("package p\nfunc h() { f(frame.ErrCodeNew, \"x\") }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ScanErrors(root, "pkg"); err == nil || !strings.Contains(err.Error(), "ErrCodeNew") {
		t.Errorf("ScanErrors with an unknown constant: error = %v", err)
	}
	if _, err := ScanErrors(root, "missing"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ScanErrors of a missing directory: error = %v, want ErrNotExist", err)
	}
}
