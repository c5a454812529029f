package analyze

import (
	"math"
	"testing"
)

func approx(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestQuantileLinearInterpolation(t *testing.T) {
	vals := make([]float64, 300)
	for i := range vals {
		vals[i] = float64(i + 1)
	}
	cases := []struct {
		name   string
		values []float64
		p      float64
		want   float64
	}{
		{"single", []float64{7}, 0.95, 7},
		{"median even", []float64{1, 2, 3, 4}, 0.5, 2.5},
		{"p0", []float64{1, 2, 3, 4}, 0, 1},
		{"p1", []float64{1, 2, 3, 4}, 1, 4},
		// n=300 p95 of 1..300 is 285.05 (rank 284.05).
		{"n300 p95", vals, 0.95, 285.05},
		// Server p50 of 400/600 ms = 500.
		{"two", []float64{400, 600}, 0.5, 500},
		// Timeouts 59990/60000 → p50 59995.
		{"timeouts", []float64{59990, 60000}, 0.5, 59995},
		{"equal neighbours stay exact", []float64{60000, 60000, 60000}, 0.37, 60000},
	}
	for _, c := range cases {
		got, ok := Quantile(c.values, c.p)
		if !ok || !approx(got, c.want, 1e-9) {
			t.Errorf("%s: Quantile(p=%v) = %v, %v; want %v", c.name, c.p, got, ok, c.want)
		}
	}
	for _, bad := range []float64{-0.1, 1.5, math.NaN()} {
		if _, ok := Quantile([]float64{1, 2}, bad); ok {
			t.Errorf("Quantile(p=%v) accepted", bad)
		}
	}
	if _, ok := Quantile(nil, 0.5); ok {
		t.Error("Quantile of no values accepted")
	}
}

// Hand-computed binomial values: n=20, p=.5: P(N≤5) = 21700/2^20 = 0.0206947,
// P(N≤6) = 60460/2^20 = 0.0576591.
func TestBinomialAgainstHandValues(t *testing.T) {
	b := newBinomial(20, 0.5)
	if got := b.cdf(5); !approx(got, 21700.0/1048576, 1e-12) {
		t.Errorf("P(N<=5) = %v", got)
	}
	if got := b.cdf(6); !approx(got, 60460.0/1048576, 1e-12) {
		t.Errorf("P(N<=6) = %v", got)
	}
	if got := b.sf(15); !approx(got, 21700.0/1048576, 1e-12) {
		t.Errorf("P(N>=15) = %v", got)
	}
	// n=10, p=.1: P(N=0) = .9^10.
	b = newBinomial(10, 0.1)
	if got := b.cdf(0); !approx(got, math.Pow(0.9, 10), 1e-12) {
		t.Errorf("P(N=0) = %v, want %v", got, math.Pow(0.9, 10))
	}
	if got := b.sf(10); !approx(got, 1e-10, 1e-20) {
		t.Errorf("P(N=10) = %v", got)
	}
}

func TestSymmetricRanks(t *testing.T) {
	cases := []struct {
		n    int
		p    float64
		j, k int
	}{
		{300, 0.95, 277, 293}, // the worked example: n=300, p95
		{230, 0.95, 212, 225},
		{20, 0.5, 6, 15},
	}
	for _, c := range cases {
		j, k, cov, ok, err := Ranks(c.n, c.p, DefaultRule)
		if err != nil || !ok || j != c.j || k != c.k {
			t.Errorf("Ranks(%d, %v) = (%d, %d, %v, %v); want (%d, %d)", c.n, c.p, j, k, ok, err, c.j, c.k)
		}
		if cov < 0.95 || cov > 1 {
			t.Errorf("Ranks(%d, %v) coverage %v below the confidence", c.n, c.p, cov)
		}
	}
	// n=20, p=.5 coverage = 1 − 2·P(N≤5) by symmetry.
	_, _, cov, _, _ := Ranks(20, 0.5, DefaultRule)
	if want := 1 - 2*21700.0/1048576; !approx(cov, want, 1e-12) {
		t.Errorf("coverage = %v, want %v", cov, want)
	}
	// N=100 has no p99 interval.
	if _, _, _, ok, _ := Ranks(100, 0.99, DefaultRule); ok {
		t.Error("n=100 p99 has an interval")
	}
}

func TestNarrowestLeBoudec(t *testing.T) {
	// Le Boudec: n=59, p=.95 → [X(50), X(59)], coverage ≈ 0.9509.
	j, k, cov, ok, err := Ranks(59, 0.95, existsRule)
	if err != nil || !ok || j != 50 || k != 59 || !approx(cov, 0.9509, 5e-4) {
		t.Fatalf("narrowest(59, .95) = (%d, %d, %v, %v, %v)", j, k, cov, ok, err)
	}
	if _, _, _, ok, _ := Ranks(58, 0.95, existsRule); ok {
		t.Error("narrowest(58, .95) exists")
	}
}

func TestMinimumNTables(t *testing.T) {
	type row struct {
		p    float64
		want int
	}
	tables := []struct {
		name string
		rule Rule
		rows []row
	}{
		{"symmetric margin 5", DefaultRule, []row{{0.5, 20}, {0.75, 44}, {0.9, 114}, {0.95, 230}, {0.99, 1164}, {0.999, 11665}}},
		{"symmetric margin 0", Rule{0.95, 0, TailsSymmetric}, []row{{0.5, 6}, {0.75, 13}, {0.9, 36}, {0.95, 72}, {0.99, 368}, {0.999, 3688}}},
		{"narrowest margin 0", existsRule, []row{{0.5, 6}, {0.95, 59}, {0.99, 299}, {0.999, 2995}}},
	}
	for _, tab := range tables {
		for _, r := range tab.rows {
			got, err := MinimumN(r.p, tab.rule)
			if err != nil || got != r.want {
				t.Errorf("%s: MinimumN(%v) = %d, %v; want %d", tab.name, r.p, got, err, r.want)
				continue
			}
			// The derivation is exact: no interval one below, one at n_min.
			if _, _, _, ok := ranks(got-1, r.p, tab.rule); ok {
				t.Errorf("%s: an interval exists at n_min-1 = %d for p=%v", tab.name, got-1, r.p)
			}
			if _, _, _, ok := ranks(got, r.p, tab.rule); !ok {
				t.Errorf("%s: no interval at n_min = %d for p=%v", tab.name, got, r.p)
			}
		}
	}
}

// Sufficiency flips exactly at 229→230 (p95) and 1163→1164 (p99).
func TestSufficiencyFlips(t *testing.T) {
	for _, c := range []struct {
		p         float64
		below, at int
	}{{0.95, 229, 230}, {0.99, 1163, 1164}} {
		lo := EstimateSuccessful(make([]float64, c.below), c.p, DefaultRule)
		hi := EstimateSuccessful(make([]float64, c.at), c.p, DefaultRule)
		if lo.Sufficient || !hi.Sufficient || lo.Interval != nil || hi.Interval == nil {
			t.Errorf("p=%v: sufficient at %d = %v, at %d = %v", c.p, c.below, lo.Sufficient, c.at, hi.Sufficient)
		}
	}
}

// Levels 0, 1, −0.1, 1.5 and bad rules are rejected.
func TestMinimumNRejects(t *testing.T) {
	for _, p := range []float64{0, 1, -0.1, 1.5, math.NaN()} {
		if _, err := MinimumN(p, DefaultRule); err == nil {
			t.Errorf("MinimumN(%v) accepted", p)
		}
	}
	for _, r := range []Rule{{0, 5, TailsSymmetric}, {1, 5, TailsSymmetric}, {0.95, -1, TailsSymmetric}, {0.95, 0, "both"}} {
		if _, err := MinimumN(0.5, r); err == nil {
			t.Errorf("MinimumN with rule %+v accepted", r)
		}
		if _, _, _, _, err := Ranks(100, 0.5, r); err == nil {
			t.Errorf("Ranks with rule %+v accepted", r)
		}
	}
}

// Ranks do not depend on the data values.
func TestRanksIndependentOfData(t *testing.T) {
	n := 300
	sorted := make([]float64, n)
	reversed := make([]float64, n)
	squared := make([]float64, n)
	for i := 0; i < n; i++ {
		sorted[i] = float64(i + 1)
		reversed[i] = float64(n - i)
		squared[i] = float64((i + 1) * (i + 1))
	}
	a := EstimateSuccessful(sorted, 0.95, DefaultRule)
	b := EstimateSuccessful(reversed, 0.95, DefaultRule)
	c := EstimateSuccessful(squared, 0.95, DefaultRule)
	for _, e := range []Estimate{a, b, c} {
		if e.Interval == nil || e.Interval.LowerRank != 277 || e.Interval.UpperRank != 293 {
			t.Fatalf("interval = %+v", e.Interval)
		}
	}
	if a.Interval.LowerMs != 277 || *a.Interval.UpperMs != 293 || *a.Interval.WidthMs != 16 {
		t.Errorf("interval values = %+v", a.Interval)
	}
	if c.Interval.LowerMs != 277*277 {
		t.Errorf("squared lower = %v", c.Interval.LowerMs)
	}
}

// Large n stays fast and sane: the binomial window, not n, sets the cost.
func TestRanksLargeN(t *testing.T) {
	j, k, cov, ok, err := Ranks(1_000_000, 0.5, DefaultRule)
	if err != nil || !ok || cov < 0.95 || j >= 500_000 || k <= 500_000 || k-j > 2500 {
		t.Errorf("Ranks(1e6, .5) = %d, %d, %v, %v, %v", j, k, cov, ok, err)
	}
	// Symmetric around the median: j − 1 = n − k.
	if j-1 != 1_000_000-k {
		t.Errorf("median ranks not symmetric: %d, %d", j, k)
	}
}

func BenchmarkRanks1e6(b *testing.B) {
	for i := 0; i < b.N; i++ {
		ranks(1_000_000, 0.99, DefaultRule)
	}
}

// directCDFs returns P(N ≤ b) for b = 0..n, N ~ Binomial(n, p), each term from log-gamma:
// an independent route to the numbers the windowed recurrence computes.
func directCDFs(n int, p float64) []float64 {
	out := make([]float64, n+1)
	ln, _ := math.Lgamma(float64(n + 1))
	sum := 0.0
	for k := 0; k <= n; k++ {
		lk, _ := math.Lgamma(float64(k + 1))
		lnk, _ := math.Lgamma(float64(n - k + 1))
		sum += math.Exp(ln - lk - lnk + float64(k)*math.Log(p) + float64(n-k)*math.Log(1-p))
		out[k] = sum
	}
	return out
}

// The symmetric ranks follow their definition for every n up to 400 at the report's levels.
func TestSymmetricRanksAgainstDefinition(t *testing.T) {
	for _, p := range []float64{0.5, 0.75, 0.9, 0.95, 0.99} {
		for n := 1; n <= 400; n++ {
			cdf := directCDFs(n, p)
			// j−1 = max{b ≥ 0 : P(N ≤ b) ≤ .025}; k = min{k : P(N ≥ k) ≤ .025}.
			below := -1
			for b := 0; b <= n && cdf[b] <= 0.025; b++ {
				below = b
			}
			k := n + 1
			for k-1 >= 1 && 1-cdf[k-2] <= 0.025 {
				k--
			}
			wantOK := below+1 >= 1 && k <= n-5
			j, gotK, cov, ok := ranks(n, p, DefaultRule)
			if ok != wantOK || (ok && (j != below+1 || gotK != k)) {
				t.Fatalf("n=%d p=%v: ranks (%d, %d, %v), want (%d, %d, %v)", n, p, j, gotK, ok, below+1, k, wantOK)
			}
			if ok {
				want := cdf[k-1] - cdf[j-1]
				if !approx(cov, want, 1e-9) || cov < 0.95 {
					t.Fatalf("n=%d p=%v: coverage %v, want %v", n, p, cov, want)
				}
			}
		}
	}
}
