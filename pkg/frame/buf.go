package frame

import (
	"math/bits"
	"sync"
)

// Buffers are pooled in power-of-two size classes from 128 B to 4 MiB. Larger
// frames are rare (big result pages, blobs) and are allocated and left to the
// GC, so a burst of them cannot pin memory in the pools.
const (
	minBufShift = 7  // 128 B: a queued single-row EXECUTE holds one
	maxBufShift = 22 // 4 MiB

	// MaxPooledBuf is the largest buffer capacity GetBuf takes from a pool.
	MaxPooledBuf = 1 << maxBufShift
)

// bufPools[i] holds *Buf whose B has capacity 1<<(minBufShift+i). Storing the
// *Buf rather than the slice keeps Put from allocating an interface box.
var bufPools [maxBufShift - minBufShift + 1]sync.Pool

// Buf is a pooled buffer that holds exactly one frame in B (header + body,
// uncompressed, header length field == len(body)). It is owned by whoever
// holds it and must be given back with Release exactly once.
type Buf struct {
	B []byte
}

// sizeClass returns the pool index for a buffer of n bytes, or -1 when n is
// too large to be pooled.
func sizeClass(n int) int {
	if n <= 1<<minBufShift {
		return 0
	}
	c := bits.Len(uint(n-1)) - minBufShift
	if c >= len(bufPools) {
		return -1
	}
	return c
}

// GetBuf returns a pooled Buf with len(B)==n. The bytes of B are not zeroed.
// n must not be negative.
func GetBuf(n int) *Buf {
	if n < 0 {
		panic("frame: GetBuf with negative size")
	}
	c := sizeClass(n)
	if c < 0 {
		return &Buf{B: make([]byte, n)}
	}
	if v := bufPools[c].Get(); v != nil {
		b := v.(*Buf)
		b.B = b.B[:n]
		return b
	}
	return &Buf{B: make([]byte, n, 1<<(c+minBufShift))}
}

// Release returns b to its pool; b must not be used afterwards. Buffers whose
// capacity is not one of the pool's size classes (too large, or replaced by
// the holder) are left to the garbage collector.
func (b *Buf) Release() {
	if b == nil {
		return
	}
	c := cap(b.B)
	if c < 1<<minBufShift || c > MaxPooledBuf || c&(c-1) != 0 {
		b.B = nil
		return
	}
	bufPools[bits.TrailingZeros(uint(c))-minBufShift].Put(b)
}
