package limiter

// How queued requests leave the queue: admitted when room appears
// (drainLocked, stepLocked), or rejected when their time is up (Sweep). The
// callbacks run with the lock released, one at a time.

import "time"

// action is one answer to deliver once the lock is released.
type action struct {
	w      Waiter
	p      Permit
	r      Reason
	waited int64 // ns in the queue, for admissions
	at     int64 // ns since the epoch when admitted
}

// deliver calls the action's Waiter; via, when not nil, is the releasing
// goroutine's (Permit.ReleaseVia).
func (a *action) deliver(l *Limiter, via any) {
	if a.r.Kind == 0 {
		l.queueWait.Observe(float64(a.waited) / 1e9)
		at := l.epoch.Add(time.Duration(a.at))
		if vw, ok := a.w.(ViaWaiter); ok && via != nil {
			vw.AdmittedVia(a.p, at, via)
			return
		}
		a.w.Admitted(a.p, at)
	} else {
		a.w.Rejected(a.r)
	}
}

// drainLocked admits queued requests while there is room, and rejects the
// ones found expired or dropped by CoDel on the way, one at a time with the
// lock released around each callback. Called with l.mu held; returns with
// it released. via is passed on to the admitted (see ViaWaiter).
func (l *Limiter) drainLocked(now int64, via any) {
	for !l.closed && l.q.n > 0 {
		a, ok := l.stepLocked(now)
		if !ok {
			break
		}
		l.mu.Unlock()
		a.deliver(l, via)
		l.mu.Lock()
	}
	l.mu.Unlock()
}

// stepLocked takes the next request the queue's order gives room to, if
// any. The order is: deficit round robin over classes, round robin over the
// class's flows starting at its cursor, FIFO within a flow. A flow whose
// first request can only go to full nodes is skipped for this step (its
// other requests wait behind it).
func (l *Limiter) stepLocked(now int64) (action, bool) {
	q := &l.q
	if !l.roomLocked(&now) {
		return action{}, false
	}
	first := q.currentClass()
	if first == none {
		return action{}, false
	}
	nc := len(q.classes)
	for k := range nc {
		ci := first + k
		if ci >= nc {
			ci -= nc
		}
		c := &q.classes[ci]
		fi := c.cursor
		for range c.nflows {
			f := &q.flows[fi]
			ei := f.head
			e := &q.entries[ei]
			if now >= e.deadline {
				return l.expireLocked(ei), true
			}
			id := l.pickLocked(e.cands, &now)
			if id < 0 {
				fi = f.rnext
				continue
			}
			// At least 0: AcquireAt callers read the clock a little before
			// the lock, so now may trail a later arrival's enq.
			waited := max(now-e.enq, 0)
			if q.codel(fi, now, waited, int64(l.cfg.QueueTarget), int64(l.cfg.QueueInterval)) {
				return l.rejectLocked(ei, Reason{Kind: StandingQueue, Limit: int64(l.cfg.QueueTarget)}), true
			}
			a := action{w: e.w, waited: waited, at: now}
			if ci == first {
				c.credit--
			}
			c.cursor = f.rnext
			q.remove(ei)
			if n := &l.nodes[id]; n.frac > 0 && n.inflight == n.limit-1 {
				n.late = 0 // see node.late
				if n.paceAt > 0 {
					n.late = max(now-n.paceAt, 0)
				}
			}
			a.p = l.grantLocked(id)
			return a, true
		}
	}
	return action{}, false
}

// expireLocked rejects a request whose deadline passed.
func (l *Limiter) expireLocked(ei int32) action {
	e := &l.q.entries[ei]
	r := Reason{Kind: QueueTimeout, Limit: e.deadline - e.enq}
	if e.byCaller {
		r.Kind = Deadline
	}
	return l.rejectLocked(ei, r)
}

func (l *Limiter) rejectLocked(ei int32, r Reason) action {
	a := action{w: l.q.entries[ei].w, r: r}
	l.rejected[r.Kind]++
	l.q.remove(ei)
	return a
}

// Sweep rejects the queued requests whose wait expired (QueueTimeout or
// Deadline), closes the adaptive sample windows that are due, and admits
// what the new limits make room for. The Limiter's goroutine calls it every
// Config.TickInterval on the real clock; with an injected Clock the caller
// does. Calls are serialized; it must not be called from a Waiter.
func (l *Limiter) Sweep() {
	l.sweepMu.Lock()
	defer l.sweepMu.Unlock()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	now := l.now()
	l.updateRateLocked(now)
	l.noteIdleLocked(now)
	buf := l.expireDueLocked(now, l.sweepBuf[:0])
	if l.cfg.Adaptive {
		l.adaptLocked(now)
	}
	l.sweepBuf = buf
	if len(buf) > 0 {
		l.mu.Unlock()
		for i := range buf {
			buf[i].deliver(l, nil)
			buf[i] = action{}
		}
		l.mu.Lock()
	}
	l.drainLocked(now, nil)
}

// expireDueLocked walks the wheel buckets of the ticks since the last sweep
// (at most one turn of the wheel) and rejects their due entries.
func (l *Limiter) expireDueLocked(now int64, buf []action) []action {
	q := &l.q
	nowTick := now / q.tick
	if nowTick <= q.lastTick {
		return buf
	}
	nb := int64(len(q.wheel))
	from := max(q.lastTick+1, nowTick-nb+1)
	for t := from; t <= nowTick; t++ {
		ei := q.wheel[t%nb]
		for ei != none {
			next := q.entries[ei].wnext
			if q.entries[ei].deadline <= now {
				buf = append(buf, l.expireLocked(ei))
			}
			ei = next
		}
	}
	q.lastTick = nowTick
	return buf
}
