package backend

// A node's own view of its load: the count of requests it completed, which
// the fleet limit uses as the throughput every sidecar sees alike (see
// pkg/limiter's noderate.go), its native transport threads' work and
// queue, which the metrics show, and the queues of the stages that read and
// write, which with the threads tell the fleet limit whether the node has
// room (pkg/limiter's nodequeue.go).

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// loadQuery reads the native transport's thread pool (Cassandra 4.0 and
// later; the virtual table does not exist before). It counts one completed
// task per request the node answered; its active tasks are the requests
// being served, at most active_tasks_limit (native_transport_max_threads),
// and its pending tasks the requests waiting for a thread. A request that
// has its thread may still wait for the stage that reads or writes
// (concurrent_reads, concurrent_writes threads): their pending tasks are
// read too. A pool appears once it first ran, so a node that has served no
// write has no MutationStage row.
const loadQuery = "SELECT name, completed_tasks, active_tasks, active_tasks_limit, pending_tasks FROM system_views.thread_pools " +
	"WHERE name IN ('" + transportPool + "', 'ReadStage', 'MutationStage')"

const transportPool = "Native-Transport-Requests"

// ErrNoConnection: the node has no open connection to ask on.
var ErrNoConnection = errors.New("no open connection to the node")

// ErrNoCounts: the node answered the reading without the counts it asks
// for (a server that speaks CQL and is not Cassandra, or a version whose
// table differs). Asking again will not change it.
var ErrNoCounts = errors.New("the node's answer lacks the native transport's counts")

// NodeLoad is one reading of a node's native transport thread pool.
type NodeLoad struct {
	Completed uint64 // requests completed since the node started
	Active    int64  // requests being served
	Threads   int64  // the most it serves at once
	Pending   int64  // requests waiting for a thread
	// StagePending is the reads and writes waiting for a thread of their
	// stage (ReadStage, MutationStage).
	StagePending int64
	At           time.Time
}

// Load asks node n, over a connection of the default pool, for its native
// transport thread pool's counts, and keeps them for the metrics
// (LastLoad). A node without the virtual table (before Cassandra 4.0)
// answers with a *ServerError; one whose answer lacks the counts gives
// ErrNoCounts.
func (cl *Cluster) Load(ctx context.Context, n *Node) (NodeLoad, error) {
	rows, err := cl.queryNode(ctx, n, loadQuery, 5000)
	if err != nil {
		return NodeLoad{}, fmt.Errorf("load of %s: %w", n.Addr, err)
	}
	l, err := parseLoads(rows)
	if err != nil {
		return NodeLoad{}, fmt.Errorf("load of %s: %w: %w", n.Addr, ErrNoCounts, err)
	}
	l.At = time.Now()
	n.load.Store(&l)
	return l, nil
}

// queryNode runs cql on node n over the least loaded connection of the
// default pool and decodes the first page of up to pageSize rows: the
// node's own virtual tables answer for that node only.
func (cl *Cluster) queryNode(ctx context.Context, n *Node, cql string, pageSize int32) ([]row, error) {
	v := cl.Version()
	pool, err := cl.Pool(ctx, v, "")
	if err != nil {
		return nil, err
	}
	for _, np := range *pool.nodes.Load() {
		if np.node != n {
			continue
		}
		c, _ := np.leastLoaded()
		if c == nil {
			return nil, ErrNoConnection
		}
		return c.queryPage(ctx, v, cql, pageSize)
	}
	return nil, ErrNoConnection
}

// LastLoad is the node's last reading (Cluster.Load), nil before the first.
func (n *Node) LastLoad() *NodeLoad { return n.load.Load() }

// parseLoads decodes loadQuery's rows: the native transport's, which must
// be there, and the stages' pending tasks.
func parseLoads(rows []row) (NodeLoad, error) {
	var (
		l       NodeLoad
		found   bool
		pending int64
	)
	for _, r := range rows {
		name := r.text("name")
		if name == transportPool {
			var err error
			if l, err = parseLoad(r); err != nil {
				return NodeLoad{}, err
			}
			found = true
			continue
		}
		v, err := integer(r.bytes("pending_tasks"))
		if err == nil && v < 0 {
			err = fmt.Errorf("negative: %d", v)
		}
		if err != nil {
			return NodeLoad{}, fmt.Errorf("%s pending_tasks: %w", name, err)
		}
		pending += v
	}
	if !found {
		return NodeLoad{}, fmt.Errorf("no %s row among %d", transportPool, len(rows))
	}
	l.StagePending = pending
	return l, nil
}

// parseLoad decodes a thread_pools row. completed_tasks is a bigint and the
// others ints; either width is taken, in case a version widens one.
func parseLoad(r row) (NodeLoad, error) {
	var l NodeLoad
	for _, c := range []struct {
		name string
		to   *int64
	}{{"active_tasks", &l.Active}, {"active_tasks_limit", &l.Threads}, {"pending_tasks", &l.Pending}} {
		v, err := integer(r.bytes(c.name))
		if err != nil {
			return NodeLoad{}, fmt.Errorf("%s: %w", c.name, err)
		}
		*c.to = v
	}
	done, err := integer(r.bytes("completed_tasks"))
	if err != nil {
		return NodeLoad{}, fmt.Errorf("completed_tasks: %w", err)
	}
	if done < 0 {
		return NodeLoad{}, fmt.Errorf("completed_tasks: %d", done)
	}
	l.Completed = uint64(done)
	return l, nil
}

// integer decodes a CQL int or bigint.
func integer(b []byte) (int64, error) {
	switch len(b) {
	case 4:
		return int64(int32(binary.BigEndian.Uint32(b))), nil
	case 8:
		return int64(binary.BigEndian.Uint64(b)), nil
	}
	return 0, fmt.Errorf("%d bytes, not an int or a bigint", len(b))
}
