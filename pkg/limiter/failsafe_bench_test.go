//go:build failsafe

// The same hot path through failsafe-go's adaptivelimiter, which this
// package evaluated first (issue 4). Run with
//
//	GOFLAGS=-mod=mod go test -tags failsafe -run x -bench . ./pkg/limiter/
//
// (-mod=mod lets go add the go.sum lines of its dependencies, tdigest and
// bitset). On the development machine (2 vCPU AMD EPYC, Go 1.26), in one
// run: 230-260 ns and 1 allocation (a 96-byte permit) per TryAcquirePermit +
// Record (270-285 ns in parallel), against 35 ns and 0 allocations for
// BenchmarkAcquireRelease (42 ns in parallel); its queueing blocks
// a goroutine per waiter (AcquirePermit), which the proxy's read loops
// cannot afford, and its clock is not injectable.
package limiter

import (
	"testing"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
)

func BenchmarkFailsafeTryAcquireRecord(b *testing.B) {
	l := adaptivelimiter.NewBuilder[any]().WithLimits(1, 100000, 10000).Build()
	b.ReportAllocs()
	for b.Loop() {
		p, ok := l.TryAcquirePermit()
		if !ok {
			b.Fatal("no permit")
		}
		p.Record()
	}
}

func BenchmarkFailsafeTryAcquireRecordParallel(b *testing.B) {
	l := adaptivelimiter.NewBuilder[any]().WithLimits(1, 1000000, 100000).Build()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if p, ok := l.TryAcquirePermit(); ok {
				p.Record()
			}
		}
	})
}
