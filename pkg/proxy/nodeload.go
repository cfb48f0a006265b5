package proxy

// The fleet limit's readings of each node's own count of completed
// requests (see pkg/limiter's noderate.go), which also give the metrics
// the node's own threads and queue (backend.Cluster.Load).

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/cqlgate/cqlgate/pkg/backend"
	"github.com/cqlgate/cqlgate/pkg/cpupressure"
	"github.com/cqlgate/cqlgate/pkg/frame"
	"github.com/cqlgate/cqlgate/pkg/limiter"
)

const (
	// nodeLoadIdle is how often the poller looks again while no node
	// wants reading (the limit mode is not fleet): a reload may switch it.
	nodeLoadIdle = time.Second
	// nodeLoadTimeout bounds one reading: a node that takes longer is
	// busy, and its next reading will do.
	nodeLoadTimeout = time.Second
	// nodeLoadRetry is how long a node that cannot count (no
	// system_views before Cassandra 4.0, or a role without SELECT on it)
	// is left alone.
	nodeLoadRetry = 10 * time.Minute
)

// cannotRead reports whether the node's answer to a reading says it will
// never answer it as asked (no such table, no permission), as opposed to a
// busy node's (OVERLOADED, a timeout), which the next reading retries: a
// node held at the fixed limit for ten minutes because it was overloaded
// once would lose the fleet limit when it is needed most.
func cannotRead(se *backend.ServerError) bool {
	switch se.Code {
	case frame.ErrCodeSyntax, frame.ErrCodeUnauthorized, frame.ErrCodeInvalid, frame.ErrCodeConfig:
		return true
	}
	return false
}

// pollNodeLoad reads the counts of every node that is up when the limiter
// says it is due (Limiter.NodeReadingDue, never outside the fleet mode),
// and hands it over (Limiter.NodeRead). It asks every NodePoll: a
// sidecar's share of a node decides how often its counts are read, and a
// share that grows must be read at once. One goroutine reads all nodes in
// turn: a reading is one small query on a pool connection, answered in a
// fraction of a millisecond, and a slow node only delays the others'.
// When the limiter also wants the node's list of clients (NodeSizeDue,
// rarely), the reading carries the number of proxies it lists and their
// share of what the node completed since the list was last read.
func (p *Proxy) pollNodeLoad(ctx context.Context) {
	retry := map[limiter.NodeID]time.Time{}
	lists := map[limiter.NodeID]nodeList{}
	psi := cpupressure.NewReader(nil)
	// The first reading at once: until it, a fleet limit is at its floor,
	// and a node that cannot report gets --node-limit only from it.
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		every := p.limiter.NodePoll()
		if every == 0 {
			t.Reset(nodeLoadIdle)
			continue
		}
		// Whether this proxy's tasks wait for a CPU: the fleet law then
		// takes its latencies to carry that wait (the limiter's starved.go).
		if v, ok := psi.Read(); ok {
			p.limiter.CPUPressure(v)
		} else {
			p.limiter.CPUPressure(-1)
		}
		for _, n := range p.cluster.Nodes() {
			id := limiter.NodeID(n.ID)
			if !n.Up() || time.Now().Before(retry[id]) || !p.limiter.NodeReadingDue(id) {
				continue
			}
			rctx, cancel := context.WithTimeout(ctx, nodeLoadTimeout)
			load, err := p.cluster.Load(rctx, n)
			cancel()
			var se *backend.ServerError
			switch {
			case err == nil:
				rd := limiter.NodeReading{Completed: load.Completed, Active: load.Active,
					Threads: load.Threads, Queued: load.Pending + load.StagePending}
				if p.limiter.NodeSizeDue(id) {
					p.readFleet(ctx, n, id, load.Completed, lists, &rd)
				}
				p.limiter.NodeRead(id, rd)
			case errors.As(err, &se) && cannotRead(se), errors.Is(err, backend.ErrNoCounts):
				p.limiter.NodeUnreadable(id)
				if _, seen := retry[id]; !seen {
					p.log.Warn("the node does not report its load, so its limit is the fixed --node-limit: fleet mode needs Cassandra 4.0 or later and, for the proxy's role unless it is a superuser, GRANT SELECT ON system_views.thread_pools and ON system_views.clients (SELECT ON ALL KEYSPACES does not cover them)",
						zap.String("node", n.Addr), zap.Error(err))
				}
				retry[id] = time.Now().Add(nodeLoadRetry)
			case ctx.Err() == nil:
				p.log.Debug("cannot read the node's completed requests", zap.String("node", n.Addr), zap.Error(err))
			}
		}
		t.Reset(every)
	}
}

// nodeList is the last reading of a node's list of clients, with the
// node's count of completed requests then; retry, when set, is when a node
// that could not list its clients is asked again.
type nodeList struct {
	list      backend.FleetList
	completed uint64
	retry     time.Time
}

// readFleet reads node n's list of clients into rd: the number of proxies
// and their share of the requests completed since the last list.
func (p *Proxy) readFleet(ctx context.Context, n *backend.Node, id limiter.NodeID, completed uint64, lists map[limiter.NodeID]nodeList, rd *limiter.NodeReading) {
	last := lists[id]
	if time.Now().Before(last.retry) {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, nodeLoadTimeout)
	fl, err := p.cluster.Fleet(rctx, n)
	cancel()
	if err != nil {
		var se *backend.ServerError
		if errors.As(err, &se) && cannotRead(se) {
			if last.retry.IsZero() {
				p.log.Info("the node does not list its clients; its fleet limit does not know how many proxies share it",
					zap.String("node", n.Addr), zap.Error(err))
			}
			last.retry = time.Now().Add(nodeLoadRetry)
			lists[id] = last
		} else if ctx.Err() == nil {
			p.log.Debug("cannot read the node's list of clients", zap.String("node", n.Addr), zap.Error(err))
		}
		return
	}
	// The list was read over one of this proxy's connections, so it is
	// one of them, whatever the count (a list longer than its first page).
	rd.Sidecars = max(fl.Proxies, 1)
	if last.list.Requests != nil && completed > last.completed {
		rd.FleetShare = backend.ProxyShare(last.list, fl, completed-last.completed)
	}
	lists[id] = nodeList{list: fl, completed: completed}
}
