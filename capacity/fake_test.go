package capacity

import (
	"context"
	"math"
	"math/rand/v2"

	"github.com/inferprobe/inferprobe/artifact"
)

// fake is a prober whose truth is known: truth(x) is the true p95 of client.e2e in ms at
// value x. A stage of n requests estimates it with relative noise sigma/√n (drawn from the
// stage's seed) and reports a normal interval at the stage rule's confidence, decided as
// Judge decides a quantile test.
type fake struct {
	truth     func(x float64) float64
	threshold float64
	sigma     float64
	stages    []Stage
}

func (f *fake) Probe(_ context.Context, s Stage) (Outcome, error) {
	f.stages = append(f.stages, s)
	q := f.truth(s.Value)
	rng := rand.New(rand.NewPCG(uint64(s.Seed), math.Float64bits(s.Value)))
	se := q * f.sigma / math.Sqrt(float64(s.Requests))
	z := math.Sqrt2 * math.Erfinv(s.Rule.Confidence)
	point := q + se*rng.NormFloat64()
	t := artifact.SearchTest{Kind: artifact.TestQuantile, Key: "client.e2e", Level: 0.95, Threshold: f.threshold,
		Lower: artifact.Ptr(point - z*se), Upper: artifact.Ptr(point + z*se), Estimate: artifact.Ptr(point), Decision: artifact.DecisionExtend}
	switch {
	case *t.Lower > f.threshold:
		t.Decision = artifact.DecisionFail
	case *t.Upper <= f.threshold:
		t.Decision = artifact.DecisionPass
	}
	return Outcome{Decision: combine([]artifact.SearchTest{t}), Tests: []artifact.SearchTest{t}, Requests: s.Requests}, nil
}

// point is the stage's point estimate, for plain bisection (the benchmark's baseline).
func (f *fake) point(s Stage) float64 {
	q := f.truth(s.Value)
	rng := rand.New(rand.NewPCG(uint64(s.Seed), math.Float64bits(s.Value)))
	return q + q*f.sigma/math.Sqrt(float64(s.Requests))*rng.NormFloat64()
}

// e2eTests is the single test the fake answers.
var e2eTests = []Test{{Kind: artifact.TestQuantile, Key: "client.e2e", Level: 0.95, MaxMs: 200}}

// smooth is 100 ms at 0 rising linearly: it crosses 200 ms at knee.
func smooth(knee float64) func(float64) float64 {
	return func(x float64) float64 { return 100 * (1 + x/knee) }
}

// cliff is 100 ms up to knee and 400 ms above.
func cliff(knee float64) func(float64) float64 {
	return func(x float64) float64 {
		if x <= knee {
			return 100
		}
		return 400
	}
}
