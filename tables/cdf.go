package tables

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/DataDog/sketches-go/ddsketch"
)

// CDFRows is the most rows of a CDF file: an exact CDF is downsampled to it, a sketch CDF
// always has that many quantiles.
const CDFRows = 1001

// SketchAccuracy is the relative accuracy of every DDSketch (sangam's 0.001).
const SketchAccuracy = 0.001

// ErrEmptySketch is returned for a CDF of a sketch that holds no value.
var ErrEmptySketch = errors.New("tables: empty sketch")

// IntFormat formats an integral value as an integer ("12"), the rendering of an int column;
// a value that is not a finite integer falls back to Repr.
func IntFormat(v float64) string {
	if v != math.Trunc(v) || math.IsInf(v, 0) || math.Abs(v) >= 1<<53 {
		return Repr(v)
	}
	return strconv.FormatInt(int64(v), 10)
}

// ExactCDF is the exact empirical CDF file of values: header "<metric>,cdf", then the values
// stable-sorted ascending, downsampled to CDFRows rows (Downsample), each kept row's value
// written with format (Repr for a float column, IntFormat for an int column) and its cdf
// Grid(kept rows)[i] in Repr — a rank fraction of the kept rows, 0.0 first and 1.0 last. NaN
// values sort first (an empty cell). values is not changed.
func ExactCDF(metric string, values []float64, format func(float64) string) []byte {
	kept, grid := exactCDFRows(values)
	return exactCDFFile(metric, kept, grid, format)
}

// exactCDFFile is ExactCDF's file of its rows (exactCDFRows).
func exactCDFFile(metric string, kept, grid []float64, format func(float64) string) []byte {
	var c CSV
	c.Row(metric, "cdf")
	for i, v := range kept {
		c.Row(format(v), Repr(grid[i]))
	}
	return c.Bytes()
}

// exactCDFRows are the rows of ExactCDF: the kept values (stable-sorted, downsampled) and
// their cdf.
func exactCDFRows(values []float64) (kept, cdf []float64) {
	sorted := slices.Clone(values)
	if slices.ContainsFunc(values, func(v float64) bool { return math.IsNaN(v) || (v == 0 && math.Signbit(v)) }) {
		slices.SortStableFunc(sorted, func(a, b float64) int { return cmpFloat(a, b) })
	} else {
		slices.Sort(sorted) // equal values are then indistinguishable: the same rows as a stable sort
	}
	idx := Downsample(len(sorted), CDFRows)
	kept = make([]float64, len(idx))
	for i, k := range idx {
		kept[i] = sorted[k]
	}
	return kept, Grid(len(idx))
}

// cmpFloat orders NaN before every number, then numbers ascending.
func cmpFloat(a, b float64) int {
	an, bn := math.IsNaN(a), math.IsNaN(b)
	switch {
	case an && bn:
		return 0
	case an:
		return -1
	case bn:
		return 1
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// NewSketch returns an empty DDSketch of relative accuracy SketchAccuracy (logarithmic
// mapping, dense stores: sketches-go's default, the counterpart of Python's DDSketch).
func NewSketch() (*ddsketch.DDSketch, error) {
	return ddsketch.NewDefaultDDSketch(SketchAccuracy)
}

// SketchCDF is the CDF file of a sketch: header "cdf,<metric>", then CDFRows rows, one per
// quantile q of Grid(CDFRows), with q and the sketch's value at q in Repr. A column whose
// values are all zero is written as "0" (Python's integer zero bucket), otherwise a zero is
// "0.0". Errors: ErrEmptySketch for a nil or empty sketch; the sketch's own query error.
func SketchCDF(metric string, s *ddsketch.DDSketch) ([]byte, error) {
	if s == nil || s.IsEmpty() {
		return nil, ErrEmptySketch
	}
	grid := Grid(CDFRows)
	vals, err := s.GetValuesAtQuantiles(grid)
	if err != nil {
		return nil, fmt.Errorf("tables: sketch quantiles: %w", err)
	}
	allZero := !slices.ContainsFunc(vals, func(v float64) bool { return v != 0 })
	var c CSV
	c.Row("cdf", metric)
	for i, q := range grid {
		v := Repr(vals[i])
		if allZero {
			v = "0"
		}
		c.Row(Repr(q), v)
	}
	return c.Bytes(), nil
}
