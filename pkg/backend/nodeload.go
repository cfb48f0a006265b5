package backend

// A node's own count of the requests it completed, which the fleet limit
// uses as the throughput every sidecar sees alike (see pkg/limiter's
// noderate.go).

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
)

// completedQuery reads the native transport's thread pool, which counts
// one completed task per request the node answered (Cassandra 4.0 and
// later; the virtual table does not exist before).
const completedQuery = "SELECT completed_tasks FROM system_views.thread_pools WHERE name='Native-Transport-Requests'"

// ErrNoConnection: the node has no open connection to ask on.
var ErrNoConnection = errors.New("no open connection to the node")

// CompletedRequests asks node n, over a connection of the default pool,
// how many requests it has completed since it started. A node without the
// virtual table (before Cassandra 4.0) answers with a *ServerError.
func (cl *Cluster) CompletedRequests(ctx context.Context, n *Node) (uint64, error) {
	v := cl.Version()
	pool, err := cl.Pool(ctx, v, "")
	if err != nil {
		return 0, err
	}
	for _, np := range *pool.nodes.Load() {
		if np.node != n {
			continue
		}
		c, _ := np.leastLoaded()
		if c == nil {
			return 0, ErrNoConnection
		}
		rows, err := c.query(ctx, v, completedQuery)
		if err != nil {
			return 0, fmt.Errorf("completed requests on %s: %w", n.Addr, err)
		}
		if len(rows) != 1 || len(rows[0].bytes("completed_tasks")) != 8 {
			return 0, fmt.Errorf("completed requests on %s: %d rows, not one bigint", n.Addr, len(rows))
		}
		return binary.BigEndian.Uint64(rows[0].bytes("completed_tasks")), nil
	}
	return 0, ErrNoConnection
}
