package capacity

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/artifact"
)

// Test is one statistical question every probe answers. Kind artifact.TestQuantile: the
// failure-penalised Level-quantile of criterion Key (its successful requests' values in ms,
// every request that did not succeed ranked worst) must be at most MaxMs. Kind
// artifact.TestAttainment: the share of offered requests that met criterion Key ("" = every
// criterion of the policy) must be at least Level.
type Test struct {
	Kind  string
	Key   string
	Level float64
	MaxMs float64
}

// Name is how reports and the binding criterion name the test: "client.e2e p95",
// "attainment", "attainment client.ttft".
func (t Test) Name() string {
	if t.Kind == artifact.TestQuantile {
		return t.Key + " " + levelKey(t.Level)
	}
	if t.Key == "" {
		return "attainment"
	}
	return "attainment " + t.Key
}

// levelKey is analyze's report key of a level ("p95"), or the level itself.
func levelKey(p float64) string {
	for _, l := range analyze.Levels {
		if l.P == p {
			return l.Key
		}
	}
	return strconv.FormatFloat(p, 'g', -1, 64)
}

// TestsOf derives the tests of a policy: for each criterion a quantile test at level (one of
// analyze.Levels: 0.5, 0.9, 0.95, 0.99) against its max_ms, plus an attainment test for each
// criterion's attainment_target, plus a joint attainment test for the policy's. Errors: no
// policy, a level outside analyze.Levels, or an aggregate-only criterion (server.itl,
// server.tpot have no per-request values to rank).
func TestsOf(p *analyze.Policy, level float64) ([]Test, error) {
	if p == nil || len(p.Criteria) == 0 {
		return nil, errors.New("a search needs an SLO: give --slo KEY:MS or --slo-file")
	}
	if levelKey(level) == strconv.FormatFloat(level, 'g', -1, 64) {
		return nil, fmt.Errorf("the quantile level must be one of 0.5, 0.9, 0.95, 0.99, not %g", level)
	}
	var tests []Test
	for _, c := range p.Criteria {
		if _, ok := analyze.SpanAttributes[c.Key()]; !ok && c.Boundary == analyze.BoundaryServer {
			return nil, fmt.Errorf("criterion %s has no per-request values (aggregate histograms only); a search ranks per-request values", c.Key())
		}
		tests = append(tests, Test{Kind: artifact.TestQuantile, Key: c.Key(), Level: level, MaxMs: c.MaxMs})
		if c.AttainmentTarget != nil {
			tests = append(tests, Test{Kind: artifact.TestAttainment, Key: c.Key(), Level: *c.AttainmentTarget})
		}
	}
	if p.AttainmentTarget != nil {
		tests = append(tests, Test{Kind: artifact.TestAttainment, Level: *p.AttainmentTarget})
	}
	return tests, nil
}

// Judge decides one probe from its case report, each test under rule (a symmetric
// order-statistic interval, or Clopper-Pearson bounds, at rule.Confidence: each bound errs
// with probability at most (1 − confidence)/2). A quantile test passes when its upper bound
// is ≤ MaxMs, fails when its lower bound is > MaxMs, and is extended otherwise (also when
// the sample is too small for the interval to exist). An attainment test passes when its
// lower bound is ≥ the target, fails when its upper bound is below it, and is extended
// otherwise. The probe fails when any test fails, passes when every test passes, and is
// extended otherwise.
func Judge(c *analyze.CaseReport, tests []Test, rule analyze.Rule) (string, []artifact.SearchTest) {
	out := make([]artifact.SearchTest, len(tests))
	for i, t := range tests {
		if t.Kind == artifact.TestQuantile {
			out[i] = judgeQuantile(c, t, rule)
		} else {
			out[i] = judgeAttainment(c, t, rule)
		}
	}
	return combine(out), out
}

// combine is the probe's decision from its tests' decisions.
func combine(tests []artifact.SearchTest) string {
	all := true
	for _, t := range tests {
		switch t.Decision {
		case artifact.DecisionFail:
			return artifact.DecisionFail
		case artifact.DecisionPass:
		default:
			all = false
		}
	}
	if all {
		return artifact.DecisionPass
	}
	return artifact.DecisionExtend
}

func judgeQuantile(c *analyze.CaseReport, t Test, rule analyze.Rule) artifact.SearchTest {
	st := artifact.SearchTest{Kind: t.Kind, Key: t.Key, Level: t.Level, Threshold: t.MaxMs, Decision: artifact.DecisionExtend}
	m, ok := c.Latency.Metrics[t.Key]
	if !ok {
		st.Reason = "no values for " + t.Key + " (server criteria need joined spans)"
		return st
	}
	e, ok := m.FailurePenalized[levelKey(t.Level)]
	switch {
	case !ok:
		st.Reason = "the report has no " + levelKey(t.Level) + " estimate"
		return st
	case e.Reason != nil:
		st.Reason = *e.Reason
		return st
	}
	_, _, _, exists, err := analyze.Ranks(e.N, t.Level, rule)
	switch {
	case err != nil:
		st.Reason = err.Error()
		return st
	case !exists:
		st.Reason = fmt.Sprintf("%d requests are too few for a %g interval", e.N, rule.Confidence)
		return st
	case e.Interval == nil:
		// The interval exists but its lower rank falls among the failures: the quantile is
		// beyond every successful value, hence beyond any threshold.
		st.Decision = artifact.DecisionFail
		st.Reason = "the lower bound falls among failed requests"
		return st
	}
	st.Lower = artifact.Ptr(e.Interval.LowerMs)
	st.Upper = e.Interval.UpperMs
	st.Estimate = e.ValueMs
	switch {
	case e.Interval.LowerMs > t.MaxMs:
		st.Decision = artifact.DecisionFail
	case e.Interval.UpperMs != nil && *e.Interval.UpperMs <= t.MaxMs:
		st.Decision = artifact.DecisionPass
	case e.Interval.UpperMs == nil:
		st.Reason = "the upper bound falls among failed requests"
	}
	return st
}

func judgeAttainment(c *analyze.CaseReport, t Test, rule analyze.Rule) artifact.SearchTest {
	st := artifact.SearchTest{Kind: t.Kind, Key: t.Key, Level: t.Level, Threshold: t.Level, Decision: artifact.DecisionExtend}
	ev := c.SLO
	if ev == nil || ev.Offered == 0 {
		st.Reason = "no SLO evaluation"
		return st
	}
	lowGood, highGood := ev.Met, ev.Met+ev.Unknown
	if t.Key != "" {
		cc, ok := ev.PerCriterion[t.Key]
		if !ok {
			st.Reason = "no counts for " + t.Key
			return st
		}
		// Requests that did not succeed are not good: only the successful ones' outcomes count.
		lowGood = cc.Pass + cc.NotApplicable
		highGood = lowGood + cc.Unknown
	}
	half := (1 - rule.Confidence) / 2
	lo, hi := ClopperPearson(lowGood, ev.Offered, half)
	_, hi = ClopperPearson(highGood, ev.Offered, half)
	st.Lower, st.Upper = artifact.Ptr(lo), artifact.Ptr(hi)
	st.Estimate = artifact.Ptr(float64(lowGood) / float64(ev.Offered))
	switch {
	case lo >= t.Level:
		st.Decision = artifact.DecisionPass
	case hi < t.Level:
		st.Decision = artifact.DecisionFail
	}
	return st
}

// ClopperPearson returns the exact one-sided bounds of a binomial proportion from x
// successes in n trials, each erring with probability at most alpha: lower solves
// P(X ≥ x | p) = alpha (0 when x = 0), upper solves P(X ≤ x | p) = alpha (1 when x = n).
// Inputs outside 0 ≤ x ≤ n, n ≥ 1, 0 < alpha < 1 give (0, 1), the uninformative bounds.
func ClopperPearson(x, n int, alpha float64) (lower, upper float64) {
	if n < 1 || x < 0 || x > n || !(alpha > 0 && alpha < 1) {
		return 0, 1
	}
	lower, upper = 0, 1
	if x > 0 {
		// P(X ≥ x | p) grows with p: the smallest p where it reaches alpha.
		lower = bisect(func(p float64) bool { return 1-binomCDF(x-1, n, p) >= alpha })
	}
	if x < n {
		// P(X ≤ x | p) falls with p: the largest p where it is still ≥ alpha.
		upper = bisect(func(p float64) bool { return binomCDF(x, n, p) < alpha })
	}
	return lower, upper
}

// bisect finds the boundary in (0, 1) of a predicate that is false below it and true above.
func bisect(above func(float64) bool) float64 {
	lo, hi := 0.0, 1.0
	for range 60 {
		mid := (lo + hi) / 2
		if above(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return (lo + hi) / 2
}

// binomCDF is P(X ≤ k) for X ~ Binomial(n, p), summed from its log pmf by the recurrence
// pmf(i+1) = pmf(i)·(n−i)/(i+1)·p/(1−p), one logarithm a term.
func binomCDF(k, n int, p float64) float64 {
	if k < 0 {
		return 0
	}
	if k >= n {
		return 1
	}
	step := math.Log(p) - math.Log1p(-p)
	lpmf := float64(n) * math.Log1p(-p)
	sum := 0.0
	for i := 0; i <= k; i++ {
		sum += math.Exp(lpmf)
		lpmf += math.Log(float64(n-i)/float64(i+1)) + step
	}
	return math.Min(sum, 1)
}
