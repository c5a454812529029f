package analyze

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSpread95OfMatchesSpread95 checks that the histogram selection gives spread95's values
// exactly, above and below smallSpread, with ties, negative values and non-finite values.
func TestSpread95OfMatchesSpread95(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	gen := map[string]func() float64{
		"uniform": func() float64 { return rng.Float64() * 100 },
		"ties":    func() float64 { return float64(rng.IntN(7)) },
		"signed":  func() float64 { return rng.NormFloat64() * 10 },
		"lognorm": func() float64 { return math.Exp(rng.NormFloat64() * 3) },
		"nonfinite": func() float64 {
			switch rng.IntN(50) {
			case 0:
				return math.NaN()
			case 1:
				return math.Inf(1)
			}
			return rng.Float64()*20 + 5
		},
	}
	for name, g := range gen {
		for _, n := range []int{0, 1, 2, 3, 1000, smallSpread, smallSpread + 1, 200_003} {
			values := make([]float64, n)
			for i := range values {
				values[i] = g()
			}
			got := spread95Of(func(yield func(float64)) {
				for _, v := range values {
					yield(v)
				}
			})
			var finiteValues []float64
			for _, v := range values {
				if finite(v) {
					finiteValues = append(finiteValues, v)
				}
			}
			want := spread95(slices.Clone(finiteValues))
			for _, c := range []struct {
				what      string
				got, want *float64
			}{{"p50", got.P50, want.P50}, {"p95", got.P95, want.P95}, {"max", got.Max, want.Max}} {
				if (c.got == nil) != (c.want == nil) || c.got != nil && *c.got != *c.want {
					t.Errorf("%s n=%d %s: got %v, want %v", name, n, c.what, derefF(c.got), derefF(c.want))
				}
			}
		}
	}
}

func derefF(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}
