package proxy_test

import (
	"bytes"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/datastax/go-cassandra-native-protocol/datatype"

	"github.com/cqlgate/cqlgate/internal/fakenode"
	"github.com/cqlgate/cqlgate/internal/promtest"
	"github.com/cqlgate/cqlgate/internal/proxytest"
	"github.com/cqlgate/cqlgate/pkg/frame"
)

// TestFakeClusterSmoke runs the proxy in front of three fake nodes given
// one contact point: it must discover the other two, and a client must be
// able to PREPARE and EXECUTE through it.
func TestFakeClusterSmoke(t *testing.T) {
	cl := fakenode.StartCluster(t, 3, fakenode.Config{})
	cl.SetTable("ks.kv", []fakenode.Column{fakenode.Key("k", datatype.Int), fakenode.Col("v", datatype.Varchar)},
		[][]byte{fakenode.Int(1), fakenode.Text("one")})
	p := proxytest.Start(t, cl.Addrs()[:1], nil)

	// Topology: every node is known and up.
	metrics := promtest.Text(t, p.Reg)
	for _, addr := range cl.Addrs() {
		if !strings.Contains(metrics, `cqlgate_backend_node_up{node="`+addr+`"} 1`) {
			t.Errorf("node %s not up in the proxy's metrics:\n%s", addr, grepLines(metrics, "cqlgate_backend_node_up"))
		}
	}

	nc, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(30 * time.Second))
	rd, w := frame.NewReader(nc, 1<<20), frame.NewWriter(nc)
	rt := func(f []byte) []byte {
		t.Helper()
		if err := w.WriteFrame(f); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		for {
			b, err := rd.ReadFrame()
			if err != nil {
				t.Fatal(err)
			}
			out := append([]byte(nil), b.B...)
			b.Release()
			if frame.Stream(out) == frame.Stream(f) {
				return out
			}
		}
	}
	if resp := rt(frame.AppendStartup(nil, 4, 0, map[string]string{"CQL_VERSION": "3.0.0"})); frame.Opcode(resp) != frame.OpReady {
		t.Fatalf("STARTUP: %s", frame.OpcodeName(frame.Opcode(resp)))
	}
	const q = "SELECT * FROM ks.kv WHERE k = ?"
	resp := rt(frame.AppendPrepare(nil, 4, 1, q, ""))
	id, err := frame.PreparedID(frame.Body(resp))
	if err != nil {
		code, msg, _ := frame.ErrorCode(frame.Body(resp))
		t.Fatalf("PREPARE: %v (0x%04x %s)", err, code, msg)
	}
	if !bytes.Equal(id, fakenode.PreparedID("", q)) {
		t.Fatalf("prepared id %x, want the node's %x", id, fakenode.PreparedID("", q))
	}
	const runs = 30
	for i := range runs {
		var b []byte
		b = append(b, 0, byte(len(id)))
		b = append(b, id...)
		b = append(b, 0, 1, 0x01, 0, 1, 0, 0, 0, 4)
		b = append(b, fakenode.Int(int32(i))...)
		resp := rt(frame.AppendFrame(nil, 4, false, 0, 2, frame.OpExecute, b))
		if frame.Opcode(resp) != frame.OpResult || !bytes.Contains(resp, []byte("one")) {
			code, msg, _ := frame.ErrorCode(frame.Body(resp))
			t.Fatalf("EXECUTE %d: %s 0x%04x %s", i, frame.OpcodeName(frame.Opcode(resp)), code, msg)
		}
	}
	if got := cl.Executions(id); got != runs {
		t.Errorf("the nodes executed the statement %d times, want %d", got, runs)
	}
	for _, n := range cl.Nodes {
		if n.Accepted() == 0 {
			t.Errorf("%s: the proxy never connected", n)
		}
		t.Logf("%s: %d connections, %d executions", n, n.Accepted(), n.Executions(id))
	}
}

func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
