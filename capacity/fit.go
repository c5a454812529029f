package capacity

import (
	"math"
	"sort"

	"github.com/inferprobe/inferprobe/artifact"
)

// marginCap bounds a margin in the fit: beyond it a bound says only "far off".
const marginCap = 3.0

// margins are a test's bounds as relative distances beyond its threshold (positive = worse,
// 0 = at the threshold): a quantile's (bound − max_ms)/max_ms, an attainment's
// (target − bound)/target. A missing bound is ±Inf (unbounded).
func margins(t artifact.SearchTest) (lower, upper float64) {
	lower, upper = math.Inf(-1), math.Inf(1)
	if t.Threshold <= 0 {
		return lower, upper
	}
	if t.Kind == artifact.TestAttainment {
		if t.Upper != nil {
			lower = (t.Threshold - *t.Upper) / t.Threshold
		}
		if t.Lower != nil {
			upper = (t.Threshold - *t.Lower) / t.Threshold
		}
		return lower, upper
	}
	if t.Lower != nil {
		lower = (*t.Lower - t.Threshold) / t.Threshold
	} else if t.Decision == artifact.DecisionFail {
		lower = marginCap // the quantile falls among failures
	}
	if t.Upper != nil {
		upper = (*t.Upper - t.Threshold) / t.Threshold
	}
	return lower, upper
}

// probeMargin is a probe's margin interval: the worst test's, [max lower, max upper].
func probeMargin(p artifact.SearchProbe) (lower, upper float64, ok bool) {
	lower, upper = math.Inf(-1), math.Inf(-1)
	for _, t := range p.Tests {
		lo, hi := margins(t)
		lower, upper = math.Max(lower, lo), math.Max(upper, hi)
	}
	return lower, upper, len(p.Tests) > 0
}

// point is one probe in the fit: its value, the middle of its capped margin interval, and a
// weight that grows with the requests and shrinks with the interval's width.
type point struct{ x, m, w float64 }

// fitPoints are the probes with a margin interval, an unsustainable probe as a far failure.
func fitPoints(probes []artifact.SearchProbe) []point {
	var pts []point
	for _, p := range probes {
		if p.Decision == artifact.DecisionUnsustainable {
			pts = append(pts, point{p.Value, marginCap, 1})
			continue
		}
		lo, hi, ok := probeMargin(p)
		if !ok {
			continue
		}
		lo = math.Max(math.Min(lo, marginCap), -1)
		hi = math.Max(math.Min(hi, marginCap), -1)
		pts = append(pts, point{p.Value, (lo + hi) / 2, 1 / (0.01 + (hi-lo)*(hi-lo))})
	}
	return isotonic(pts)
}

// isotonic is the weighted least-squares non-decreasing fit of the margins over the values
// (pool-adjacent-violators): equal values are pooled first; each returned point carries its
// block's fitted margin.
func isotonic(pts []point) []point {
	sort.SliceStable(pts, func(i, j int) bool { return pts[i].x < pts[j].x })
	type block struct {
		m, w   float64
		xs     []float64
		weight []float64
	}
	var blocks []block
	for _, p := range pts {
		if n := len(blocks); n > 0 && blocks[n-1].xs[len(blocks[n-1].xs)-1] == p.x {
			b := &blocks[n-1]
			b.m = (b.m*b.w + p.m*p.w) / (b.w + p.w)
			b.w += p.w
			b.weight[len(b.weight)-1] += p.w
			continue
		}
		blocks = append(blocks, block{m: p.m, w: p.w, xs: []float64{p.x}, weight: []float64{p.w}})
		for len(blocks) > 1 && blocks[len(blocks)-2].m > blocks[len(blocks)-1].m {
			a, b := blocks[len(blocks)-2], blocks[len(blocks)-1]
			merged := block{m: (a.m*a.w + b.m*b.w) / (a.w + b.w), w: a.w + b.w,
				xs: append(a.xs, b.xs...), weight: append(a.weight, b.weight...)}
			blocks = append(blocks[:len(blocks)-2], merged)
		}
	}
	var out []point
	for _, b := range blocks {
		for i, x := range b.xs {
			out = append(out, point{x, b.m, b.weight[i]})
		}
	}
	return out
}

// at is the fit at x by linear interpolation between fitted points (constant beyond them).
func at(fit []point, x float64) float64 {
	if x <= fit[0].x {
		return fit[0].m
	}
	for i := 1; i < len(fit); i++ {
		if x <= fit[i].x {
			a, b := fit[i-1], fit[i]
			return a.m + (x-a.x)/(b.x-a.x)*(b.m-a.m)
		}
	}
	return fit[len(fit)-1].m
}

// root is where the fit crosses 0 between lo and top, by linear interpolation of the fit at
// the two ends; ok is false unless the fit is below 0 at lo and above it at top.
func root(fit []point, lo, top float64) (float64, bool) {
	if len(fit) == 0 {
		return 0, false
	}
	a, b := at(fit, lo), at(fit, top)
	if !(a < 0 && b > 0) {
		return 0, false
	}
	return lo + (-a)/(b-a)*(top-lo), true
}

// cliffJump is the least rise of the binding test's bounds across the final bracket, as a
// share of its threshold, that makes the boundary a cliff.
const cliffJump = 0.5

// shape is cliff when, for the test that failed at hi, hi's lower margin exceeds lo's upper
// margin by cliffJump or more (the criterion jumps by half its threshold within the
// bracket, beyond what the bounds allow), else smooth. An unsustainable hi is a cliff.
func shape(lo, hi *artifact.SearchProbe) string {
	if hi.Decision == artifact.DecisionUnsustainable {
		return artifact.BoundaryCliff
	}
	for _, t := range hi.Tests {
		if t.Decision != artifact.DecisionFail {
			continue
		}
		hl, _ := margins(t)
		for _, u := range lo.Tests {
			if u.Kind == t.Kind && u.Key == t.Key && u.Level == t.Level {
				if _, lu := margins(u); hl-lu >= cliffJump {
					return artifact.BoundaryCliff
				}
			}
		}
	}
	return artifact.BoundarySmooth
}
