package analyze

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// checkSelect compares quantileInPlace with Quantile over a sorted copy, bit for bit, at the
// levels the report uses and a few more. Values compare with == (-0 and +0 are equal and
// sort in no defined order), NaN equal to NaN.
func checkSelect(t *testing.T, name string, values []float64) {
	t.Helper()
	sorted := sortedCopy(values)
	for _, p := range []float64{0, 0.001, 0.25, 0.5, 0.9, 0.95, 0.99, 0.999, 1} {
		work := append([]float64(nil), values...)
		got, gotOK := quantileInPlace(work, p)
		want, wantOK := Quantile(sorted, p)
		if gotOK != wantOK || got != want && !(got != got && want != want) {
			t.Fatalf("%s (n=%d) p=%v: selection %v (%v), sort %v (%v)", name, len(values), p, got, gotOK, want, wantOK)
		}
		// the selection only reorders
		if s := sortedCopy(work); len(s) != len(sorted) {
			t.Fatalf("%s: length changed", name)
		} else {
			for i := range s {
				if s[i] != sorted[i] && !(s[i] != s[i] && sorted[i] != sorted[i]) {
					t.Fatalf("%s: element %d changed", name, i)
				}
			}
		}
	}
}

func TestQuantileInPlaceMatchesSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	gen := map[string]func(n int) []float64{
		"uniform": func(n int) []float64 {
			v := make([]float64, n)
			for i := range v {
				v[i] = rng.Float64()
			}
			return v
		},
		"few": func(n int) []float64 {
			v := make([]float64, n)
			for i := range v {
				v[i] = float64(rng.IntN(3))
			}
			return v
		},
		"sorted": func(n int) []float64 {
			v := make([]float64, n)
			for i := range v {
				v[i] = float64(i)
			}
			return v
		},
		"reversed": func(n int) []float64 {
			v := make([]float64, n)
			for i := range v {
				v[i] = float64(n - i)
			}
			return v
		},
		"equal": func(n int) []float64 {
			v := make([]float64, n)
			for i := range v {
				v[i] = 7
			}
			return v
		},
		"organ": func(n int) []float64 {
			v := make([]float64, n)
			for i := range v {
				v[i] = float64(min(i, n-i))
			}
			return v
		},
		"heavy tail": func(n int) []float64 {
			v := make([]float64, n)
			for i := range v {
				v[i] = math.Exp(3 * rng.NormFloat64())
			}
			return v
		},
		"infinities": func(n int) []float64 {
			v := make([]float64, n)
			for i := range v {
				switch rng.IntN(5) {
				case 0:
					v[i] = math.Inf(1)
				case 1:
					v[i] = math.Inf(-1)
				default:
					v[i] = rng.NormFloat64()
				}
			}
			return v
		},
		"nan": func(n int) []float64 {
			v := make([]float64, n)
			for i := range v {
				v[i] = rng.Float64()
			}
			v[rng.IntN(n)] = math.NaN()
			return v
		},
	}
	for name, g := range gen {
		for _, n := range []int{1, 2, 3, 5, 16, 17, 100, 1001, 20000} {
			checkSelect(t, name, g(n))
		}
	}
	if _, ok := quantileInPlace(nil, 0.5); ok {
		t.Error("empty input must not be ok")
	}
	if _, ok := quantileInPlace([]float64{1}, 1.5); ok {
		t.Error("p outside [0, 1] must not be ok")
	}
}

func FuzzQuantileInPlace(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	f.Add(make([]byte, 8*40))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 8*4096 {
			return
		}
		var v []float64
		for len(data) >= 8 {
			v = append(v, math.Float64frombits(binary.LittleEndian.Uint64(data)))
			data = data[8:]
		}
		if len(v) == 0 {
			return
		}
		checkSelect(t, "fuzz", v)
	})
}
