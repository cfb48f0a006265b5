package cpupressure

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want float64
		ok   bool
	}{
		{"some avg10=72.01 avg60=64.00 avg300=61.62 total=5602303714\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", 0.7201, true},
		{"some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", 0, true},
		{"full avg10=3.00 avg60=0.00 avg300=0.00 total=0\nsome avg10=5.50 avg60=1 avg300=1 total=1\n", 0.055, true},
		{"", 0, false},
		{"some avg60=1.00\n", 0, false},
		{"some avg10=x avg60=1.00\n", 0, false},
		{"some avg10=101.00\n", 0, false},
	} {
		got, err := Parse(strings.NewReader(c.in))
		if (err == nil) != c.ok || c.ok && (got < c.want-1e-9 || got > c.want+1e-9) {
			t.Errorf("Parse(%q) = %v, %v; want %v, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
}

func TestReaderFallsBackAndReportsAbsence(t *testing.T) {
	dir := t.TempDir()
	host := filepath.Join(dir, "cpu")
	if err := os.WriteFile(host, []byte("some avg10=25.00 avg60=1.00 avg300=1.00 total=1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := NewReader([]string{filepath.Join(dir, "missing"), host})
	if v, ok := r.Read(); !ok || v != 0.25 {
		t.Errorf("Read() = %v, %v; want 0.25 from the second path", v, ok)
	}
	if _, ok := NewReader([]string{filepath.Join(dir, "missing")}).Read(); ok {
		t.Error("Read() of no file reported a pressure")
	}
}

func FuzzParse(f *testing.F) {
	f.Add("some avg10=72.01 avg60=64.00 avg300=61.62 total=5602303714\n")
	f.Fuzz(func(t *testing.T, s string) {
		v, err := Parse(strings.NewReader(s))
		if err == nil && (v < 0 || v > 1) {
			t.Fatalf("Parse(%q) = %v: out of [0, 1]", s, v)
		}
	})
}
