package docgen

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Family describes one metric family as the documentation shows it.
type Family struct {
	Name    string   // e.g. "cqlgate_requests_total"
	Type    string   // "counter", "gauge", "histogram", "summary" or "untyped"
	Labels  []string // label names: variable ones as declared, then constant ones
	Help    string   // the help text, from the code
	Planned bool     // announced but not exported yet (see Planned)
}

// Recorder is a prometheus.Registerer that passes every registration on to
// Next and remembers the collectors that Next accepted, so that Families can
// describe every family the proxy registers, including vectors that have no
// series yet (those are absent from Gather and from /metrics). It is safe for
// concurrent use; Next must be set before use.
type Recorder struct {
	Next prometheus.Registerer

	mu         sync.Mutex
	collectors []prometheus.Collector
}

// Register implements prometheus.Registerer.
func (r *Recorder) Register(c prometheus.Collector) error {
	if err := r.Next.Register(c); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.collectors = append(r.collectors, c)
	return nil
}

// MustRegister implements prometheus.Registerer; like every Registerer's, it
// panics when a registration fails.
func (r *Recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// Unregister implements prometheus.Registerer.
func (r *Recorder) Unregister(c prometheus.Collector) bool {
	if !r.Next.Unregister(c) {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if reflect.TypeOf(c).Comparable() { // comparing others would panic
		r.collectors = slices.DeleteFunc(r.collectors, func(x prometheus.Collector) bool {
			return reflect.TypeOf(x) == reflect.TypeOf(c) && x == c
		})
	}
	return true
}

// UntypedError names the families whose type Recorder.Families could not
// tell: their custom collectors exported no series for them.
type UntypedError struct {
	Names []string
}

func (e *UntypedError) Error() string {
	return fmt.Sprintf("cannot tell the type of %s: the collector exports no series for it yet; exercise the proxy so that it does", strings.Join(e.Names, ", "))
}

// Families describes the metric families of every collector registered
// through r, sorted by name. Names, help texts and label names come from the
// collectors' descriptors; the type from a metric the collector exports now,
// or, for a vector without children, from the vector's Go type. Families
// whose type cannot be told (a custom collector that exports nothing for
// them at the moment) are left out and named by an *UntypedError, returned
// with the others.
func (r *Recorder) Families() ([]Family, error) {
	r.mu.Lock()
	cs := slices.Clone(r.collectors)
	r.mu.Unlock()

	byName := make(map[string]Family)
	var errs []error
	var untyped []string
	for _, c := range cs {
		types := make(map[*prometheus.Desc]string)
		for _, m := range collect(c) {
			t, err := metricType(m)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			types[m.Desc()] = t
		}
		for _, d := range describe(c) {
			info, err := parseDesc(d.String())
			if err != nil {
				errs = append(errs, err)
				continue
			}
			f := Family{Name: info.name, Help: info.help, Labels: info.labels, Type: types[d]}
			if f.Type == "" {
				f.Type = vectorType(c)
			}
			if f.Type == "" {
				untyped = append(untyped, f.Name)
				continue
			}
			byName[f.Name] = f
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(untyped) > 0 {
		slices.Sort(untyped)
		return sortedFamilies(byName), &UntypedError{Names: untyped}
	}
	return sortedFamilies(byName), nil
}

func collect(c prometheus.Collector) []prometheus.Metric {
	ch := make(chan prometheus.Metric)
	go func() {
		defer close(ch)
		c.Collect(ch)
	}()
	var out []prometheus.Metric
	for m := range ch {
		out = append(out, m)
	}
	return out
}

func describe(c prometheus.Collector) []*prometheus.Desc {
	ch := make(chan *prometheus.Desc)
	go func() {
		defer close(ch)
		c.Describe(ch)
	}()
	var out []*prometheus.Desc
	for d := range ch {
		out = append(out, d)
	}
	return out
}

func metricType(m prometheus.Metric) (string, error) {
	var pb dto.Metric
	if err := m.Write(&pb); err != nil {
		return "", fmt.Errorf("reading a sample of %s: %w", m.Desc(), err)
	}
	switch {
	case pb.Counter != nil:
		return "counter", nil
	case pb.Gauge != nil:
		return "gauge", nil
	case pb.Histogram != nil:
		return "histogram", nil
	case pb.Summary != nil:
		return "summary", nil
	case pb.Untyped != nil:
		return "untyped", nil
	}
	return "", fmt.Errorf("a sample of %s has no value", m.Desc())
}

// vectorType is the type of the families of a client_golang vector, which
// exports nothing until it has children; "" for other collectors.
func vectorType(c prometheus.Collector) string {
	switch c.(type) {
	case *prometheus.CounterVec:
		return "counter"
	case *prometheus.GaugeVec:
		return "gauge"
	case *prometheus.HistogramVec:
		return "histogram"
	case *prometheus.SummaryVec:
		return "summary"
	}
	return ""
}

// descInfo is what parseDesc reads from a descriptor.
type descInfo struct {
	name, help string
	labels     []string
}

// parseDesc reads a prometheus.Desc's String form,
//
//	Desc{fqName: "x", help: "y", unit: "", constLabels: {a="1",b="2"}, variableLabels: {c,d}}
//
// which is the only way client_golang exposes a descriptor's contents. Fields
// it does not know are skipped, so that a new one does not break it; a
// missing one it needs is an error (TestParseDesc notices a format change).
func parseDesc(s string) (descInfo, error) {
	var info descInfo
	bad := func(what string) (descInfo, error) {
		return descInfo{}, fmt.Errorf("cannot read the %s of metric descriptor %s", what, s)
	}
	var ok bool
	if info.name, ok = quotedAfter(s, "fqName: "); !ok || info.name == "" {
		return bad("name")
	}
	if info.help, ok = quotedAfter(s, "help: "); !ok {
		return bad("help")
	}
	vars, ok := bracedAfter(s, "variableLabels: {")
	if !ok {
		return bad("variable labels")
	}
	for l := range strings.SplitSeq(vars, ",") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "c(") && strings.HasSuffix(l, ")") { // constrained label
			l = l[2 : len(l)-1]
		}
		if l != "" {
			info.labels = append(info.labels, l)
		}
	}
	consts, ok := bracedAfter(s, "constLabels: {")
	if !ok {
		return bad("constant labels")
	}
	for consts != "" {
		name, rest, found := strings.Cut(consts, "=")
		if !found {
			return bad("constant labels")
		}
		q, err := strconv.QuotedPrefix(rest)
		if err != nil {
			return bad("constant labels")
		}
		info.labels = append(info.labels, strings.TrimSpace(name))
		consts = strings.TrimPrefix(rest[len(q):], ",")
	}
	return info, nil
}

// quotedAfter returns the Go-quoted string that follows key in s.
func quotedAfter(s, key string) (string, bool) {
	i := strings.Index(s, key)
	if i < 0 {
		return "", false
	}
	q, err := strconv.QuotedPrefix(s[i+len(key):])
	if err != nil {
		return "", false
	}
	v, err := strconv.Unquote(q)
	return v, err == nil
}

// bracedAfter returns the text between key (which ends with "{") and the
// matching "}", skipping over quoted strings.
func bracedAfter(s, key string) (string, bool) {
	i := strings.Index(s, key)
	if i < 0 {
		return "", false
	}
	body := s[i+len(key):]
	for j := 0; j < len(body); j++ {
		switch body[j] {
		case '"':
			q, err := strconv.QuotedPrefix(body[j:])
			if err != nil {
				return "", false
			}
			j += len(q) - 1
		case '}':
			return body[:j], true
		}
	}
	return "", false
}

// ParseExposition reads a /metrics page in the Prometheus text format and
// describes its families, sorted by name. Label names are those of the
// page's series ("le" and "quantile" excluded), in order of appearance.
func ParseExposition(r io.Reader) ([]Family, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parsing metrics page: %w", err)
	}
	byName := make(map[string]Family, len(mfs))
	for name, mf := range mfs {
		f := Family{Name: name, Help: mf.GetHelp(), Type: strings.ToLower(mf.GetType().String())}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if !slices.Contains(f.Labels, lp.GetName()) {
					f.Labels = append(f.Labels, lp.GetName())
				}
			}
		}
		byName[name] = f
	}
	return sortedFamilies(byName), nil
}

// Merge joins sets of families by name, sorted by name. Of a family found in
// several sets, the first set's description is kept; the label names of the
// later ones are added to it.
func Merge(sets ...[]Family) []Family {
	byName := make(map[string]Family)
	for _, set := range sets {
		for _, f := range set {
			old, ok := byName[f.Name]
			if !ok {
				f.Labels = slices.Clone(f.Labels)
				byName[f.Name] = f
				continue
			}
			for _, l := range f.Labels {
				if !slices.Contains(old.Labels, l) {
					old.Labels = append(old.Labels, l)
				}
			}
			byName[f.Name] = old
		}
	}
	return sortedFamilies(byName)
}

func sortedFamilies(m map[string]Family) []Family {
	out := make([]Family, 0, len(m))
	for _, f := range m {
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b Family) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// Prefix of the families the proxy documents one by one; the others (Go
// runtime, process, scrape handler) are listed by prefix only.
const ownPrefix = "cqlgate_"

// metricGroups order the metrics document's tables. A family belongs to the
// first group whose prefix it has; the last group takes the rest.
var metricGroups = []struct{ title, prefix string }{
	{"Admission: limits and queue", "cqlgate_limiter_"},
	{"Cassandra nodes and connections", "cqlgate_backend_"},
	{"Speculative execution (hedging)", "cqlgate_speculative_"},
	{"Clients, requests and errors", ownPrefix},
}

// MetricGroup is one table of the metrics document.
type MetricGroup struct {
	Title    string
	Families []Family
}

// MetricsData is what templates/metrics.md.tmpl renders.
type MetricsData struct {
	Groups        []MetricGroup
	Planned       []string // names of the planned families shown
	OtherPrefixes []string // prefixes of the exported families not documented one by one, e.g. "go_"
}

// Metrics renders docs/metrics.md: every exported cqlgate_ family, grouped,
// with the planned families that are not exported yet, marked as such.
func Metrics(exported, planned []Family) ([]byte, error) {
	byName := make(map[string]Family)
	var data MetricsData
	others := make(map[string]bool)
	for _, f := range exported {
		if !strings.HasPrefix(f.Name, ownPrefix) {
			p, _, _ := strings.Cut(f.Name, "_")
			others[p+"_"] = true
			continue
		}
		f.Planned = false
		byName[f.Name] = f
	}
	for _, f := range planned {
		if _, ok := byName[f.Name]; ok {
			continue // exported now: the code's description wins
		}
		f.Planned = true
		byName[f.Name] = f
		data.Planned = append(data.Planned, f.Name)
	}
	for p := range others {
		data.OtherPrefixes = append(data.OtherPrefixes, p)
	}
	slices.Sort(data.OtherPrefixes)
	groups := make([]MetricGroup, len(metricGroups))
	for _, f := range sortedFamilies(byName) {
		for i, g := range metricGroups {
			if strings.HasPrefix(f.Name, g.prefix) {
				groups[i].Families = append(groups[i].Families, f)
				break
			}
		}
	}
	for i, g := range metricGroups {
		if len(groups[i].Families) > 0 {
			groups[i].Title = g.title
			data.Groups = append(data.Groups, groups[i])
		}
	}
	return render("metrics.md.tmpl", data)
}

// DocumentedMetrics returns the metric family names a metrics document
// lists in its tables, and which of them are marked planned.
func DocumentedMetrics(doc []byte) (names map[string]bool, planned map[string]bool) {
	names, planned = make(map[string]bool), make(map[string]bool)
	for line := range bytes.Lines(doc) {
		s := string(line)
		if !strings.HasPrefix(s, "| `"+ownPrefix) {
			continue
		}
		cell, _, _ := strings.Cut(strings.TrimPrefix(s, "| `"), "`")
		names[cell] = true
		if strings.Contains(s, plannedMark) {
			planned[cell] = true
		}
	}
	return names, planned
}

// plannedMark starts the meaning of a planned family in the metrics tables.
const plannedMark = "*(planned)*"
