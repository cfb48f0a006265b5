package stmtstats

import (
	"math/bits"
	"time"
)

// The latency histogram is log-linear over microseconds: exact below 8 µs,
// then 8 buckets per power of two (12.5% wide), up to 2^27 µs (134 s); a
// longer latency counts in the last bucket (its exact value still sets the
// maximum).
const (
	histSubBits = 3
	histSub     = 1 << histSubBits
	histMaxExp  = 27
	histBuckets = histSub + (histMaxExp-histSubBits)*histSub
)

type histogram [histBuckets]uint32

func bucketOf(d time.Duration) int {
	us := uint64(d / time.Microsecond)
	if d < 0 {
		us = 0
	}
	if us < histSub {
		return int(us)
	}
	e := bits.Len64(us) - 1 // >= histSubBits
	if e >= histMaxExp {
		return histBuckets - 1
	}
	sub := int(us>>(e-histSubBits)) & (histSub - 1)
	return histSub + (e-histSubBits)*histSub + sub
}

// bucketUpper is the largest latency bucket i holds.
func bucketUpper(i int) time.Duration {
	if i < histSub {
		return time.Duration(i+1) * time.Microsecond
	}
	e := (i-histSub)/histSub + histSubBits
	sub := (i - histSub) % histSub
	lo := uint64(1)<<e + uint64(sub)<<(e-histSubBits)
	return time.Duration(lo+uint64(1)<<(e-histSubBits)) * time.Microsecond
}

// quantile returns the upper bound of the bucket holding quantile q (0-1]
// of n samples, capped at max.
func (h *histogram) quantile(q float64, n uint64, max time.Duration) time.Duration {
	if n == 0 {
		return 0
	}
	rank := uint64(q*float64(n) + 0.5)
	rank = min(max64(rank, 1), n)
	var seen uint64
	for i, c := range h {
		seen += uint64(c)
		if seen >= rank {
			return min(bucketUpper(i), max)
		}
	}
	return max
}

func max64(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}
