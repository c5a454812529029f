package capacity

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/inferprobe/inferprobe/artifact"
)

// Search finds the largest value of o's range that meets the SLO, probing through pr.
//
// Bracket: probe Min, then grow the value by Growth (capped at Max) until a probe fails;
// when something passed, one further probe above the first failure checks monotonicity (a
// pass there makes the boundary non_monotone). Refine: probe inside the bracket [last pass, first failure] at
// the root of an isotonic fit of every probe's criterion margins (safeguarded to the middle
// half of the bracket), until the bracket is within the tolerance with both ends decided.
// An undecided probe is never read as a pass or a fail: the search refines the widest gap
// it leaves in the bracket, and when every gap is within a quarter of the tolerance but the
// bracket is not within the tolerance, it stops with status undecided and the wider bracket. An unsustainable probe counts as a failure. Each probe is decided by stages: the
// plan's first size, doubled on every extension up to MaxRequestsPerProbe, then undecided.
//
// The result is deterministic given the prober. Errors: invalid options (nothing probed), or
// the prober's error (the result so far is returned with it).
func Search(ctx context.Context, pr Prober, o Options) (*artifact.Search, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	plan, err := PlanOf(o)
	if err != nil {
		return nil, err
	}
	s := &searcher{pr: pr, o: o, plan: plan, res: &artifact.Search{
		SearchID: o.SearchID, Over: o.Over, Min: o.Min, Max: o.Max, Tolerance: o.Tolerance,
		Confidence: o.Confidence, Probes: []artifact.SearchProbe{}, Warnings: []string{},
	}}
	err = s.run(ctx)
	s.finish()
	if ctx.Err() != nil {
		s.res.Status = artifact.SearchInterrupted
	}
	return s.res, err
}

// searcher is the state of one search.
type searcher struct {
	pr   Prober
	o    Options
	plan Plan
	res  *artifact.Search
	runs int

	lo, hi      *artifact.SearchProbe // last pass below the first failure; the first failure
	undecided   []float64             // undecided values
	nonMonotone bool
}

func (s *searcher) run(ctx context.Context) error {
	if err := s.bracket(ctx); err != nil {
		return err
	}
	return s.refine(ctx)
}

// bracket grows the value from Min until a failure (or Max), then checks one value above it.
func (s *searcher) bracket(ctx context.Context) error {
	x := s.o.Min
	for {
		p, err := s.probe(ctx, x)
		if err != nil {
			return err
		}
		if failed(p.Decision) {
			break
		}
		if x >= s.o.Max || len(s.res.Probes) >= s.o.MaxProbes {
			return nil
		}
		x = s.grow(x)
	}
	if s.lo == nil || x >= s.o.Max || len(s.res.Probes) >= s.o.MaxProbes {
		return nil
	}
	p, err := s.probe(ctx, s.grow(x))
	if err == nil && p.Decision == artifact.DecisionPass {
		s.nonMonotone = true
		s.res.Warnings = append(s.res.Warnings, fmt.Sprintf("%g passed after %g failed: the boundary is not monotone; the capacity is the last pass below the first failure", p.Value, x))
	}
	return err
}

// grow is the next bracketing value above x: x·Growth, rounded up to a whole number in
// concurrency mode (at least x+1), at most Max.
func (s *searcher) grow(x float64) float64 {
	next := x * s.o.Growth
	if s.o.Over == artifact.OverConcurrency {
		next = math.Max(math.Ceil(next), x+1)
	}
	return math.Min(next, s.o.Max)
}

func failed(decision string) bool {
	return decision == artifact.DecisionFail || decision == artifact.DecisionUnsustainable
}

// refine narrows [lo, hi] until it is within the tolerance, the budget is spent, or every
// gap the undecided probes leave inside it is within the tolerance.
func (s *searcher) refine(ctx context.Context) error {
	for s.lo != nil && s.hi != nil {
		if s.within(s.lo.Value, s.hi.Value) || len(s.res.Probes) >= s.o.MaxProbes {
			return nil
		}
		a, b, ok := s.gap()
		if !ok {
			return nil
		}
		if _, err := s.probe(ctx, s.next(a, b)); err != nil {
			return err
		}
	}
	return nil
}

// gap is the relatively widest interval between consecutive points of lo, the undecided
// values inside the bracket and hi that is still wider than a quarter of the tolerance (or
// than adjacent whole numbers in concurrency mode): a probe there can still move an end of
// the bracket. ok is false when none is left.
func (s *searcher) gap() (a, b float64, ok bool) {
	pts := []float64{s.lo.Value}
	for _, u := range s.undecided {
		if u > s.lo.Value && u < s.hi.Value {
			pts = append(pts, u)
		}
	}
	pts = append(pts, s.hi.Value)
	best := -1.0
	for i := 1; i < len(pts); i++ {
		if pts[i]-pts[i-1] <= s.o.Tolerance*pts[i-1]/4 || s.o.Over == artifact.OverConcurrency && pts[i]-pts[i-1] <= 1 {
			continue
		}
		if w := (pts[i] - pts[i-1]) / pts[i-1]; w > best {
			best, a, b, ok = w, pts[i-1], pts[i], true
		}
	}
	return a, b, ok
}

// within reports whether [a, b] is narrow enough: b − a ≤ Tolerance·a, or adjacent whole
// numbers in concurrency mode.
func (s *searcher) within(a, b float64) bool {
	if s.o.Over == artifact.OverConcurrency && b-a <= 1 {
		return true
	}
	return b-a <= s.o.Tolerance*a
}

// next is the refining value inside (a, b). The isotonic fit's root r (the middle when the
// fit does not cross 0 there) is where probes are least decidable, so next straddles it:
// r·(1 − 0.45·Tolerance) or r·(1 + 0.45·Tolerance), whichever leaves the wider gap to its
// end, so that a pass and a fail there close the bracket within the tolerance. It is kept at
// least a tenth of the gap away from both ends (every probe shrinks the gap) and, in
// concurrency mode, rounded to a whole number strictly inside.
func (s *searcher) next(a, b float64) float64 {
	w := b - a
	x := a + w/2
	if r, ok := root(fitPoints(s.res.Probes), a, b); ok {
		below, above := r*(1-0.45*s.o.Tolerance), r*(1+0.45*s.o.Tolerance)
		x = below
		if below-a < b-above {
			x = above
		}
	}
	x = math.Min(math.Max(x, a+w/10), b-w/10)
	if s.o.Over == artifact.OverConcurrency {
		x = math.Min(math.Max(math.Round(x), a+1), b-1)
	}
	return x
}

// probe decides value x by stages and records it.
func (s *searcher) probe(ctx context.Context, x float64) (artifact.SearchProbe, error) {
	p := artifact.SearchProbe{Index: len(s.res.Probes) + 1, Value: x, LookConfidence: s.plan.Rule.Confidence}
	n := min(s.plan.First, s.o.MaxRequestsPerProbe)
	for {
		s.runs++
		p.Stages++
		p.Seed = s.o.Seed + int64(s.runs) - 1
		out, err := s.pr.Probe(ctx, Stage{Probe: p.Index, Stage: p.Stages, Value: x, Requests: n, Seed: p.Seed, Rule: s.plan.Rule})
		s.res.RunsSpent++
		s.res.RequestsSpent += out.Requests
		p.Requests, p.Tests, p.Artifact, p.Reason = out.Requests, out.Tests, out.Artifact, out.Reason
		if out.Note != "" {
			s.res.Warnings = append(s.res.Warnings, fmt.Sprintf("probe %d at %g, run %d: %s", p.Index, x, p.Stages, out.Note))
		}
		if err != nil {
			p.Decision = artifact.DecisionUndecided
			p.Reason = err.Error()
			if ctx.Err() != nil {
				p.Reason = "the search was interrupted while this probe ran"
			}
			s.record(p)
			return p, err
		}
		switch out.Decision {
		case artifact.DecisionPass, artifact.DecisionFail, artifact.DecisionUnsustainable:
			p.Decision = out.Decision
			s.record(p)
			return p, nil
		}
		if n >= s.o.MaxRequestsPerProbe {
			p.Decision = artifact.DecisionUndecided
			if p.Reason == "" {
				p.Reason = undecidedReason(out.Tests, n)
			}
			s.record(p)
			return p, nil
		}
		n = min(2*n, s.o.MaxRequestsPerProbe)
	}
}

// undecidedReason names the tests still open after n requests.
func undecidedReason(tests []artifact.SearchTest, n int) string {
	var open []string
	for _, t := range tests {
		if t.Decision == artifact.DecisionExtend {
			name := Test{Kind: t.Kind, Key: t.Key, Level: t.Level}.Name()
			if t.Reason != "" {
				name += " (" + t.Reason + ")"
			}
			open = append(open, name)
		}
	}
	return fmt.Sprintf("after %d requests the bounds of %s still straddle the threshold", n, strings.Join(open, ", "))
}

// record appends p and updates the bracket: the first failure is the lowest failing value,
// the last pass the highest passing value below it.
func (s *searcher) record(p artifact.SearchProbe) {
	s.res.Probes = append(s.res.Probes, p)
	s.lo, s.hi = nil, nil
	for i := range s.res.Probes {
		q := &s.res.Probes[i]
		if failed(q.Decision) && (s.hi == nil || q.Value < s.hi.Value) {
			s.hi = q
		}
	}
	s.undecided = s.undecided[:0]
	for i := range s.res.Probes {
		q := &s.res.Probes[i]
		switch {
		case q.Decision == artifact.DecisionPass && (s.hi == nil || q.Value < s.hi.Value) && (s.lo == nil || q.Value > s.lo.Value):
			s.lo = q
		case q.Decision == artifact.DecisionUndecided:
			s.undecided = append(s.undecided, q.Value)
		}
	}
	slices.Sort(s.undecided)
}

// finish sets the result's status, capacity, bracket, binding criterion and shape.
func (s *searcher) finish() {
	r := s.res
	r.ProbesSpent = len(r.Probes)
	if s.lo != nil {
		r.Capacity = artifact.Ptr(s.lo.Value)
		r.BracketLower = artifact.Ptr(s.lo.Value)
	}
	if s.hi != nil {
		r.BracketUpper = artifact.Ptr(s.hi.Value)
		r.BindingCriterion = binding(s.hi)
	}
	r.Boundary = artifact.BoundaryUnknown
	switch {
	case s.lo != nil && s.hi == nil && s.lo.Value >= s.o.Max:
		r.Status = artifact.SearchAboveRange
	case s.lo == nil && s.hi != nil && s.hi.Value == s.o.Min:
		r.Status = artifact.SearchNone
	case s.lo != nil && s.hi != nil && s.within(s.lo.Value, s.hi.Value):
		r.Status = artifact.SearchFound
	default:
		r.Status = artifact.SearchUndecided
	}
	if s.lo == nil && r.Status == artifact.SearchUndecided && len(s.undecided) == 0 && s.hi != nil {
		r.Status = artifact.SearchNone
	}
	if s.lo != nil && s.hi != nil {
		r.Boundary = shape(s.lo, s.hi)
	}
	if s.nonMonotone {
		r.Boundary = artifact.BoundaryNonMonotone
	}
	for _, p := range r.Probes {
		if p.Decision == artifact.DecisionUndecided {
			r.Warnings = append(r.Warnings, fmt.Sprintf("probe %d at %g is undecided: %s", p.Index, p.Value, p.Reason))
		}
	}
}

// binding names the failing test of the first failure with the largest lower margin, or
// "backlog" for an unsustainable probe.
func binding(p *artifact.SearchProbe) *string {
	if p.Decision == artifact.DecisionUnsustainable {
		return artifact.Ptr("backlog")
	}
	best, name := math.Inf(-1), ""
	for _, t := range p.Tests {
		if t.Decision != artifact.DecisionFail {
			continue
		}
		if lo, _ := margins(t); lo > best || name == "" {
			best, name = lo, Test{Kind: t.Kind, Key: t.Key, Level: t.Level}.Name()
		}
	}
	if name == "" {
		return nil
	}
	return &name
}
