package roundstats

import (
	"math"
	"testing"
)

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol }

// Reference values computed with mpmath (betainc, regularized), 30 digits.
func TestRegIncBetaAndStudentP(t *testing.T) {
	tests := []struct {
		t, df, p float64
	}{
		{0, 5, 1},
		{2.0, 10, 0.07338803},  // 2*pt(-2, 10)
		{2.776445, 4, 0.05},    // qt(0.975, 4)
		{12.7062, 1, 0.05},     // qt(0.975, 1)
		{-3.5, 7.3, 0.0093431}, // 2*pt(-3.5, 7.3)
		{1.959964, 1e6, 0.05},  // ~normal
	}
	for _, tt := range tests {
		if got := studentTwoSidedP(tt.t, tt.df); !near(got, tt.p, 2e-5) {
			t.Errorf("studentTwoSidedP(%v, %v) = %.7f; want %.7f", tt.t, tt.df, got, tt.p)
		}
	}
	if got := regIncBeta(2, 3, 0.4); !near(got, 0.5248, 1e-9) { // pbeta(0.4, 2, 3)
		t.Errorf("regIncBeta(2, 3, 0.4) = %v; want 0.5248", got)
	}
}

func TestWelchTTestKnownExample(t *testing.T) {
	// Reference: t.test(b, a) with Welch's correction, recomputed with
	// mpmath.
	a := []float64{10000, 10100, 9900, 10050}
	b := []float64{9500, 9450, 9600, 9550}
	w, ok := WelchTTest(a, b)
	if !ok {
		t.Fatal("WelchTTest not ok")
	}
	// mean(a)=10012.5, mean(b)=9525; var(a)=7291.667, var(b)=4166.667
	// se=sqrt(7291.667/4+4166.667/4)=53.5218; t=-487.5/53.5218=-9.1085
	// df=(1822.917+1041.667)^2/(1822.917^2/3+1041.667^2/3)=5.5846
	if !near(w.T, -9.10844, 1e-4) || !near(w.DF, 5.58462, 1e-4) {
		t.Errorf("t=%v df=%v; want -9.10844, 5.58462", w.T, w.DF)
	}
	if !near(w.P, 0.000147287, 1e-8) {
		t.Errorf("p=%v; want 0.000147287", w.P)
	}
}

func TestWelchEdgeCases(t *testing.T) {
	if _, ok := WelchTTest([]float64{1}, []float64{1, 2}); ok {
		t.Error("one round: want not ok")
	}
	w, ok := WelchTTest([]float64{5, 5}, []float64{5, 5})
	if !ok || w.P != 1 {
		t.Errorf("identical constant rounds: p=%v ok=%v; want 1, true", w.P, ok)
	}
	w, ok = WelchTTest([]float64{5, 5}, []float64{6, 6})
	if !ok || w.P != 0 {
		t.Errorf("different constant rounds: p=%v ok=%v; want 0, true", w.P, ok)
	}
}

func TestMannWhitney(t *testing.T) {
	p, _ := MannWhitneyP([]float64{1, 2, 3}, []float64{4, 5, 6})
	if !near(p, 0.1, 1e-12) { // 2 / C(6,3)
		t.Errorf("separated 3+3: p=%v; want 0.1", p)
	}
	p, _ = MannWhitneyP([]float64{1, 2, 3, 4}, []float64{1, 2, 3, 4})
	if p != 1 {
		t.Errorf("identical samples: p=%v; want 1", p)
	}
	// Normal approximation for larger samples: separated 15+15.
	var a, b []float64
	for i := range 15 {
		a = append(a, float64(i))
		b = append(b, float64(100+i))
	}
	p, _ = MannWhitneyP(a, b)
	if p > 1e-4 {
		t.Errorf("separated 15+15: p=%v; want < 1e-4", p)
	}
}

func TestSummarize(t *testing.T) {
	s := Summarize([]float64{2, 4, 4, 4, 5, 5, 7, 9})
	if s.N != 8 || s.Mean != 5 || s.Min != 2 || s.Max != 9 || !near(s.StdDev, 2.138090, 1e-6) {
		t.Errorf("Summarize = %+v", s)
	}
}
