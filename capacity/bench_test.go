package capacity

import (
	"context"
	"math"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
)

// bisection is plain bisection as peers run it: probes of a fixed n requests decided by the
// sign of the point estimate alone (p95 ≤ threshold passes), Min then Max, then midpoints
// until the bracket is within the tolerance. It returns the bracket and what it spent.
func bisection(f *fake, o Options, n int) (lo, hi float64, probes, requests int) {
	seed := o.Seed
	pass := func(x float64) bool {
		probes++
		requests += n
		seed++
		return f.point(Stage{Value: x, Requests: n, Seed: seed}) <= f.threshold
	}
	if !pass(o.Min) {
		return 0, o.Min, probes, requests
	}
	if pass(o.Max) {
		return o.Max, math.Inf(1), probes, requests
	}
	lo, hi = o.Min, o.Max
	for hi-lo > o.Tolerance*lo && !(o.Over == artifact.OverConcurrency && hi-lo <= 1) {
		mid := (lo + hi) / 2
		if o.Over == artifact.OverConcurrency {
			mid = math.Round(mid)
		}
		if pass(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, hi, probes, requests
}

// scenario is one sim setting of the comparison.
type scenario struct {
	name  string
	truth func(float64) float64
	knee  float64
	sigma float64
}

var scenarios = []scenario{
	{"smooth", smooth(50), 50, 0.1},
	{"smooth_noisy", smooth(50), 50, 0.5},
	{"cliff", cliff(50), 50, 0.1},
}

// tally is what a set of searches spent and how many brackets missed the knee.
type tally struct{ probes, requests, wrong, undecided, runs int }

func (t *tally) add(probes, requests int, lo, hi, knee, tol float64) {
	t.runs++
	t.probes += probes
	t.requests += requests
	if !(lo <= knee*(1+tol) && hi >= knee*(1-tol)) {
		t.wrong++
	}
}

// compare runs the search and plain bisection (n requests a probe) on every scenario with
// seeds 1..seeds, over rate 1..1000.
func compare(seeds, n int) (search, bisect map[string]*tally) {
	search, bisect = map[string]*tally{}, map[string]*tally{}
	for _, sc := range scenarios {
		search[sc.name], bisect[sc.name] = &tally{}, &tally{}
		for seed := 1; seed <= seeds; seed++ {
			o := Options{Over: artifact.OverRate, Min: 1, Max: 1000, Tests: e2eTests, Seed: int64(seed * 1000)}
			f := &fake{truth: sc.truth, threshold: 200, sigma: sc.sigma}
			res, _ := Search(context.Background(), f, o)
			lo, hi := val(res.BracketLower), math.Inf(1)
			if res.BracketUpper != nil {
				hi = *res.BracketUpper
			}
			search[sc.name].add(res.ProbesSpent, res.RequestsSpent, lo, hi, sc.knee, 0.1)
			if res.Status == artifact.SearchUndecided {
				search[sc.name].undecided++
			}
			o, _ = o.withDefaults()
			blo, bhi, bp, br := bisection(&fake{truth: sc.truth, threshold: 200, sigma: sc.sigma}, o, n)
			bisect[sc.name].add(bp, br, blo, bhi, sc.knee, 0.1)
		}
	}
	return search, bisect
}

// TestSearchCheaperAndNoWorseThanBisection: on the clean scenarios the search spends fewer
// requests than bisection at 1,000 requests a probe and never misses the knee; with 104
// requests a probe (the search's first size) bisection misses it on the noisy one.
func TestSearchCheaperAndNoWorseThanBisection(t *testing.T) {
	search, bisect := compare(20, 1000)
	for _, name := range []string{"smooth", "cliff"} {
		s, b := search[name], bisect[name]
		if s.wrong != 0 || s.requests >= b.requests {
			t.Errorf("%s: search %+v, bisection %+v", name, *s, *b)
		}
	}
	_, cheap := compare(20, 104)
	if cheap["smooth_noisy"].wrong == 0 {
		t.Errorf("bisection at 104 requests never missed the noisy knee: %+v", *cheap["smooth_noisy"])
	}
}

// BenchmarkSearchVsBisection reports, per scenario, the mean probes and requests of a
// search and of plain bisection at 1,000 requests a probe, their ratio, how often each
// bracket missed the knee, how often the search ended undecided, and how often bisection at
// 104 requests a probe (the search's first size) missed the knee (20 seeds). Run: go test -bench SearchVsBisection -run '^$' ./capacity
func BenchmarkSearchVsBisection(b *testing.B) {
	for _, sc := range scenarios {
		b.Run(sc.name, func(b *testing.B) {
			var s, bi, cheap *tally
			for range b.N {
				ss, bb := compare(20, 1000)
				_, cc := compare(20, 104)
				s, bi, cheap = ss[sc.name], bb[sc.name], cc[sc.name]
			}
			runs := float64(s.runs)
			b.ReportMetric(float64(s.probes)/runs, "search_probes")
			b.ReportMetric(float64(s.requests)/runs, "search_requests")
			b.ReportMetric(float64(bi.probes)/runs, "bisect_probes")
			b.ReportMetric(float64(bi.requests)/runs, "bisect_requests")
			b.ReportMetric(float64(s.requests)/float64(bi.requests), "requests_ratio")
			b.ReportMetric(float64(s.wrong)/runs, "search_wrong")
			b.ReportMetric(float64(bi.wrong)/runs, "bisect_wrong")
			b.ReportMetric(float64(s.undecided)/runs, "search_undecided")
			b.ReportMetric(float64(cheap.wrong)/runs, "bisect104_wrong")
		})
	}
}
