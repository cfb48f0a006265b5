// Package cpupressure reads how much of the time the proxy's tasks waited
// for a CPU: Linux's pressure stall information (PSI) for CPU, the share of
// the last 10 seconds in which at least one runnable task of the cgroup (or
// of the host) had no CPU to run on.
//
// The fleet limit uses it to know when the latencies it measures carry the
// proxy's own wait for a CPU (pkg/limiter's starvedBelow): a sidecar on a host
// whose CPUs are all taken reads its backend's answers late, and would read
// that lateness as a queue in Cassandra.
package cpupressure

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
)

// DefaultPaths returns where the pressure is read from, in order: the
// cgroup's own (cgroup v2, the container's under a cgroup namespace), then
// the host's.
func DefaultPaths() []string { return []string{"/sys/fs/cgroup/cpu.pressure", "/proc/pressure/cpu"} }

// Reader reads the CPU pressure from the first of its paths that exists.
// The zero Reader reads DefaultPaths.
type Reader struct {
	paths []string
	path  string // the path found (after the first Read)
}

// NewReader returns a Reader of paths (nil: DefaultPaths).
func NewReader(paths []string) *Reader { return &Reader{paths: paths} }

// Read returns the share of the last 10 seconds in which some task waited
// for a CPU (0 to 1), and false where the kernel does not report it (not
// Linux, a kernel before 4.20 or booted without PSI).
func (r *Reader) Read() (float64, bool) {
	if r.paths == nil {
		r.paths = DefaultPaths()
	}
	if r.path == "" {
		for _, p := range r.paths {
			if _, err := os.Stat(p); err == nil {
				r.path = p
				break
			}
		}
		if r.path == "" {
			return 0, false
		}
	}
	f, err := os.Open(r.path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	v, err := Parse(f)
	if err != nil {
		return 0, false
	}
	return v, true
}

// Parse reads the "some" line's avg10 from a pressure file (see the
// kernel's Documentation/accounting/psi.rst) as a share (0 to 1).
func Parse(rd io.Reader) (float64, error) {
	sc := bufio.NewScanner(rd)
	for sc.Scan() {
		line := sc.Bytes()
		rest, ok := bytes.CutPrefix(line, []byte("some "))
		if !ok {
			continue
		}
		for _, field := range bytes.Fields(rest) {
			v, ok := bytes.CutPrefix(field, []byte("avg10="))
			if !ok {
				continue
			}
			pct, err := strconv.ParseFloat(string(v), 64)
			if err != nil || pct < 0 || pct > 100 {
				return 0, fmt.Errorf("cpupressure: bad avg10 %q", v)
			}
			return pct / 100, nil
		}
		return 0, fmt.Errorf("cpupressure: no avg10 in %q", line)
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("cpupressure: %w", err)
	}
	return 0, fmt.Errorf("cpupressure: no \"some\" line")
}
