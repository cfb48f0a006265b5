package backend

// Upkeep: the once-a-second loop of heartbeats, request expiry and the
// closing of idle keyspace pools, and beside it the topology refresher.

import (
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/cqlgate/cqlgate/pkg/frame"
)

// upkeep sends heartbeats on idle connections, expires requests and closes
// idle pools, once a second. Nothing it does waits for the network, so the
// request timeout is enforced on time whatever the nodes do.
func (cl *Cluster) upkeep() {
	defer cl.background.Done()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-cl.ctx.Done():
			return
		case now := <-tick.C:
			cl.heartbeat(now)
			cl.expire(now)
			cl.closeIdlePools(now)
		}
	}
}

// refresher refreshes the topology when asked, and reconnects the control
// connection, one refresh at a time: requests made during a refresh
// coalesce into one more after it (cl.refresh holds one). It has its own
// goroutine because a refresh waits for the control node, for seconds when
// that node is slow, and must not hold up upkeep.
func (cl *Cluster) refresher() {
	defer cl.background.Done()
	for {
		select {
		case <-cl.ctx.Done():
			return
		case <-cl.refresh:
		}
		// Events come in bursts when a node restarts; one refresh after
		// the burst is enough.
		if !cl.sleep(500 * time.Millisecond) {
			return
		}
		if err := cl.refreshTopology(); err != nil {
			cl.log.Warn("control connection reconnect failed", zap.Error(err))
			if !cl.sleep(cl.cfg.ReconnectBaseDelay * 10) {
				return
			}
			cl.requestRefresh()
		}
	}
}

// sleep waits for d, or reports false when the cluster closes first.
func (cl *Cluster) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-cl.ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// heartbeat sends OPTIONS on connections that have read nothing for a
// heartbeat interval and closes those whose previous heartbeat went
// unanswered for as long, so a silently dead node is noticed even while
// requests are pending on it.
func (cl *Cluster) heartbeat(now time.Time) {
	if cl.cfg.HeartbeatInterval < 0 {
		return
	}
	conns := cl.poolConns()
	cl.mu.Lock()
	if cl.control != nil {
		conns = append(conns, cl.control)
	}
	cl.mu.Unlock()
	for _, c := range conns {
		idle := c.idleFor(now)
		if idle < cl.cfg.HeartbeatInterval {
			continue
		}
		if idle >= 2*cl.cfg.HeartbeatInterval && c.heartbeatPending.Load() {
			cl.log.Warn("heartbeat unanswered, closing connection", zap.String("node", c.Addr()), zap.Duration("idle", idle))
			c.fail(fmt.Errorf("heartbeat: no answer from %s for %s", c.Addr(), idle.Round(time.Millisecond)))
			continue
		}
		if c.heartbeatPending.CompareAndSwap(false, true) {
			hb := frame.GetBuf(0)
			hb.B = frame.AppendOptions(hb.B[:0], c.Version(), 0)
			// Written by the connection's flusher: a write to a stalled
			// node must not hold up upkeep (nor the other heartbeats).
			if err := c.Queue(hb.B, heartbeatHandler{hb}); err != nil {
				hb.Release()
				c.heartbeatPending.Store(false)
				continue
			}
			c.Kick()
		}
	}
}

// closeIdlePools closes the keyspace pools idle for PoolIdleTimeout: an
// application that USEs many keyspaces over time (one per tenant, say) would
// otherwise keep connections to every node for each of them for good. Role
// pools, whatever their keyspace, close after RolePoolIdleTimeout, and a
// role with neither pools nor clients is forgotten.
func (cl *Cluster) closeIdlePools(now time.Time) {
	var idle []*Pool
	cl.mu.Lock()
	for key, e := range cl.pools {
		timeout := cl.cfg.PoolIdleTimeout
		if key.role != "" {
			timeout = cl.cfg.RolePoolIdleTimeout
		} else if key.keyspace == "" {
			continue
		}
		if timeout <= 0 || e.pool == nil || !e.pool.idleSince(now.Add(-timeout)) {
			continue
		}
		delete(cl.pools, key)
		idle = append(idle, e.pool)
	}
	cl.forgetIdleRolesLocked()
	cl.mu.Unlock()
	for _, p := range idle {
		if p.role != nil {
			cl.log.Info("closing an idle role pool", zap.String("role", p.role.name), zap.String("keyspace", p.keyspace),
				zap.Uint8("protocol_version", p.version), zap.Duration("idle_timeout", cl.cfg.RolePoolIdleTimeout))
		} else {
			cl.log.Info("closing an idle keyspace pool", zap.String("keyspace", p.keyspace),
				zap.Uint8("protocol_version", p.version), zap.Duration("idle_timeout", cl.cfg.PoolIdleTimeout))
		}
		p.close()
	}
}

// expire enforces the request timeout on every pool connection, and
// replaces connections whose stream ids go to orphans: such a connection
// leaves its pool at once (a new one is dialled in its place) and is closed
// once nothing but orphans is left on it, so no live request is failed.
func (cl *Cluster) expire(now time.Time) {
	if cl.cfg.RequestTimeout <= 0 {
		return
	}
	orphans := 0
	for _, np := range cl.nodePools() {
		cs := np.conns.Load()
		if cs == nil {
			continue
		}
		for _, c := range *cs {
			n := c.ExpireRequests(now)
			orphans += n
			if n > cl.cfg.MaxOrphans {
				cl.log.Warn("replacing a connection with too many orphaned streams",
					zap.String("node", c.Addr()), zap.Int("orphans", n), zap.Int("max", cl.cfg.MaxOrphans))
				np.remove(c)
				np.kick()
				cl.metrics.replaced.Inc()
				cl.mu.Lock()
				cl.retiring = append(cl.retiring, c)
				cl.mu.Unlock()
			}
		}
	}
	cl.mu.Lock()
	retiring := cl.retiring[:0]
	for _, c := range cl.retiring {
		orphans += c.ExpireRequests(now)
		if c.Err() != nil || c.liveRequests() == 0 {
			c.Close()
			continue
		}
		retiring = append(retiring, c)
	}
	clear(cl.retiring[len(retiring):])
	cl.retiring = retiring
	cl.mu.Unlock()
	cl.metrics.orphans.Set(float64(orphans))
}

// nodePools returns every NodePool of every ready pool.
func (cl *Cluster) nodePools() []*NodePool {
	var nps []*NodePool
	for _, p := range cl.readyPools() {
		nps = append(nps, *p.nodes.Load()...)
	}
	return nps
}

// poolConns returns every open pool connection.
func (cl *Cluster) poolConns() []*Conn {
	var conns []*Conn
	for _, p := range cl.readyPools() {
		for _, np := range *p.nodes.Load() {
			if cs := np.conns.Load(); cs != nil {
				conns = append(conns, *cs...)
			}
		}
	}
	return conns
}

// connected reports whether any pool has an open connection to n.
func (cl *Cluster) connected(n *Node) bool {
	for _, p := range cl.readyPools() {
		for _, np := range *p.nodes.Load() {
			if np.node == n && np.numConns() > 0 {
				return true
			}
		}
	}
	return false
}

// readyPools returns the pools that finished connecting.
func (cl *Cluster) readyPools() []*Pool {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	var pools []*Pool
	for _, e := range cl.pools {
		select {
		case <-e.ready:
			if e.pool != nil {
				pools = append(pools, e.pool)
			}
		default:
		}
	}
	return pools
}

type heartbeatHandler struct{ req *frame.Buf }

func (h heartbeatHandler) OnTimeout(*Conn) {}

func (h heartbeatHandler) OnResponse(c *Conn, resp *frame.Buf) {
	resp.Release()
	h.req.Release()
	c.heartbeatPending.Store(false)
}

func (h heartbeatHandler) OnFailure(c *Conn, _ error, _ bool) {
	h.req.Release()
	c.heartbeatPending.Store(false)
}
