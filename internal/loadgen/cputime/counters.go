package cputime

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Machine returns the busy time of every CPU of the machine added up, from
// /proc/stat: what the host pays for the generator, the proxy and the
// database together (and for anything else running, so it is only
// meaningful as a difference over a window on an otherwise quiet host).
func Machine() (time.Duration, error) {
	ticks, err := PerCPU()
	if err != nil {
		return 0, fmt.Errorf("machine cpu time: %w", err)
	}
	var busy int64
	for _, t := range ticks {
		busy += t.Busy
	}
	return time.Duration(busy) * time.Second / clockTicksPerSecond, nil
}

// Counters are a process's cumulative kernel counters that tell where its
// CPU time goes besides computing: system calls that read or write, and
// times a thread was switched off its CPU.
type Counters struct {
	// ReadCalls and WriteCalls are the read and write system calls
	// (syscr and syscw of /proc/PID/io): on a proxy, the socket reads and
	// writes, since Go reads and writes sockets with read(2) and write(2).
	ReadCalls, WriteCalls int64
	// Voluntary counts the times a thread blocked (a futex sleep, an
	// epoll_wait with nothing ready): roughly one per wake-up hand-off
	// between threads. Involuntary counts preemptions. Both are summed
	// over the process's threads (/proc/PID/task/*/status); threads that
	// exited no longer count.
	Voluntary, Involuntary int64
}

// Sub returns c minus before.
func (c Counters) Sub(before Counters) Counters {
	return Counters{
		ReadCalls:   c.ReadCalls - before.ReadCalls,
		WriteCalls:  c.WriteCalls - before.WriteCalls,
		Voluntary:   c.Voluntary - before.Voluntary,
		Involuntary: c.Involuntary - before.Involuntary,
	}
}

// ReadCounters reads process pid's Counters from the proc file system
// mounted at root ("" means "/proc"). /proc/PID/io is readable only by
// the process's owner (or root).
func ReadCounters(root string, pid int) (Counters, error) {
	if root == "" {
		root = "/proc"
	}
	var c Counters
	dir := filepath.Join(root, strconv.Itoa(pid))
	io, err := os.ReadFile(filepath.Join(dir, "io"))
	if err != nil {
		return c, fmt.Errorf("read i/o counters of pid %d: %w", pid, err)
	}
	c.ReadCalls = field(io, "syscr:")
	c.WriteCalls = field(io, "syscw:")
	tasks, err := os.ReadDir(filepath.Join(dir, "task"))
	if err != nil {
		return c, fmt.Errorf("list threads of pid %d: %w", pid, err)
	}
	for _, t := range tasks {
		st, err := os.ReadFile(filepath.Join(dir, "task", t.Name(), "status"))
		if err != nil {
			continue // the thread exited meanwhile
		}
		c.Voluntary += field(st, "voluntary_ctxt_switches:")
		c.Involuntary += field(st, "nonvoluntary_ctxt_switches:")
	}
	return c, nil
}

// field returns the number after the line prefix name in a "name: value"
// file, 0 when there is none.
func field(b []byte, name string) int64 {
	s := bufio.NewScanner(bytes.NewReader(b))
	for s.Scan() {
		line := s.Bytes()
		if v, ok := bytes.CutPrefix(line, []byte(name)); ok {
			n, _ := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
			return n
		}
	}
	return 0
}
