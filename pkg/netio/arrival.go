package netio

import (
	"io"
	"time"
)

// Arrival times. A proxy short of CPU reads an answer late: the time it
// read it then holds the wait for its own goroutine besides Cassandra's
// work, and a limit that adapts to latency reads the proxy's saturation as
// the node's. The kernel stamps each segment as it arrives; with
// SO_TIMESTAMPNS set it hands the stamp of the last segment a read took
// (TCP reports that one) to recvmsg(2), and the latency measured to it
// leaves the proxy's own delay out.

// ArrivalStamps asks the kernel to stamp what arrives on rw, a value Wrap
// returned, and reports whether it will: only a plain TCP socket on Linux
// can. From then on Arrived reports the stamps.
func ArrivalStamps(rw io.ReadWriter) bool {
	c, ok := rw.(*rawConn)
	if !ok {
		return false
	}
	if c.rx != nil {
		return true
	}
	rx, err := enableArrivalStamps(c.rc)
	if err != nil || rx == nil {
		return false
	}
	c.rx = rx
	return true
}

// Arrived returns when the last segment of the last read that returned
// data arrived, as the kernel stamped it, or false when rw keeps no stamps
// or the read carried none. Only the reading goroutine may call it.
func Arrived(rw io.ReadWriter) (time.Time, bool) {
	c, ok := rw.(*rawConn)
	if !ok || c.rx == nil || c.rx.last == 0 {
		return time.Time{}, false
	}
	return time.Unix(0, c.rx.last), true
}
