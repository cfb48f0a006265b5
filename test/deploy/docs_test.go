package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/cqlgate/cqlgate/internal/docgen"
	"github.com/cqlgate/cqlgate/pkg/admin"
	"github.com/cqlgate/cqlgate/pkg/config"
	"github.com/cqlgate/cqlgate/pkg/proxy"
)

// checkGenerated compares a generated document with the checked-in one, or
// rewrites it with -update.
func checkGenerated(t *testing.T, rel string, got []byte) {
	t.Helper()
	path := filepath.Join(repoRoot(t), rel)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", rel)
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run `make docs` to generate it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is out of date: run `make docs` and commit the result. First difference:\n%s", rel, firstDiff(want, got))
	}
}

// firstDiff shows the first differing line of two documents.
func firstDiff(old, new []byte) string {
	a, b := strings.Split(string(old), "\n"), strings.Split(string(new), "\n")
	for i := range max(len(a), len(b)) {
		var x, y string
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			return fmt.Sprintf("line %d\n  checked in: %s\n  generated:  %s", i+1, x, y)
		}
	}
	return "(none)"
}

func TestDocsSettings(t *testing.T) {
	doc, err := docgen.Settings(config.Fields())
	if err != nil {
		t.Fatal(err)
	}
	checkGenerated(t, "docs/settings.md", doc)
}

func TestDocsErrors(t *testing.T) {
	sites, err := docgen.ScanErrors(repoRoot(t), "pkg")
	if err != nil {
		t.Fatal(err)
	}
	if len(sites) == 0 {
		t.Fatal("found no error answers in pkg/: the scanner is broken")
	}
	doc, err := docgen.Errors(sites)
	if err != nil {
		t.Fatal(err)
	}
	checkGenerated(t, "docs/errors.md", doc)
}

// TestDocsMetrics starts a real proxy in front of Cassandra, sends it a few
// requests, and documents every metric family it registers (including
// vectors without series yet), merged with the /metrics page of the cqlgate
// binary (which adds cqlgate_build_info and the runtime families). The
// document must match the checked-in one, and every family the binary
// serves must be in it.
func TestDocsMetrics(t *testing.T) {
	c := single.Get(t)

	reg := admin.NewRegistry()
	rec := &docgen.Recorder{Next: reg}
	exercise(t, startInProcess(t, c.Addrs, rec))
	waitForFamily(t, reg, "cqlgate_backend_node_request_threads")
	inProcess, err := rec.Families()
	if err != nil {
		t.Fatal(err)
	}
	runtimeFamilies := gatheredFamilies(t, reg)
	optional := optionalFamilies(t, inProcess)

	b := startBinary(t, nil, "--contact-points", c.Addrs[0])
	exercise(t, b.CQLAddr)
	code, page := httpGet(b.AdminURL + "/metrics")
	if code != 200 {
		t.Fatalf("GET /metrics: status %d", code)
	}
	served, err := docgen.ParseExposition(bytes.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}

	exported := docgen.Merge(inProcess, optional, served, runtimeFamilies)
	doc, err := docgen.Metrics(exported, docgen.Planned)
	if err != nil {
		t.Fatal(err)
	}
	checkGenerated(t, "docs/metrics.md", doc)

	// Whatever the generation says, the page a user scrapes must be
	// documented, family by family, and not as planned.
	names, planned := docgen.DocumentedMetrics(repoFile(t, "docs/metrics.md"))
	for _, f := range served {
		if !strings.HasPrefix(f.Name, "cqlgate_") {
			continue
		}
		switch {
		case !names[f.Name]:
			t.Errorf("the proxy serves %s, which docs/metrics.md does not document", f.Name)
		case planned[f.Name]:
			t.Errorf("the proxy serves %s, which docs/metrics.md still marks planned", f.Name)
		}
	}
	// And the document lists nothing the proxy no longer has, unless it is
	// marked planned.
	all := make(map[string]bool)
	for _, f := range exported {
		all[f.Name] = true
	}
	for n := range names {
		if !all[n] && !planned[n] {
			t.Errorf("docs/metrics.md documents %s, which the proxy does not export (mark it planned in docgen.Planned or remove it)", n)
		}
	}
}

// withOptionalFeatures turns on, in a default configuration, the features
// that register metrics of their own, so that the documentation covers
// them. A feature added later with metrics of its own belongs here.
func withOptionalFeatures(cfg *config.Config) {
	cfg.ClientAuth = config.ClientAuthPassthrough
	cfg.BackendUsername = "docs"
	cfg.BackendPassword = "docs"
}

// optionalFamilies returns the families registered by a proxy built (not
// run) with withOptionalFeatures that known does not have already.
func optionalFamilies(t *testing.T, known []docgen.Family) []docgen.Family {
	t.Helper()
	cfg := config.Default()
	cfg.ContactPoints = []string{"127.0.0.1:1"} // never dialled: the proxy does not run
	withOptionalFeatures(&cfg)
	if err := cfg.Validate(); err != nil {
		t.Fatalf("config with optional features: %v", err)
	}
	rec := &docgen.Recorder{Next: prometheus.NewRegistry()}
	if _, err := proxy.New(cfg, zap.NewNop(), rec); err != nil {
		t.Fatalf("proxy.New with optional features: %v", err)
	}
	fams, err := rec.Families()
	have := make(map[string]bool)
	for _, f := range known {
		have[f.Name] = true
	}
	var ue *docgen.UntypedError
	switch {
	case errors.As(err, &ue):
		for _, n := range ue.Names {
			if !have[n] {
				t.Errorf("cannot document %s: the proxy registers it only with optional features, and exports no series for it before it runs", n)
			}
		}
	case err != nil:
		t.Fatal(err)
	}
	return slices.DeleteFunc(fams, func(f docgen.Family) bool { return have[f.Name] })
}

func gatheredFamilies(t *testing.T, g prometheus.Gatherer) []docgen.Family {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []docgen.Family
	for _, mf := range mfs {
		out = append(out, docgen.Family{Name: mf.GetName(), Type: strings.ToLower(mf.GetType().String()), Help: mf.GetHelp()})
	}
	return out
}

// documentedFamilies is the set of metric families docs/metrics.md lists
// (planned ones included), and the prefixes of the families it documents
// as a group (go_, process_, ...).
func documentedFamilies(t *testing.T) (names map[string]bool, planned map[string]bool, prefixes []string) {
	t.Helper()
	doc := repoFile(t, "docs/metrics.md")
	names, planned = docgen.DocumentedMetrics(doc)
	for _, m := range regexp.MustCompile("`([a-z]+_)\\*`").FindAllSubmatch(doc, -1) {
		prefixes = append(prefixes, string(m[1]))
	}
	return names, planned, prefixes
}

// metricName matches a metric name in a document or a query.
var metricName = regexp.MustCompile(`\bcqlgate_[a-z0-9_]*[a-z0-9]\b`)

// familyOf maps a series name to its family: histogram and summary series
// carry _bucket, _sum and _count suffixes.
func familyOf(name string, names map[string]bool) string {
	if names[name] {
		return name
	}
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suf); ok && names[base] {
			return base
		}
	}
	return name
}

// TestDocsNameRealMetricsAndFlags checks the hand-written documentation
// against the code: every cqlgate_ metric named in README.md and docs/
// is documented in docs/metrics.md, and every flag in README's settings
// table and in docs/ (as `--flag`) is a setting of the proxy.
func TestDocsNameRealMetricsAndFlags(t *testing.T) {
	names, _, _ := documentedFamilies(t)
	flags := map[string]bool{"help": true, "version": true}
	for _, f := range config.Fields() {
		flags[f.Flag] = true
	}
	files := []string{"README.md"}
	docs, err := filepath.Glob(filepath.Join(repoRoot(t), "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		if base := filepath.Base(d); base != "loadgen.md" { // loadgen's flags, not the proxy's
			files = append(files, filepath.Join("docs", base))
		}
	}
	flagRef := regexp.MustCompile("`--([a-z][a-z0-9-]*)")
	for _, rel := range files {
		text := repoFile(t, rel)
		for _, m := range metricName.FindAll(text, -1) {
			if n := string(m); !names[familyOf(n, names)] && !strings.HasSuffix(n, "_") {
				t.Errorf("%s names %s, which docs/metrics.md does not document", rel, n)
			}
		}
		for line := range bytes.Lines(text) {
			if rel == "README.md" && !bytes.HasPrefix(line, []byte("| `--")) {
				continue // README's other flags may be loadgen's or the scripts'
			}
			for _, m := range flagRef.FindAllSubmatch(line, -1) {
				if f := string(m[1]); !flags[f] {
					t.Errorf("%s names --%s, which is not a setting of the proxy: %s", rel, f, bytes.TrimSpace(line))
				}
			}
		}
	}
}

// TestDocsLinks checks that relative links in README.md and docs/ point to
// files that exist.
func TestDocsLinks(t *testing.T) {
	root := repoRoot(t)
	files := []string{"README.md"}
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	for _, d := range docs {
		files = append(files, filepath.Join("docs", filepath.Base(d)))
	}
	link := regexp.MustCompile(`\]\(([^)#\s]+)(#[^)]*)?\)`)
	for _, rel := range files {
		for _, m := range link.FindAllSubmatch(repoFile(t, rel), -1) {
			target := string(m[1])
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			if _, err := os.Stat(filepath.Join(root, filepath.Dir(rel), target)); err != nil {
				t.Errorf("%s links to %s, which does not exist", rel, target)
			}
		}
	}
}

// waitForFamily waits until reg gathers a series of the family name: one
// that only a reading made in the background creates.
func waitForFamily(t *testing.T, reg prometheus.Gatherer, name string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if slices.ContainsFunc(gatheredFamilies(t, reg), func(f docgen.Family) bool { return f.Name == name }) {
			return
		}
	}
	t.Fatalf("no series of %s after 10s", name)
}
