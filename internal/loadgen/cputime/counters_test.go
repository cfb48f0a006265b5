package cputime

import (
	"os"
	"path/filepath"
	"testing"
)

func TestReadCountersSumsThreads(t *testing.T) {
	root := t.TempDir()
	write := func(path, s string) {
		t.Helper()
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("7/io", "rchar: 100\nwchar: 200\nsyscr: 31\nsyscw: 17\nread_bytes: 0\n")
	write("7/task/7/status", "Name:\tproxy\nvoluntary_ctxt_switches:\t5\nnonvoluntary_ctxt_switches:\t1\n")
	write("7/task/8/status", "Name:\tproxy\nvoluntary_ctxt_switches:\t10\nnonvoluntary_ctxt_switches:\t2\n")
	c, err := ReadCounters(root, 7)
	if err != nil {
		t.Fatal(err)
	}
	want := Counters{ReadCalls: 31, WriteCalls: 17, Voluntary: 15, Involuntary: 3}
	if c != want {
		t.Fatalf("ReadCounters = %+v, want %+v", c, want)
	}
	if d := want.Sub(Counters{ReadCalls: 1, WriteCalls: 2, Voluntary: 3, Involuntary: 1}); d != (Counters{30, 15, 12, 2}) {
		t.Fatalf("Sub = %+v", d)
	}
}

func TestReadCountersOfThisProcess(t *testing.T) {
	before, err := ReadCounters("", os.Getpid())
	if err != nil {
		t.Skipf("no /proc counters here: %v", err)
	}
	f, err := os.Open("/proc/self/stat")
	if err != nil {
		t.Skip(err)
	}
	buf := make([]byte, 64)
	for range 10 {
		if _, err := f.ReadAt(buf, 0); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	after, err := ReadCounters("", os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if d := after.Sub(before); d.ReadCalls < 10 {
		t.Fatalf("10 reads counted as %d read calls", d.ReadCalls)
	}
}

func TestMachineMoves(t *testing.T) {
	a, err := Machine()
	if err != nil {
		t.Skipf("no /proc/stat: %v", err)
	}
	if a <= 0 {
		t.Fatalf("machine busy time %v since boot", a)
	}
}
