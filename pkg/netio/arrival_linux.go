package netio

import (
	"syscall"
	"unsafe"
)

// rxStamps is a socket's recvmsg(2) state: its message header, set up
// once, and its control buffer are reused, so that a read allocates
// nothing.
type rxStamps struct {
	iov  syscall.Iovec
	msg  syscall.Msghdr
	oob  [64]byte
	last int64 // unix ns of the last stamp read; 0: none yet
}

func enableArrivalStamps(rc syscall.RawConn) (*rxStamps, error) {
	var serr error
	err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1)
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return nil, err
	}
	x := &rxStamps{}
	x.msg.Iov, x.msg.Iovlen, x.msg.Control = &x.iov, 1, &x.oob[0]
	return x, nil
}

// recv is one recvmsg(2) into b; it keeps the stamp the kernel attached.
func (x *rxStamps) recv(fd uintptr, b []byte) (uintptr, syscall.Errno) {
	x.iov.Base = &b[0]
	x.iov.SetLen(len(b))
	x.msg.SetControllen(len(x.oob)) // the kernel set it to what it wrote
	r, _, e := syscall.RawSyscall(syscall.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(&x.msg)), 0)
	if e == 0 && r > 0 {
		// No stamp on these bytes (the kernel turns stamping on for the
		// whole machine a moment after the first socket asks) leaves none.
		x.last = 0
		x.parse(int(x.msg.Controllen))
	}
	return r, e
}

// parse finds SCM_TIMESTAMPNS in the first n bytes of the control buffer.
func (x *rxStamps) parse(n int) {
	const hdr = syscall.SizeofCmsghdr
	for off := 0; off+hdr <= n; {
		h := (*syscall.Cmsghdr)(unsafe.Pointer(&x.oob[off]))
		l := int(h.Len)
		if l < hdr || off+l > n {
			return
		}
		if h.Level == syscall.SOL_SOCKET && h.Type == syscall.SCM_TIMESTAMPNS && l >= hdr+int(unsafe.Sizeof(syscall.Timespec{})) {
			ts := (*syscall.Timespec)(unsafe.Pointer(&x.oob[off+cmsgAlign(hdr)]))
			x.last = ts.Nano()
			return
		}
		off += cmsgAlign(l)
	}
}

func cmsgAlign(n int) int {
	const a = int(unsafe.Sizeof(uintptr(0)))
	return (n + a - 1) &^ (a - 1)
}
