package fakenode_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/datastax/go-cassandra-native-protocol/datatype"
	"go.uber.org/goleak"

	"github.com/cqlgate/cqlgate/internal/fakenode"
	"github.com/cqlgate/cqlgate/pkg/frame"
)

// client is a raw protocol client: one request at a time unless the test
// sends several itself.
type client struct {
	t  *testing.T
	nc net.Conn
	v  byte
	rd *frame.Reader
	w  *frame.Writer
}

func dial(t *testing.T, addr string, v byte) *client {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	c := &client{t: t, nc: nc, v: v, rd: frame.NewReader(nc, 1<<20), w: frame.NewWriter(nc)}
	resp := c.roundTrip(frame.AppendStartup(nil, v, 0, map[string]string{"CQL_VERSION": "3.0.0", "THROW_ON_OVERLOAD": "true"}))
	if frame.Opcode(resp) != frame.OpReady {
		t.Fatalf("STARTUP answered %s", frame.OpcodeName(frame.Opcode(resp)))
	}
	if v >= frame.V5 {
		c.rd.EnableSegments(frame.CompressionNone)
		c.w.EnableSegments(frame.CompressionNone)
	}
	return c
}

func (c *client) send(f []byte) {
	c.t.Helper()
	if err := c.w.WriteFrame(f); err != nil {
		c.t.Fatal(err)
	}
	if err := c.w.Flush(); err != nil {
		c.t.Fatal(err)
	}
}

func (c *client) read() ([]byte, error) {
	b, err := c.rd.ReadFrame()
	if err != nil {
		return nil, err
	}
	defer b.Release()
	return append([]byte(nil), b.B...), nil
}

func (c *client) roundTrip(f []byte) []byte {
	c.t.Helper()
	c.send(f)
	resp, err := c.read()
	if err != nil {
		c.t.Fatalf("reading the answer to %s: %v", frame.OpcodeName(frame.Opcode(f)), err)
	}
	return resp
}

func (c *client) prepare(q string) []byte {
	c.t.Helper()
	resp := c.roundTrip(frame.AppendPrepare(nil, c.v, 1, q, ""))
	id, err := frame.PreparedID(frame.Body(resp))
	if err != nil {
		c.t.Fatalf("PREPARE %q: %v (%s)", q, err, errText(resp))
	}
	return id
}

// execute builds an EXECUTE of id with the given flags and values.
func execute(v byte, stream int16, id, metaID []byte, flags byte, values ...[]byte) []byte {
	var b []byte
	b = appendShortBytes(b, id)
	if v >= frame.V5 {
		b = appendShortBytes(b, metaID)
	}
	b = append(b, 0, 1) // ONE
	if len(values) > 0 {
		flags |= 0x01
	}
	if v >= frame.V5 {
		b = append(b, 0, 0, 0, flags)
	} else {
		b = append(b, flags)
	}
	if len(values) > 0 {
		b = append(b, 0, byte(len(values)))
		for _, val := range values {
			b = append(b, 0, 0, 0, byte(len(val)))
			b = append(b, val...)
		}
	}
	return frame.AppendFrame(nil, v, false, 0, stream, frame.OpExecute, b)
}

func appendShortBytes(b, v []byte) []byte {
	b = append(b, byte(len(v)>>8), byte(len(v)))
	return append(b, v...)
}

func errText(resp []byte) string {
	if frame.Opcode(resp) != frame.OpError {
		return frame.OpcodeName(frame.Opcode(resp))
	}
	code, msg, _ := frame.ErrorCode(frame.Body(resp))
	return fmt.Sprintf("ERROR 0x%04x: %s", code, msg)
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

// rowsFlags returns the flags and column count of a RESULT Rows body.
func rowsFlags(t *testing.T, resp []byte) (flags, cols int32) {
	t.Helper()
	body := frame.Body(resp)
	if frame.Opcode(resp) != frame.OpResult || len(body) < 12 {
		t.Fatalf("want RESULT Rows, got %s", errText(resp))
	}
	kind := int32(be32(body))
	if kind != frame.ResultRows {
		t.Fatalf("want Rows, got kind %d", kind)
	}
	return int32(be32(body[4:])), int32(be32(body[8:]))
}

func be32(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

const (
	flagNoMetadata      = 0x0004
	flagMetadataChanged = 0x0008
)

func kvNode(t *testing.T, cfg fakenode.Config) *fakenode.Node {
	n := fakenode.Start(t, cfg)
	n.SetTable("ks.kv", []fakenode.Column{fakenode.Key("k", datatype.Int), fakenode.Col("v", datatype.Varchar)},
		[][]byte{fakenode.Int(1), fakenode.Text("one")})
	return n
}

func TestPrepareExecute(t *testing.T) {
	for _, v := range []byte{frame.V3, frame.V4, frame.V5} {
		t.Run("v"+itoa(int(v)), func(t *testing.T) {
			n := kvNode(t, fakenode.Config{})
			c := dial(t, n.Addr(), v)
			if got := n.StartupOptions()[0]["THROW_ON_OVERLOAD"]; got != "true" {
				t.Errorf("STARTUP options seen: %v", n.StartupOptions())
			}
			q := "SELECT * FROM ks.kv WHERE k = ?"
			id := c.prepare(q)
			if want := fakenode.PreparedID("", q); !bytes.Equal(id, want) {
				t.Fatalf("id %x, want %x", id, want)
			}
			meta, err := frame.ParsePrepared(v, frame.Body(c.roundTrip(frame.AppendPrepare(nil, v, 1, q, ""))))
			if err != nil {
				t.Fatal(err)
			}
			if v >= frame.V4 && (len(meta.PKIndexes) != 1 || meta.PKIndexes[0] != 0) {
				t.Errorf("pk indexes %v, want [0]", meta.PKIndexes)
			}
			resp := c.roundTrip(execute(v, 2, id, meta.ResultMetadataID, 0, fakenode.Int(1)))
			if flags, cols := rowsFlags(t, resp); flags&flagNoMetadata != 0 || cols != 2 {
				t.Errorf("flags %x cols %d, want metadata and 2 columns", flags, cols)
			}
			if !bytes.Contains(resp, []byte("one")) {
				t.Errorf("row value missing from %q", resp)
			}
			if got := n.Executions(id); got != 1 {
				t.Errorf("Executions = %d, want 1", got)
			}
			if got := n.QueryExecutions(q); got != 1 {
				t.Errorf("QueryExecutions = %d, want 1", got)
			}

			// skip_metadata: rows come without metadata.
			resp = c.roundTrip(execute(v, 3, id, meta.ResultMetadataID, 0x02, fakenode.Int(1)))
			if flags, _ := rowsFlags(t, resp); flags&flagNoMetadata == 0 {
				t.Errorf("skip_metadata: flags %x, want No_metadata", flags)
			}

			// ALTER TABLE: a column more.
			n.SetTable("ks.kv", []fakenode.Column{fakenode.Key("k", datatype.Int), fakenode.Col("a", datatype.Int), fakenode.Col("v", datatype.Varchar)},
				[][]byte{fakenode.Int(1), fakenode.Int(42), fakenode.Text("one")})
			resp = c.roundTrip(execute(v, 4, id, meta.ResultMetadataID, 0x02, fakenode.Int(1)))
			flags, cols := rowsFlags(t, resp)
			if v >= frame.V5 {
				if flags&flagMetadataChanged == 0 || flags&flagNoMetadata != 0 || cols != 3 {
					t.Errorf("v5 after ALTER: flags %x cols %d, want Metadata_changed with 3 columns", flags, cols)
				}
			} else if flags&flagNoMetadata == 0 || cols != 3 {
				// The wrong-data bug: the driver reads 3 cells with 2 columns' metadata.
				t.Errorf("v%d after ALTER: flags %x cols %d, want No_metadata with 3 columns", v, flags, cols)
			}

			n.ForgetPrepared()
			resp = c.roundTrip(execute(v, 5, id, meta.ResultMetadataID, 0, fakenode.Int(1)))
			uid, err := frame.UnpreparedID(frame.Body(resp))
			if err != nil || !bytes.Equal(uid, id) {
				t.Fatalf("after ForgetPrepared: %s, id %x err %v", errText(resp), uid, err)
			}
			if got := n.Requests(frame.OpExecute); got != 4 {
				t.Errorf("Requests(EXECUTE) = %d, want 4", got)
			}
		})
	}
}

func TestUseAndQuery(t *testing.T) {
	n := kvNode(t, fakenode.Config{})
	c := dial(t, n.Addr(), frame.V4)
	resp := c.roundTrip(frame.AppendQuery(nil, 4, 1, "USE ks", 1, 0))
	if ks, err := frame.SetKeyspaceName(frame.Body(resp)); err != nil || ks != "ks" {
		t.Fatalf("USE: %q %v", ks, err)
	}
	resp = c.roundTrip(frame.AppendQuery(nil, 4, 2, "SELECT v FROM kv", 1, 0))
	if _, cols := rowsFlags(t, resp); cols != 1 {
		t.Errorf("cols = %d", cols)
	}
	resp = c.roundTrip(frame.AppendQuery(nil, 4, 3, "SELECT * FROM ks.nope", 1, 0))
	if code, _, _ := frame.ErrorCode(frame.Body(resp)); frame.Opcode(resp) != frame.OpError || code != frame.ErrCodeInvalid {
		t.Errorf("unknown table: %s", errText(resp))
	}
}

func TestFaults(t *testing.T) {
	n := kvNode(t, fakenode.Config{})
	const q = "INSERT INTO ks.kv (k, v) VALUES (1, 'x')"
	n.SetHook(func(r fakenode.Request) fakenode.Action {
		if r.Opcode != frame.OpQuery {
			return fakenode.Action{}
		}
		switch r.Stream {
		case 1:
			return fakenode.Action{Error: fakenode.Overloaded()}
		case 2:
			return fakenode.Action{Error: fakenode.ReadTimeout(1, 0, 1, false)}
		case 3:
			return fakenode.Action{Delay: 50 * time.Millisecond}
		case 5:
			return fakenode.Action{Fault: fakenode.NoAnswer}
		case 6:
			return fakenode.Action{Fault: fakenode.ResetAfterExecute}
		}
		return fakenode.Action{}
	})
	c := dial(t, n.Addr(), frame.V4)
	resp := c.roundTrip(frame.AppendQuery(nil, 4, 1, q, 1, 0))
	if code, _, _ := frame.ErrorCode(frame.Body(resp)); code != frame.ErrCodeOverloaded {
		t.Errorf("stream 1: %s", errText(resp))
	}
	resp = c.roundTrip(frame.AppendQuery(nil, 4, 2, q, 1, 0))
	body := frame.Body(resp)
	if code, msg, _ := frame.ErrorCode(body); code != frame.ErrCodeReadTimeout {
		t.Errorf("stream 2: %s", errText(resp))
	} else if extra := body[4+2+len(msg):]; !bytes.Equal(extra, []byte{0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0}) {
		t.Errorf("READ_TIMEOUT fields %x", extra)
	}
	if got := n.QueryExecutions(q); got != 0 {
		t.Errorf("errors executed the query %d times", got)
	}
	// The delayed answer comes after the one sent behind it.
	c.send(frame.AppendQuery(nil, 4, 3, q, 1, 0))
	c.send(frame.AppendQuery(nil, 4, 4, q, 1, 0))
	for _, want := range []int16{4, 3} {
		resp, err := c.read()
		if err != nil {
			t.Fatal(err)
		}
		if frame.Stream(resp) != want {
			t.Errorf("answer on stream %d, want %d", frame.Stream(resp), want)
		}
	}
	c.send(frame.AppendQuery(nil, 4, 5, q, 1, 0))
	c.send(frame.AppendQuery(nil, 4, 6, q, 1, 0))
	if resp, err := c.read(); err == nil {
		t.Fatalf("got an answer on stream %d after ResetAfterExecute", frame.Stream(resp))
	}
	if got := n.QueryExecutions(q); got != 4 {
		t.Errorf("executed %d times, want 4 (streams 3 to 6)", got)
	}
}

func TestHalfAnswer(t *testing.T) {
	for _, v := range []byte{frame.V4, frame.V5} {
		n := kvNode(t, fakenode.Config{})
		n.SetHook(func(r fakenode.Request) fakenode.Action {
			if r.Opcode == frame.OpQuery {
				return fakenode.Action{Fault: fakenode.HalfAnswer}
			}
			return fakenode.Action{}
		})
		c := dial(t, n.Addr(), v)
		c.send(frame.AppendQuery(nil, v, 1, "SELECT * FROM ks.kv", 1, 0))
		if _, err := c.read(); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("v%d: read after half an answer: %v, want unexpected EOF", v, err)
		}
	}
}

func TestRejectAndVersion(t *testing.T) {
	n := kvNode(t, fakenode.Config{MaxVersion: frame.V4})
	nc, err := net.Dial("tcp", n.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	w := frame.NewWriter(nc)
	_ = w.WriteFrame(frame.AppendStartup(nil, 5, 0, map[string]string{"CQL_VERSION": "3.0.0"}))
	_ = w.Flush()
	b, err := frame.NewReader(nc, 1<<20).ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	if code, _, _ := frame.ErrorCode(frame.Body(b.B)); frame.Opcode(b.B) != frame.OpError || code != frame.ErrCodeProtocol {
		t.Errorf("v5 STARTUP on a v4 node: %s", errText(b.B))
	}
	b.Release()

	n.RejectConnections(true)
	nc2, err := net.Dial("tcp", n.Addr())
	if err == nil {
		_, err = nc2.Read(make([]byte, 1))
		nc2.Close()
	}
	if err == nil {
		t.Error("a rejected connection stayed open")
	}
	if n.Rejected() != 1 || n.Accepted() != 1 {
		t.Errorf("rejected %d accepted %d", n.Rejected(), n.Accepted())
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestStallDropAndPendingTimers: a stalled connection answers only after
// Resume; Close with delayed answers pending and with stalled readers
// leaves no goroutine behind (TestMain checks).
func TestStallDropAndPendingTimers(t *testing.T) {
	n := kvNode(t, fakenode.Config{})
	n.SetHook(func(r fakenode.Request) fakenode.Action {
		switch {
		case r.Opcode != frame.OpQuery:
		case r.Stream == 1:
			return fakenode.Action{Fault: fakenode.Stall}
		case r.Stream == 9:
			return fakenode.Action{Delay: time.Hour}
		}
		return fakenode.Action{}
	})
	c := dial(t, n.Addr(), frame.V5)
	c.send(frame.AppendQuery(nil, 5, 1, "SELECT * FROM ks.kv", 1, 0))
	c.send(frame.AppendQuery(nil, 5, 2, "SELECT * FROM ks.kv", 1, 0))
	_ = c.nc.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if resp, err := c.read(); err == nil {
		t.Fatalf("a stalled connection answered stream %d", frame.Stream(resp))
	}
	_ = c.nc.SetReadDeadline(time.Time{})
	// The reader timed out mid-wait; read again on a fresh client view.
	n.Resume()
	c.rd = frame.NewReader(c.nc, 1<<20)
	c.rd.EnableSegments(frame.CompressionNone)
	for _, want := range []int16{1, 2} {
		resp, err := c.read()
		if err != nil {
			t.Fatal(err)
		}
		if frame.Stream(resp) != want {
			t.Errorf("stream %d, want %d", frame.Stream(resp), want)
		}
	}
	c.send(frame.AppendQuery(nil, 5, 9, "SELECT * FROM ks.kv", 1, 0))
	d := dial(t, n.Addr(), frame.V4)
	n.DropConnections()
	if _, err := d.read(); err == nil {
		t.Error("a dropped connection still answers")
	}
	e := dial(t, n.Addr(), frame.V4)
	n.Stall()
	e.send(frame.AppendQuery(nil, 4, 3, "SELECT * FROM ks.kv", 1, 0))
	n.Close()
	if _, err := e.read(); err == nil {
		t.Error("a closed node still answers")
	}
}
