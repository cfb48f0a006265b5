// Package capnode puts a node of known, small capacity in front of a real
// Cassandra node, for benchmarks of many proxies on a machine too small to
// overload a real node with them: on two cores the node saturates the CPU
// long before eight proxies can offer it five times its capacity, and then
// the figures measure the machine, not the proxies' limits.
//
// The emulator forwards every frame to the real node and passes its real
// answers back, but serves requests (QUERY, PREPARE, EXECUTE, BATCH) the
// way a node of Threads request threads would: at most Threads at once,
// first come first served, each holding its thread for at least a service time drawn as ServiceFixed
// plus an exponential of mean ServiceExp (times the current slowdown); the
// rest wait in its queue. So its capacity is Threads / mean service time,
// latency is flat up to Threads in flight and climbs past it (an M/G/c
// queue), which is what an adaptive limit reads, and SetSlow changes the
// capacity mid-run. Past MaxInFlight requests held (served and queued) it
// answers OVERLOADED at once, as Cassandra does past
// native_transport_max_request_data_in_flight to a client that sent
// THROW_ON_OVERLOAD. The model is internal/fleetsim's NodeModel, so that
// the simulator can be checked against real processes.
//
// Only protocol v3 and v4 connections are gated: the proxies' v5
// connections (control connection, the pool of their highest version) pass
// through untouched, so that discovery does not spend the capacity under
// test, and so do the handshake's messages and heartbeats (OPTIONS).
//
// A request is forwarded to the real node when its thread takes it, and
// its answer held until its service time has passed. The threads' timelines
// are computed at arrival (when each is next free), not lived by goroutines:
// on a busy machine a timer that fires late delays that one answer, as
// network jitter would, but not the requests behind it, so the capacity
// stays what the model says.
//
// It listens on loopback only and is for tests and benchmarks.
package capnode

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cqlgate/cqlgate/pkg/frame"
)

// Model is the emulated node's capacity (see the package comment).
type Model struct {
	Threads                  int
	ServiceFixed, ServiceExp time.Duration
	MaxInFlight              int
}

// Capacity is the node's throughput in requests/s at slowdown f.
func (m Model) Capacity(f float64) float64 {
	return float64(m.Threads) / (f * (m.ServiceFixed + m.ServiceExp).Seconds())
}

// Node is a running emulator.
type Node struct {
	// Addr is where it listens (host:port).
	Addr string

	m        Model
	upstream string
	ln       net.Listener
	// Observe, when set before traffic starts, is called for every request
	// served, with the time its answer was written and how long it was in
	// the node (from its arrival to its answer).
	Observe func(done time.Time, inNode time.Duration)

	mu   sync.Mutex
	rng  *rand.Rand
	slow float64
	// freeAt is when each thread is free, unix ns: a thread's timeline
	// is computed, not lived, so that a timer firing late (a busy
	// machine) delays that answer but not the thread's next request,
	// and the capacity stays Threads / mean service time.
	freeAt []int64
	held   int // requests in the node, waiting or served
	conns  map[*conn]struct{}
	closed bool

	served, overloaded atomic.Int64
	wg                 sync.WaitGroup
}

// pending is one held request.
type pending struct {
	c       *conn
	f       []byte
	stream  int16
	version byte
	arrived time.Time
	due     time.Time // earliest answer: service start plus service time
}

// Start listens on listen (host:port; port 0 picks one) in front of the node
// at upstream, with capacity m, and stops when tb ends.
func Start(tb testing.TB, listen, upstream string, m Model, seed uint64) *Node {
	tb.Helper()
	if m.Threads <= 0 || m.MaxInFlight < m.Threads || m.ServiceFixed+m.ServiceExp <= 0 {
		tb.Fatalf("capnode: need threads, MaxInFlight >= threads and a service time: %+v", m)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		tb.Fatalf("capnode: listen %s: %v", listen, err)
	}
	n := &Node{Addr: ln.Addr().String(), m: m, upstream: upstream, ln: ln, slow: 1,
		rng: rand.New(rand.NewPCG(seed, seed^0x5bd1e995)), conns: map[*conn]struct{}{}, freeAt: make([]int64, m.Threads)}
	n.wg.Add(1)
	go n.accept()
	tb.Cleanup(n.Stop)
	return n
}

// SetSlow multiplies the service times of requests that start from now on
// by f (2 halves the capacity; 1 restores it).
func (n *Node) SetSlow(f float64) {
	n.mu.Lock()
	n.slow = f
	n.mu.Unlock()
}

// InNode is the requests held now, served and queued.
func (n *Node) InNode() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.held
}

// Counts returns the requests answered with the real node's answer
// and those answered OVERLOADED by the emulator, since the start.
func (n *Node) Counts() (served, overloaded int64) { return n.served.Load(), n.overloaded.Load() }

// Stop closes the listener and every connection, and waits for their
// goroutines.
func (n *Node) Stop() {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	n.closed = true
	for c := range n.conns {
		c.close()
	}
	n.mu.Unlock()
	n.ln.Close()
	n.wg.Wait()
}

func (n *Node) accept() {
	defer n.wg.Done()
	for {
		nc, err := n.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.DialTimeout("tcp", n.upstream, 5*time.Second)
		if err != nil {
			nc.Close()
			continue
		}
		c := &conn{n: n, client: nc, up: up, gated: map[int16]*pending{}}
		n.mu.Lock()
		if n.closed {
			n.mu.Unlock()
			c.close()
			return
		}
		n.conns[c] = struct{}{}
		n.mu.Unlock()
		n.wg.Add(2)
		go c.fromClient()
		go c.fromNode()
	}
}

// conn is one client connection and its own connection to the real node.
type conn struct {
	n          *Node
	client, up net.Conn

	cmu sync.Mutex // writes to client
	umu sync.Mutex // writes to up

	gmu   sync.Mutex
	gated map[int16]*pending // by stream: held requests sent to the node
	dead  bool               // fromNode ended: no answer will come

	closeOnce sync.Once
}

func (c *conn) close() {
	c.closeOnce.Do(func() {
		c.client.Close()
		c.up.Close()
	})
}

func (c *conn) done() {
	c.close()
	c.n.mu.Lock()
	delete(c.n.conns, c)
	c.n.mu.Unlock()
	c.n.wg.Done()
}

// readFrame reads one whole frame (header and body) into a new slice.
func readFrame(r *bufio.Reader) ([]byte, error) {
	var hdr [frame.HeaderLen]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[5:9])
	if n > 256<<20 {
		return nil, fmt.Errorf("capnode: frame body of %d bytes", n)
	}
	f := make([]byte, frame.HeaderLen+int(n))
	copy(f, hdr[:])
	if _, err := io.ReadFull(r, f[frame.HeaderLen:]); err != nil {
		return nil, err
	}
	return f, nil
}

// fromClient forwards the client's frames, holding its requests. A v5
// connection is piped as bytes from its first byte on: after STARTUP its
// frames travel in segments this package does not parse.
func (c *conn) fromClient() {
	defer c.done()
	r := bufio.NewReaderSize(c.client, 64<<10)
	first, err := r.Peek(1)
	if err != nil {
		return
	}
	if first[0]&^frame.ResponseBit >= frame.V5 {
		_, _ = io.Copy(c.up, r)
		return
	}
	for {
		f, err := readFrame(r)
		if err != nil {
			return
		}
		if !held(f[4]) {
			if c.writeUp(f) != nil {
				return
			}
			continue
		}
		c.n.arrive(&pending{c: c, f: f, stream: int16(binary.BigEndian.Uint16(f[2:4])), version: f[0] &^ frame.ResponseBit, arrived: time.Now()})
	}
}

// held reports whether requests of opcode op take a thread: every request
// that does work on the node (a PREPARE too, which Cassandra serves on the
// same native transport threads), not the handshake's and heartbeats'
// messages.
func held(op byte) bool {
	switch op {
	case frame.OpQuery, frame.OpPrepare, frame.OpExecute, frame.OpBatch:
		return true
	}
	return false
}

// fromNode passes the node's answers back, holding a gated request's answer
// until its service time has passed.
func (c *conn) fromNode() {
	defer c.done()
	defer c.abandon()
	r := bufio.NewReaderSize(c.up, 64<<10)
	first, err := r.Peek(1)
	if err != nil {
		return
	}
	if first[0]&^frame.ResponseBit >= frame.V5 {
		_, _ = io.Copy(c.client, r)
		return
	}
	for {
		f, err := readFrame(r)
		if err != nil {
			return
		}
		s := int16(binary.BigEndian.Uint16(f[2:4]))
		c.gmu.Lock()
		p := c.gated[s]
		if p != nil {
			delete(c.gated, s)
		}
		c.gmu.Unlock()
		if p == nil {
			if c.writeClient(f) != nil {
				return
			}
			continue
		}
		p.f = f
		if wait := time.Until(p.due); wait > 0 {
			time.AfterFunc(wait, func() { c.n.finish(p) })
		} else {
			c.n.finish(p)
		}
	}
}

// abandon frees the threads of the requests whose answers will not come.
func (c *conn) abandon() {
	c.close()
	c.gmu.Lock()
	c.dead = true
	lost := len(c.gated)
	clear(c.gated)
	c.gmu.Unlock()
	for range lost {
		c.n.release()
	}
}

func (c *conn) writeUp(f []byte) error {
	c.umu.Lock()
	defer c.umu.Unlock()
	_, err := c.up.Write(f)
	return err
}

func (c *conn) writeClient(f []byte) error {
	c.cmu.Lock()
	defer c.cmu.Unlock()
	_, err := c.client.Write(f)
	return err
}

// arrive takes a request into the node: OVERLOADED if the node holds
// MaxInFlight already, else it gets the thread that frees first, from when
// that thread is free (first come, first served), and its service time.
func (n *Node) arrive(p *pending) {
	n.mu.Lock()
	if n.held >= n.m.MaxInFlight {
		n.mu.Unlock()
		n.overloaded.Add(1)
		_ = p.c.writeClient(frame.AppendError(nil, p.version, p.stream, frame.ErrCodeOverloaded, "capnode: too many requests in flight"))
		return
	}
	n.held++
	th := 0
	for i, at := range n.freeAt {
		if at < n.freeAt[th] {
			th = i
		}
	}
	now := time.Now()
	start := now
	if at := time.Unix(0, n.freeAt[th]); at.After(now) {
		start = at
	}
	d := n.slow * (float64(n.m.ServiceFixed) + n.rng.ExpFloat64()*float64(n.m.ServiceExp))
	p.due = start.Add(time.Duration(d))
	n.freeAt[th] = p.due.UnixNano()
	n.mu.Unlock()
	if wait := start.Sub(now); wait > 0 {
		time.AfterFunc(wait, func() { n.send(p) })
		return
	}
	n.send(p)
}

// send registers p as its stream's pending request and writes it to the
// node; a failed write lets it go (the client's connection is gone).
func (n *Node) send(p *pending) {
	p.c.gmu.Lock()
	if p.c.dead {
		p.c.gmu.Unlock()
		n.release()
		return
	}
	p.c.gated[p.stream] = p
	p.c.gmu.Unlock()
	if err := p.c.writeUp(p.f); err != nil {
		p.c.gmu.Lock()
		_, still := p.c.gated[p.stream]
		delete(p.c.gated, p.stream)
		p.c.gmu.Unlock()
		if still { // else abandon released it
			n.release()
		}
	}
}

// finish answers p's client.
func (n *Node) finish(p *pending) {
	err := p.c.writeClient(p.f)
	now := time.Now()
	if err == nil {
		n.served.Add(1)
		if n.Observe != nil {
			n.Observe(now, now.Sub(p.arrived))
		}
	}
	n.release()
}

// release counts a request out of the node.
func (n *Node) release() {
	n.mu.Lock()
	n.held--
	n.mu.Unlock()
}
