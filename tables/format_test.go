package tables

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

func TestTablesRepr(t *testing.T) {
	cases := []struct {
		x    float64
		want string
	}{
		{1, "1.0"},
		{0.35000000000000003, "0.35000000000000003"},
		{1e-05, "1e-05"},
		{1.5e16, "1.5e+16"},
		{1234567, "1234567.0"},
		{math.Copysign(0, -1), "-0.0"},
		{0, "0.0"},
		{math.Inf(1), "inf"},
		{math.Inf(-1), "-inf"},
		{math.NaN(), ""},
		{0.30000000000000004, "0.30000000000000004"},
		{0.0001, "0.0001"},
		{0.00009, "9e-05"},
		{1e16, "1e+16"},
		{9999999999999998, "9999999999999998.0"},
		{123.456, "123.456"},
		{-2.5, "-2.5"},
		{1e22, "1e+22"},
		{5e-324, "5e-324"},
		{math.MaxFloat64, "1.7976931348623157e+308"},
		{0.009000000000000001, "0.009000000000000001"},
		{100, "100.0"},
		{1.5e-7, "1.5e-07"},
	}
	for _, c := range cases {
		if got := Repr(c.x); got != c.want {
			t.Errorf("Repr(%v) = %q, want %q", c.x, got, c.want)
		}
	}
}

func TestTablesFixed4(t *testing.T) {
	cases := []struct {
		x    float64
		want string
	}{
		{12, "12.0000"}, {5, "5.0000"}, {0.12345, "0.1235"}, {2.00005, "2.0000"},
		{math.NaN(), ""}, {math.Inf(1), "inf"}, {math.Inf(-1), "-inf"}, {-0.00001, "-0.0000"},
	}
	for _, c := range cases {
		if got := Fixed4(c.x); got != c.want {
			t.Errorf("Fixed4(%v) = %q, want %q", c.x, got, c.want)
		}
	}
}

func TestTablesCSVQuoteMinimal(t *testing.T) {
	var c CSV
	c.Row("Request Id", "a,b", `say "hi"`, " lead", `\.`, "two\nlines", "cr\r")
	c.Row("")
	c.Row("", "")
	want := "Request Id,\"a,b\",\"say \"\"hi\"\"\", lead,\\.,\"two\nlines\",\"cr\r\"\n\"\"\n,\n"
	if got := string(c.Bytes()); got != want {
		t.Errorf("CSV = %q, want %q", got, want)
	}
}

// artefacts counts the grid points that the multiplication makes differ from i/(n−1).
func artefacts(q []float64) (n int) {
	for i, v := range q {
		if v != float64(i)/float64(len(q)-1) {
			n++
		}
	}
	return n
}

func TestTablesGrid(t *testing.T) {
	g101, g1001 := Grid(101), Grid(1001)
	if len(g101) != 101 || g101[0] != 0 || g101[100] != 1 || Repr(g101[35]) != "0.35000000000000003" {
		t.Errorf("Grid(101): len %d, first %v, last %v, q[35] %s", len(g101), g101[0], g101[100], Repr(g101[35]))
	}
	if n := artefacts(g101); n != 10 {
		t.Errorf("Grid(101) has %d repr artefacts, want 10", n)
	}
	if len(g1001) != 1001 || g1001[1000] != 1 || Repr(g1001[9]) != "0.009000000000000001" {
		t.Errorf("Grid(1001): len %d, last %v, q[9] %s", len(g1001), g1001[1000], Repr(g1001[9]))
	}
	if n := artefacts(g1001); n != 144 {
		t.Errorf("Grid(1001) has %d repr artefacts, want 144", n)
	}
	if g := Grid(1); len(g) != 1 || g[0] != 1 {
		t.Errorf("Grid(1) = %v, want [1]", g)
	}
	if g := Grid(2); len(g) != 2 || g[0] != 0 || g[1] != 1 {
		t.Errorf("Grid(2) = %v, want [0 1]", g)
	}
	if g := Grid(0); len(g) != 0 {
		t.Errorf("Grid(0) = %v, want none", g)
	}
}

func TestTablesDownsample(t *testing.T) {
	if idx := Downsample(1001, 1001); len(idx) != 1001 || idx[1000] != 1000 {
		t.Errorf("Downsample(1001) kept %d rows, last %d", len(idx), idx[len(idx)-1])
	}
	if idx := Downsample(3, 1001); len(idx) != 3 || idx[0] != 0 || idx[2] != 2 {
		t.Errorf("Downsample(3) = %v", idx)
	}
	for _, n := range []int{1002, 1500, 2001, 12345, 1000000} {
		idx := Downsample(n, 1001)
		if len(idx) != 1001 || idx[0] != 0 || idx[1000] != n-1 {
			t.Fatalf("Downsample(%d): %d rows, first %d, last %d", n, len(idx), idx[0], idx[len(idx)-1])
		}
		for k := 1; k < len(idx); k++ {
			if idx[k] <= idx[k-1] {
				t.Fatalf("Downsample(%d) repeats or reorders at %d: %d, %d", n, k, idx[k-1], idx[k])
			}
		}
	}
	// n = 2001: step (n−1)/1000 = 2, so every other row.
	if idx := Downsample(2001, 1001); idx[1] != 2 || idx[500] != 1000 {
		t.Errorf("Downsample(2001): idx[1] %d, idx[500] %d, want 2 and 1000", idx[1], idx[500])
	}
	// n = 1500: step 1.499, int(k × 1.499).
	if idx := Downsample(1500, 1001); idx[1] != 1 || idx[2] != 2 || idx[3] != 4 || idx[999] != 1497 {
		t.Errorf("Downsample(1500): %v … %d", idx[:4], idx[999])
	}
}

func TestTablesExactCDF(t *testing.T) {
	got := string(ExactCDF("request_e2e_time", []float64{0.3, 0.1, 0.2}, Repr))
	want := "request_e2e_time,cdf\n0.1,0.0\n0.2,0.5\n0.3,1.0\n"
	if got != want {
		t.Errorf("ExactCDF = %q, want %q", got, want)
	}
	if got := string(ExactCDF("m", []float64{7}, IntFormat)); got != "m,cdf\n7,1.0\n" {
		t.Errorf("one-row ExactCDF = %q", got)
	}
	vals := make([]float64, 5000)
	for i := range vals {
		vals[i] = float64(len(vals) - i)
	}
	lines := strings.Split(strings.TrimSuffix(string(ExactCDF("request_num_gen_tokens", vals, IntFormat)), "\n"), "\n")
	if len(lines) != 1+CDFRows || lines[1] != "1,0.0" || lines[CDFRows] != "5000,1.0" || lines[10] != "45,0.009000000000000001" {
		t.Errorf("5000-value ExactCDF: %d lines, first %q, row 10 %q, last %q", len(lines), lines[1], lines[10], lines[len(lines)-1])
	}
}

func TestTablesSketchCDF(t *testing.T) {
	if _, err := SketchCDF("m", nil); err != ErrEmptySketch {
		t.Errorf("nil sketch: %v, want ErrEmptySketch", err)
	}
	s, err := NewSketch()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := SketchCDF("m", s); err != ErrEmptySketch {
		t.Errorf("empty sketch: %v, want ErrEmptySketch", err)
	}
	for i := 1; i <= 1000; i++ {
		if err := s.Add(float64(i) / 1000); err != nil {
			t.Fatal(err)
		}
	}
	b, err := SketchCDF("request_time_between_tokens", s)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 1+CDFRows || lines[0] != "cdf,request_time_between_tokens" {
		t.Fatalf("sketch CDF: %d lines, header %q", len(lines), lines[0])
	}
	// Each quantile is within the relative accuracy of the exact one.
	for i, q := range Grid(CDFRows) {
		cdf, val, _ := strings.Cut(lines[1+i], ",")
		if cdf != Repr(q) {
			t.Fatalf("row %d cdf %s, want %s", i, cdf, Repr(q))
		}
		exact := float64(int(q*999)+1) / 1000
		if v := parse(t, val); math.Abs(v-exact) > SketchAccuracy*exact*1.0001 {
			t.Fatalf("row %d: value %v, exact %v", i, v, exact)
		}
	}
	z, _ := NewSketch()
	_ = z.Add(0)
	_ = z.Add(0)
	if b, _ := SketchCDF("m", z); !strings.HasSuffix(string(b), "\n1.0,0\n") || strings.Contains(string(b), ",0.0\n") {
		t.Errorf("all-zero sketch CDF ends %q", string(b)[len(b)-20:])
	}
}

func parse(t *testing.T, s string) float64 {
	t.Helper()
	var v float64
	if _, err := fmt.Sscan(s, &v); err != nil {
		t.Fatalf("parse %q: %v", s, err)
	}
	return v
}

// Repr reads back as the same float, in fixed notation exactly when 1e-4 ≤ |x| < 1e16.
func TestTablesReprRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		x := math.Float64frombits(r.Uint64())
		if math.IsNaN(x) || math.IsInf(x, 0) {
			continue
		}
		if r.IntN(2) == 0 { // also the common magnitudes
			x = (r.Float64() - 0.5) * math.Pow(10, float64(r.IntN(24)-8))
		}
		s := Repr(x)
		back, err := strconv.ParseFloat(s, 64)
		if err != nil || back != x {
			t.Fatalf("Repr(%v) = %q reads back as %v (%v)", x, s, back, err)
		}
		a := math.Abs(x)
		fixed := !strings.ContainsAny(s, "e")
		if fixed != (a >= 1e-4 && a < 1e16 || a == 0) || fixed && !strings.Contains(s, ".") {
			t.Fatalf("Repr(%v) = %q: wrong notation", x, s)
		}
	}
}
