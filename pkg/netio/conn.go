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
// and the addresses stay on nc.
func Wrap(nc net.Conn) io.ReadWriter {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return nc
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nc
	}
	return &rawConn{rc: rc}
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
type rawConn struct {
	rc syscall.RawConn
}

func (c *rawConn) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	var (
		n     int
		errno syscall.Errno
	)
	err := c.rc.Read(func(fd uintptr) bool {
		for {
			r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
			switch e {
			case 0:
				n = int(r)
				return true
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false // the poller waits for readability, then calls again
			default:
				errno = e
				return true
			}
		}
	})
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

func (c *rawConn) Write(b []byte) (int, error) {
	var (
		n     int
		errno syscall.Errno
	)
	err := c.rc.Write(func(fd uintptr) bool {
		for n < len(b) {
			r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&b[n])), uintptr(len(b)-n))
			switch e {
			case 0:
				n += int(r)
			case syscall.EINTR:
			case syscall.EAGAIN:
				return false // the poller waits for room, then calls again
			default:
				errno = e
				return true
			}
		}
		return true
	})
	switch {
	case err != nil:
		return n, err
	case errno != 0:
		return n, os.NewSyscallError("write", errno)
	}
	return n, nil
}
