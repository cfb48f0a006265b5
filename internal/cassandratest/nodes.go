package cassandratest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Control of single nodes of a running cluster: stop, start, pause and
// resume one node, and find its process.

// StopNode stops node i (0-based) with SIGTERM (SIGKILL after 30 s) and waits until it is gone.
func (c *Cluster) StopNode(ctx context.Context, i int) error {
	if err := c.controllable(i); err != nil {
		return err
	}
	_, err := c.run(ctx, "stop", "--dir", c.Dir, "--node", strconv.Itoa(i+1))
	return err
}

// StartNode starts node i (0-based) again with its previous configuration and data, and waits
// until it answers CQL (and accepts the superuser login on an Auth cluster).
func (c *Cluster) StartNode(ctx context.Context, i int) error {
	if err := c.controllable(i); err != nil {
		return err
	}
	args := []string{"start-node", "--dir", c.Dir, "--node", strconv.Itoa(i + 1), "--timeout", nodeTimeout(ctx)}
	if _, err := c.run(ctx, args...); err != nil {
		return err
	}
	return c.waitNode(ctx, i, false)
}

// PauseNode freezes node i (0-based) with SIGSTOP: its sockets stay open but it stops
// answering, like a hung server. Peers mark it down after the failure detector's timeout
// (several seconds). ResumeNode undoes it; stopping the cluster also resumes paused nodes.
func (c *Cluster) PauseNode(i int) error { return c.signal(i, syscall.SIGSTOP) }

// ResumeNode continues node i (0-based) after PauseNode (SIGCONT).
func (c *Cluster) ResumeNode(i int) error { return c.signal(i, syscall.SIGCONT) }

// PID returns the process id of node i (0-based), verified to be that node's CassandraDaemon.
func (c *Cluster) PID(i int) (int, error) {
	if err := c.controllable(i); err != nil {
		return 0, err
	}
	b, err := os.ReadFile(filepath.Join(c.nodeDir(i), "pid"))
	if err != nil {
		return 0, fmt.Errorf("cassandratest: node %d is not running (no pid file): %w", i, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("cassandratest: node %d: bad pid file: %w", i, err)
	}
	if !c.isNodeProcess(i, pid) {
		return 0, fmt.Errorf("cassandratest: node %d: pid %d is not running (or not that node)", i, pid)
	}
	return pid, nil
}

func (c *Cluster) nodeDir(i int) string { return filepath.Join(c.Dir, fmt.Sprintf("node%d", i+1)) }

func (c *Cluster) controllable(i int) error {
	if c == nil {
		return errors.New("cassandratest: nil cluster")
	}
	if i < 0 || i >= len(c.Addrs) {
		return fmt.Errorf("cassandratest: no node %d (cluster has %d)", i, len(c.Addrs))
	}
	if c.Dir == "" || c.script == "" {
		return errors.New("cassandratest: external cluster without its directory (set CQLGATE_TEST_CASSANDRA_<NAME>_DIR) cannot be controlled")
	}
	return nil
}

// isNodeProcess checks /proc/PID/cmdline: a CassandraDaemon started with node i's config.
func (c *Cluster) isNodeProcess(i, pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	hasMain, hasConf := false, false
	conf := "-Dcassandra.config=file://" + filepath.Join(c.nodeDir(i), "cassandra.yaml")
	for _, arg := range strings.Split(string(b), "\x00") {
		switch arg {
		case "org.apache.cassandra.service.CassandraDaemon":
			hasMain = true
		case conf:
			hasConf = true
		}
	}
	return hasMain && hasConf && procState(pid) != 0
}

// procState returns the state letter of a live process (R, S, D, T, ...) or 0 if the process is
// gone or a zombie. A JVM whose main thread exited shows Z while its other threads still run:
// that counts as alive ('z').
func procState(pid int) byte {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	j := bytes.LastIndexByte(st, ')')
	if j < 0 || j+2 >= len(st) {
		return 0
	}
	s := st[j+2]
	if s == 'Z' || s == 'X' {
		if tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid)); err == nil && len(tasks) > 1 {
			return 'z'
		}
		return 0
	}
	return s
}

// signal sends sig to node i and waits (up to 5 s) until the process is stopped (SIGSTOP) or
// running again (SIGCONT).
func (c *Cluster) signal(i int, sig syscall.Signal) error {
	pid, err := c.PID(i)
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, sig); err != nil {
		return err
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		st := procState(pid)
		if st == 0 || (sig == syscall.SIGSTOP) == (st == 'T') {
			return nil
		}
	}
	return fmt.Errorf("cassandratest: node %d (pid %d) did not react to %v", i, pid, sig)
}
