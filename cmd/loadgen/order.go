package main

import "slices"

// roundOrder returns, for each round, the order in which the targets
// (indexes 0..n-1) are measured: as given in even rounds (0-based) and
// reversed in odd ones, so two targets run A B, B A, A B, ... ("ABBA").
// Alternating cancels slow drifts (compaction, JIT, page cache, thermal)
// that would otherwise always favour whichever target runs first.
func roundOrder(n, rounds int) [][]int {
	orders := make([][]int, rounds)
	for r := range orders {
		o := make([]int, n)
		for i := range o {
			o[i] = i
		}
		if r%2 == 1 {
			slices.Reverse(o)
		}
		orders[r] = o
	}
	return orders
}
