// Package tables writes a run's per-request tables in sangam's file layout: request_metrics.csv
// (one row per measured request, one column per metric that has a source), request_plots/
// <metric>.csv (each metric's exact empirical CDF) and manifest.json (every column: where its
// values come from, their unit and definition, and for a column left out, why). The Sink
// collects the records of one or more runs and writes the directory when it is closed; the
// formatting helpers (Python-repr floats, QUOTE_MINIMAL CSV, the linspace quantile grid, the
// 1,001-row downsampling, DDSketch CDFs) reproduce what pandas 2.3.3 and numpy 2.3.3 write.
package tables

import (
	"math"
	"strconv"
	"strings"
)

// Repr formats x as Python's repr (numpy's astype(str), pandas' default float rendering): the
// shortest digits that read back as x; fixed notation when 1e-4 ≤ |x| < 1e16, with at least
// one decimal (1.0, 1234567.0, 0.35000000000000003); otherwise scientific with a signed,
// at-least-two-digit exponent (1e-05, 1.5e+16). NaN is "" (an empty cell), ±Inf are "inf" and
// "-inf", and negative zero keeps its sign ("-0.0").
func Repr(x float64) string {
	if s, ok := nonFinite(x); ok {
		return s
	}
	sci := strconv.FormatFloat(x, 'e', -1, 64) // [-]d[.ddd]e±XX
	mant, expText, _ := strings.Cut(sci, "e")
	exp, err := strconv.Atoi(expText)
	if err != nil || exp < -4 || exp >= 16 {
		return sci
	}
	sign := ""
	if strings.HasPrefix(mant, "-") {
		sign, mant = "-", mant[1:]
	}
	digits := strings.Replace(mant, ".", "", 1)
	var intPart, frac string
	if exp >= 0 {
		if len(digits) <= exp+1 {
			intPart, frac = digits+strings.Repeat("0", exp+1-len(digits)), "0"
		} else {
			intPart, frac = digits[:exp+1], digits[exp+1:]
		}
	} else {
		intPart, frac = "0", strings.Repeat("0", -exp-1)+digits
	}
	return sign + intPart + "." + frac
}

// Fixed4 formats x as Python's "%.4f" (pandas' float_format="%.4f"): four decimals of the
// correctly rounded binary value. NaN is "" (an empty cell), ±Inf are "inf" and "-inf".
func Fixed4(x float64) string {
	if s, ok := nonFinite(x); ok {
		return s
	}
	return strconv.FormatFloat(x, 'f', 4, 64)
}

// Grid is numpy's linspace(0, 1, n) as numpy 2.3.3 computes it: q[i] = i × (1/(n−1)), a
// multiplication (not i/(n−1)), with the last point exactly 1.0. One point is [1.0] (the cdf
// of a single row); n ≤ 0 gives none.
func Grid(n int) []float64 {
	switch {
	case n <= 0:
		return nil
	case n == 1:
		return []float64{1}
	}
	step := 1.0 / float64(n-1)
	q := make([]float64, n)
	for i := range q {
		q[i] = float64(i) * step
	}
	q[n-1] = 1
	return q
}

// Downsample returns the row indices kept of n rows at most max (sangam's downsample_rows):
// every row when n ≤ max; otherwise int(k × ((n−1)/(max−1))) for k = 0…max−1 with the last
// forced to n−1, which keeps the first and last rows and repeats none. max < 2 keeps every row.
func Downsample(n, max int) []int {
	if n <= max || max < 2 {
		idx := make([]int, n)
		for i := range idx {
			idx[i] = i
		}
		return idx
	}
	step := float64(n-1) / float64(max-1)
	idx := make([]int, max)
	for k := range idx {
		idx[k] = int(float64(k) * step)
	}
	idx[max-1] = n - 1
	return idx
}

// nonFinite is how pandas writes a value that is not finite: NaN as "" (an empty cell), ±Inf
// as "inf" and "-inf"; ok is false for a finite x.
func nonFinite(x float64) (s string, ok bool) {
	switch {
	case math.IsNaN(x):
		return "", true
	case math.IsInf(x, 1):
		return "inf", true
	case math.IsInf(x, -1):
		return "-inf", true
	}
	return "", false
}
