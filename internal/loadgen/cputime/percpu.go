package cputime

import (
	"os"
	"strconv"
	"strings"
)

// Ticks is one CPU's busy and total time since boot, in USER_HZ.
type Ticks struct{ Busy, Total int64 }

// PerCPU returns every CPU's times from /proc/stat, in the order the
// kernel lists them (cpu0, cpu1, ...).
func PerCPU() ([]Ticks, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return nil, err
	}
	return parsePerCPU(b), nil
}

// parsePerCPU reads the per-CPU lines of /proc/stat; the machine-wide
// "cpu" line and lines too short to hold idle and iowait are skipped.
// Busy is every field but idle and iowait (fields 4 and 5).
func parsePerCPU(stat []byte) []Ticks {
	var out []Ticks
	for line := range strings.SplitSeq(string(stat), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || !strings.HasPrefix(f[0], "cpu") || f[0] == "cpu" {
			continue
		}
		var t Ticks
		for i, v := range f[1:] {
			n, _ := strconv.ParseInt(v, 10, 64)
			t.Total += n
			if i != 3 && i != 4 { // idle and iowait
				t.Busy += n
			}
		}
		out = append(out, t)
	}
	return out
}

// Busy returns each CPU's busy share between two readings of PerCPU, 0
// for a CPU whose total did not move; nil when the readings differ in
// length (a CPU went on- or offline, or a reading failed).
func Busy(before, after []Ticks) []float64 {
	if len(before) != len(after) {
		return nil
	}
	out := make([]float64, len(after))
	for i := range after {
		if d := after[i].Total - before[i].Total; d > 0 {
			out[i] = float64(after[i].Busy-before[i].Busy) / float64(d)
		}
	}
	return out
}
