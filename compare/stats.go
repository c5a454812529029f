package compare

import (
	"math"
	"sort"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/inferprobe/inferprobe/analyze"
)

// MinRankSample is the smallest sample per run for the rank test: below it the
// Brunner–Munzel statistic's t approximation is not trusted (its authors advise a
// permutation test there), so the metric's verdict is "insufficient sample".
const MinRankSample = 10

// RankTest is the Brunner–Munzel test of two independent samples: Effect is the estimated
// probability p̂ = P(B < C) + ½·P(B = C) that a candidate value exceeds a base value (½: no
// shift; for a latency, above ½ means the candidate is slower), Statistic the test statistic
// W, DF its Welch–Satterthwaite degrees of freedom (null for complete separation), and
// PGreater, PLess, P the one-sided p-values (candidate larger, smaller) and the two-sided one.
// JSON: {n_base, n_candidate, effect, statistic, df, p_greater, p_less, p}.
type RankTest struct {
	NBase      int      `json:"n_base"`
	NCandidate int      `json:"n_candidate"`
	Effect     float64  `json:"effect"`
	Statistic  *float64 `json:"statistic"`
	DF         *float64 `json:"df"`
	PGreater   float64  `json:"p_greater"`
	PLess      float64  `json:"p_less"`
	P          float64  `json:"p"`
}

// BrunnerMunzel tests whether candidate values tend to be larger or smaller than base values
// (H0: p̂ = ½), without assuming equal variances or shapes (Brunner and Munzel, 2000): with
// pooled midranks R, within-sample midranks R⁽ⁱ⁾ and nᵢ values in sample i,
//
//	Sᵢ² = Σ (R − R⁽ⁱ⁾ − mean(R) + (nᵢ+1)/2)² / (nᵢ − 1)
//	W   = n_B·n_C·(mean R_C − mean R_B) / ((n_B+n_C)·√(n_B·S_B² + n_C·S_C²))
//	df  = (n_B·S_B² + n_C·S_C²)² / ((n_B·S_B²)²/(n_B−1) + (n_C·S_C²)²/(n_C−1))
//
// and p from Student's t with df. When both Sᵢ² are 0 the samples are either all equal (p =
// 1) or completely separated; then the exact permutation probability of that separation,
// 1/C(n_B+n_C, n_B), is the one-sided p. base and candidate must be sorted ascending,
// finite; ok is false when either holds fewer than MinRankSample values. Time: one merge of
// the two sorted samples, twice.
func BrunnerMunzel(base, candidate []float64) (RankTest, bool) {
	nb, nc := len(base), len(candidate)
	t := RankTest{NBase: nb, NCandidate: nc, Effect: 0.5, PGreater: 1, PLess: 1, P: 1}
	if nb < MinRankSample || nc < MinRankSample {
		return t, false
	}
	// First pass: the mean of R − R⁽ⁱ⁾ per sample (placements).
	var sumB, sumC float64
	mergeRuns(base, candidate, func(cb, cc int, dB, dC float64) {
		sumB += float64(cb) * dB
		sumC += float64(cc) * dC
	})
	meanB, meanC := sumB/float64(nb), sumC/float64(nc)
	var ssB, ssC float64
	mergeRuns(base, candidate, func(cb, cc int, dB, dC float64) {
		if cb > 0 {
			ssB += float64(cb) * (dB - meanB) * (dB - meanB)
		}
		if cc > 0 {
			ssC += float64(cc) * (dC - meanC) * (dC - meanC)
		}
	})
	sB, sC := ssB/float64(nb-1), ssC/float64(nc-1)
	// mean R_i = mean placement + (nᵢ+1)/2
	rB, rC := meanB+float64(nb+1)/2, meanC+float64(nc+1)/2
	t.Effect = (rC - float64(nc+1)/2) / float64(nb)
	v := float64(nb)*sB + float64(nc)*sC
	n := float64(nb + nc)
	if v <= 0 {
		if rC == rB {
			return t, true
		}
		lnC, _ := math.Lgamma(n + 1)
		lb, _ := math.Lgamma(float64(nb) + 1)
		lc, _ := math.Lgamma(float64(nc) + 1)
		p1 := math.Exp(lb + lc - lnC)
		if rC > rB {
			t.PGreater = p1
		} else {
			t.PLess = p1
		}
		t.P = math.Min(1, 2*p1)
		return t, true
	}
	w := float64(nb) * float64(nc) * (rC - rB) / (n * math.Sqrt(v))
	df := v * v / (sq(float64(nb)*sB)/float64(nb-1) + sq(float64(nc)*sC)/float64(nc-1))
	dist := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}
	t.Statistic, t.DF = &w, &df
	t.PLess = dist.CDF(w)
	t.PGreater = dist.Survival(w)
	t.P = math.Min(1, 2*math.Min(t.PLess, t.PGreater))
	return t, true
}

func sq(v float64) float64 { return v * v }

// mergeRuns walks the distinct values of two sorted samples in ascending order and calls f
// for each with its copies in each sample (cb, cc) and the placement R − R⁽ⁱ⁾ of those
// copies in each (pooled midrank minus within-sample midrank; meaningful only where the
// count is positive).
func mergeRuns(b, c []float64, f func(cb, cc int, dB, dC float64)) {
	i, j := 0, 0
	for i < len(b) || j < len(c) {
		var v float64
		switch {
		case j >= len(c) || (i < len(b) && b[i] <= c[j]):
			v = b[i]
		default:
			v = c[j]
		}
		i0, j0 := i, j
		for i < len(b) && b[i] == v {
			i++
		}
		for j < len(c) && c[j] == v {
			j++
		}
		cb, cc := i-i0, j-j0
		// pooled ranks of the run: i0+j0+1 … i+j; within-sample: i0+1 … i, j0+1 … j
		pooled := float64(i0+j0) + float64(cb+cc+1)/2
		f(cb, cc, pooled-(float64(i0)+float64(cb+1)/2), pooled-(float64(j0)+float64(cc+1)/2))
	}
}

// Holm returns Holm's step-down adjusted p-values of a family of tests, in the order given:
// with the p-values sorted ascending p₍₁₎ ≤ … ≤ p₍ₘ₎, adjusted p₍ᵢ₎ = max over k ≤ i of
// min(1, (m − k + 1)·p₍ₖ₎). Rejecting every test whose adjusted p is at most α keeps the
// probability of any false rejection in the family at most α, whatever the tests'
// dependence (Holm, 1979).
func Holm(p []float64) []float64 {
	m := len(p)
	order := make([]int, m)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return p[order[a]] < p[order[b]] })
	out := make([]float64, m)
	running := 0.0
	for rank, i := range order {
		running = math.Max(running, math.Min(1, float64(m-rank)*p[i]))
		out[i] = running
	}
	return out
}

// wilson is the Wilson score interval of x successes in n trials at normal quantile z.
func wilson(x, n int, z float64) (lo, hi float64) {
	if n == 0 {
		return 0, 1
	}
	nf := float64(n)
	p := float64(x) / nf
	d := 1 + z*z/nf
	center := (p + z*z/(2*nf)) / d
	half := z * math.Sqrt(p*(1-p)/nf+z*z/(4*nf*nf)) / d
	return math.Max(0, center-half), math.Min(1, center+half)
}

// newcombe is Newcombe's hybrid score interval (his method 10) for p₂ − p₁, with p₁ = x1/n1
// and p₂ = x2/n2, from each proportion's Wilson interval (l, u) at normal quantile z:
// [d − √((p₂−l₂)² + (u₁−p₁)²), d + √((u₂−p₂)² + (p₁−l₁)²)].
func newcombe(x1, n1, x2, n2 int, z float64) (lo, hi float64) {
	p1, p2 := float64(x1)/float64(n1), float64(x2)/float64(n2)
	l1, u1 := wilson(x1, n1, z)
	l2, u2 := wilson(x2, n2, z)
	d := p2 - p1
	return d - math.Sqrt(sq(p2-l2)+sq(u1-p1)), d + math.Sqrt(sq(u2-p2)+sq(p1-l1))
}

// Proportion is a count out of a total with some outcomes unknown: between Known/Total and
// (Known+Unknown)/Total (an SLO's met requests; unknown: requests whose value was missing).
type Proportion struct {
	Known, Unknown, Total int
}

func (p Proportion) lower() float64 { return float64(p.Known) / float64(p.Total) }
func (p Proportion) upper() float64 { return float64(p.Known+p.Unknown) / float64(p.Total) }

// diffBounds is the interval for candidate − base at normal quantile z: Newcombe's lower
// end with the candidate's unknowns as misses and the base's as hits, and his upper end the
// other way round, so the interval holds whatever the unknown outcomes were.
func diffBounds(base, cand Proportion, z float64) (lo, hi float64) {
	lo, _ = newcombe(base.Known+base.Unknown, base.Total, cand.Known, cand.Total, z)
	_, hi = newcombe(base.Known, base.Total, cand.Known+cand.Unknown, cand.Total, z)
	return lo, hi
}

var stdNormal = distuv.UnitNormal

// zOf is the normal quantile of a two-sided confidence level.
func zOf(confidence float64) float64 { return stdNormal.Quantile(1 - (1-confidence)/2) }

// proportionP returns the one-sided p-value of "candidate − base < −drop" (below: the
// candidate lost more than drop) or of "candidate − base > rise" (!below), by the interval:
// the smallest one-sided level α at which the Newcombe bound (z = Φ⁻¹(1−α)) excludes the
// threshold, found by bisection on z (the bounds are monotone in z). 1 when no level does.
func proportionP(base, cand Proportion, threshold float64, below bool) float64 {
	excludes := func(z float64) bool {
		lo, hi := diffBounds(base, cand, z)
		if below {
			return hi < threshold
		}
		return lo > threshold
	}
	if !excludes(0) {
		return 1
	}
	lo, hi := 0.0, 40.0
	if excludes(hi) {
		return stdNormal.Survival(hi)
	}
	for range 60 {
		mid := (lo + hi) / 2
		if excludes(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return stdNormal.Survival(lo)
}

// quantileBounds are the order-statistic bounds of one run's p-quantile (analyze's
// binomial rule, analyze.OrderBounds).
type quantileBounds struct {
	values []float64 // sorted
	ob     analyze.OrderBounds
}

func newQuantileBounds(sorted []float64, p float64) (quantileBounds, bool) {
	ob, ok := analyze.NewOrderBounds(len(sorted), p)
	return quantileBounds{values: sorted, ob: ob}, ok
}

// lower is the order statistic below the quantile with probability at least 1 − a.
func (q quantileBounds) lower(a float64) (float64, bool) {
	j, ok := q.ob.Lower(a)
	if !ok {
		return 0, false
	}
	return q.values[j-1], true
}

// upper is the order statistic above the quantile with probability at least 1 − a.
func (q quantileBounds) upper(a float64) (float64, bool) {
	k, ok := q.ob.Upper(a)
	if !ok {
		return 0, false
	}
	return q.values[k-1], true
}

// exceedsP is the one-sided p-value of H0: q_hi ≤ scale·q_lo + shift against q_hi being
// larger, from order statistics alone: at level α the test rejects when the hi run's lower
// bound X_hi(j) (tail α/2) exceeds scale × the lo run's upper bound X_lo(k) (tail α/2) +
// shift. Under H0 a rejection needs X_hi(j) > q_hi or X_lo(k) < q_lo, so its probability is
// at most α/2 + α/2 whatever the distributions (Bonferroni; independence is not needed). The
// ranks move monotonically with α, so the p-value — the smallest α that rejects — is found
// by bisection (on log α, down to 1e-16). 1 when even α = 1 does not reject or a run is too
// small to bound at all.
func exceedsP(hi, lo quantileBounds, scale, shift float64) float64 {
	rejects := func(alpha float64) bool {
		h, ok1 := hi.lower(alpha / 2)
		l, ok2 := lo.upper(alpha / 2)
		return ok1 && ok2 && h > scale*l+shift
	}
	if !rejects(1) {
		return 1
	}
	a, b := -16.0, 0.0 // log10 α: rejects at 10^b, test 10^a
	if rejects(math.Pow(10, a)) {
		return 1e-16
	}
	for range 50 {
		mid := (a + b) / 2
		if rejects(math.Pow(10, mid)) {
			b = mid
		} else {
			a = mid
		}
	}
	return math.Pow(10, b)
}
