// Package cputime reads CPU time counters: this process's (getrusage),
// another process's (/proc/PID/stat) and each CPU's busy share of the
// machine (/proc/stat).
//
// It owns the readers and the parsing of their files, nothing else: it
// must not sample on its own schedule, keep state between readings or
// judge the figures (whether the generator is the bottleneck is the
// caller's call). Readings are cumulative; callers take differences.
package cputime

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// Self returns the user and system CPU time this process has used so
// far. It counts every goroutine of the generator, gocql's readers and
// writers and the garbage collector included, which is what "CPU per op"
// must charge; the system part is mostly the socket syscalls.
func Self() (user, sys time.Duration, err error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano()), nil
}

// Source reports the cumulative CPU time of some process, such as the
// proxy under test. ProcStat is one; a reader of the process's metrics is
// another.
type Source interface {
	CPU(ctx context.Context) (time.Duration, error)
	String() string
}

// clockTicksPerSecond is USER_HZ, the unit of utime and stime in
// /proc/PID/stat. Go cannot call sysconf(_SC_CLK_TCK) without cgo, and
// Linux fixes USER_HZ at 100 on every architecture Go supports.
const clockTicksPerSecond = 100

// ProcStat reads a process's CPU time from /proc/PID/stat.
type ProcStat struct {
	PID int
	// Root is the proc file system's mount point; "" means "/proc".
	Root string
}

func (p ProcStat) String() string { return "pid " + strconv.Itoa(p.PID) }

// CPU returns the process's user plus system time, at the 10 ms
// resolution of clock ticks.
func (p ProcStat) CPU(context.Context) (time.Duration, error) {
	root := p.Root
	if root == "" {
		root = "/proc"
	}
	b, err := os.ReadFile(fmt.Sprintf("%s/%d/stat", root, p.PID))
	if err != nil {
		return 0, fmt.Errorf("read cpu time of pid %d: %w", p.PID, err)
	}
	ticks, err := parseProcStatTicks(b)
	if err != nil {
		return 0, fmt.Errorf("pid %d: %w", p.PID, err)
	}
	return time.Duration(ticks) * time.Second / clockTicksPerSecond, nil
}

// parseProcStatTicks returns utime+stime (fields 14 and 15, in clock ticks)
// of a /proc/PID/stat line. The command name (field 2) is in parentheses and
// may itself contain spaces and parentheses, so fields are counted from the
// last ')'.
func parseProcStatTicks(stat []byte) (int64, error) {
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, fmt.Errorf("malformed /proc stat %q: no ')'", stat)
	}
	fields := bytes.Fields(stat[end+1:])
	// fields[0] is field 3 (state), so field n is fields[n-3].
	const utimeIdx, stimeIdx = 14 - 3, 15 - 3
	if len(fields) <= stimeIdx {
		return 0, fmt.Errorf("malformed /proc stat: %d fields after the name, want > %d", len(fields), stimeIdx)
	}
	var total int64
	for _, i := range []int{utimeIdx, stimeIdx} {
		v, err := strconv.ParseInt(string(fields[i]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("malformed /proc stat field %d: %w", i+3, err)
		}
		total += v
	}
	return total, nil
}
