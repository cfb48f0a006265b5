package capnode

import (
	"bufio"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/cqlgate/cqlgate/pkg/frame"
)

// echoNode answers every request frame at once: RESULT Void for EXECUTE,
// READY for anything else, on the request's stream.
func echoNode(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				r := bufio.NewReader(nc)
				for {
					f, err := readFrame(r)
					if err != nil {
						return
					}
					s := int16(binary.BigEndian.Uint16(f[2:4]))
					var out []byte
					if f[4] == frame.OpExecute {
						out = frame.AppendFrame(nil, frame.V4, true, 0, s, frame.OpResult, []byte{0, 0, 0, 1})
					} else {
						out = frame.AppendReady(nil, frame.V4, s)
					}
					if _, err := nc.Write(out); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

type answer struct {
	stream int16
	op     byte
	code   int32
	at     time.Duration
}

// exchange sends frames and collects want answers with their arrival times
// since the first write.
func exchange(t *testing.T, addr string, frames [][]byte, want int) []answer {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	start := time.Now()
	for _, f := range frames {
		if _, err := nc.Write(f); err != nil {
			t.Fatal(err)
		}
	}
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(nc)
	var out []answer
	for range want {
		f, err := readFrame(r)
		if err != nil {
			t.Fatalf("after %d answers: %v", len(out), err)
		}
		a := answer{stream: int16(binary.BigEndian.Uint16(f[2:4])), op: f[4], at: time.Since(start)}
		if a.op == frame.OpError {
			a.code = int32(binary.BigEndian.Uint32(f[9:13]))
		}
		out = append(out, a)
	}
	return out
}

func execute(s int16) []byte {
	return frame.AppendFrame(nil, frame.V4, false, 0, s, frame.OpExecute, []byte{0, 1, 'x', 0, 1, 0})
}

// Two threads of 40ms and room for four: of six EXECUTEs sent at once, two
// are OVERLOADED at once, two answered after one service time and two after
// two, in order of arrival; an OPTIONS sent meanwhile is not held.
func TestCapacityQueueAndOverload(t *testing.T) {
	const d = 40 * time.Millisecond
	n := Start(t, "127.0.0.1:0", echoNode(t), Model{Threads: 2, ServiceFixed: d, MaxInFlight: 4}, 1)
	var frames [][]byte
	for s := range int16(6) {
		frames = append(frames, execute(s+1))
	}
	frames = append(frames, frame.AppendOptions(nil, frame.V4, 100))
	got := exchange(t, n.Addr, frames, 7)
	var over, ok []answer
	for _, a := range got {
		switch {
		case a.stream == 100:
			if len(ok) > 0 {
				t.Errorf("OPTIONS answered after %s, after %d results; want before them (only EXECUTE is held)", a.at, len(ok))
			}
		case a.op == frame.OpError && a.code == frame.ErrCodeOverloaded:
			over = append(over, a)
		case a.op == frame.OpResult:
			ok = append(ok, a)
		default:
			t.Errorf("unexpected answer %+v", a)
		}
	}
	if len(over) != 2 || len(ok) != 4 {
		t.Fatalf("%d OVERLOADED and %d results; want 2 and 4: %+v", len(over), len(ok), got)
	}
	if testing.Verbose() {
		t.Logf("%+v", got)
	}
	for _, a := range over {
		if a.stream < 5 || a.at > d/2 {
			t.Errorf("OVERLOADED %+v; want streams 5 and 6, at once", a)
		}
	}
	for i, a := range ok {
		lo := d * time.Duration(i/2+1)
		if a.at < lo || a.at > lo+d/2+20*time.Millisecond {
			t.Errorf("result %d (stream %d) after %s; want about %s (two threads of %s)", i, a.stream, a.at, lo, d)
		}
	}
	// The node counts an answer after writing it, so the client can read the
	// last one a moment before the counts include it.
	deadline := time.Now().Add(time.Second)
	for s, _ := n.Counts(); (s != 4 || n.InNode() != 0) && time.Now().Before(deadline); s, _ = n.Counts() {
		time.Sleep(time.Millisecond)
	}
	if s, o := n.Counts(); s != 4 || o != 2 {
		t.Errorf("counts %d served, %d overloaded; want 4, 2", s, o)
	}
	if in := n.InNode(); in != 0 {
		t.Errorf("%d requests still in the node", in)
	}
}

// A slowed node takes twice the service time; restored, it is fast again.
func TestSetSlow(t *testing.T) {
	const d = 30 * time.Millisecond
	n := Start(t, "127.0.0.1:0", echoNode(t), Model{Threads: 1, ServiceFixed: d, MaxInFlight: 8}, 1)
	seen := make(chan time.Duration, 2)
	n.Observe = func(_ time.Time, in time.Duration) { seen <- in }
	n.SetSlow(2)
	slow := exchange(t, n.Addr, [][]byte{execute(1)}, 1)[0].at
	n.SetSlow(1)
	fast := exchange(t, n.Addr, [][]byte{execute(1)}, 1)[0].at
	if slow < 2*d || fast < d || fast >= 2*d {
		t.Errorf("slowed 2x: %s, restored: %s; want >= %s and in [%s, %s)", slow, fast, 2*d, d, 2*d)
	}
	if first, second := <-seen, <-seen; first < 2*d || second >= 2*d {
		t.Errorf("observed %s then %s in the node; want >= %s, then less", first, second, 2*d)
	}
	if c := (Model{Threads: 16, ServiceFixed: 2500 * time.Microsecond, ServiceExp: 2500 * time.Microsecond}).Capacity(1); c != 3200 {
		t.Errorf("capacity %.0f; want 3200", c)
	}
}

// A connection that ends with requests at the node lets them go: the node
// holds nothing, and the next client is served once the threads' work
// already started is done (a node does not cancel a request whose client
// left).
func TestClosedConnectionLetsGo(t *testing.T) {
	const d = 50 * time.Millisecond
	n := Start(t, "127.0.0.1:0", echoNode(t), Model{Threads: 1, ServiceFixed: d, MaxInFlight: 8}, 1)
	nc, err := net.Dial("tcp", n.Addr)
	if err != nil {
		t.Fatal(err)
	}
	for s := range int16(3) {
		if _, err := nc.Write(execute(s + 1)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(d / 5)
	nc.Close()
	deadline := time.Now().Add(2 * time.Second)
	for n.InNode() != 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if in := n.InNode(); in != 0 {
		t.Fatalf("%d requests of a closed connection still held", in)
	}
	if at := exchange(t, n.Addr, [][]byte{execute(1)}, 1)[0].at; at > 4*d+20*time.Millisecond {
		t.Errorf("answered after %s; want at most the 3 earlier services and its own (%s)", at, 4*d)
	}
}

// A timer that fires late delays its own answer only: a thread's next
// request starts when the last one's service time ended, not when its
// answer was written. Fifty requests of 2ms on one thread take about 100ms
// whatever the timers do.
func TestCapacityIgnoresLateTimers(t *testing.T) {
	const d, k = 2 * time.Millisecond, 50
	n := Start(t, "127.0.0.1:0", echoNode(t), Model{Threads: 1, ServiceFixed: d, MaxInFlight: k}, 1)
	var frames [][]byte
	for s := range int16(k) {
		frames = append(frames, execute(s+1))
	}
	got := exchange(t, n.Addr, frames, k)
	last := got[len(got)-1].at
	if last < k*d || last > k*d+30*time.Millisecond {
		t.Errorf("%d requests of %s on one thread took %s; want about %s", k, d, last, k*d)
	}
}

// A PREPARE takes a thread like an EXECUTE (Cassandra serves both on its
// native transport threads): a sidecar's first samples are not faster than
// its reads.
func TestPrepareIsHeld(t *testing.T) {
	const d = 30 * time.Millisecond
	n := Start(t, "127.0.0.1:0", echoNode(t), Model{Threads: 1, ServiceFixed: d, MaxInFlight: 8}, 1)
	got := exchange(t, n.Addr, [][]byte{frame.AppendPrepare(nil, frame.V4, 1, "SELECT 1", "")}, 1)
	if got[0].at < d {
		t.Errorf("PREPARE answered after %s; want the service time, %s", got[0].at, d)
	}
}
