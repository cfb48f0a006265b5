package proxy

// Pending handshakes: a client connection holds a connection slot from
// accept on, but until its handshake is done it has shown nothing. Idle or
// slow sockets (a scanner, a flood, a driver stuck mid-login) must not keep
// well-behaved clients out, so a pending handshake is the first thing to go
// when room is needed, and no pending handshake outlives
// --handshake-timeout. A real driver's handshake takes milliseconds, so it
// is only evicted if that many newer connections arrive meanwhile.

import (
	"errors"
	"net"
)

// Reasons a client connection is closed before it was served, as labels of
// cqlgate_client_rejected_connections_total.
const (
	rejectMaxConnections   = "max_connections"
	rejectDraining         = "draining"
	rejectHandshakeTimeout = "handshake_timeout"
	rejectHandshakeEvicted = "handshake_evicted"
)

// pendingHandshake is a client connection whose handshake is under way.
type pendingHandshake struct {
	src string // the source address (host only)
	seq uint64 // arrival order: the lowest is the oldest
}

// sourceHost is the host part of a connection's remote address.
func sourceHost(nc net.Conn) string {
	addr := nc.RemoteAddr().String()
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}

// admitLocked makes room for the new connection c, which then counts as a
// pending handshake, and returns the connections to close (outside p.mu)
// for it: its source address's oldest pending handshake when that address
// has --max-pending-handshakes-per-address already, the oldest pending
// handshake of all when --max-pending-handshakes are pending or the proxy
// serves --max-client-connections. ok is false when c itself must be
// refused: the connection limit is reached and no handshake is pending.
// Called with p.mu held.
func (p *Proxy) admitLocked(c *client, src string) (evict []*client, ok bool) {
	if limit := p.maxClients.Load(); limit > 0 && int64(len(p.clients)) >= limit {
		v := p.oldestPendingLocked("")
		if v == nil {
			return nil, false
		}
		evict = append(evict, v)
		p.forgetPendingLocked(v)
	}
	if p.pendingBySrc[src] >= int(p.maxPendingPerAddr.Load()) {
		if v := p.oldestPendingLocked(src); v != nil {
			evict = append(evict, v)
			p.forgetPendingLocked(v)
		}
	}
	if len(p.pending) >= int(p.maxPending.Load()) {
		if v := p.oldestPendingLocked(""); v != nil {
			evict = append(evict, v)
			p.forgetPendingLocked(v)
		}
	}
	p.pendingSeq++
	p.pending[c] = pendingHandshake{src: src, seq: p.pendingSeq}
	p.pendingBySrc[src]++
	return evict, true
}

// oldestPendingLocked returns the pending handshake that arrived first,
// from src ("" for any source), or nil. It scans: it runs only when a limit
// is reached, and the pending set is bounded by --max-pending-handshakes.
func (p *Proxy) oldestPendingLocked(src string) *client {
	var oldest *client
	var seq uint64
	for c, ph := range p.pending {
		if (src == "" || ph.src == src) && (oldest == nil || ph.seq < seq) {
			oldest, seq = c, ph.seq
		}
	}
	return oldest
}

func (p *Proxy) forgetPendingLocked(c *client) {
	ph, ok := p.pending[c]
	if !ok {
		return
	}
	delete(p.pending, c)
	if p.pendingBySrc[ph.src]--; p.pendingBySrc[ph.src] <= 0 {
		delete(p.pendingBySrc, ph.src)
	}
}

// handshakeEnded takes c off the pending handshakes, whether it succeeded
// or not. A successful handshake calls it before its last answer is written,
// and serve once more when the handshake returns; the second call is a no-op.
func (p *Proxy) handshakeEnded(c *client) {
	p.mu.Lock()
	p.forgetPendingLocked(c)
	p.mu.Unlock()
}

// evict closes connections whose handshake made room for newer ones.
func (p *Proxy) evict(cs []*client) {
	for _, c := range cs {
		p.metrics.connsRejected.WithLabelValues(rejectHandshakeEvicted).Inc()
		c.evicted.Store(true)
		c.nc.Close() // its handshake's read fails, and serve closes it
	}
}

// isTimeout reports whether err is a deadline that passed.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
