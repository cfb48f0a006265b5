// Package promtest renders Prometheus registries for tests that compare
// exported series with what they expect.
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
