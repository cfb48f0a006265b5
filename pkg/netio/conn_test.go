package netio

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t testing.TB) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

func TestWrapKeepsWhatIsNotTCP(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if rw := Wrap(a); rw != io.ReadWriter(a) {
		t.Fatalf("Wrap(pipe) = %T, want the pipe itself", rw)
	}
}

// Bytes written through the raw path arrive whole, also when the write is
// far larger than the socket buffers (the writer parks on EAGAIN until the
// reader makes room), and the peer's close reads as io.EOF.
func TestRawConnReadWrite(t *testing.T) {
	c, s := tcpPair(t)
	cw, sr := Wrap(c), Wrap(s)
	if _, ok := cw.(*rawConn); !ok {
		t.Fatalf("Wrap(tcp) = %T, want *rawConn", cw)
	}
	want := bytes.Repeat([]byte("0123456789abcdef"), 1<<18) // 4 MiB
	errc := make(chan error, 1)
	go func() {
		n, err := cw.Write(want)
		if err == nil && n != len(want) {
			err = io.ErrShortWrite
		}
		c.Close()
		errc <- err
	}()
	got, err := io.ReadAll(sr)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("write: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, want the %d written", len(got), len(want))
	}
}

// A read deadline still applies and reads as a timeout; a read on a
// closed socket reports net.ErrClosed, as net.Conn's own Read does.
func TestRawConnDeadlineAndClose(t *testing.T) {
	_, s := tcpPair(t)
	sr := Wrap(s)
	if err := s.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	_, err := sr.Read(make([]byte, 10))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read past the deadline: %v, want a timeout", err)
	}
	if err := s.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := sr.Read(make([]byte, 10))
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	s.Close()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read on a closed socket: %v, want net.ErrClosed", err)
	}
}

// A read and a write through the raw path allocate nothing: they run for
// every request.
func TestRawConnAllocatesNothing(t *testing.T) {
	c, s := tcpPair(t)
	cw, sr := Wrap(c), Wrap(s)
	out, in := []byte("ping"), make([]byte, 4)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := cw.Write(out); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(sr, in); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per write and read, want 0", allocs)
	}
}
