package capacity

import (
	"context"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
)

func search(t *testing.T, f *fake, o Options) *artifact.Search {
	t.Helper()
	if o.Tests == nil {
		o.Tests = e2eTests
	}
	res, err := Search(context.Background(), f, o)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func val(p *float64) float64 {
	if p == nil {
		return -1
	}
	return *p
}

// inBracket reports whether [lo, hi] is within the tolerance and holds the knee, allowing
// for the probes nearest the knee erring within the tolerance (a wrong decision is possible
// only where the truth is within the noise of the threshold).
func inBracket(knee, lo, hi, tol float64) bool {
	return lo > 0 && hi-lo <= tol*lo && lo <= knee*(1+tol) && hi >= knee*(1-tol) && lo < hi
}

// Noise too large for the budget near the knee: the search says undecided and keeps the
// knee inside its wider bracket rather than returning a capacity above it.
func TestSearchNoisyKneeUndecided(t *testing.T) {
	for _, seed := range []int64{1, 2, 3} {
		f := &fake{truth: smooth(50), threshold: 200, sigma: 2}
		res := search(t, f, Options{Over: artifact.OverRate, Min: 2, Max: 400, Seed: seed})
		lo, hi := val(res.BracketLower), val(res.BracketUpper)
		if res.Status != artifact.SearchUndecided || !(lo < 50 && 50 < hi) || hi-lo <= 0.1*lo {
			t.Errorf("seed %d: status %s bracket [%g, %g], want undecided, wider than 10%% and holding 50", seed, res.Status, lo, hi)
		}
	}
}

func TestSearchBracketsSmoothKneeConcurrency(t *testing.T) {
	f := &fake{truth: smooth(20.5), threshold: 200, sigma: 0.1}
	res := search(t, f, Options{Over: artifact.OverConcurrency, Min: 1, Max: 256, Seed: 7})
	lo, hi := val(res.Capacity), val(res.BracketUpper)
	if res.Status != artifact.SearchFound || !(lo <= 20.5 && 20.5 < hi) || hi-lo > max(1, 0.1*lo) || val(res.BracketLower) != lo {
		t.Fatalf("status %s capacity %v bracket [%v, %v], want found around 20.5 within 10%%; probes %+v", res.Status, lo, val(res.BracketLower), hi, res.Probes)
	}
	if res.Boundary != artifact.BoundarySmooth || res.BindingCriterion == nil || *res.BindingCriterion != "client.e2e p95" {
		t.Fatalf("boundary %s binding %v", res.Boundary, res.BindingCriterion)
	}
	if res.ProbesSpent != len(res.Probes) || res.RunsSpent != len(f.stages) || res.RunsSpent < res.ProbesSpent {
		t.Fatalf("spent %d probes %d runs, %d stages seen", res.ProbesSpent, res.RunsSpent, len(f.stages))
	}
	seeds := map[int64]bool{}
	for _, s := range f.stages {
		if seeds[s.Seed] {
			t.Fatalf("seed %d reused", s.Seed)
		}
		seeds[s.Seed] = true
	}
}

func TestSearchBracketsSmoothKneeRate(t *testing.T) {
	f := &fake{truth: smooth(37.5), threshold: 200, sigma: 0.1}
	res := search(t, f, Options{Over: artifact.OverRate, Min: 1, Max: 1000, Seed: 3})
	lo, hi := val(res.BracketLower), val(res.BracketUpper)
	if res.Status != artifact.SearchFound || !inBracket(37.5, lo, hi, 0.1) {
		t.Fatalf("status %s bracket [%g, %g], want found around 37.5 within 10%%", res.Status, lo, hi)
	}
}

func TestSearchSeedsAgree(t *testing.T) {
	for _, seed := range []int64{1, 100, 10_000, 77_777} {
		f := &fake{truth: smooth(50), threshold: 200, sigma: 0.1}
		res := search(t, f, Options{Over: artifact.OverRate, Min: 2, Max: 400, Seed: seed})
		lo, hi := val(res.BracketLower), val(res.BracketUpper)
		if res.Status != artifact.SearchFound || !inBracket(50, lo, hi, 0.1) {
			t.Errorf("seed %d: status %s bracket [%g, %g], want found around 50 within 10%%", seed, res.Status, lo, hi)
		}
	}
}

func TestSearchCliff(t *testing.T) {
	f := &fake{truth: cliff(37), threshold: 200, sigma: 1}
	res := search(t, f, Options{Over: artifact.OverConcurrency, Min: 1, Max: 512})
	lo, hi := val(res.Capacity), val(res.BracketUpper)
	if res.Status != artifact.SearchFound || !(lo <= 37 && 37 < hi) || hi-lo > max(1, 0.1*lo) || res.Boundary != artifact.BoundaryCliff {
		t.Fatalf("status %s capacity %g upper %g boundary %s, want found [≤37, >37] within 10%% and cliff", res.Status, lo, hi, res.Boundary)
	}
}

func TestSearchNoneWhenMinimumFails(t *testing.T) {
	f := &fake{truth: func(float64) float64 { return 500 }, threshold: 200, sigma: 1}
	res := search(t, f, Options{Over: artifact.OverConcurrency, Min: 1, Max: 64})
	if res.Status != artifact.SearchNone || res.Capacity != nil || len(res.Probes) != 1 || res.Probes[0].Decision != artifact.DecisionFail {
		t.Fatalf("status %s capacity %v probes %+v, want none after one failing probe", res.Status, res.Capacity, res.Probes)
	}
}

func TestSearchAboveRange(t *testing.T) {
	f := &fake{truth: func(float64) float64 { return 50 }, threshold: 200, sigma: 1}
	res := search(t, f, Options{Over: artifact.OverConcurrency, Min: 1, Max: 10})
	if res.Status != artifact.SearchAboveRange || val(res.Capacity) != 10 || res.BracketUpper != nil {
		t.Fatalf("status %s capacity %g upper %v, want above_range 10", res.Status, val(res.Capacity), res.BracketUpper)
	}
	if got := len(res.Probes); got != 5 { // 1, 2, 4, 8, 10
		t.Fatalf("%d probes, want 5", got)
	}
}

// A plateau exactly at the threshold can never be decided: the search must not return a
// capacity inside it, and says it is undecided.
func TestSearchUndecidedPlateau(t *testing.T) {
	truth := func(x float64) float64 {
		switch {
		case x < 16:
			return 100
		case x <= 24:
			return 200
		}
		return 400
	}
	f := &fake{truth: truth, threshold: 200, sigma: 1}
	res := search(t, f, Options{Over: artifact.OverConcurrency, Min: 1, Max: 64, MaxRequestsPerProbe: 400})
	if res.Status != artifact.SearchUndecided {
		t.Fatalf("status %s, want undecided; probes %+v", res.Status, res.Probes)
	}
	if res.Capacity == nil || *res.Capacity >= 16 {
		t.Fatalf("capacity %v, want a pass below 16", res.Capacity)
	}
	undecided := 0
	for _, p := range res.Probes {
		if p.Decision == artifact.DecisionUndecided {
			undecided++
			if p.Requests != 400 || p.Stages < 2 || !strings.Contains(p.Reason, "straddle") {
				t.Fatalf("undecided probe %+v: want the budget spent and the reason", p)
			}
		}
	}
	if undecided == 0 || len(res.Warnings) < undecided {
		t.Fatalf("%d undecided probes, warnings %q", undecided, res.Warnings)
	}
}

func TestSearchNonMonotone(t *testing.T) {
	truth := func(x float64) float64 {
		if x >= 4 && x < 6 || x > 40 {
			return 400
		}
		return 100
	}
	f := &fake{truth: truth, threshold: 200, sigma: 1}
	res := search(t, f, Options{Over: artifact.OverConcurrency, Min: 1, Max: 64})
	if res.Boundary != artifact.BoundaryNonMonotone || val(res.Capacity) != 3 || val(res.BracketUpper) != 4 {
		t.Fatalf("boundary %s capacity %g upper %g, want non_monotone 3 4; probes %+v", res.Boundary, val(res.Capacity), val(res.BracketUpper), res.Probes)
	}
	if len(res.Warnings) == 0 || !strings.Contains(res.Warnings[0], "not monotone") {
		t.Fatalf("warnings %q", res.Warnings)
	}
}

func TestSearchDeterministic(t *testing.T) {
	a := search(t, &fake{truth: smooth(30), threshold: 200, sigma: 3}, Options{Over: artifact.OverRate, Min: 1, Max: 100, Seed: 5})
	b := search(t, &fake{truth: smooth(30), threshold: 200, sigma: 3}, Options{Over: artifact.OverRate, Min: 1, Max: 100, Seed: 5})
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("two searches with the same prober differ:\n%+v\n%+v", a, b)
	}
}

func TestSearchMaxProbes(t *testing.T) {
	f := &fake{truth: smooth(300), threshold: 200, sigma: 1}
	res := search(t, f, Options{Over: artifact.OverRate, Min: 1, Max: 1000, MaxProbes: 4})
	if len(res.Probes) != 4 || res.Status != artifact.SearchUndecided || val(res.Capacity) != 8 {
		t.Fatalf("%d probes status %s capacity %g, want 4 undecided 8", len(res.Probes), res.Status, val(res.Capacity))
	}
}

func TestSearchOptionErrors(t *testing.T) {
	for _, o := range []Options{
		{Over: "tokens", Min: 1, Max: 2},
		{Min: 0, Max: 2},
		{Min: 4, Max: 2},
		{Min: 1.5, Max: 8},
		{Min: 1, Max: 8, Tolerance: 1.5},
		{Min: 1, Max: 8, Confidence: 1},
		{Min: 1, Max: 8, MaxProbes: 1},
		{Min: 1, Max: 8, MaxRequestsPerProbe: 10},
	} {
		if o.Tests == nil {
			o.Tests = e2eTests
		}
		f := &fake{truth: smooth(5), threshold: 200, sigma: 1}
		if _, err := Search(context.Background(), f, o); err == nil || len(f.stages) != 0 {
			t.Errorf("%+v: err %v after %d stages, want an error before probing", o, err, len(f.stages))
		}
	}
	if _, err := Search(context.Background(), &fake{}, Options{Min: 1, Max: 8}); err == nil {
		t.Error("no tests: want an error")
	}
}

func TestPlanSplitsConfidenceOverLooks(t *testing.T) {
	p95, err := PlanOf(Options{Min: 1, Max: 2, Tests: e2eTests})
	if err != nil {
		t.Fatal(err)
	}
	// Nominal 0.95: 72 requests make the p95 interval exist; 72·2^k up to 1000 is 5 looks.
	if p95.Looks != 5 || p95.Rule.Confidence != 1-0.05/5 || p95.First != 104 {
		t.Fatalf("plan %+v, want 5 looks at 0.99 from 104 requests", p95)
	}
	p99, err := PlanOf(Options{Min: 1, Max: 2, Tests: e2eTests, Confidence: 0.99})
	if err != nil {
		t.Fatal(err)
	}
	if !(p99.Rule.Confidence > p95.Rule.Confidence && p99.First > p95.First) {
		t.Fatalf("confidence 0.99 plan %+v is not stricter than %+v", p99, p95)
	}
	if _, err := PlanOf(Options{Min: 1, Max: 2, Tests: e2eTests, MaxRequestsPerProbe: 50}); err == nil {
		t.Fatal("50 requests cannot decide a p95: want an error")
	}
	_, err = PlanOf(Options{Min: 1, Max: 2, Tests: e2eTests, Requests: 5000, MaxRequestsPerProbe: 1000})
	if err == nil || err.Error() != "--requests 5000 is more than --max-requests-per-probe 1000" {
		t.Fatalf("requests above the maximum: %v", err)
	}
}

// Random step-and-noise truths: whatever the prober says, the result keeps its invariants —
// the capacity is the bracket's lower end, below every failing value; found means within the
// tolerance; every probe is inside the range and decided or undecided.
func TestSearchInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for i := range 300 {
		knee := 1 + rng.Float64()*300
		jump := rng.Float64() * 3
		bump := rng.Float64() * 400
		truth := func(x float64) float64 {
			q := 100 * (1 + x/knee)
			if x > knee {
				q += 100 * jump
			}
			if x > bump && x < bump*1.3 {
				q *= 3
			}
			return q
		}
		over := artifact.OverRate
		if i%2 == 0 {
			over = artifact.OverConcurrency
		}
		o := Options{Over: over, Min: 1, Max: float64(2 + rng.IntN(500)), Seed: int64(i), MaxProbes: 2 + rng.IntN(20),
			MaxRequestsPerProbe: 104 + rng.IntN(2000), Tolerance: 0.01 + rng.Float64()*0.5}
		res := search(t, &fake{truth: truth, threshold: 200, sigma: rng.Float64() * 3}, o)
		if len(res.Probes) > o.MaxProbes || len(res.Probes) == 0 {
			t.Fatalf("case %d: %d probes for a budget of %d", i, len(res.Probes), o.MaxProbes)
		}
		for _, p := range res.Probes {
			if p.Value < o.Min || p.Value > o.Max || p.Decision == artifact.DecisionExtend {
				t.Fatalf("case %d: probe %+v", i, p)
			}
			if res.Capacity != nil && failed(p.Decision) && p.Value <= *res.Capacity {
				t.Fatalf("case %d: capacity %g at or above the failure at %g", i, *res.Capacity, p.Value)
			}
		}
		if (res.Capacity == nil) != (res.BracketLower == nil) || res.Capacity != nil && *res.Capacity != *res.BracketLower {
			t.Fatalf("case %d: capacity %v, bracket lower %v", i, res.Capacity, res.BracketLower)
		}
		if res.Status == artifact.SearchFound {
			lo, hi := *res.BracketLower, *res.BracketUpper
			if hi-lo > o.Tolerance*lo && !(over == artifact.OverConcurrency && hi-lo <= 1) {
				t.Fatalf("case %d: found with bracket [%g, %g] at tolerance %g", i, lo, hi, o.Tolerance)
			}
		}
	}
}
