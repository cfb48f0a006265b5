package proxy

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// series returns the label values of the series a collector has now.
func series(t *testing.T, c prometheus.Collector) []string {
	ch := make(chan prometheus.Metric, 1024)
	c.Collect(ch)
	close(ch)
	var out []string
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			t.Fatal(err)
		}
		for _, l := range pb.GetLabel() {
			out = append(out, l.GetValue())
		}
	}
	slices.Sort(out)
	return out
}

// A node id reused by a new node (the old one was removed) takes over the
// id's latency series: the old node's goes, so node churn leaves as many
// series as the cluster has nodes, and the new node's answers are never
// counted under the old node's address.
func TestBackendLatencyFollowsReusedNodeIDs(t *testing.T) {
	m := newMetrics(prometheus.NewRegistry(), &Proxy{prep: &preparedCache{}})
	m.observeBackend(0, "10.0.0.1:9042", time.Millisecond)
	m.observeBackend(1, "10.0.0.2:9042", time.Millisecond)
	for i := 0; i < 50; i++ {
		// Node 1 replaced, again and again.
		m.observeBackend(1, fmt.Sprintf("10.0.1.%d:9042", i), time.Millisecond)
	}
	want := []string{"10.0.0.1:9042", "10.0.1.49:9042"}
	if got := series(t, m.backendLatencyVec); !slices.Equal(got, want) {
		t.Errorf("latency series after 50 replacements of one node of two: %v; want %v", got, want)
	}
}
