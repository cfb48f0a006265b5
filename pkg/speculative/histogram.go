package speculative

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// A latency histogram with log-linear buckets: 8 per power of two, so a
// bucket is at most 12.5% wide, from 1.024 µs to 2^37 ns (137 s; longer
// latencies land in the last bucket, shorter ones in the first). Counting
// is one atomic add; reading sums the buckets.

const (
	histUnitShift = 10 // bucket unit: 2^10 ns = 1.024 µs
	histSubBits   = 3  // 2^3 = 8 buckets per power of two
	histSub       = 1 << histSubBits
	histMaxShift  = 37 // latencies of 2^37 ns (137 s) and more share the last bucket
	histBuckets   = (histMaxShift - histUnitShift - histSubBits + 1) * histSub
)

// histogram is one sub-window's counts.
type histogram struct {
	counts [histBuckets]atomic.Uint32
}

// bucketOf returns the bucket of latency d.
func bucketOf(d time.Duration) int {
	if d < 0 {
		d = 0
	}
	v := uint64(d) >> histUnitShift
	if v < histSub {
		return int(v)
	}
	// v has at least histSubBits+1 bits; its top histSubBits+1 bits are
	// 1xxx, and xxx picks the bucket within the power of two.
	shift := bits.Len64(v) - histSubBits - 1
	idx := (shift+1)*histSub + int(v>>shift) - histSub
	if idx >= histBuckets {
		return histBuckets - 1
	}
	return idx
}

// bucketUpper returns the upper bound (exclusive) of bucket i: the delay
// that a percentile falling in bucket i is reported as. Reporting the top
// of the bucket errs towards hedging later, never earlier.
func bucketUpper(i int) time.Duration {
	if i < histSub {
		return time.Duration(i+1) << histUnitShift
	}
	shift := i/histSub - 1
	mant := uint64(i%histSub + histSub)
	return time.Duration((mant + 1) << shift << histUnitShift)
}
