package backend

// Request expiry: the list of requests with a deadline, walked once a
// second by the cluster's upkeep.

import (
	"math"
	"time"
)

// ExpireRequests calls OnTimeout for every request whose deadline has
// passed by now, and returns how many streams are orphaned (timed out and
// still awaiting their answer) afterwards. An orphan's stream id stays
// reserved until its answer arrives or the connection dies, so a late
// answer can never be taken for the answer to a later request.
//
// It costs nothing while no deadline can have passed, and otherwise time
// proportional to the requests in flight with a deadline: it runs once a
// second per connection, with the connection locked.
func (c *Conn) ExpireRequests(now time.Time) int {
	t := now.UnixNano()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0
	}
	if c.minDeadline >= t {
		return c.orphans
	}
	earliest := int64(math.MaxInt64)
	for id := c.timed; id >= 0; {
		s := &c.pending[id]
		next := s.next
		if s.deadline < t {
			c.unlink(id)
			s.orphan = true
			c.orphans++
			s.h.OnTimeout(c)
		} else {
			earliest = min(earliest, s.deadline)
		}
		id = next
	}
	c.minDeadline = earliest
	return c.orphans
}

// liveRequests returns how many requests on the connection still await an
// answer that someone waits for (in flight minus orphans).
func (c *Conn) liveRequests() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return int(c.inflight.Load()) - c.orphans
}

// idleFor reports how long the connection has gone without reading a frame.
func (c *Conn) idleFor(now time.Time) time.Duration {
	return now.Sub(time.Unix(0, c.lastRead.Load()))
}

// link adds stream, whose slot has a deadline, to the timed list. Called
// with mu held.
func (c *Conn) link(id int16) {
	s := &c.pending[id]
	s.timed, s.prev, s.next = true, -1, c.timed
	if c.timed >= 0 {
		c.pending[c.timed].prev = id
	}
	c.timed = id
	c.minDeadline = min(c.minDeadline, s.deadline)
}

// unlink takes stream off the timed list. Called with mu held.
func (c *Conn) unlink(id int16) {
	s := &c.pending[id]
	if s.prev >= 0 {
		c.pending[s.prev].next = s.next
	} else {
		c.timed = s.next
	}
	if s.next >= 0 {
		c.pending[s.next].prev = s.prev
	}
	s.timed, s.prev, s.next = false, -1, -1
}
