package compare

import (
	"math"

	"github.com/inferprobe/inferprobe/analyze"
)

// QuantileDiff is one quantile of one metric in both runs: the point values (ms, by
// analyze.Quantile over the successful requests' values), the difference candidate − base
// (ms) and relative difference (candidate ÷ base − 1) with their intervals at the
// comparison's confidence, and the test of "no difference": one-sided p-values of a rise
// (PWorse for a latency) and a fall, the two-sided P, its Holm-adjusted value over the
// comparison's family, and the verdict.
//
// The interval is built from order statistics only: each run's symmetric interval for its
// own quantile at confidence 1 − α/2 ([L_B, U_B], [L_C, U_C]; analyze's binomial rule) gives
// [L_C − U_B, U_C − L_B] for the difference and [L_C/U_B − 1, U_C/L_B − 1] for the ratio.
// Both runs' intervals hold together with probability at least 1 − α (Bonferroni: four
// tails of α/4), whatever the two distributions — no resampling, and no assumption that
// the quantile's sampling distribution is normal, which fails for high quantiles of
// heavy-tailed latencies; a percentile bootstrap would also cost B resamples of up to a
// million values per quantile. The interval excludes 0 exactly when the two-sided p is at
// most α. When either run has too few values for its interval (N < NMin, the symmetric
// rule at 1 − α/2), there is no interval and no verdict: Verdict is "insufficient sample".
type QuantileDiff struct {
	Level      string   `json:"level"`
	P          float64  `json:"p_level"`
	BaseMs     *float64 `json:"base_ms"`
	CandMs     *float64 `json:"candidate_ms"`
	DiffMs     *float64 `json:"diff_ms"`
	DiffLower  *float64 `json:"diff_lower_ms"`
	DiffUpper  *float64 `json:"diff_upper_ms"`
	Rel        *float64 `json:"relative"`
	RelLower   *float64 `json:"relative_lower"`
	RelUpper   *float64 `json:"relative_upper"`
	NBase      int      `json:"n_base"`
	NCandidate int      `json:"n_candidate"`
	NMin       int      `json:"n_min"`
	Sufficient bool     `json:"sufficient"`
	PWorse     *float64 `json:"p_rise"`
	PBetter    *float64 `json:"p_fall"`
	PValue     *float64 `json:"p"`
	AdjustedP  *float64 `json:"p_holm"`
	Verdict    string   `json:"verdict"`
}

// quantileDiff compares the p-quantile (level key) of two sorted samples at two-sided level
// alpha. It leaves AdjustedP and Verdict to the family (insufficient samples get their
// verdict here).
func quantileDiff(key string, p float64, base, cand []float64, alpha float64) QuantileDiff {
	q := QuantileDiff{Level: key, P: p, NBase: len(base), NCandidate: len(cand)}
	q.NMin, _ = analyze.MinimumN(p, analyze.Rule{Confidence: 1 - alpha/2, Margin: 0, Tails: analyze.TailsSymmetric})
	if v, ok := analyze.Quantile(base, p); ok {
		q.BaseMs = &v
	}
	if v, ok := analyze.Quantile(cand, p); ok {
		q.CandMs = &v
	}
	if q.BaseMs != nil && q.CandMs != nil {
		q.DiffMs = ptr(*q.CandMs - *q.BaseMs)
		if *q.BaseMs > 0 {
			q.Rel = ptr(*q.CandMs / *q.BaseMs - 1)
		}
	}
	bb, okB := newQuantileBounds(base, p)
	cb, okC := newQuantileBounds(cand, p)
	if !okB || !okC {
		q.Verdict = VerdictInsufficient
		return q
	}
	lb, ok1 := bb.lower(alpha / 4)
	ub, ok2 := bb.upper(alpha / 4)
	lc, ok3 := cb.lower(alpha / 4)
	uc, ok4 := cb.upper(alpha / 4)
	if !(ok1 && ok2 && ok3 && ok4) {
		q.Verdict = VerdictInsufficient
		return q
	}
	q.Sufficient = true
	q.DiffLower, q.DiffUpper = ptr(lc-ub), ptr(uc-lb)
	if ub > 0 && lb > 0 {
		q.RelLower, q.RelUpper = ptr(lc/ub-1), ptr(uc/lb-1)
	}
	worse, better := exceedsP(cb, bb, 1, 0), exceedsP(bb, cb, 1, 0)
	q.PWorse, q.PBetter = &worse, &better
	q.PValue = ptr(math.Min(1, 2*math.Min(worse, better)))
	return q
}

func ptr[T any](v T) *T { return &v }
