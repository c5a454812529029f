package compare

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func sorted(v []float64) []float64 {
	out := slices.Clone(v)
	slices.Sort(out)
	return out
}

// The Brunner–Munzel example of its reference implementations (scipy.stats.brunnermunzel's
// documentation): W = 3.1374674823029505, two-sided p = 0.0057862086661515377.
func TestBrunnerMunzelReference(t *testing.T) {
	x := sorted([]float64{1, 2, 1, 1, 1, 1, 1, 1, 1, 1, 2, 4, 1, 1})
	y := sorted([]float64{3, 3, 4, 3, 1, 2, 3, 1, 1, 5, 4})
	rt, ok := BrunnerMunzel(x, y)
	if !ok || rt.Statistic == nil || math.Abs(*rt.Statistic-3.1374674823029505) > 1e-12 || math.Abs(rt.P-0.0057862086661515377) > 1e-9 {
		t.Fatalf("%+v (W %v)", rt, *rt.Statistic)
	}
	if math.Abs(rt.PGreater*2-rt.P) > 1e-12 || rt.PLess < 0.99 {
		t.Fatalf("one-sided %g %g", rt.PGreater, rt.PLess)
	}
	// The effect is P(X < Y) + ½P(X = Y), counted pair by pair.
	if want := pairEffect(x, y); math.Abs(rt.Effect-want) > 1e-12 {
		t.Fatalf("effect %g, pairs %g", rt.Effect, want)
	}
	// Swapping the runs flips the statistic and the effect.
	sw, _ := BrunnerMunzel(y, x)
	if math.Abs(*sw.Statistic+*rt.Statistic) > 1e-12 || math.Abs(sw.Effect-(1-rt.Effect)) > 1e-12 {
		t.Fatalf("swapped %+v", sw)
	}
}

func pairEffect(x, y []float64) float64 {
	s := 0.0
	for _, a := range x {
		for _, b := range y {
			switch {
			case a < b:
				s++
			case a == b:
				s += 0.5
			}
		}
	}
	return s / float64(len(x)*len(y))
}

// Degenerate samples: all equal (p = 1), completely separated (the exact permutation
// probability), too small (no test).
func TestBrunnerMunzelDegenerate(t *testing.T) {
	ones := make([]float64, 12)
	for i := range ones {
		ones[i] = 1
	}
	if rt, ok := BrunnerMunzel(ones, ones); !ok || rt.P != 1 || rt.Effect != 0.5 {
		t.Fatalf("equal %+v", rt)
	}
	lo, hi := make([]float64, 10), make([]float64, 10)
	for i := range lo {
		lo[i], hi[i] = float64(i), float64(100+i)
	}
	rt, ok := BrunnerMunzel(lo, hi)
	// 1 / C(20, 10) = 1/184756
	if !ok || rt.Effect != 1 || math.Abs(rt.PGreater-1.0/184756) > 1e-15 || rt.PLess != 1 || rt.DF != nil {
		t.Fatalf("separated %+v", rt)
	}
	if _, ok := BrunnerMunzel(lo[:9], hi); ok {
		t.Fatal("tested 9 values")
	}
}

// Under one distribution the two-sided test rejects at 5% in about 5% of 1,000 seeded
// repeats (unequal sizes); under a shift of half a standard deviation at n = 200 nearly
// always, and in the right direction.
func TestBrunnerMunzelLevelAndPower(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	draw := func(n int, shift float64) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = rng.ExpFloat64()*10 + shift
		}
		return sorted(v)
	}
	rejected := 0
	for range 1000 {
		rt, _ := BrunnerMunzel(draw(60, 0), draw(90, 0))
		if rt.P <= 0.05 {
			rejected++
		}
	}
	if rejected < 25 || rejected > 75 {
		t.Fatalf("rejected %d of 1000 at 5%%", rejected)
	}
	found := 0
	for range 100 {
		rt, _ := BrunnerMunzel(draw(200, 0), draw(200, 5))
		if rt.P <= 0.05 && rt.PGreater < rt.PLess && rt.Effect > 0.5 {
			found++
		}
	}
	if found < 95 {
		t.Fatalf("shift found %d of 100 times", found)
	}
}

func TestHolm(t *testing.T) {
	got := Holm([]float64{0.01, 0.04, 0.03, 0.005})
	want := []float64{0.03, 0.06, 0.06, 0.02}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-15 {
			t.Fatalf("holm %v, want %v", got, want)
		}
	}
	if got := Holm([]float64{0.9, 0.6}); got[0] != 1 || got[1] != 1 {
		t.Fatalf("capped %v", got)
	}
	if len(Holm(nil)) != 0 {
		t.Fatal("empty family")
	}
}

// Newcombe's own example (1998, Table II, 56/70 − 48/80 = 0.2): the hybrid score interval
// is [0.0524, 0.3339].
func TestNewcombeReference(t *testing.T) {
	lo, hi := newcombe(48, 80, 56, 70, zOf(0.95))
	if math.Abs(lo-0.0524) > 5e-5 || math.Abs(hi-0.3339) > 5e-5 {
		t.Fatalf("[%g, %g]", lo, hi)
	}
	// Unknown outcomes widen the interval to cover every way they could have gone.
	b, c := Proportion{Known: 48, Total: 80}, Proportion{Known: 56, Unknown: 4, Total: 70}
	lo2, hi2 := diffBounds(b, c, zOf(0.95))
	if math.Abs(lo2-lo) > 1e-12 || !(hi2 > hi) {
		t.Fatalf("with unknowns [%g, %g]", lo2, hi2)
	}
	// The p-value agrees with the interval: the 95% interval excludes 0, the level where
	// the lower end touches 0 is the one-sided p.
	p := proportionP(Proportion{Known: 48, Total: 80}, Proportion{Known: 56, Total: 70}, 0, false)
	if !(p < 0.025) {
		t.Fatalf("p %g", p)
	}
	l, _ := diffBounds(Proportion{Known: 48, Total: 80}, Proportion{Known: 56, Total: 70}, stdNormal.Quantile(1-p))
	if math.Abs(l) > 1e-9 {
		t.Fatalf("lower end at the p-value's level %g", l)
	}
}

// The quantile-difference interval covers the true difference in at least its confidence
// of seeded repeats (exponential latencies, a true shift of 3 ms at every quantile), and the
// "no rise" test rejects equal distributions in at most α of them.
func TestQuantileDiffCoverage(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	draw := func(n int, shift float64) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = 20 + rng.ExpFloat64()*10 + shift
		}
		return sorted(v)
	}
	const reps = 400
	covered, falseRise := map[string]int{}, 0
	for range reps {
		b, c := draw(300, 0), draw(250, 3)
		for _, l := range []struct {
			key string
			p   float64
		}{{"p50", 0.5}, {"p90", 0.9}} {
			q := quantileDiff(l.key, l.p, b, c, 0.05)
			if !q.Sufficient {
				t.Fatalf("%s insufficient at n=300/250", l.key)
			}
			if *q.DiffLower <= 3 && 3 <= *q.DiffUpper {
				covered[l.key]++
			}
		}
		same := quantileDiff("p50", 0.5, b, draw(250, 0), 0.05)
		if *same.PWorse <= 0.025 {
			falseRise++
		}
	}
	for k, n := range covered {
		if n < reps*95/100 {
			t.Errorf("%s covered the truth %d of %d times", k, n, reps)
		}
	}
	if falseRise > reps*25/1000+5 {
		t.Errorf("one-sided 2.5%% test rejected equal medians %d of %d times", falseRise, reps)
	}
}

// Too few values for an interval: no verdict, n_min stated (p99 needs 471 at 97.5%).
func TestQuantileDiffInsufficient(t *testing.T) {
	v := make([]float64, 100)
	for i := range v {
		v[i] = float64(i)
	}
	q := quantileDiff("p99", 0.99, v, v, 0.05)
	if q.Sufficient || q.Verdict != VerdictInsufficient || q.DiffLower != nil || q.PValue != nil || q.NMin <= 100 {
		t.Fatalf("%+v", q)
	}
	if q.BaseMs == nil || *q.BaseMs != 98.01 {
		t.Fatalf("point %v", q.BaseMs)
	}
}

// exceedsP: far apart samples give a tiny p, equal ones 1; a threshold beyond the observed
// rise gives a large p.
func TestExceedsP(t *testing.T) {
	lo, hi := make([]float64, 500), make([]float64, 500)
	for i := range lo {
		lo[i], hi[i] = float64(i), float64(i)+1000
	}
	bl, _ := newQuantileBounds(lo, 0.5)
	bh, _ := newQuantileBounds(hi, 0.5)
	if p := exceedsP(bh, bl, 1, 0); p > 1e-15 {
		t.Fatalf("far apart p %g", p)
	}
	if p := exceedsP(bl, bl, 1, 0); p != 1 {
		t.Fatalf("same p %g", p)
	}
	// The median rises 250 → 1250 (+400%): a +500% threshold is not exceeded.
	if p := exceedsP(bh, bl, 6, 0); p != 1 {
		t.Fatalf("threshold p %g", p)
	}
	if p := exceedsP(bh, bl, 1, 900); !(p < 1e-4) {
		t.Fatalf("+900 ms p %g", p)
	}
}

func TestSignedFormats(t *testing.T) {
	if got := signedPct(-0.0000107); got != "+0.0%" {
		t.Errorf("signedPct %s", got)
	}
	if got := points(-0.0004); got != "+0.0" {
		t.Errorf("points %s", got)
	}
	if got := signedPct(-0.0123); got != "-1.2%" {
		t.Errorf("signedPct %s", got)
	}
}
