//go:build race

package fleetsim

// raceEnabled: a simulation runs in one goroutine on a virtual clock, so
// the race detector finds nothing in it and makes it 10-20x slower; the
// longest ones skip under it and run in make test's pass without -race.
const raceEnabled = true
