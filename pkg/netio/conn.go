package netio

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"
)

// Wrap returns the reader and writer to use for nc's bytes: for a plain
// TCP socket one that reads and writes with raw system calls (see rawConn),
// for anything else (TLS, an in-memory pipe) nc itself. Deadlines, Close
// and the addresses stay on nc. The result may be used by one reading and
// one writing goroutine at a time, as a frame.Reader and a frame.Writer
// use it.
func Wrap(nc net.Conn) io.ReadWriter {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return nc
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nc
	}
	c := &rawConn{rc: rc}
	c.readFn, c.writeFn = c.read, c.write
	return c
}

// rawConn reads and writes a non-blocking TCP socket with
// syscall.RawSyscall inside syscall.RawConn's Read and Write: the runtime's
// poller still parks the goroutine while the socket is not ready, and
// deadlines still apply, but the read or write itself skips the scheduler's
// system-call bookkeeping. That bookkeeping is what costs at low load: a
// proxy waiting for its next request has every P idle, so the runtime's
// monitor thread (sysmon) goes to sleep, and the next system call entered
// the ordinary way wakes it up again (a futex wake, a thread switch, and
// its 20 µs naps until it sleeps again), one to two per request. A
// non-blocking read or write on a socket returns at once, so nothing is
// lost by not handing the P over during it.
//
// The functions handed to RawConn are bound once (readFn, writeFn) and
// keep their state in the struct: a closure per call would allocate.
type rawConn struct {
	rc syscall.RawConn

	// The reading goroutine's call: its buffer, bytes read, error.
	rbuf   []byte
	rn     int
	rerr   syscall.Errno
	readFn func(fd uintptr) bool
	// rx is set when the socket reports arrival times (ArrivalStamps):
	// reads are recvmsg(2) calls that keep the kernel's time.
	rx *rxStamps

	// The writing goroutine's call: its bytes, bytes written, error.
	wbuf    []byte
	wn      int
	werr    syscall.Errno
	writeFn func(fd uintptr) bool
}

func (c *rawConn) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	c.rbuf, c.rn, c.rerr = b, 0, 0
	err := c.rc.Read(c.readFn)
	n, errno := c.rn, c.rerr
	c.rbuf = nil
	switch {
	case err != nil:
		return 0, err
	case errno != 0:
		return 0, os.NewSyscallError("read", errno)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// read is readFn: one read(2), or false to wait for readability.
func (c *rawConn) read(fd uintptr) bool {
	b := c.rbuf
	for {
		var r uintptr
		var e syscall.Errno
		if c.rx != nil {
			r, e = c.rx.recv(fd, b)
		} else {
			r, _, e = syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		}
		switch e {
		case 0:
			c.rn = int(r)
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false // the poller waits for readability, then calls again
		default:
			c.rerr = e
			return true
		}
	}
}

func (c *rawConn) Write(b []byte) (int, error) {
	c.wbuf, c.wn, c.werr = b, 0, 0
	err := c.rc.Write(c.writeFn)
	n, errno := c.wn, c.werr
	c.wbuf = nil
	switch {
	case err != nil:
		return n, err
	case errno != 0:
		return n, os.NewSyscallError("write", errno)
	}
	return n, nil
}

// write is writeFn: write(2) until all of wbuf is written, or false to
// wait for room.
func (c *rawConn) write(fd uintptr) bool {
	b := c.wbuf
	for c.wn < len(b) {
		r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&b[c.wn])), uintptr(len(b)-c.wn))
		switch e {
		case 0:
			c.wn += int(r)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false // the poller waits for room, then calls again
		default:
			c.werr = e
			return true
		}
	}
	return true
}
