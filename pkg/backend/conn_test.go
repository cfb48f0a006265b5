package backend

import (
	"errors"
	"testing"

	"github.com/cqlgate/cqlgate/pkg/frame"
)

// Cassandra pauses reading a connection that exceeds its in-flight limits
// unless the client asked for OVERLOADED errors instead; a paused shared
// backend connection would freeze every client behind it.
func TestStartupAsksThrowOnOverload(t *testing.T) {
	n := newFakeNode(t, nil)
	dialFake(t, n, DialConfig{}, nil)
	s := n.Startups()
	if len(s) != 1 {
		t.Fatalf("got %d STARTUPs, want 1", len(s))
	}
	// The server compares the value with the string "1".
	if got, ok := s[0]["THROW_ON_OVERLOAD"]; !ok || got != "1" {
		t.Errorf("STARTUP options %v: THROW_ON_OVERLOAD = %q (present %v), want \"1\"", s[0], got, ok)
	}
}

// Requests queued by Queue go out on the next Flush, answers reach their
// handlers and free the stream; when the connection dies, requests written
// fail as sent and requests only queued as unsent.
func TestConnQueueFlushCompleteFail(t *testing.T) {
	reqs := make(chan *fakeReq, 4)
	n := newFakeNode(t, func(r *fakeReq) fakeAction {
		reqs <- r
		return fakeHold
	})
	closed := make(chan error, 1)
	c := dialFake(t, n, DialConfig{}, func(_ *Conn, err error) { closed <- err })
	fc := waitFor(t, n.accepted, "accepted connection")

	answered := newRecorder(1)
	if err := c.Queue(queryFrame("SELECT 1"), answered); err != nil {
		t.Fatal(err)
	}
	select {
	case <-reqs:
		t.Fatal("queued request written before Flush")
	default:
	}
	c.Flush()
	waitFor(t, reqs, "request at the node").AnswerVoid()
	resp := waitFor(t, answered.responses, "answer")
	if op := frame.Opcode(resp.B); op != frame.OpResult {
		t.Errorf("answer opcode %s, want RESULT", frame.OpcodeName(op))
	}
	resp.Release()
	if got := c.InFlight(); got != 0 {
		t.Errorf("InFlight after the answer = %d, want 0", got)
	}

	sent := newRecorder(1)
	if err := c.Send(queryFrame("SELECT 2"), sent); err != nil {
		t.Fatal(err)
	}
	waitFor(t, reqs, "second request at the node")
	unsent := newRecorder(1)
	if err := c.Queue(queryFrame("SELECT 3"), unsent); err != nil {
		t.Fatal(err)
	}
	fc.Close()
	if f := waitFor(t, sent.failures, "OnFailure of the written request"); !f.sent {
		t.Errorf("written request reported unsent")
	}
	if f := waitFor(t, unsent.failures, "OnFailure of the queued request"); f.sent {
		t.Errorf("request never written reported sent")
	}
	if err := waitFor(t, closed, "onClose"); err == nil {
		t.Errorf("onClose got no error")
	}
	if got := c.InFlight(); got != 0 {
		t.Errorf("InFlight after failure = %d, want 0", got)
	}
	if err := c.Queue(queryFrame("SELECT 4"), newRecorder(1)); !errors.Is(err, ErrConnClosed) {
		t.Errorf("Queue on a dead connection: %v, want ErrConnClosed", err)
	}
}
