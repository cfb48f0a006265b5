//go:build race

package stmtstats

// raceEnabled is true under -race, which changes what allocations cost and
// slows the 100,000-string tests tenfold: they measure memory without it.
const raceEnabled = true
