package artifact

import (
	"math"
	"strconv"
	"testing"
)

func TestParseJSONFloat(t *testing.T) {
	for _, s := range []string{"0", "-0", "-0.0", "16.649488", "0.1339754907905088", "236.410861", "1", "-1.5",
		"123456789012345", "1234567890123456", "0.0000000000000000000001", "0.00000000000000000000001",
		"1e3", "-1.5E+3", "1e400", "9007199254740993", "0.30000000000000004", "999999999999999.9"} {
		want, werr := strconv.ParseFloat(s, 64)
		got, ok := parseJSONFloat([]byte(s))
		if ok != (werr == nil) || math.Float64bits(got) != math.Float64bits(want) && werr == nil {
			t.Errorf("parseJSONFloat(%s) = %v, %v; strconv gives %v, %v", s, got, ok, want, werr)
		}
	}
}

// FuzzParseJSONFloat checks parseJSONFloat against strconv.ParseFloat, bit for bit, on every
// number of JSON's grammar.
func FuzzParseJSONFloat(f *testing.F) {
	for _, s := range []string{"16.649488", "-0", "0.1339754907905088", "1e9", "123456789012345.6"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if numberLen(s) != len(s) || len(s) == 0 {
			return
		}
		want, werr := strconv.ParseFloat(s, 64)
		got, ok := parseJSONFloat([]byte(s))
		if ok != (werr == nil) {
			t.Fatalf("parseJSONFloat(%q) ok %v, strconv error %v", s, ok, werr)
		}
		if ok && math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("parseJSONFloat(%q) = %v (%#x), strconv gives %v (%#x)", s, got, math.Float64bits(got), want, math.Float64bits(want))
		}
	})
}
