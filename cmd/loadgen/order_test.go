package main

import (
	"reflect"
	"testing"
)

func TestRoundOrderIsABBA(t *testing.T) {
	got := roundOrder(2, 4)
	want := [][]int{{0, 1}, {1, 0}, {0, 1}, {1, 0}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("roundOrder(2, 4) = %v; want %v", got, want)
	}
}

func TestRoundOrderThreeTargets(t *testing.T) {
	got := roundOrder(3, 3)
	want := [][]int{{0, 1, 2}, {2, 1, 0}, {0, 1, 2}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("roundOrder(3, 3) = %v; want %v", got, want)
	}
}

// Over an even number of rounds every target holds every position equally
// often, which is what cancels drift.
func TestRoundOrderBalancesPositions(t *testing.T) {
	const n, rounds = 2, 6
	counts := make([][n]int, n)
	for _, o := range roundOrder(n, rounds) {
		for pos, target := range o {
			counts[target][pos]++
		}
	}
	for target, c := range counts {
		for pos, k := range c {
			if k != rounds/n {
				t.Errorf("target %d ran at position %d %d times; want %d", target, pos, k, rounds/n)
			}
		}
	}
}
