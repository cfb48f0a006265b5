// Package roundstats compares two targets' per-round throughputs: it
// summarizes each sample (mean, standard deviation, range) and tests
// whether their difference is beyond round-to-round noise. Rounds are few
// (4 by default), so both a parametric test (Welch) and an exact rank test
// (Mann-Whitney) are given: they disagree mostly when one round is an
// outlier.
//
// It owns the arithmetic only: plain float64 samples in, numbers out. It
// must not measure, know about requests or histograms, or decide how a
// report words its verdict.
package roundstats

import (
	"math"
	"slices"
)

// Alpha is the significance level of the verdict.
const Alpha = 0.05

// Summary describes a sample of per-round throughputs.
type Summary struct {
	N      int     `json:"n"`
	Mean   float64 `json:"mean"`
	StdDev float64 `json:"stddev"` // sample standard deviation; 0 when N < 2
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// Summarize describes xs; the zero Summary (with N 0) when xs is empty.
func Summarize(xs []float64) Summary {
	s := Summary{N: len(xs)}
	if len(xs) == 0 {
		return s
	}
	s.Min, s.Max = slices.Min(xs), slices.Max(xs)
	s.Mean = mean(xs)
	s.StdDev = math.Sqrt(variance(xs))
	return s
}

func mean(xs []float64) float64 {
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// variance is the unbiased sample variance; 0 when there are fewer than two
// values.
func variance(xs []float64) float64 {
	if len(xs) < 2 {
		return 0
	}
	m := mean(xs)
	var ss float64
	for _, x := range xs {
		ss += (x - m) * (x - m)
	}
	return ss / float64(len(xs)-1)
}

// Welch is the result of Welch's unequal-variances t-test.
type Welch struct {
	T  float64 // positive when b's mean is above a's
	DF float64 // Welch–Satterthwaite degrees of freedom
	P  float64 // two-sided
}

// WelchTTest compares the means of a and b. ok is false when the test is
// undefined (fewer than two values on a side).
func WelchTTest(a, b []float64) (w Welch, ok bool) {
	if len(a) < 2 || len(b) < 2 {
		return Welch{}, false
	}
	va, vb := variance(a)/float64(len(a)), variance(b)/float64(len(b))
	diff := mean(b) - mean(a)
	se2 := va + vb
	if se2 == 0 {
		// Identical rounds on both sides: the difference, if any, is
		// certain; none is no evidence of a difference.
		if diff == 0 {
			return Welch{P: 1, DF: float64(len(a) + len(b) - 2)}, true
		}
		return Welch{T: math.Copysign(math.Inf(1), diff), P: 0, DF: float64(len(a) + len(b) - 2)}, true
	}
	w.T = diff / math.Sqrt(se2)
	w.DF = se2 * se2 / (va*va/float64(len(a)-1) + vb*vb/float64(len(b)-1))
	w.P = studentTwoSidedP(w.T, w.DF)
	return w, true
}

// studentTwoSidedP is P(|T| >= |t|) for Student's t with df degrees of
// freedom, via the regularized incomplete beta function.
func studentTwoSidedP(t, df float64) float64 {
	return regIncBeta(df/2, 0.5, df/(df+t*t))
}

// regIncBeta is the regularized incomplete beta function I_x(a, b),
// evaluated by Lentz's continued fraction (Numerical Recipes, betacf).
func regIncBeta(a, b, x float64) float64 {
	switch {
	case x <= 0:
		return 0
	case x >= 1:
		return 1
	}
	lbeta := func(a, b float64) float64 {
		la, _ := math.Lgamma(a)
		lb, _ := math.Lgamma(b)
		lab, _ := math.Lgamma(a + b)
		return la + lb - lab
	}
	front := math.Exp(a*math.Log(x) + b*math.Log1p(-x) - lbeta(a, b))
	// The fraction converges fast for x < (a+1)/(a+b+2); use the symmetry
	// I_x(a,b) = 1 - I_{1-x}(b,a) on the other side.
	if x > (a+1)/(a+b+2) {
		return 1 - front*betaContinuedFraction(b, a, 1-x)/b
	}
	return front * betaContinuedFraction(a, b, x) / a
}

func betaContinuedFraction(a, b, x float64) float64 {
	const (
		maxIter = 300
		eps     = 1e-15
		tiny    = 1e-300
	)
	c, d := 1.0, 1-(a+b)*x/(a+1)
	if math.Abs(d) < tiny {
		d = tiny
	}
	d = 1 / d
	h := d
	for m := 1; m <= maxIter; m++ {
		fm := float64(m)
		for _, num := range [2]float64{
			fm * (b - fm) * x / ((a + 2*fm - 1) * (a + 2*fm)),
			-(a + fm) * (a + b + fm) * x / ((a + 2*fm) * (a + 2*fm + 1)),
		} {
			d = 1 + num*d
			if math.Abs(d) < tiny {
				d = tiny
			}
			c = 1 + num/c
			if math.Abs(c) < tiny {
				c = tiny
			}
			d = 1 / d
			h *= d * c
		}
		if math.Abs(d*c-1) < eps {
			break
		}
	}
	return h
}

// exactRankLimit bounds the exact Mann-Whitney enumeration: C(20,10) is
// under 200k subsets. Beyond it the normal approximation is good.
const exactRankLimit = 20

// MannWhitneyP is the two-sided p-value of the Mann-Whitney U test (rank
// sum test) of a against b. Ties get mid-ranks. Small samples are tested
// exactly by enumerating every assignment of the pooled ranks; larger ones
// by the normal approximation with tie correction.
func MannWhitneyP(a, b []float64) (p float64, ok bool) {
	n1, n2 := len(a), len(b)
	if n1 == 0 || n2 == 0 {
		return 0, false
	}
	ranks := midRanks(append(slices.Clone(a), b...))
	var ra float64 // rank sum of a
	for _, r := range ranks[:n1] {
		ra += r
	}
	n := n1 + n2
	expected := float64(n1) * float64(n+1) / 2
	dev := math.Abs(ra - expected)

	if n <= exactRankLimit {
		// Count the n1-subsets of ranks whose sum is at least as far from
		// its expectation as the observed one.
		var extreme, total int
		const slack = 1e-9 // mid-ranks are halves; compare with slack
		forEachSubsetSum(ranks, n1, func(sum float64) {
			total++
			if math.Abs(sum-expected) >= dev-slack {
				extreme++
			}
		})
		return float64(extreme) / float64(total), true
	}

	var tieTerm float64
	for _, t := range tieSizes(ranks) {
		tieTerm += float64(t*t*t - t)
	}
	nf := float64(n)
	sd := math.Sqrt(float64(n1) * float64(n2) / 12 * ((nf + 1) - tieTerm/(nf*(nf-1))))
	if sd == 0 {
		return 1, true
	}
	z := (dev - 0.5) / sd // continuity correction
	if z < 0 {
		z = 0
	}
	return math.Erfc(z / math.Sqrt2), true
}

// midRanks returns the 1-based rank of each value, ties sharing the mean of
// their ranks.
func midRanks(xs []float64) []float64 {
	idx := make([]int, len(xs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(i, j int) int {
		switch {
		case xs[i] < xs[j]:
			return -1
		case xs[i] > xs[j]:
			return 1
		}
		return 0
	})
	ranks := make([]float64, len(xs))
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && xs[idx[j+1]] == xs[idx[i]] {
			j++
		}
		r := float64(i+j)/2 + 1
		for k := i; k <= j; k++ {
			ranks[idx[k]] = r
		}
		i = j + 1
	}
	return ranks
}

func tieSizes(ranks []float64) []int {
	counts := map[float64]int{}
	for _, r := range ranks {
		counts[r]++
	}
	var sizes []int
	for _, c := range counts {
		if c > 1 {
			sizes = append(sizes, c)
		}
	}
	return sizes
}

// forEachSubsetSum calls f with the sum of every k-element subset of xs.
func forEachSubsetSum(xs []float64, k int, f func(float64)) {
	var rec func(start, left int, sum float64)
	rec = func(start, left int, sum float64) {
		if left == 0 {
			f(sum)
			return
		}
		for i := start; i <= len(xs)-left; i++ {
			rec(i+1, left-1, sum+xs[i])
		}
	}
	rec(0, k, 0)
}
