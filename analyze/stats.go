package analyze

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
)

// Quantile returns the p-quantile of sorted (ascending) by linear interpolation between order
// statistics: rank = p·(n−1), value = v[⌊rank⌋] + (rank−⌊rank⌋)·(v[⌊rank⌋+1] − v[⌊rank⌋]).
// This is the one percentile rule of the whole report. ok is false when
// sorted is empty or p is outside [0, 1] (or NaN). The caller must pass sorted values.
func Quantile(sorted []float64, p float64) (value float64, ok bool) {
	n := len(sorted)
	if n == 0 || !(p >= 0 && p <= 1) {
		return 0, false
	}
	rank := p * float64(n-1)
	lower := int(math.Floor(rank))
	if lower >= n-1 {
		return sorted[n-1], true
	}
	weight := rank - float64(lower)
	a, b := sorted[lower], sorted[lower+1]
	if weight == 0 || a == b {
		return a, true
	}
	return a + weight*(b-a), true
}

// quantilePtr is Quantile as a nullable value.
func quantilePtr(sorted []float64, p float64) *float64 {
	v, ok := Quantile(sorted, p)
	if !ok {
		return nil
	}
	return &v
}

// Tails names how an order-statistic interval's two ranks are chosen.
type Tails string

const (
	// TailsSymmetric: each tail at most (1−confidence)/2 — the project-wide sufficiency rule.
	TailsSymmetric Tails = "symmetric"
	// TailsNarrowest: the narrowest ranks reaching the confidence (Le Boudec's own tables).
	TailsNarrowest Tails = "narrowest"
)

// Rule says which order-statistic interval must exist for a quantile to count as sufficient:
// its confidence (strictly between 0 and 1), how many order statistics must remain above its
// upper rank (Margin ≥ 0), and how its tails are chosen. JSON: {confidence, margin, tails}.
type Rule struct {
	Confidence float64 `json:"confidence"`
	Margin     int     `json:"margin"`
	Tails      Tails   `json:"tails"`
}

// DefaultRule is the report's rule: symmetric 95% interval with 5 order statistics above it.
// Its minimum sample sizes are p50 20, p75 44, p90 114, p95 230, p99 1,164 and p99.9 11,665.
var DefaultRule = Rule{Confidence: 0.95, Margin: 5, Tails: TailsSymmetric}

// existsRule is Le Boudec's: the narrowest interval, nothing required above it. Its minimum
// sample sizes (n_min_exists) are p50 6, p95 59, p99 299, p99.9 2,995.
var existsRule = Rule{Confidence: 0.95, Margin: 0, Tails: TailsNarrowest}

// Validate reports whether the rule can be used: confidence in (0, 1), margin ≥ 0, and a known
// tails kind.
func (r Rule) Validate() error {
	if !(r.Confidence > 0 && r.Confidence < 1) {
		return errors.New("confidence must be between 0 and 1")
	}
	if r.Margin < 0 {
		return errors.New("margin must be >= 0")
	}
	if r.Tails != TailsSymmetric && r.Tails != TailsNarrowest {
		return fmt.Errorf("tails must be %q or %q", TailsSymmetric, TailsNarrowest)
	}
	return nil
}

func checkLevel(p float64) error {
	if !(p > 0 && p < 1) {
		return errors.New("the quantile level must be between 0 and 1")
	}
	return nil
}

// binomial holds Binomial(n, p) probabilities over a window [lo, hi] that carries all but a
// negligible (< 1e-30 relative to the mode) part of the mass; outside it the distribution
// function is taken as 0 below and 1 above. Both tails are summed from their far ends, so
// small tail probabilities keep their relative precision.
type binomial struct {
	n, lo, hi int
	below     []float64 // below[i] = P(N ≤ lo+i)
	above     []float64 // above[i] = P(N ≥ lo+i)
}

const negligible = 1e-30

func newBinomial(n int, p float64) *binomial {
	mode := int(math.Floor(float64(n+1) * p))
	if mode > n {
		mode = n
	}
	q := 1 - p
	// Relative probabilities, walking out from the mode with the pmf recurrence.
	var down []float64 // down[i] = pmf(mode-1-i)/pmf(mode)
	term := 1.0
	for k := mode; k > 0; k-- {
		term *= float64(k) / float64(n-k+1) * q / p
		if term < negligible {
			break
		}
		down = append(down, term)
	}
	var up []float64 // up[i] = pmf(mode+1+i)/pmf(mode)
	term = 1.0
	for k := mode; k < n; k++ {
		term *= float64(n-k) / float64(k+1) * p / q
		if term < negligible {
			break
		}
		up = append(up, term)
	}
	lo := mode - len(down)
	hi := mode + len(up)
	rel := make([]float64, hi-lo+1)
	for i, v := range down {
		rel[mode-1-i-lo] = v
	}
	rel[mode-lo] = 1
	for i, v := range up {
		rel[mode+1+i-lo] = v
	}
	b := &binomial{n: n, lo: lo, hi: hi, below: make([]float64, len(rel)), above: make([]float64, len(rel))}
	total := 0.0
	for i, v := range rel {
		total += v
		b.below[i] = total
	}
	sum := 0.0
	for i := len(rel) - 1; i >= 0; i-- {
		sum += rel[i]
		b.above[i] = sum
	}
	// Normalise by the summed mass: the mode's absolute probability is never needed.
	for i := range rel {
		b.below[i] /= total
		b.above[i] /= sum
	}
	return b
}

// cdf returns P(N ≤ k).
func (b *binomial) cdf(k int) float64 {
	switch {
	case k < b.lo:
		return 0
	case k >= b.hi:
		return 1
	}
	return b.below[k-b.lo]
}

// sf returns P(N ≥ k).
func (b *binomial) sf(k int) float64 {
	switch {
	case k <= b.lo:
		return 1
	case k > b.hi:
		return 0
	}
	return b.above[k-b.lo]
}

// coverage returns P(j ≤ N < k) = B(k−1) − B(j−1): the probability that [X(j), X(k)] covers
// the p-quantile (Le Boudec Thm 2.1), computed from both tails so it keeps its precision.
func (b *binomial) coverage(j, k int) float64 {
	c := 1 - b.cdf(j-1) - b.sf(k)
	if c < 0 {
		return 0
	}
	return c
}

// Ranks returns the 1-based order-statistic ranks (j, k) of rule's confidence interval for
// the p-quantile of n i.i.d. observations, and its coverage; ok is false when no such
// interval exists (n too small). The ranks depend on n, p and the rule only, never on data.
//
// Symmetric: j = 1 + max{b ≥ 0 : P(N ≤ b) ≤ α/2} and k = min{k : P(N ≥ k) ≤ α/2} with
// N ~ Binomial(n, p) and α = 1 − confidence; it exists iff j ≥ 1 and k ≤ n − margin.
// Narrowest: among intervals reaching the confidence with k ≤ n − margin, the narrowest; ties
// go to the one more central around (n+1)p, then the higher coverage, then the higher ranks.
// Errors: p outside (0, 1) or an invalid rule.
func Ranks(n int, p float64, rule Rule) (j, k int, coverage float64, ok bool, err error) {
	if err := checkLevel(p); err != nil {
		return 0, 0, 0, false, err
	}
	if err := rule.Validate(); err != nil {
		return 0, 0, 0, false, err
	}
	j, k, coverage, ok = ranks(n, p, rule)
	return j, k, coverage, ok, nil
}

// ranksKey and ranksValue are one entry of rankCache.
type ranksKey struct {
	n    int
	p    float64
	rule Rule
}

type ranksValue struct {
	j, k     int
	coverage float64
	ok       bool
}

// rankCache memoises ranks: the metrics of a case share their sample sizes and levels, so the
// same binomial window (8,000 terms at n = 500,000) is built once, not once per metric. At
// most maxRankCache entries; the whole cache is dropped when it is full. Safe for concurrent
// use.
var rankCache = struct {
	sync.Mutex
	m map[ranksKey]ranksValue
}{m: map[ranksKey]ranksValue{}}

const maxRankCache = 4096

// ranks is computeRanks, memoised (rankCache).
func ranks(n int, p float64, rule Rule) (j, k int, coverage float64, ok bool) {
	key := ranksKey{n, p, rule}
	rankCache.Lock()
	v, hit := rankCache.m[key]
	rankCache.Unlock()
	if !hit {
		v.j, v.k, v.coverage, v.ok = computeRanks(n, p, rule)
		rankCache.Lock()
		if len(rankCache.m) >= maxRankCache {
			clear(rankCache.m)
		}
		rankCache.m[key] = v
		rankCache.Unlock()
	}
	return v.j, v.k, v.coverage, v.ok
}

// computeRanks returns the 1-based order-statistic ranks j ≤ k of rule's interval for the
// p-quantile of n values, its coverage, and ok false when the interval does not exist.
func computeRanks(n int, p float64, rule Rule) (j, k int, coverage float64, ok bool) {
	if n < 1 {
		return 0, 0, 0, false
	}
	b := newBinomial(n, p)
	if rule.Tails == TailsNarrowest {
		return narrowest(b, n, p, rule)
	}
	half := (1 - rule.Confidence) / 2
	// j−1 = the largest b ≥ 0 with P(N ≤ b) ≤ α/2 (−1 when even b = 0 is too likely).
	below := -1
	if b.lo > 0 {
		below = b.lo - 1 // P(N ≤ lo−1) is negligible
	}
	for x := max(b.lo, 0); x <= n && b.cdf(x) <= half; x++ {
		below = x
	}
	// k = the smallest k with P(N ≥ k) ≤ α/2; P(N ≥ n+1) = 0 so k ≤ n+1.
	upper := n + 1
	if b.hi+1 < upper {
		upper = b.hi + 1 // P(N ≥ hi+1) is negligible
	}
	for upper-1 >= 1 && b.sf(upper-1) <= half {
		upper--
	}
	j, k = below+1, upper
	if j < 1 || k > n-rule.Margin {
		return 0, 0, 0, false
	}
	return j, k, b.coverage(j, k), true
}

func narrowest(b *binomial, n int, p float64, rule Rule) (int, int, float64, bool) {
	top := n - rule.Margin
	if top < 1 || b.coverage(1, top) < rule.Confidence {
		return 0, 0, 0, false
	}
	// Upper ranks above hi+1 share hi+1's widest lower rank and are only wider.
	start := top
	if b.hi+1 < start {
		start = b.hi + 1
	}
	center := 2 * float64(n+1) * p // compare j+k against it
	bestJ, bestK, bestCov := 0, 0, 0.0
	j := start - 1
	for k := start; k >= 2; k-- {
		if b.coverage(1, k) < rule.Confidence {
			break
		}
		if j > k-1 {
			j = k - 1
		}
		// The widest lower rank for this k is monotone in k: walk it down.
		for j > 1 && b.coverage(j, k) < rule.Confidence {
			j--
		}
		if b.coverage(j, k) < rule.Confidence {
			continue
		}
		cov := b.coverage(j, k)
		if bestK == 0 || better(j, k, cov, bestJ, bestK, bestCov, center) {
			bestJ, bestK, bestCov = j, k, cov
		}
	}
	if bestK == 0 {
		return 0, 0, 0, false
	}
	return bestJ, bestK, bestCov, true
}

// better reports whether [j, k] beats [bj, bk] under the narrowest rule's order: narrower,
// then more central around (n+1)p, then higher coverage, then higher ranks.
func better(j, k int, cov float64, bj, bk int, bcov, center float64) bool {
	if w, bw := k-j, bk-bj; w != bw {
		return w < bw
	}
	d := math.Abs(float64(j+k) - center)
	bd := math.Abs(float64(bj+bk) - center)
	if math.Abs(d-bd) > 1e-9 {
		return d < bd
	}
	if math.Abs(cov-bcov) > 1e-12 {
		return cov > bcov
	}
	return j > bj
}

// maxMinimumN bounds the n_min search.
const maxMinimumN = 10_000_000

type nminKey struct {
	p    float64
	rule Rule
}

var (
	nminMu    sync.Mutex
	nminCache = map[nminKey]int{}
)

// MinimumN returns the smallest n for which rule's interval for the p-quantile exists, found
// by doubling then bisection (existence is monotone in n for both constructions). DefaultRule
// gives 20, 44, 114, 230, 1,164 and 11,665 for p50, p75, p90, p95, p99 and p99.9; symmetric
// with margin 0 gives 6, 13, 36, 72, 368, 3,688; narrowest with margin 0 (Le Boudec) gives 6
// (p50), 59 (p95), 299 (p99), 2,995 (p99.9). Errors: p outside (0, 1), an invalid rule, or no
// n up to 10,000,000. Results are cached; safe for concurrent use.
func MinimumN(p float64, rule Rule) (int, error) {
	if err := checkLevel(p); err != nil {
		return 0, err
	}
	if err := rule.Validate(); err != nil {
		return 0, err
	}
	key := nminKey{p, rule}
	nminMu.Lock()
	v, hit := nminCache[key]
	nminMu.Unlock()
	if hit {
		return v, nil
	}
	exists := func(n int) bool { _, _, _, ok := ranks(n, p, rule); return ok }
	if exists(1) {
		v = 1
	} else {
		low, high := 1, 2
		for !exists(high) {
			low = high
			high *= 2
			if high > maxMinimumN {
				return 0, fmt.Errorf("no n up to %d supports p=%g", maxMinimumN, p)
			}
		}
		for low+1 < high {
			mid := (low + high) / 2
			if exists(mid) {
				high = mid
			} else {
				low = mid
			}
		}
		v = high
	}
	nminMu.Lock()
	nminCache[key] = v
	nminMu.Unlock()
	return v, nil
}

// sortedCopy returns values sorted ascending without touching the input.
func sortedCopy(values []float64) []float64 {
	out := append([]float64(nil), values...)
	sort.Float64s(out)
	return out
}

// quantileInPlace returns Quantile(sorted values, p) — the same value (up to the sign of a
// zero: -0 and +0 compare equal, so a sort orders them arbitrarily too) — without sorting: it
// reorders values (which the caller owns) by selection, in O(n) expected time with an O(n log
// n) bound. Values containing NaN are sorted instead (sort.Float64s order). ok is false when
// values is empty or p is outside [0, 1].
func quantileInPlace(values []float64, p float64) (value float64, ok bool) {
	n := len(values)
	if n == 0 || !(p >= 0 && p <= 1) {
		return 0, false
	}
	for _, v := range values {
		if v != v {
			sort.Float64s(values)
			return Quantile(values, p)
		}
	}
	rank := p * float64(n-1)
	lower := int(math.Floor(rank))
	if lower >= n-1 {
		return maxOf(values), true
	}
	selectKth(values, lower)
	weight := rank - float64(lower)
	a := values[lower]
	b := minOf(values[lower+1:]) // the (lower+1)-th order statistic
	if weight == 0 || a == b {
		return a, true
	}
	return a + weight*(b-a), true
}

func quantileInPlacePtr(values []float64, p float64) *float64 {
	v, ok := quantileInPlace(values, p)
	if !ok {
		return nil
	}
	return &v
}

func minOf(values []float64) float64 {
	m := values[0]
	for _, v := range values[1:] {
		if v < m {
			m = v
		}
	}
	return m
}

func maxOf(values []float64) float64 {
	m := values[0]
	for _, v := range values[1:] {
		if v > m {
			m = v
		}
	}
	return m
}

// selectKth reorders v (no NaN) so that v[k] is its k-th smallest value (0-based), every
// element before it ≤ v[k] and every element after it ≥ v[k]: Hoare partitioning around a
// median-of-three pivot, falling back to sorting the remaining range after 2·log2(n)
// rounds so that adversarial input stays O(n log n).
func selectKth(v []float64, k int) {
	lo, hi := 0, len(v)-1
	budget := 2 * bitsLen(len(v))
	for hi > lo {
		if budget == 0 || hi-lo < 16 {
			sort.Float64s(v[lo : hi+1])
			return
		}
		budget--
		mid := lo + (hi-lo)/2
		// median of three into v[mid]
		if v[mid] < v[lo] {
			v[mid], v[lo] = v[lo], v[mid]
		}
		if v[hi] < v[lo] {
			v[hi], v[lo] = v[lo], v[hi]
		}
		if v[hi] < v[mid] {
			v[hi], v[mid] = v[mid], v[hi]
		}
		pivot := v[mid]
		i, j := lo, hi
		for i <= j {
			for v[i] < pivot {
				i++
			}
			for v[j] > pivot {
				j--
			}
			if i <= j {
				v[i], v[j] = v[j], v[i]
				i++
				j--
			}
		}
		// now v[lo..j] ≤ pivot ≤ v[i..hi], and v[j+1..i-1] == pivot
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return
		}
	}
}

func bitsLen(n int) int {
	b := 0
	for n > 0 {
		b++
		n >>= 1
	}
	return b
}
