package analyze

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
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

// sortFloats sorts as sort.Float64s does, below and above radixMin, with ties, negative,
// infinite and NaN values.
func TestSortFloatsMatchesSortFloat64s(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 5, radixMin - 1, radixMin, 100_001} {
		for name, g := range map[string]func() float64{
			"uniform": func() float64 { return rng.Float64() * 1000 },
			"signed":  func() float64 { return rng.NormFloat64() * 1e6 },
			"ties":    func() float64 { return float64(rng.IntN(5)) },
			"inf":     func() float64 { return []float64{math.Inf(1), math.Inf(-1), 1, 2}[rng.IntN(4)] },
			"nan":     func() float64 { return []float64{math.NaN(), 1, -3, 2.5}[rng.IntN(4)] },
		} {
			got := make([]float64, n)
			for i := range got {
				got[i] = g()
			}
			want := slices.Clone(got)
			sort.Float64s(want)
			sortFloats(got)
			for i := range got {
				if math.Float64bits(got[i]) != math.Float64bits(want[i]) && !(math.IsNaN(got[i]) && math.IsNaN(want[i])) {
					t.Fatalf("%s n=%d: at %d got %v, want %v", name, n, i, got[i], want[i])
				}
			}
		}
	}
}
