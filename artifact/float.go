package artifact

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// Float is a sample value that may be non-finite. Finite values are JSON
// numbers; NaN, +Inf and -Inf are the strings "NaN", "+Inf" and "-Inf"
// — JSON has no spelling for them — which strict JSON readers accept. Use *Float
// for a value that can also be unknown (null).
type Float float64

// Non-finite spellings of Float.
const (
	NaNString    = "NaN"
	PosInfString = "+Inf"
	NegInfString = "-Inf"
)

// MarshalJSON writes finite values as numbers (Go's shortest form; an
// integral value has no decimal point) and non-finite ones as strings.
func (f Float) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if s := nonFiniteJSON(v); s != "" {
		return []byte(s), nil
	}
	return json.Marshal(v)
}

// nonFiniteJSON is the JSON text of a non-finite value — the quoted
// NaNString, PosInfString or NegInfString — or "" for a finite one.
func nonFiniteJSON(v float64) string {
	switch {
	case math.IsNaN(v):
		return `"` + NaNString + `"`
	case math.IsInf(v, 1):
		return `"` + PosInfString + `"`
	case math.IsInf(v, -1):
		return `"` + NegInfString + `"`
	}
	return ""
}

// parseNonFinite reads NaNString, PosInfString or NegInfString (unquoted);
// false for any other text.
func parseNonFinite(s string) (float64, bool) {
	switch s {
	case NaNString:
		return math.NaN(), true
	case PosInfString:
		return math.Inf(1), true
	case NegInfString:
		return math.Inf(-1), true
	}
	return 0, false
}

// UnmarshalJSON reads a JSON number or one of the strings "NaN", "+Inf",
// "-Inf". null leaves the value unchanged. Any other string, a bool, or a
// number out of float64 range is an error.
func (f *Float) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, ok := parseNonFinite(s)
		if !ok {
			return fmt.Errorf("artifact: float string %q is not NaN, +Inf or -Inf", s)
		}
		*f = Float(v)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("artifact: float value %s is not a number or NaN/+Inf/-Inf", truncateText(string(b), 40))
	}
	v, err := strconv.ParseFloat(n.String(), 64)
	if err != nil {
		return fmt.Errorf("artifact: float value %s: %w", n, err)
	}
	*f = Float(v)
	return nil
}
