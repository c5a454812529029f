package compare

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Gate metrics beyond Metrics: SLO attainment and the share of successful requests.
const (
	GateAttainment = "slo.attainment"
	GateSuccess    = "success"
)

// ErrBadGate is wrapped by every ParseGate error: an unusable --fail-on (the command exits 2).
var ErrBadGate = errors.New("bad --fail-on")

// Gate is one regression gate (--fail-on): it fires when the candidate is worse than the
// base by more than Threshold and that is significant at the comparison's confidence, Holm-
// adjusted over every gate and case it is tested in. For a quantile of a latency metric
// (Level, P set) Threshold is a fraction of the base's value (Relative: 0.05 is +5%) or
// milliseconds; for slo.attainment and success it is a fall in share points (0.01 is one
// percentage point).
type Gate struct {
	Spec      string  `json:"spec"`
	Metric    string  `json:"metric"`
	Level     string  `json:"level,omitempty"`
	P         float64 `json:"p_level,omitempty"`
	Relative  bool    `json:"relative"`
	Threshold float64 `json:"threshold"`
}

// ParseGate reads a --fail-on value:
//
//	METRIC.pQ:+N%       the candidate's Q-th percentile exceeds the base's by more than N%
//	METRIC.pQ:+Nms      … by more than N milliseconds (Ns: seconds)
//	slo.attainment:-N%  SLO attainment fell by more than N percentage points
//	success:-N%         the share of offered requests that succeeded fell by more than N points
//
// METRIC is a per-request metric (Metrics: client.ttft, client.tpot, client.e2e, their
// _from_intended forms, client.e2e_per_output_token, server.ttft, server.e2e, server.queue);
// a name without a dot is a client metric (ttft is client.ttft). Q is a percentile strictly
// between 0 and 100 (p50, p99, p99.9). The sign may be left out; a sign that is not a
// regression (-5% on a latency, +1% on attainment) is refused, as are N < 0, an unknown
// metric and a bad percentile. Errors wrap ErrBadGate.
func ParseGate(spec string) (Gate, error) {
	g := Gate{Spec: spec}
	bad := func(format string, a ...any) (Gate, error) {
		return Gate{}, fmt.Errorf("%w %q: %s", ErrBadGate, spec, fmt.Sprintf(format, a...))
	}
	left, right, ok := strings.Cut(strings.TrimSpace(spec), ":")
	if !ok || left == "" || right == "" {
		return bad("want METRIC.pQ:+N%% or +Nms, slo.attainment:-N%% or success:-N%%")
	}
	right = strings.TrimSpace(right)
	if left == GateAttainment || left == GateSuccess {
		g.Metric = left
		n, err := number(right, "-", "%")
		if err != nil {
			return bad("%v (a fall in percentage points, like -1%%)", err)
		}
		g.Threshold = n / 100
		return g, nil
	}
	i := strings.LastIndex(left, ".p")
	if i <= 0 {
		return bad("no percentile: write METRIC.pQ, like client.ttft.p99")
	}
	metric, level := left[:i], left[i+1:]
	if !strings.Contains(metric, ".") {
		metric = "client." + metric
	}
	if !slices.Contains(Metrics, metric) {
		return bad("unknown metric %s; known: %s, %s, %s", metric, strings.Join(Metrics, ", "), GateAttainment, GateSuccess)
	}
	pct, err := strconv.ParseFloat(level[1:], 64)
	if err != nil || !(pct > 0 && pct < 100) || strings.ContainsAny(level[1:], "eE+-") {
		return bad("unknown percentile %s: want p followed by a number between 0 and 100, like p99 or p99.9", level)
	}
	g.Metric, g.Level, g.P = metric, level, math.Round(pct*1e10)/1e12 // 99.9 → 0.999 exactly
	switch {
	case strings.HasSuffix(right, "%"):
		n, err := number(right, "+", "%")
		if err != nil {
			return bad("%v (a rise, like +5%%)", err)
		}
		g.Relative, g.Threshold = true, n/100
	case strings.HasSuffix(right, "ms"):
		n, err := number(right, "+", "ms")
		if err != nil {
			return bad("%v (a rise, like +20ms)", err)
		}
		g.Threshold = n
	case strings.HasSuffix(right, "s"):
		n, err := number(right, "+", "s")
		if err != nil {
			return bad("%v (a rise, like +0.5s)", err)
		}
		g.Threshold = n * 1000
	default:
		return bad("the threshold needs a unit: %% of the base's value, ms or s")
	}
	return g, nil
}

// number parses "[sign]N<unit>" where sign, when present, must be want; N finite ≥ 0.
func number(s, want, unit string) (float64, error) {
	s = strings.TrimSpace(strings.TrimSuffix(s, unit))
	if s != "" && (s[0] == '+' || s[0] == '-') {
		if s[:1] != want {
			return 0, fmt.Errorf("%s is not a regression", s[:1]+"N"+unit)
		}
		s = s[1:]
	}
	n, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(n) || math.IsInf(n, 0) || n < 0 || strings.ContainsAny(s, "+-") {
		return 0, fmt.Errorf("%q is not a number ≥ 0", s)
	}
	return n, nil
}

func (g Gate) validate() error {
	if g.Metric != GateAttainment && g.Metric != GateSuccess && !slices.Contains(Metrics, g.Metric) {
		return fmt.Errorf("%w %q: unknown metric %s", ErrBadGate, g.Spec, g.Metric)
	}
	if g.Level != "" && !(g.P > 0 && g.P < 1) {
		return fmt.Errorf("%w %q: percentile out of range", ErrBadGate, g.Spec)
	}
	if !(g.Threshold >= 0) || math.IsInf(g.Threshold, 0) {
		return fmt.Errorf("%w %q: threshold must be ≥ 0", ErrBadGate, g.Spec)
	}
	return nil
}

// Gate outcomes.
const (
	GateFired      = "regression"
	GateHeld       = "no significant regression"
	GateUntestable = "not evaluated"
)

// GateResult is one gate in one case: the observed change (relative, ms, or share points),
// its interval at the comparison's confidence, the one-sided p of "the regression is at most
// the threshold", its Holm-adjusted value over every evaluated gate test, and the outcome
// (regression, no significant regression, or not evaluated with the reason: too few
// requests for the quantile's interval, a metric or policy one run lacks).
type GateResult struct {
	Gate      Gate     `json:"gate"`
	CaseID    string   `json:"case_id"`
	Change    *float64 `json:"change"`
	Lower     *float64 `json:"change_lower"`
	Upper     *float64 `json:"change_upper"`
	PValue    *float64 `json:"p"`
	AdjustedP *float64 `json:"p_holm"`
	Outcome   string   `json:"outcome"`
	Reason    string   `json:"reason,omitempty"`
}

// evaluateGates tests every gate in every compared case, adjusts their p-values together
// (Holm) and sets Fired.
func (r *Result) evaluateGates(gates []Gate, alpha float64) error {
	var ps []float64
	var idx []int
	for _, g := range gates {
		for ci := range r.Cases {
			gr := r.Cases[ci].gate(g, alpha)
			if gr.PValue != nil {
				ps = append(ps, *gr.PValue)
				idx = append(idx, len(r.Gates))
			}
			r.Gates = append(r.Gates, gr)
		}
	}
	for i, adj := range Holm(ps) {
		gr := &r.Gates[idx[i]]
		gr.AdjustedP = ptr(adj)
		gr.Outcome = GateHeld
		if adj <= alpha {
			gr.Outcome = GateFired
			r.Fired = true
		}
	}
	return nil
}

// gate tests g in case c: its p-value, change and interval (or why it cannot be tested).
func (c *CaseResult) gate(g Gate, alpha float64) GateResult {
	gr := GateResult{Gate: g, CaseID: c.CaseID, Outcome: GateUntestable}
	if g.Metric == GateAttainment || g.Metric == GateSuccess {
		d := c.Attainment
		if g.Metric == GateSuccess {
			d = c.Success
		}
		switch {
		case d == nil:
			gr.Reason = "no SLO policy judged both runs"
			return gr
		case d.Verdict == VerdictNotComparable || d.Verdict == VerdictInsufficient:
			gr.Reason = d.Reason
			return gr
		}
		gr.Change = ptr(d.cand.lower() - d.base.lower())
		gr.Lower, gr.Upper = ptr(d.Lower), ptr(d.Upper)
		gr.PValue = ptr(proportionP(d.base, d.cand, -g.Threshold, true))
		return gr
	}
	bv, cv := c.samples[0].values[g.Metric], c.samples[1].values[g.Metric]
	if len(bv) == 0 || len(cv) == 0 {
		gr.Reason = fmt.Sprintf("a run has no values of %s", g.Metric)
		return gr
	}
	q := quantileDiff(g.Level, g.P, bv, cv, alpha)
	if g.Relative {
		gr.Change, gr.Lower, gr.Upper = q.Rel, q.RelLower, q.RelUpper
	} else {
		gr.Change, gr.Lower, gr.Upper = q.DiffMs, q.DiffLower, q.DiffUpper
	}
	if !q.Sufficient {
		gr.Reason = fmt.Sprintf("too few requests for the %s interval: %d and %d, at least %d each needed", g.Level, q.NBase, q.NCandidate, q.NMin)
		return gr
	}
	bb, _ := newQuantileBounds(bv, g.P)
	cb, _ := newQuantileBounds(cv, g.P)
	if g.Relative {
		gr.PValue = ptr(exceedsP(cb, bb, 1+g.Threshold, 0))
	} else {
		gr.PValue = ptr(exceedsP(cb, bb, 1, g.Threshold))
	}
	return gr
}
