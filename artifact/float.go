package artifact

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// Float is a sample value that may be non-finite. Finite values are JSON
// numbers; NaN, +Inf and -Inf are the strings "NaN", "+Inf" and "-Inf"
// (stormlog.md §2.5 "Common"), which strict JSON readers accept. Use *Float
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
	switch {
	case math.IsNaN(v):
		return []byte(`"` + NaNString + `"`), nil
	case math.IsInf(v, 1):
		return []byte(`"` + PosInfString + `"`), nil
	case math.IsInf(v, -1):
		return []byte(`"` + NegInfString + `"`), nil
	}
	return json.Marshal(v)
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
		switch s {
		case NaNString:
			*f = Float(math.NaN())
		case PosInfString:
			*f = Float(math.Inf(1))
		case NegInfString:
			*f = Float(math.Inf(-1))
		default:
			return fmt.Errorf("artifact: float string %q is not NaN, +Inf or -Inf", s)
		}
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("artifact: float value %s is not a number or NaN/+Inf/-Inf", truncateForError(b))
	}
	v, err := strconv.ParseFloat(n.String(), 64)
	if err != nil {
		return fmt.Errorf("artifact: float value %s: %w", n, err)
	}
	*f = Float(v)
	return nil
}

func truncateForError(b []byte) string {
	const max = 40
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}
