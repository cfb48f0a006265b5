package cputime

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
	got, err := ProcStat{PID: 4242, Root: root}.CPU(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := 10 * time.Second; got != want { // 1000 ticks at 100/s
		t.Errorf("got %v; want %v", got, want)
	}
	if _, err := (ProcStat{PID: 4243, Root: root}).CPU(context.Background()); err == nil {
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
	viaProc, err := ProcStat{PID: os.Getpid()}.CPU(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	user, sys, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	viaRusage := user + sys
	if diff := viaRusage - viaProc; diff < -100*time.Millisecond || diff > 100*time.Millisecond {
		t.Errorf("/proc says %v, getrusage %v", viaProc, viaRusage)
	}
}

func TestParsePerCPU(t *testing.T) {
	// user nice system idle iowait irq softirq steal guest guest_nice
	stat := "cpu  300 0 100 900 50 0 10 0 0 0\n" +
		"cpu0 200 0 50 100 10 0 5 0 0 0\n" +
		"cpu1 100 0 50 800 40 0 5 0 0 0\n" +
		"intr 12345 0 0\n" +
		"ctxt 999\n"
	got := parsePerCPU([]byte(stat))
	want := []Ticks{{Busy: 255, Total: 365}, {Busy: 155, Total: 995}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("parsePerCPU = %+v; want %+v (the machine-wide line skipped)", got, want)
	}
}

func TestBusy(t *testing.T) {
	before := []Ticks{{Busy: 100, Total: 200}, {Busy: 50, Total: 1000}}
	after := []Ticks{{Busy: 175, Total: 300}, {Busy: 50, Total: 1000}}
	got := Busy(before, after)
	if len(got) != 2 || got[0] != 0.75 || got[1] != 0 {
		t.Errorf("Busy = %v; want [0.75 0] (a CPU whose total did not move is 0)", got)
	}
	if got := Busy(before, after[:1]); got != nil {
		t.Errorf("Busy of readings of different lengths = %v; want nil", got)
	}
}

func TestPerCPUReadsProc(t *testing.T) {
	if _, err := os.Stat("/proc/stat"); err != nil {
		t.Skip("no /proc on this system")
	}
	got, err := PerCPU()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 {
		t.Fatal("no CPU in /proc/stat")
	}
	for i, c := range got {
		if c.Busy < 0 || c.Busy > c.Total {
			t.Errorf("cpu%d: busy %d of %d", i, c.Busy, c.Total)
		}
	}
}
