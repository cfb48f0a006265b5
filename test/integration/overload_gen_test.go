package integration

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/cqlgate/cqlgate/internal/loadgen/stepstats"
	"github.com/cqlgate/cqlgate/pkg/frame"
)

// overloadGen sends one prepared EXECUTE on raw v4 connections and sorts
// the answers into RESULTs and OVERLOADED errors.
type overloadGen struct {
	tb    testing.TB
	conns []*genConn
	epoch time.Time
	// atMeasure and atEnd, when set, are called when an open loop's
	// warm-up ends and when it stops sending.
	atMeasure, atEnd func()
	// observe, when set (by newObservedGen, before the readers start), is
	// called by the readers for every answer to a request: when it was
	// read, sent and meant to be sent (ns since epoch), its opcode and, for
	// an ERROR, its code.
	observe func(now, sent, intended int64, op byte, code uint32)
}

type genConn struct {
	g    *overloadGen
	nc   net.Conn
	tmpl []byte // the EXECUTE frame; its stream id is at [2:4]

	wmu sync.Mutex
	bw  *bufio.Writer
	// free holds the stream ids not in flight; the reader returns them a
	// read burst at a time, so that the generator costs the proxy's core
	// as little as possible.
	freeMu sync.Mutex
	free   []int16

	// Per stream: when the request was sent and meant to be sent, ns
	// since epoch.
	sentAt, intended [32768]atomic.Int64

	closedLoop atomic.Bool // the reader re-sends on every answer
	stats      atomic.Pointer[statShard]
	inflight   atomic.Int64
	done       chan struct{}
}

// statShard is one connection's share of a step's figures, written by its
// reader alone; stepStats.merge adds the shards up once nothing is in
// flight. The histograms are stepstats' (1 µs to 60 s, 3 digits), like
// loadgen's, so that the two generators' percentiles compare.
type statShard struct {
	from                 int64
	ok, okCO, overloaded *hdrhistogram.Histogram
	other                int64
}

type stepStats struct {
	mu         sync.Mutex
	shards     []*statShard
	ok         *hdrhistogram.Histogram // service time, µs
	okCO       *hdrhistogram.Histogram // from the intended send, µs
	overloaded *hdrhistogram.Histogram
	// okLat and olLat summarize ok and overloaded once merged.
	okLat, olLat stepstats.Latency
	other        int64
	from         int64 // ns since epoch: requests sent earlier are not counted
	elapsed      time.Duration
	offered      float64
	unsent       int64
	late         int64 // requests sent more than lateAfter after their time
}

func newStepStats(from int64) *stepStats {
	return &stepStats{ok: stepstats.NewHistogram(), okCO: stepstats.NewHistogram(), overloaded: stepstats.NewHistogram(), from: from}
}

// merge adds the connections' shards into the step's figures; the caller
// has drained the connections, which orders the readers' writes before it.
func (s *stepStats) merge() {
	for _, sh := range s.shards {
		s.ok.Merge(sh.ok)
		s.okCO.Merge(sh.okCO)
		s.overloaded.Merge(sh.overloaded)
		s.other += sh.other
	}
	s.shards = nil
	s.okLat, s.olLat = stepstats.LatencyOf(s.ok), stepstats.LatencyOf(s.overloaded)
}

func (s *stepStats) goodput() float64 { return stepstats.Goodput(s.ok.TotalCount(), s.elapsed) }

// behindShare is the share of late requests above which a step is behind
// its schedule: stricter than loadgen's 1%, as this generator's whole
// point is to keep it.
const behindShare = 0.001

func (s *stepStats) schedule() string {
	sent := s.ok.TotalCount() + s.overloaded.TotalCount() + s.other
	if !stepstats.Behind(s.late, s.unsent, sent, behindShare) {
		return fmt.Sprintf("on schedule (%d late of %d)", s.late, sent)
	}
	return fmt.Sprintf("BEHIND: %d late, %d unsent", s.late, s.unsent)
}

func newOverloadGen(tb testing.TB, addr string, conns int, query string) *overloadGen {
	return newObservedGen(tb, addr, conns, query, nil)
}

// newObservedGen is newOverloadGen with an observer of every answer (see
// overloadGen.observe).
func newObservedGen(tb testing.TB, addr string, conns int, query string,
	observe func(now, sent, intended int64, op byte, code uint32)) *overloadGen {
	g := &overloadGen{tb: tb, epoch: time.Now(), observe: observe}
	for range conns {
		rc := dialRaw(tb, addr, frame.V4)
		rc.startup(nil)
		resp := rc.roundTrip(frame.AppendPrepare(nil, frame.V4, 1, query, ""))
		id, _, err := prepared(resp, frame.V4)
		if err != nil {
			tb.Fatalf("PREPARE: %v", err)
		}
		_ = rc.nc.SetReadDeadline(time.Time{})
		gc := &genConn{g: g, nc: rc.nc, tmpl: appendExecute(nil, frame.V4, 0, id, nil, consistencyOne, nil),
			bw: bufio.NewWriterSize(rc.nc, 256<<10), free: make([]int16, 0, 32768), done: make(chan struct{})}
		for s := int16(32766); s >= 2; s-- {
			gc.free = append(gc.free, s)
		}
		go gc.read(bufio.NewReaderSize(rc.nc, 1<<20))
		g.conns = append(g.conns, gc)
	}
	return g
}

func (g *overloadGen) now() int64 { return int64(time.Since(g.epoch)) }

func (g *overloadGen) close() {
	for _, c := range g.conns {
		c.nc.Close()
		<-c.done
	}
}

// begin points every connection at fresh stats counting requests sent from
// warmup on.
func (g *overloadGen) begin(warmup time.Duration) *stepStats {
	st := newStepStats(g.now() + int64(warmup))
	for _, c := range g.conns {
		sh := &statShard{from: st.from, ok: stepstats.NewHistogram(), okCO: stepstats.NewHistogram(), overloaded: stepstats.NewHistogram()}
		st.shards = append(st.shards, sh)
		c.stats.Store(sh)
	}
	return st
}

// drain waits until nothing is in flight (answers to a step must not land
// in the next one), at most 5 s.
func (g *overloadGen) drain() {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		var n int64
		for _, c := range g.conns {
			n += c.inflight.Load()
		}
		if n == 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	g.tb.Fatalf("requests still in flight 5s after a step")
}

// closedLoop keeps outstanding requests in flight on every connection for
// d and returns the step's figures.
func (g *overloadGen) closedLoop(outstanding int, d time.Duration) *stepStats {
	warmup := 500 * time.Millisecond
	st := g.begin(warmup)
	for _, c := range g.conns {
		c.closedLoop.Store(true)
		c.sendBurst(outstanding)
	}
	time.Sleep(warmup + d)
	for _, c := range g.conns {
		c.closedLoop.Store(false)
		// A reader may have queued a re-send in a read burst and then
		// seen the loop end before the burst's last answer, which
		// flushes: send it.
		c.wmu.Lock()
		_ = c.bw.Flush()
		c.wmu.Unlock()
	}
	st.elapsed = d
	g.drain()
	st.merge()
	return st
}

// warmUp runs the closed loop in 2 s rounds until two rounds in a row
// agree within 5% (at most 40 s): Cassandra's JIT takes a new read path
// from about half its speed to full over tens of seconds, and a step that
// ran while it warmed would be compared with a peak it could not yet reach.
func (g *overloadGen) warmUp(outstanding int) {
	deadline := time.Now().Add(40 * time.Second)
	var last float64
	for round := 1; ; round++ {
		r := g.closedLoop(outstanding, 2*time.Second).goodput()
		if last > 0 && math.Abs(r-last) <= 0.05*max(r, last) || time.Now().After(deadline) {
			g.tb.Logf("warm-up: %d rounds of 2s, the last at %.0f/s", round, r)
			return
		}
		last = r
	}
}

// openLoop offers rate requests per second, spread over the connections,
// for d after a warm-up, each sent at its scheduled time (late ones are
// counted) whatever the answers do.
func (g *overloadGen) openLoop(rate float64, d time.Duration) *stepStats {
	warmup := 500 * time.Millisecond
	st := g.begin(warmup)
	st.offered, st.elapsed = rate, d
	var wg sync.WaitGroup
	if g.atMeasure != nil {
		wg.Go(func() {
			time.Sleep(warmup)
			g.atMeasure()
		})
	}
	perConn := rate / float64(len(g.conns))
	for _, c := range g.conns {
		wg.Go(func() {
			unsent, late := c.pace(perConn, warmup+d, st.from)
			st.mu.Lock()
			st.unsent += unsent
			st.late += late
			st.mu.Unlock()
		})
	}
	wg.Wait()
	if g.atEnd != nil {
		g.atEnd()
	}
	g.drain()
	st.merge()
	return st
}

// lateAfter is how late a request may be written and still count as on
// schedule. A sleep shorter than a millisecond lasts a whole one when the
// process has nothing else to run (the runtime's network poller waits in
// milliseconds), so pace itself is up to about 1.25 ms late on an idle core.
const lateAfter = 2 * time.Millisecond

// pacePass is how long pace sleeps between two writes: every request is
// sent within about that of its time, and at 10x a pass writes some
// hundred requests per connection in one syscall.
const pacePass = 250 * time.Microsecond

// pace sends at rate per second for d, in batches: every pass writes the
// requests due by now in one write, then sleeps briefly.
func (c *genConn) pace(rate float64, d time.Duration, countFrom int64) (unsent, late int64) {
	start := c.g.now()
	end := start + int64(d)
	interval := float64(time.Second) / rate
	var sent int64
	var ids []int16
	for {
		now := c.g.now()
		if now >= end {
			return unsent, late
		}
		due := int64(float64(now-start) / interval)
		ids = c.takeFree(ids[:0], int(due-sent))
		c.wmu.Lock()
		for ; sent < due; sent++ {
			at := start + int64(float64(sent)*interval)
			if len(ids) == 0 {
				if at >= countFrom {
					unsent++
				}
				continue
			}
			s := ids[len(ids)-1]
			ids = ids[:len(ids)-1]
			if at >= countFrom && now-at > int64(lateAfter) {
				late++
			}
			c.queueLocked(s, at, now)
		}
		if err := c.bw.Flush(); err != nil {
			c.wmu.Unlock()
			return unsent, late
		}
		c.wmu.Unlock()
		time.Sleep(pacePass)
	}
}

// takeFree appends up to n free stream ids to ids.
func (c *genConn) takeFree(ids []int16, n int) []int16 {
	c.freeMu.Lock()
	defer c.freeMu.Unlock()
	k := min(n, len(c.free))
	ids = append(ids, c.free[len(c.free)-k:]...)
	c.free = c.free[:len(c.free)-k]
	return ids
}

// giveBack returns stream ids to the free list.
func (c *genConn) giveBack(ids []int16) {
	c.freeMu.Lock()
	c.free = append(c.free, ids...)
	c.freeMu.Unlock()
}

// sendBurst sends n requests at once (fewer if fewer stream ids are free).
func (c *genConn) sendBurst(n int) {
	ids := c.takeFree(nil, n)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	now := c.g.now()
	for _, s := range ids {
		c.queueLocked(s, now, now)
	}
	_ = c.bw.Flush()
}

func (c *genConn) queueLocked(s int16, intended, now int64) {
	c.sentAt[s].Store(now)
	c.intended[s].Store(intended)
	c.inflight.Add(1)
	binary.BigEndian.PutUint16(c.tmpl[2:4], uint16(s))
	_, _ = c.bw.Write(c.tmpl)
}

func (c *genConn) read(r *bufio.Reader) {
	defer close(c.done)
	var hdr [9]byte
	var code [4]byte
	var freed []int16
	for {
		if len(freed) > 0 && (r.Buffered() == 0 || len(freed) >= 1024) {
			c.giveBack(freed)
			freed = freed[:0]
		}
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return
		}
		n := int64(binary.BigEndian.Uint32(hdr[5:9]))
		op := hdr[4]
		s := int16(binary.BigEndian.Uint16(hdr[2:4]))
		if op == frame.OpError && n >= 4 {
			if _, err := io.ReadFull(r, code[:]); err != nil {
				return
			}
			n -= 4
		}
		if _, err := r.Discard(int(n)); err != nil {
			return
		}
		if s < 2 {
			continue // events and the setup's streams
		}
		now := c.g.now()
		sent, intended := c.sentAt[s].Load(), c.intended[s].Load()
		if c.g.observe != nil {
			var ec uint32
			if op == frame.OpError {
				ec = binary.BigEndian.Uint32(code[:])
			}
			c.g.observe(now, sent, intended, op, ec)
		}
		if st := c.stats.Load(); st != nil && intended >= st.from {
			switch {
			case op == frame.OpResult:
				stepstats.Record(st.ok, time.Duration(now-sent))
				stepstats.Record(st.okCO, time.Duration(now-intended))
			case op == frame.OpError && binary.BigEndian.Uint32(code[:]) == 0x1001:
				stepstats.Record(st.overloaded, time.Duration(now-sent))
			default:
				st.other++
			}
		}
		c.inflight.Add(-1)
		if c.closedLoop.Load() {
			c.wmu.Lock()
			c.queueLocked(s, now, now)
			// One write for all the answers read at once, unless the
			// loop ended meanwhile and no later answer would flush.
			if r.Buffered() == 0 || !c.closedLoop.Load() {
				_ = c.bw.Flush()
			}
			c.wmu.Unlock()
			continue
		}
		freed = append(freed, s)
	}
}
