//go:build race

package frame

// raceEnabled is true under -race, where sync.Pool drops items at random and
// allocation counts are meaningless.
const raceEnabled = true
