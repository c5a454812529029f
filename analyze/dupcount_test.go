package analyze

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func TestRepeats(t *testing.T) {
	keys := func(ks ...string) func(int) (string, bool) {
		return func(i int) (string, bool) { return ks[i], ks[i] != "-" }
	}
	for _, tc := range []struct {
		keys []string
		want int
	}{
		{nil, 0},
		{[]string{"a"}, 0},
		{[]string{"a", "b", "c"}, 0},
		{[]string{"a", "a", "a"}, 2},
		{[]string{"a", "b", "a", "b", "c", "a"}, 3},
		{[]string{"-", "-", "a", "-"}, 0}, // ignored keys never count
		{[]string{"", "", "x"}, 1},
	} {
		if got := repeats(len(tc.keys), keys(tc.keys...)); got != tc.want {
			t.Errorf("repeats(%q) = %d, want %d", tc.keys, got, tc.want)
		}
	}
	// against a set, on many keys with repeats
	r := rand.New(rand.NewPCG(1, 2))
	ks := make([]string, 20000)
	for i := range ks {
		ks[i] = fmt.Sprintf("req-%d", r.IntN(15000))
	}
	seen, want := map[string]bool{}, 0
	for _, k := range ks {
		if seen[k] {
			want++
		}
		seen[k] = true
	}
	if got := repeats(len(ks), keys(ks...)); got != want || want == 0 {
		t.Fatalf("repeats = %d, want %d", got, want)
	}
}
