package analyze

import "sort"

// OrderBounds gives one-sided distribution-free confidence bounds for the p-quantile of n
// i.i.d. continuous observations from their order statistics, at any tail probability: the
// same binomial rule as Ranks (Le Boudec, Theorem 2.1), one side at a time. With N the
// number of observations at or below the quantile, N ~ Binomial(n, p):
//
//   - X(j) is a lower bound with P(X(j) > q) = P(N < j) = P(N ≤ j−1); Lower(a) is the
//     highest such rank with P(N ≤ j−1) ≤ a;
//   - X(k) is an upper bound with P(X(k) < q) ≤ P(N ≥ k); Upper(a) is the lowest such rank
//     with P(N ≥ k) ≤ a.
//
// Ranks are 1-based and depend on n, p and a only, never on the data. Symmetric ranks at a
// confidence c (Ranks with TailsSymmetric, margin 0) are Lower((1−c)/2) and Upper((1−c)/2).
// Build one with NewOrderBounds; it is safe for concurrent use once built.
type OrderBounds struct {
	n int
	b *binomial
}

// NewOrderBounds prepares the bounds for the p-quantile of n observations. ok is false when
// n < 1 or p is outside (0, 1).
func NewOrderBounds(n int, p float64) (OrderBounds, bool) {
	if n < 1 || checkLevel(p) != nil {
		return OrderBounds{}, false
	}
	return OrderBounds{n: n, b: newBinomial(n, p)}, true
}

// N is the number of observations the bounds were built for.
func (o OrderBounds) N() int { return o.n }

// Lower returns the highest rank j (1 ≤ j ≤ n) with P(N ≤ j−1) ≤ a, so that X(j) exceeds
// the quantile with probability at most a; ok is false when even X(1) exceeds it with a
// probability above a (P(N = 0) > a: too few observations) or a is not in (0, 1).
func (o OrderBounds) Lower(a float64) (rank int, ok bool) {
	if o.b == nil || !(a > 0 && a < 1) {
		return 0, false
	}
	b := o.b
	// The largest x with cdf(x) ≤ a: cdf is taken as 0 below lo and is 1 from hi on, so x
	// lies in [lo−1, hi−1]; search [lo, hi) for the first x whose cdf exceeds a.
	i := sort.Search(b.hi-b.lo, func(i int) bool { return b.cdf(b.lo+i) > a })
	below := b.lo + i - 1
	j := below + 1
	if j < 1 || j > o.n {
		return 0, false
	}
	return j, true
}

// Upper returns the lowest rank k (1 ≤ k ≤ n) with P(N ≥ k) ≤ a, so that X(k) falls below
// the quantile with probability at most a; ok is false when even X(n) falls below it with a
// probability above a (P(N = n) > a: too few observations) or a is not in (0, 1).
func (o OrderBounds) Upper(a float64) (rank int, ok bool) {
	if o.b == nil || !(a > 0 && a < 1) {
		return 0, false
	}
	b := o.b
	// sf(k) is 1 up to lo and 0 above hi; find the first k in [lo+1, hi+1] with sf(k) ≤ a.
	lo := max(b.lo+1, 1)
	hi := min(b.hi+1, o.n+1)
	k := lo + sort.Search(hi-lo+1, func(i int) bool { return b.sf(lo+i) <= a })
	if k > o.n {
		return 0, false
	}
	return k, true
}
