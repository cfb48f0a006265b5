package proxy_test

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/cqlgate/cqlgate/internal/fakenode"
	"github.com/cqlgate/cqlgate/internal/proxytest"
	"github.com/cqlgate/cqlgate/pkg/config"
	"github.com/cqlgate/cqlgate/pkg/frame"
)

// TestDrainWritesAnswersAlreadyQueued: shutdown waits for the requests in
// flight, and a request stops being in flight once its answer is queued
// for the client, before the answer is written. Before the fix the drain
// then closed the connection at once, and an answer still on its way (a
// large one to a client reading slowly, or one the writer goroutine had
// not reached yet) was cut off: the client read EOF instead of its result.
// The answer here is larger than loopback's socket buffers, and the client
// starts reading only after shutdown has begun.
func TestDrainWritesAnswersAlreadyQueued(t *testing.T) {
	cl := fakenode.StartCluster(t, 1, fakenode.Config{})
	big := strings.Repeat("x", 12<<20)
	cl.SetTable("ks.big", kvCols, [][]byte{fakenode.Int(1), fakenode.Text(big)})
	p := proxytest.Start(t, cl.Addrs(), func(c *config.Config) {
		c.DrainTimeout = 10 * time.Second
		c.MaxFrameBytes = 32 << 20
		c.SpeculativeMaxExecutions = 0
	})
	waitNodesUp(t, p, cl)

	c := dialRaw(t, p.Addr, frame.V4)
	c.rd = frame.NewReader(c.nc, 32<<20)
	c.send(frame.AppendQuery(nil, 4, 1, "SELECT * FROM ks.big", 0x0001, 0))
	// The answer is queued (the request no longer in flight) once the
	// proxy has read it from the node whole.
	waitFor(t, "the answer to be read from the node", func() bool {
		return cl.QueryExecutions("SELECT * FROM ks.big") == 1 &&
			metricSum(t, p, "cqlgate_backend_in_flight_requests") == 0
	})
	stopped := make(chan struct{})
	go func() { p.Stop(); close(stopped) }()
	waitFor(t, "the proxy to stop accepting", func() bool {
		nc, err := net.DialTimeout("tcp", p.Addr, time.Second)
		if err == nil {
			nc.Close()
		}
		return err != nil
	})
	time.Sleep(200 * time.Millisecond) // a drain that does not wait has closed by now
	_ = c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := c.rd.ReadFrame()
	if err != nil {
		t.Fatalf("the answer queued before shutdown was cut off: %v", err)
	}
	defer b.Release()
	if frame.Opcode(b.B) != frame.OpResult || !strings.Contains(string(b.B), big) {
		t.Errorf("the answer queued before shutdown: %s, want the whole row", describe(b.B))
	}
	select {
	case <-stopped:
	case <-time.After(15 * time.Second):
		t.Fatal("the proxy did not stop after its last answer was read")
	}
}
