package main

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/cqlgate/cqlgate/internal/loadgen/roundstats"
)

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol }

// On synthetic rounds the verdict is what a reader expects: a 10% drop with
// 1% noise is beyond noise; two draws from one distribution are not.
func TestThroughputSignificanceOnSyntheticRounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	draw := func(mean float64, n int) []float64 {
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = mean * (1 + 0.01*rng.NormFloat64())
		}
		return xs
	}

	s := testThroughput(draw(10000, 4), draw(9000, 4))
	if !s.Significant {
		t.Errorf("10%% drop with 1%% noise: not significant (p=%v)", deref(s.P))
	}
	if s.MannWhitneyP == nil || !near(*s.MannWhitneyP, 2.0/70, 1e-12) {
		t.Errorf("Mann-Whitney p = %v; want 2/70 (complete separation, n=4+4)", s.MannWhitneyP)
	}

	// Same distribution: at roundstats.Alpha 0.05 about 5% of trials are false
	// positives; with 200 trials, more than 12% would mean a broken test.
	falsePositives := 0
	const trials = 200
	for range trials {
		if testThroughput(draw(10000, 4), draw(10000, 4)).Significant {
			falsePositives++
		}
	}
	if falsePositives > trials*12/100 {
		t.Errorf("%d/%d false positives at alpha %v", falsePositives, trials, roundstats.Alpha)
	}
}

func TestThroughputSignificanceOfOneRound(t *testing.T) {
	s := testThroughput([]float64{1}, []float64{2})
	if s.P != nil || s.Significant {
		t.Errorf("one round: significance %+v; want no p and not significant", s)
	}
}
