package backend

import (
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func cqlInt(v int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(v)) }
func cqlBig(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }
func loadRow(m map[string][]byte) row {
	r := row{"completed_tasks": cqlBig(1 << 40), "active_tasks": cqlInt(7), "active_tasks_limit": cqlInt(128), "pending_tasks": cqlInt(300)}
	for k, v := range m {
		r[k] = v
	}
	return r
}

// Cassandra 5.0's thread_pools row: completed_tasks a bigint, the others
// ints. Each column lands in its own field, whatever the widths.
func TestParseLoad(t *testing.T) {
	l, err := parseLoad(loadRow(nil))
	if err != nil {
		t.Fatal(err)
	}
	if l.Completed != 1<<40 || l.Active != 7 || l.Threads != 128 || l.Pending != 300 {
		t.Errorf("got %+v; want completed 2^40, active 7, threads 128, pending 300", l)
	}
	l, err = parseLoad(loadRow(map[string][]byte{"pending_tasks": cqlBig(5), "completed_tasks": cqlInt(9)}))
	if err != nil || l.Pending != 5 || l.Completed != 9 {
		t.Errorf("widened and narrowed columns: %+v, %v; want pending 5, completed 9", l, err)
	}
}

// A null, a column of another type or a negative count is an error that
// names the column, never a reading of zero.
func TestParseLoadRejectsWhatIsNotACount(t *testing.T) {
	for _, c := range []struct {
		name string
		r    row
		want string
	}{
		{"null active", loadRow(map[string][]byte{"active_tasks": nil}), "active_tasks"},
		{"text pending", loadRow(map[string][]byte{"pending_tasks": []byte("abc")}), "pending_tasks"},
		{"missing limit", func() row { r := loadRow(nil); delete(r, "active_tasks_limit"); return r }(), "active_tasks_limit"},
		{"negative completed", loadRow(map[string][]byte{"completed_tasks": cqlBig(-1)}), "completed_tasks"},
	} {
		if _, err := parseLoad(c.r); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v; want one naming %s", c.name, err, c.want)
		}
	}
}

// The node's threads and queue are shown while the node is up and the
// reading is fresh: a proxy that stopped reading (its limit mode changed)
// shows nothing rather than a queue frozen at its last value.
func TestNodeLoadMetricsShowFreshReadingsOnly(t *testing.T) {
	reg := prometheus.NewRegistry()
	cl, err := NewCluster(Config{ContactPoints: []string{"127.0.0.1:1"}}, reg)
	if err != nil {
		t.Fatal(err)
	}
	n := &Node{Addr: "127.0.0.1:1"}
	cl.nodes[n.Addr] = n
	n.up.Store(true)
	// queued returns the series of the queue gauge, by node.
	queued := func() map[string]float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, mf := range mfs {
			if mf.GetName() != "cqlgate_backend_node_queued_requests" {
				continue
			}
			for _, m := range mf.GetMetric() {
				out[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
			}
		}
		return out
	}
	if q := queued(); len(q) != 0 {
		t.Errorf("before any reading: %v; want no series", q)
	}
	n.load.Store(&NodeLoad{Active: 128, Threads: 128, Pending: 40, At: time.Now()})
	if q := queued(); len(q) != 1 || q[n.Addr] != 40 {
		t.Errorf("after a reading of 40 queued: %v; want %s 40", q, n.Addr)
	}
	n.up.Store(false)
	if q := queued(); len(q) != 0 {
		t.Errorf("node down: %v; want no series", q)
	}
	n.up.Store(true)
	n.load.Store(&NodeLoad{Pending: 40, At: time.Now().Add(-loadStale)})
	if q := queued(); len(q) != 0 {
		t.Errorf("a reading %v old: %v; want no series", loadStale, q)
	}
}

// loadQuery's rows: the native transport's, and the stages' pending tasks
// summed, in any order; a MutationStage row is missing until the node's
// first write. A reading without the transport's row, or with a stage's
// pending that is not a count, is an error.
func TestParseLoadsSumsTheStagesQueues(t *testing.T) {
	stage := func(name string, pending []byte) row {
		return row{"name": []byte(name), "completed_tasks": cqlBig(3), "active_tasks": cqlInt(8), "active_tasks_limit": cqlInt(8), "pending_tasks": pending}
	}
	ntr := loadRow(map[string][]byte{"name": []byte(transportPool)})
	l, err := parseLoads([]row{stage("ReadStage", cqlInt(40)), ntr, stage("MutationStage", cqlInt(2))})
	if err != nil || l.Active != 7 || l.Pending != 300 || l.StagePending != 42 {
		t.Errorf("got %+v, %v; want the transport's active 7, pending 300, and 42 at the stages", l, err)
	}
	if l, err = parseLoads([]row{ntr}); err != nil || l.StagePending != 0 {
		t.Errorf("the transport's row alone: %+v, %v; want nothing at the stages", l, err)
	}
	for _, c := range []struct {
		name string
		rows []row
		want string
	}{
		{"no transport row", []row{stage("ReadStage", cqlInt(1))}, transportPool},
		{"null stage pending", []row{ntr, stage("ReadStage", nil)}, "ReadStage pending_tasks"},
		{"negative stage pending", []row{ntr, stage("MutationStage", cqlInt(-1))}, "MutationStage pending_tasks"},
	} {
		if _, err := parseLoads(c.rows); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v; want one naming %s", c.name, err, c.want)
		}
	}
}
