package frame

import "testing"

func TestGetBufSizeClasses(t *testing.T) {
	tests := []struct{ n, wantCap int }{
		{0, 128},
		{1, 128},
		{128, 128},
		{129, 256},
		{512, 512},
		{513, 1024},
		{100_000, 128 << 10},
		{MaxSegmentPayload, 128 << 10},
		{MaxPooledBuf, MaxPooledBuf},
		{MaxPooledBuf + 1, MaxPooledBuf + 1},
	}
	for _, tt := range tests {
		b := GetBuf(tt.n)
		if len(b.B) != tt.n || cap(b.B) != tt.wantCap {
			t.Errorf("GetBuf(%d): len %d cap %d; want len %d cap %d", tt.n, len(b.B), cap(b.B), tt.n, tt.wantCap)
		}
		b.Release()
	}
}

func TestBufReleaseIgnoresForeignCapacities(t *testing.T) {
	// Released buffers of odd capacities must not end up in a pool where
	// GetBuf would hand out a slice shorter than its class.
	(&Buf{B: make([]byte, 10, 700)}).Release()
	(&Buf{B: nil}).Release()
	var nilBuf *Buf
	nilBuf.Release()
	for range 100 {
		b := GetBuf(1000)
		if cap(b.B) != 1024 {
			t.Fatalf("GetBuf(1000) has cap %d; want 1024", cap(b.B))
		}
		defer b.Release()
	}
}

func TestGetBufDoesNotAllocateInSteadyState(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under -race")
	}
	for _, n := range []int{100, 5000, 1 << 20} {
		GetBuf(n).Release()
		if allocs := testing.AllocsPerRun(1000, func() { GetBuf(n).Release() }); allocs != 0 {
			t.Errorf("GetBuf(%d)+Release: %v allocs/op; want 0", n, allocs)
		}
	}
}
