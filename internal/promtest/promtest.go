// Package promtest renders Prometheus registries for tests that compare
// exported series with what they expect.
// It only reads registries; it must not register or change anything.
package promtest

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// Text renders what g gathers in the text format, without HELP lines and
// blank lines.
func Text(tb testing.TB, g prometheus.Gatherer) string {
	tb.Helper()
	mfs, err := g.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			tb.Fatal(err)
		}
	}
	var out []string
	for _, line := range strings.Split(b.String(), "\n") {
		if !strings.HasPrefix(line, "# HELP") && line != "" {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// Value returns the value of the unlabelled gauge or counter name in what g
// gathers (the sum over its series, if it has labels); 0 if it is absent.
func Value(tb testing.TB, g prometheus.Gatherer, name string) float64 {
	tb.Helper()
	mfs, err := g.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	var v float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			switch {
			case m.GetGauge() != nil:
				v += m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				v += m.GetCounter().GetValue()
			}
		}
	}
	return v
}

// Get returns the value of the gauge or counter name whose series has a
// label with the value label ("" for the unlabelled series), failing tb
// when there is none.
func Get(tb testing.TB, g prometheus.Gatherer, name, label string) float64 {
	tb.Helper()
	mfs, err := g.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := label == "" && len(m.GetLabel()) == 0
			for _, l := range m.GetLabel() {
				match = match || l.GetValue() == label
			}
			if !match {
				continue
			}
			if m.GetGauge() != nil {
				return m.GetGauge().GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	tb.Fatalf("no metric %s{%s}", name, label)
	return 0
}
