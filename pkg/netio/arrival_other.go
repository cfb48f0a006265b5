//go:build !linux

package netio

import (
	"errors"
	"syscall"
)

type rxStamps struct{ last int64 }

func enableArrivalStamps(syscall.RawConn) (*rxStamps, error) {
	return nil, errors.New("netio: arrival stamps need Linux")
}

func (x *rxStamps) recv(uintptr, []byte) (uintptr, syscall.Errno) { return 0, syscall.ENOSYS }
