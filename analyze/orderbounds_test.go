package analyze

import "testing"

// The one-sided bounds at (1−c)/2 are the symmetric interval's ranks (Ranks, margin 0), for
// sizes around each level's minimum and far above it.
func TestOrderBoundsMatchRanks(t *testing.T) {
	rule := Rule{Confidence: 0.95, Margin: 0, Tails: TailsSymmetric}
	for _, p := range []float64{0.5, 0.9, 0.95, 0.99} {
		for _, n := range []int{1, 5, 6, 35, 36, 72, 100, 367, 368, 1000, 12345, 500_000} {
			j, k, _, ok, err := Ranks(n, p, rule)
			if err != nil {
				t.Fatal(err)
			}
			b, built := NewOrderBounds(n, p)
			if !built {
				t.Fatal("not built")
			}
			lo, okLo := b.Lower(0.025)
			hi, okHi := b.Upper(0.025)
			if ok != (okLo && okHi) || (ok && (lo != j || hi != k)) {
				t.Errorf("n=%d p=%g: bounds (%d %v, %d %v), ranks (%d, %d, %v)", n, p, lo, okLo, hi, okHi, j, k, ok)
			}
		}
	}
}

// The bounds' tail probabilities hold exactly at the returned ranks and fail one rank
// further out: median of 20 at a = 0.05 is X(6) (P(N ≤ 5) = 0.0207 ≤ 0.05 < P(N ≤ 6) =
// 0.0577) and X(15).
func TestOrderBoundsTails(t *testing.T) {
	b, _ := NewOrderBounds(20, 0.5)
	if j, ok := b.Lower(0.05); !ok || j != 6 {
		t.Fatalf("lower %d %v", j, ok)
	}
	if k, ok := b.Upper(0.05); !ok || k != 15 {
		t.Fatalf("upper %d %v", k, ok)
	}
	// P(N = 0) = 2^-20: below it no lower bound exists.
	if _, ok := b.Lower(1e-7); ok {
		t.Fatal("a lower bound below P(N=0)")
	}
	if j, ok := b.Lower(1e-6); !ok || j != 1 {
		t.Fatalf("lower at 1e-6: %d %v", j, ok)
	}
	if _, ok := NewOrderBounds(0, 0.5); ok {
		t.Fatal("built for n = 0")
	}
	if _, ok := b.Upper(0); ok {
		t.Fatal("a bound at tail 0")
	}
}
