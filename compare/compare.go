package compare

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/artifact"
)

// Verdicts of a metric, a quantile, a proportion or a gate.
const (
	VerdictBetter        = "better"
	VerdictWorse         = "worse"
	VerdictSame          = "not distinguishable"
	VerdictInsufficient  = "insufficient sample"
	VerdictNotComparable = "not comparable"
)

// DefaultConfidence is the comparison's confidence when Options.Confidence is 0.
const DefaultConfidence = 0.95

// ErrDigestMismatch is returned when the two runs' workloads differ (their workload digests)
// and Options.AllowDigestMismatch is not set; the message names what differs. It wraps
// artifact.ErrInvalidArtifact: the inputs cannot be compared as given.
var ErrDigestMismatch = fmt.Errorf("%w: the runs' workloads differ", artifact.ErrInvalidArtifact)

// Options configure a comparison. Base and Candidate are what `inferprobe analyze` takes:
// one artifact, several artifacts or a directory (the shards of one run). Confidence is the
// stated confidence of every interval and verdict (0: DefaultConfidence); verdicts are
// decided at α = 1 − Confidence after Holm's adjustment over the comparison's family of
// tests. Levels are the quantile levels compared (nil: analyze.Levels). BaseAnalysis and
// CandidateAnalysis are each run's analysis options (SLO policy, spans, server telemetry,
// cost); Gates the regression gates (ParseGate). Metrics limits the per-request metrics
// compared (nil: every one of Metrics): fewer tests make a smaller family, so each verdict
// needs less evidence.
type Options struct {
	Base, Candidate                 []string
	Confidence                      float64
	Levels                          []analyze.Level
	Metrics                         []string
	AllowDigestMismatch             bool
	BaseAnalysis, CandidateAnalysis analyze.Options
	Gates                           []Gate
}

// Result is a comparison: both sides, the warnings (different models, APIs or SLO
// policies, cases in one run only, a workload mismatch that was allowed), the cases in the
// base run's order, the size of the family Holm adjusted over, and the gates.
type Result struct {
	Confidence float64      `json:"confidence"`
	Base       *Side        `json:"base"`
	Candidate  *Side        `json:"candidate"`
	Warnings   []string     `json:"warnings"`
	Family     int          `json:"family_size"`
	Cases      []CaseResult `json:"cases"`
	Gates      []GateResult `json:"gates"`
	// Fired is true when any gate's regression is significant (the command exits 3).
	Fired bool `json:"fired"`

	base, cand *Side
}

// CaseResult is one case present in both runs.
type CaseResult struct {
	CaseID     string          `json:"case_id"`
	Offered    [2]int          `json:"offered"`
	Metrics    []MetricResult  `json:"metrics"`
	Success    *ProportionDiff `json:"success"`
	Attainment *ProportionDiff `json:"slo_attainment"`
	Rates      Rates           `json:"rates"`
	Notes      []string        `json:"notes"`
	samples    [2]*caseSamples // base, candidate
	reports    [2]*analyze.CaseReport
}

// MetricResult is one metric of a case: how many successful requests had it in each run
// (and lacked it), the rank test, its Holm-adjusted p, the metric's verdict (the rank
// test's: a shift of the whole distribution), the reason of a missing verdict, and each
// quantile's difference.
type MetricResult struct {
	Key        string         `json:"metric"`
	NBase      int            `json:"n_base"`
	NCandidate int            `json:"n_candidate"`
	Missing    [2]int         `json:"missing"`
	Rank       *RankTest      `json:"rank_test"`
	AdjustedP  *float64       `json:"p_holm"`
	Verdict    string         `json:"verdict"`
	Reason     string         `json:"reason,omitempty"`
	Quantiles  []QuantileDiff `json:"quantiles"`
}

// ProportionDiff compares a share of offered requests (successes, or SLO attainment) between
// the runs: each run's bounds (unknown outcomes counted as misses, then as hits), the
// difference's interval (Newcombe's hybrid score interval, widened to hold whatever the
// unknown outcomes were), the two-sided p of "no difference", its Holm-adjusted value and
// the verdict (higher is better).
type ProportionDiff struct {
	Base      [2]float64 `json:"base"`
	Candidate [2]float64 `json:"candidate"`
	Lower     float64    `json:"diff_lower"`
	Upper     float64    `json:"diff_upper"`
	PValue    float64    `json:"p"`
	AdjustedP *float64   `json:"p_holm"`
	Verdict   string     `json:"verdict"`
	Reason    string     `json:"reason,omitempty"`

	base, cand Proportion
	rise, fall float64 // one-sided p-values of a rise and a fall
}

// Rates are a case's measured rates in both runs: one measurement per run, so they carry no
// sampling interval and no verdict (repeat the runs to test them). Goodput is the SLO
// evaluation's lower bound; energy is joules per output token; cost dollars per million
// output tokens. A pair member is null when its run lacks the figure.
type Rates struct {
	OutputTokensPerSecond Pair `json:"output_tokens_per_second"`
	RequestsPerSecond     Pair `json:"requests_per_second"`
	GoodputRPS            Pair `json:"goodput_lower_rps"`
	JoulesPerOutputToken  Pair `json:"joules_per_output_token"`
	USDPerMillionOutput   Pair `json:"usd_per_million_output_tokens"`
}

// Pair is a figure in the base and the candidate run, and candidate ÷ base − 1 when both
// are known and the base is positive.
type Pair struct {
	Base      *float64 `json:"base"`
	Candidate *float64 `json:"candidate"`
	Relative  *float64 `json:"relative"`
}

func pairOf(b, c *float64) Pair {
	p := Pair{Base: b, Candidate: c}
	if b != nil && c != nil && *b > 0 {
		p.Relative = ptr(*c / *b - 1)
	}
	return p
}

// Run compares Candidate with Base: each is read and analysed (one after the other, so that
// only one run's requests are in memory at a time), cases are matched by id, the workloads
// must have the same digest (unless allowed), and every metric, quantile and proportion is
// tested; then the gates. Errors: an invalid option (Validate), a run that cannot be read
// (the analysis's errors), ErrDigestMismatch, no case in both runs, ctx's error.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Confidence == 0 {
		o.Confidence = DefaultConfidence
	}
	if o.Levels == nil {
		o.Levels = analyze.Levels
	}
	if o.Metrics == nil {
		o.Metrics = Metrics
	}
	base, err := loadSide(ctx, o.Base, o.BaseAnalysis)
	if err != nil {
		return nil, fmt.Errorf("base: %w", err)
	}
	cand, err := loadSide(ctx, o.Candidate, o.CandidateAnalysis)
	if err != nil {
		return nil, fmt.Errorf("candidate: %w", err)
	}
	return compareSides(ctx, base, cand, o)
}

// Validate checks the options before anything is read: both runs given, a confidence in
// (0, 1) (or 0), levels in (0, 1), and gates with known metrics.
func (o Options) Validate() error {
	if len(o.Base) == 0 || len(o.Candidate) == 0 {
		return errors.New("compare needs a base and a candidate run")
	}
	if o.Confidence != 0 && !(o.Confidence > 0 && o.Confidence < 1) {
		return fmt.Errorf("the confidence must be between 0 and 1, not %g", o.Confidence)
	}
	for _, l := range o.Levels {
		if !(l.P > 0 && l.P < 1) {
			return fmt.Errorf("quantile level %s is not between 0 and 1", l.Key)
		}
	}
	for _, g := range o.Gates {
		if err := g.validate(); err != nil {
			return err
		}
	}
	for _, m := range o.Metrics {
		if !slices.Contains(Metrics, m) {
			return fmt.Errorf("unknown metric %s; known: %s", m, strings.Join(Metrics, ", "))
		}
	}
	return nil
}

// compareSides is Run after both sides were read.
func compareSides(ctx context.Context, base, cand *Side, o Options) (*Result, error) {
	res := &Result{Confidence: o.Confidence, Base: base, Candidate: cand, Warnings: []string{}, Cases: []CaseResult{},
		Gates: []GateResult{}, base: base, cand: cand}
	if err := res.checkWorkloads(o.AllowDigestMismatch); err != nil {
		return nil, err
	}
	res.nameDifferences()
	ids := res.matchCases()
	if len(ids) == 0 {
		return nil, fmt.Errorf("%w: no case is in both runs (base: %s; candidate: %s)", artifact.ErrInvalidArtifact,
			caseList(base.report.CaseOrder), caseList(cand.report.CaseOrder))
	}
	alpha := 1 - o.Confidence
	policiesMatch := sameSLO(base.SLO, cand.SLO)
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		res.Cases = append(res.Cases, compareCase(id, base, cand, o.Metrics, o.Levels, alpha, policiesMatch))
	}
	res.adjust(alpha)
	if err := res.evaluateGates(o.Gates, alpha); err != nil {
		return nil, err
	}
	return res, nil
}

func caseList(ids []string) string {
	if len(ids) == 0 {
		return "none"
	}
	return fmt.Sprint(ids)
}

// matchCases returns the ids of the cases in both runs, in the base run's case order, and
// warns of the cases only one run has.
func (r *Result) matchCases() []string {
	inCand := map[string]bool{}
	for _, id := range r.cand.report.CaseOrder {
		inCand[id] = true
	}
	var ids []string
	for _, id := range r.base.report.CaseOrder {
		if inCand[id] {
			ids = append(ids, id)
			delete(inCand, id)
		} else {
			r.Warnings = append(r.Warnings, fmt.Sprintf("case %s is only in the base run: not compared", id))
		}
	}
	var only []string
	for id := range inCand {
		only = append(only, id)
	}
	sort.Strings(only)
	for _, id := range only {
		r.Warnings = append(r.Warnings, fmt.Sprintf("case %s is only in the candidate run: not compared", id))
	}
	return ids
}

// compareCase tests one case's metrics and proportions and gathers its rates.
func compareCase(id string, base, cand *Side, metrics []string, levels []analyze.Level, alpha float64, policiesMatch bool) CaseResult {
	br, cr := base.report.Cases[id], cand.report.Cases[id]
	bs, cs := base.cases[id], cand.cases[id]
	if bs == nil {
		bs = &caseSamples{values: map[string][]float64{}, missing: map[string]int{}}
	}
	if cs == nil {
		cs = &caseSamples{values: map[string][]float64{}, missing: map[string]int{}}
	}
	c := CaseResult{CaseID: id, Offered: [2]int{br.Population.Offered, cr.Population.Offered}, Metrics: []MetricResult{},
		Notes: []string{}, samples: [2]*caseSamples{bs, cs}, reports: [2]*analyze.CaseReport{br, cr}}
	for _, key := range metrics {
		bv, cv := bs.values[key], cs.values[key]
		if len(bv) == 0 && len(cv) == 0 {
			continue // neither run has the metric (no spans, no streaming): nothing to say
		}
		m := MetricResult{Key: key, NBase: len(bv), NCandidate: len(cv), Missing: [2]int{bs.missing[key], cs.missing[key]}, Quantiles: []QuantileDiff{}}
		switch {
		case len(bv) == 0 || len(cv) == 0:
			m.Verdict = VerdictNotComparable
			which := "base"
			if len(cv) == 0 {
				which = "candidate"
			}
			m.Reason = fmt.Sprintf("the %s run has no values of %s", which, key)
		default:
			if rt, ok := BrunnerMunzel(bv, cv); ok {
				m.Rank = &rt
			} else {
				m.Verdict = VerdictInsufficient
				m.Reason = fmt.Sprintf("the rank test needs %d values in each run", MinRankSample)
			}
			for _, l := range levels {
				m.Quantiles = append(m.Quantiles, quantileDiff(l.Key, l.P, bv, cv, alpha))
			}
		}
		c.Metrics = append(c.Metrics, m)
	}
	c.Success = successDiff(br, cr)
	c.Attainment = attainmentDiff(br, cr, policiesMatch)
	c.Rates = ratesOf(br, cr)
	return c
}

// successDiff compares the share of offered requests that succeeded.
func successDiff(b, c *analyze.CaseReport) *ProportionDiff {
	bp := Proportion{Known: b.Population.Successful, Total: b.Population.Offered}
	cp := Proportion{Known: c.Population.Successful, Total: c.Population.Offered}
	if bp.Total == 0 || cp.Total == 0 {
		return nil
	}
	return &ProportionDiff{base: bp, cand: cp}
}

// attainmentDiff compares SLO attainment (met of offered, unknown between) when both runs
// were judged; under different policies it is not comparable.
func attainmentDiff(b, c *analyze.CaseReport, policiesMatch bool) *ProportionDiff {
	if b.SLO == nil || c.SLO == nil {
		return nil
	}
	d := &ProportionDiff{base: Proportion{Known: b.SLO.Met, Unknown: b.SLO.Unknown, Total: b.SLO.Offered},
		cand: Proportion{Known: c.SLO.Met, Unknown: c.SLO.Unknown, Total: c.SLO.Offered}}
	if !policiesMatch {
		d.Verdict, d.Reason = VerdictNotComparable, "the runs were judged by different SLO policies"
	}
	if d.base.Total == 0 || d.cand.Total == 0 {
		d.Verdict, d.Reason = VerdictInsufficient, "a run offered no request"
	}
	return d
}

// finish computes the proportion's bounds, interval and p at level alpha (unless it already
// has a verdict).
func (d *ProportionDiff) finish(alpha float64) {
	if d.Verdict != "" {
		if d.base.Total > 0 && d.cand.Total > 0 {
			d.Base = [2]float64{d.base.lower(), d.base.upper()}
			d.Candidate = [2]float64{d.cand.lower(), d.cand.upper()}
		}
		d.PValue = 1
		return
	}
	d.Base = [2]float64{d.base.lower(), d.base.upper()}
	d.Candidate = [2]float64{d.cand.lower(), d.cand.upper()}
	d.Lower, d.Upper = diffBounds(d.base, d.cand, zOf(1-alpha))
	d.fall = proportionP(d.base, d.cand, 0, true)
	d.rise = proportionP(d.base, d.cand, 0, false)
	d.PValue = math.Min(1, 2*math.Min(d.fall, d.rise))
}

func ratesOf(b, c *analyze.CaseReport) Rates {
	var r Rates
	r.OutputTokensPerSecond = pairOf(b.Throughput.OutputTokensPerSecond, c.Throughput.OutputTokensPerSecond)
	r.RequestsPerSecond = pairOf(b.Throughput.RequestsPerSecond, c.Throughput.RequestsPerSecond)
	goodput := func(cr *analyze.CaseReport) *float64 {
		if cr.SLO == nil {
			return nil
		}
		return cr.SLO.GoodputLowerRPS
	}
	r.GoodputRPS = pairOf(goodput(b), goodput(c))
	r.JoulesPerOutputToken = pairOf(b.Energy.JoulesPerOutputToken, c.Energy.JoulesPerOutputToken)
	cost := func(cr *analyze.CaseReport) *float64 {
		if cr.Cost == nil {
			return nil
		}
		return cr.Cost.USDPerMillionOutputTokens
	}
	r.USDPerMillionOutput = pairOf(cost(b), cost(c))
	return r
}

// adjust applies Holm's step-down over every test of the comparison that has a p-value —
// each sufficient metric's rank test, each sufficient quantile's test, each proportion —
// and sets the verdicts: a test whose adjusted p is at most alpha is better or worse by
// its direction, else not distinguishable.
func (r *Result) adjust(alpha float64) {
	var ps []float64
	var set []func(adj float64)
	for ci := range r.Cases {
		c := &r.Cases[ci]
		for mi := range c.Metrics {
			m := &c.Metrics[mi]
			if m.Rank != nil && m.Verdict == "" {
				ps = append(ps, m.Rank.P)
				set = append(set, func(adj float64) {
					m.AdjustedP = ptr(adj)
					m.Verdict = direction(adj, alpha, m.Rank.PGreater < m.Rank.PLess, false)
				})
			}
			for qi := range m.Quantiles {
				q := &m.Quantiles[qi]
				if q.Sufficient && q.PValue != nil {
					ps = append(ps, *q.PValue)
					set = append(set, func(adj float64) {
						q.AdjustedP = ptr(adj)
						q.Verdict = direction(adj, alpha, *q.PWorse < *q.PBetter, false)
					})
				}
			}
		}
		for _, d := range []*ProportionDiff{c.Success, c.Attainment} {
			if d == nil {
				continue
			}
			d.finish(alpha)
			if d.Verdict == "" {
				ps = append(ps, d.PValue)
				set = append(set, func(adj float64) {
					d.AdjustedP = ptr(adj)
					d.Verdict = direction(adj, alpha, d.rise < d.fall, true)
				})
			}
		}
	}
	for i, adj := range Holm(ps) {
		set[i](adj)
	}
	r.Family = len(ps)
}

// direction is a test's verdict: not distinguishable unless adj ≤ alpha; then rose says
// the candidate's value is the larger one, and higherBetter whether that is better.
func direction(adj, alpha float64, rose, higherBetter bool) string {
	if adj > alpha {
		return VerdictSame
	}
	if rose == higherBetter {
		return VerdictBetter
	}
	return VerdictWorse
}

func sameSLO(a, b *analyze.SLOInfo) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Digest == b.Digest
}
