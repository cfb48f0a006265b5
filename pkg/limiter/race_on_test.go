//go:build race

package limiter

// raceEnabled: the simulations, single-goroutine and deterministic, gain
// nothing from the race detector and run 10x slower under it, so they run
// fewer seeds.
const raceEnabled = true
