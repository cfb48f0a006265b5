package speculative

// The hedge budget of failsafe-go (budget package, v0.9.8), which Budget
// was measured against. It is as cheap and allocation-free, but it is not
// what the proxy needs:
//
//   - it bounds hedges in flight as a share of executions in flight
//     (inflight/executions > maxRate refuses), not hedges as a share of
//     requests over a recent window; every execution must be recorded and
//     released, so the proxy would pay two atomics per request on the
//     shared counter instead of one;
//   - its permit methods (TryAcquirePermit, ReleasePermit, RecordExecution)
//     are not in its exported Budget interface, which only has Rate(): the
//     proxy would depend on a type assertion to an unexported type;
//   - it cannot be paused while the limiter rejects.

import (
	"testing"

	"github.com/failsafe-go/failsafe-go/budget"
)

// failsafePermits is the unexported surface of failsafe-go's budget.
type failsafePermits interface {
	RecordExecution()
	ReleaseExecution()
	TryAcquirePermit() bool
	ReleasePermit()
}

// BenchmarkFailsafeBudget does what BenchmarkBudget does through
// failsafe-go: every request recorded (and released), one in 20 tries a
// hedge (and releases it).
func BenchmarkFailsafeBudget(b *testing.B) {
	bu, ok := budget.NewBuilder().WithMaxRate(0.05).WithMinConcurrency(10).Build().(failsafePermits)
	if !ok {
		b.Skip("failsafe-go's budget no longer has the permit methods")
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		bu.RecordExecution()
		if i%20 == 0 && bu.TryAcquirePermit() {
			bu.ReleasePermit()
		}
		bu.ReleaseExecution()
		i++
	}
}
