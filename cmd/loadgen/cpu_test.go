package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

func TestParseProcStatTicks(t *testing.T) {
	tests := []struct {
		name, stat string
		want       int64
	}{
		{
			"plain",
			"4242 (proxy) S 1 4242 4242 0 -1 4194560 2185 0 0 0 731 269 0 0 20 0 9 0 1234 1000 200 18446744073709551615",
			731 + 269,
		},
		{
			// The name may hold spaces and parentheses; only the last ')'
			// ends it.
			"tricky name",
			"77 (my (odd) proc) R 1 77 77 0 -1 0 0 0 0 0 5 7 0 0 20 0 1 0 99 0 0\n",
			12,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseProcStatTicks([]byte(tt.stat))
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %d ticks; want %d", got, tt.want)
			}
		})
	}
	for _, bad := range []string{"", "1 proc S 1", "1 (p) S 1 2 3", "1 (p) S 1 1 1 0 -1 0 0 0 0 0 x 1 0"} {
		if _, err := parseProcStatTicks([]byte(bad)); err == nil {
			t.Errorf("parseProcStatTicks(%q): no error", bad)
		}
	}
}

func TestProcStatCPUReadsFile(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "4242")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	stat := "4242 (proxy) S 1 4242 4242 0 -1 4194560 2185 0 0 0 731 269 0 0 20 0 9 0 1234 1000 200\n"
	if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := procStatCPU{pid: 4242, root: root}.CPU(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := 10 * time.Second; got != want { // 1000 ticks at 100/s
		t.Errorf("got %v; want %v", got, want)
	}
	if _, err := (procStatCPU{pid: 4243, root: root}).CPU(context.Background()); err == nil {
		t.Error("missing pid: no error")
	}
}

// Our own process, read through /proc and through getrusage, must roughly
// agree: both count the same CPU, at tick versus microsecond resolution.
func TestProcStatCPUAgreesWithRusage(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc on this system")
	}
	deadline := time.Now().Add(300 * time.Millisecond)
	for x := 0; time.Now().Before(deadline); x++ {
		_ = strconv.Itoa(x) // burn some CPU
	}
	viaProc, err := procStatCPU{pid: os.Getpid()}.CPU(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	user, sys, err := selfCPU()
	if err != nil {
		t.Fatal(err)
	}
	viaRusage := user + sys
	if diff := viaRusage - viaProc; diff < -100*time.Millisecond || diff > 100*time.Millisecond {
		t.Errorf("/proc says %v, getrusage %v", viaProc, viaRusage)
	}
}
