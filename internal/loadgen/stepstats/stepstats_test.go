package stepstats

import (
	"testing"
	"time"
)

func TestRecordClampsIntoRange(t *testing.T) {
	h := NewHistogram()
	Record(h, 0)
	Record(h, 300*time.Nanosecond)
	Record(h, 10*time.Minute)
	if h.TotalCount() != 3 {
		t.Fatalf("count = %d; want 3 (out-of-range values clamped, not dropped)", h.TotalCount())
	}
	if h.Min() != MinMicros {
		t.Errorf("min = %d; want %d", h.Min(), MinMicros)
	}
	if !h.ValuesAreEquivalent(h.Max(), MaxMicros) {
		t.Errorf("max = %d; want %d", h.Max(), MaxMicros)
	}
}

func TestLatencyOf(t *testing.T) {
	h := NewHistogram()
	for i := 1; i <= 1000; i++ {
		Record(h, time.Duration(i)*time.Millisecond)
	}
	l := LatencyOf(h)
	if l.Count != 1000 {
		t.Errorf("count = %d; want 1000", l.Count)
	}
	for _, c := range []struct {
		name      string
		got, want int64
	}{{"p50", l.P50, 500_000}, {"p90", l.P90, 900_000}, {"p99", l.P99, 990_000}, {"p99.9", l.P999, 999_000}, {"max", l.Max, 1_000_000}} {
		if !h.ValuesAreEquivalent(c.got, c.want) {
			t.Errorf("%s = %dµs; want ~%dµs", c.name, c.got, c.want)
		}
	}
	if l.Mean < 499_000 || l.Mean > 502_000 {
		t.Errorf("mean = %v; want ~500500", l.Mean)
	}
	if empty := LatencyOf(NewHistogram()); empty != (Latency{}) {
		t.Errorf("empty histogram: %+v; want zeros", empty)
	}
}

func TestGoodput(t *testing.T) {
	if got := Goodput(3000, 2*time.Second); got != 1500 {
		t.Errorf("Goodput(3000, 2s) = %v; want 1500", got)
	}
	if got := Goodput(3000, 0); got != 0 {
		t.Errorf("Goodput(3000, 0) = %v; want 0", got)
	}
}

func TestBehind(t *testing.T) {
	tests := []struct {
		late, unsent, requests int64
		share                  float64
		want                   bool
	}{
		{0, 0, 0, 0.01, false},
		{10, 0, 1000, 0.01, false}, // exactly the share: kept up
		{11, 0, 1000, 0.01, true},  // over it
		{0, 1, 1000, 0.01, true},   // one unsent is enough
		{1, 0, 1000, 0.001, false}, // the overload benchmark's 0.1%
		{2, 0, 1000, 0.001, true},
		{3, 0, 3000, 0.001, false}, // late*1000 == requests
		{1, 0, 0, 0.01, true},      // late, but none counted
		{100, 0, 100_000, 0.001, false},
	}
	for _, tt := range tests {
		if got := Behind(tt.late, tt.unsent, tt.requests, tt.share); got != tt.want {
			t.Errorf("Behind(late %d, unsent %d, of %d, share %v) = %v; want %v", tt.late, tt.unsent, tt.requests, tt.share, got, tt.want)
		}
	}
}

func TestMicros(t *testing.T) {
	if got := Micros(1234); got != "1.234ms" {
		t.Errorf("Micros(1234) = %q; want 1.234ms", got)
	}
}

// With share 0.001 Behind is the overload benchmark's own rule, in
// integers: on schedule when nothing is unsent and late*1000 <= sent.
func TestBehindMatchesIntegerRule(t *testing.T) {
	for sent := int64(0); sent <= 20_000; sent += 7 {
		for late := int64(0); late <= 25; late++ {
			want := !(late*1000 <= sent)
			if got := Behind(late, 0, sent, 0.001); got != want {
				t.Fatalf("Behind(late %d, of %d, 0.001) = %v; want %v", late, sent, got, want)
			}
		}
	}
}
