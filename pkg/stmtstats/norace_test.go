//go:build !race

package stmtstats

const raceEnabled = false
