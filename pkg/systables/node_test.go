package systables

import (
	"math/big"
	"strconv"
	"testing"
)

func TestHostID(t *testing.T) {
	a := HostID("cluster/127.0.0.1:9042")
	if b := HostID("cluster/127.0.0.1:9042"); a != b {
		t.Errorf("HostID is not deterministic: %x != %x", a, b)
	}
	seen := map[[16]byte]string{}
	for _, seed := range []string{"", "cluster/127.0.0.1:9042", "cluster/127.0.0.1:9043", "cluster/127.0.0.2:9042", "other/127.0.0.1:9042"} {
		id := HostID(seed)
		if prev, dup := seen[id]; dup {
			t.Errorf("HostID(%q) == HostID(%q)", seed, prev)
		}
		seen[id] = seed
		if v := id[6] >> 4; v != 4 {
			t.Errorf("HostID(%q) version = %d, want 4", seed, v)
		}
		if v := id[8] >> 6; v != 2 {
			t.Errorf("HostID(%q) variant bits = %b, want 10", seed, v)
		}
	}
}

// A fixed value, so that host ids survive refactoring.
func TestHostIDStable(t *testing.T) {
	got := HostID("test")
	// sha256("test") = 9f86d081884c7d659a2feaa0c55ad015...
	want := [16]byte{0x9f, 0x86, 0xd0, 0x81, 0x88, 0x4c, 0x4d, 0x65, 0x9a, 0x2f, 0xea, 0xa0, 0xc5, 0x5a, 0xd0, 0x15}
	if got != want {
		t.Errorf("HostID(%q) = %x, want %x", "test", got, want)
	}
}

func TestRingTokens(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want []string
	}{
		{-1, nil},
		{0, nil},
		{1, []string{"-9223372036854775808"}},
		{2, []string{"-9223372036854775808", "0"}},
		{4, []string{"-9223372036854775808", "-4611686018427387904", "0", "4611686018427387904"}},
		{3, []string{"-9223372036854775808", "-3074457345618258603", "3074457345618258602"}},
	} {
		got := RingTokens(tc.n)
		if len(got) != len(tc.want) {
			t.Errorf("RingTokens(%d) = %v, want %v", tc.n, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("RingTokens(%d)[%d] = %s, want %s", tc.n, i, got[i], tc.want[i])
			}
		}
	}
	// Against big-integer arithmetic, for many n.
	ring := new(big.Int).Lsh(big.NewInt(1), 64)
	minTok := new(big.Int).Neg(new(big.Int).Lsh(big.NewInt(1), 63))
	for _, n := range []int{1, 2, 3, 5, 7, 10, 16, 100, 255, 1000} {
		got := RingTokens(n)
		prev := int64(0)
		for i, s := range got {
			w := new(big.Int).Mul(ring, big.NewInt(int64(i)))
			w.Div(w, big.NewInt(int64(n)))
			w.Add(w, minTok)
			if s != w.String() {
				t.Errorf("RingTokens(%d)[%d] = %s, want %s", n, i, s, w)
			}
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				t.Errorf("RingTokens(%d)[%d] = %q: %v", n, i, s, err)
			}
			if i > 0 && v <= prev {
				t.Errorf("RingTokens(%d) not increasing at %d", n, i)
			}
			prev = v
		}
	}
}
