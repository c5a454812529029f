package artifact

import (
	"encoding/json"
	"math"
	"testing"
)

func TestSpanLatencySeconds(t *testing.T) {
	k := AttrE2E
	for _, c := range []struct {
		name   string
		v      any
		want   float64
		reason string
	}{
		{"float", 0.25, 0.25, ""},
		{"zero", 0.0, 0, ""},
		{"int64", int64(3), 3, ""},
		{"json number", json.Number("1.5"), 1.5, ""},
		{"seven days", float64(MaxSpanLatencySeconds), MaxSpanLatencySeconds, ""},
		{"over seven days", float64(MaxSpanLatencySeconds) + 1, 0, ReasonOutOfRangeValue},
		{"1e308 (×1000 would be +Inf)", 1e308, 0, ReasonOutOfRangeValue},
		{"json number past float64", json.Number("1e999"), 0, ReasonNonFiniteValue},
		{"negative", -5.0, 0, ReasonNegativeValue},
		{"NaN", math.NaN(), 0, ReasonNonFiniteValue},
		{"+Inf string", PosInfString, 0, ReasonNonFiniteValue},
		{"other string", "0.1", 0, "span_attribute_missing:" + k},
		{"bool", true, 0, "span_attribute_missing:" + k},
		{"absent", nil, 0, "span_attribute_missing:" + k},
		{"bad json number", json.Number("x"), 0, "span_attribute_missing:" + k},
	} {
		attrs := map[string]any{}
		if c.v != nil {
			attrs[k] = c.v
		}
		got, reason := SpanLatencySeconds(attrs, k)
		if got != c.want || reason != c.reason {
			t.Errorf("%s: got %v %q, want %v %q", c.name, got, reason, c.want, c.reason)
		}
	}
}
