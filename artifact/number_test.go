package artifact

import (
	"errors"
	"math"
	"testing"
	"time"
)

func TestRangeCheckMessages(t *testing.T) {
	window := Seconds(MinWindowSeconds, false)
	positive := Seconds(0, true)
	ms := Range{Min: 0, Max: MaxSeconds * 1000, Unit: "milliseconds"}
	for _, tc := range []struct {
		name string
		r    Range
		v    float64
		want string
	}{
		{"over the maximum", window, 1e300, "must be at most 604800 seconds (7 days), not 1e+300"},
		{"infinite", window, math.Inf(1), "must be at most 604800 seconds (7 days), not +Inf"},
		{"NaN", window, math.NaN(), "must be a number, not NaN"},
		{"under the minimum", window, 1e-9, "must be at least 0.001 seconds (1 ms), not 1e-09"},
		{"negative infinity", window, math.Inf(-1), "must be at least 0.001 seconds (1 ms), not -Inf"},
		{"zero, exclusive", positive, 0, "must be > 0 seconds, not 0"},
		{"negative, exclusive", positive, -1, "must be > 0 seconds, not -1"},
		{"milliseconds", ms, 99999999999, "must be at most 604800000 milliseconds (7 days), not 99999999999"},
		{"hours", Range{Min: 0.1, Max: 3600, Unit: "seconds"}, 0.05, "must be at least 0.1 seconds (100 ms), not 0.05"},
		{"hours max", Range{Min: 0.1, Max: 3600, Unit: "seconds"}, 4000, "must be at most 3600 seconds (1 h), not 4000"},
		{"minutes", Range{Max: 600, Unit: "seconds"}, 601, "must be at most 600 seconds (10 min), not 601"},
		{"plain", Range{Min: 0, Max: 1, Unit: ""}, 2, "must be at most 1, not 2"},
		{"one token", Range{Min: 1, Max: 100000, Unit: "tokens"}, 0, "must be at least 1 token, not 0"},
		{"one request per second", Range{Min: 1, Max: 10, Unit: "requests per second"}, 0.5, "must be at least 1 request per second, not 0.5"},
		{"one second", Range{Min: 1, Max: 10, Unit: "seconds"}, 0.5, "must be at least 1 second, not 0.5"},
		{"two tokens", Range{Min: 2, Max: 10, Unit: "tokens"}, 1, "must be at least 2 tokens, not 1"},
		{"one ms", Range{Min: 1, Max: 10000, Unit: "ms"}, 0.5, "must be at least 1 ms, not 0.5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.r.Check(tc.v)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("Check(%v) = %v, want %q", tc.v, err, tc.want)
			}
		})
	}
	for _, v := range []float64{MinWindowSeconds, 1, MaxSeconds} {
		if err := window.Check(v); err != nil {
			t.Errorf("Check(%v): %v", v, err)
		}
	}
}

func TestParseNumberMessages(t *testing.T) {
	for _, tc := range []struct {
		in, want   string
		outOfRange bool
	}{
		{"1e400", "1e400 is out of range (float64 holds at most ±1.8e+308)", true},
		{"-1e400", "-1e400 is out of range (float64 holds at most ±1.8e+308)", true},
		{"fast", `"fast" is not a number`, false},
		{"", `"" is not a number`, false},
	} {
		_, err := ParseNumber(tc.in)
		if err == nil || err.Error() != tc.want || errors.Is(err, ErrOutOfRange) != tc.outOfRange {
			t.Errorf("ParseNumber(%q) = %v, want %q (out of range %v)", tc.in, err, tc.want, tc.outOfRange)
		}
	}
	if v, err := ParseNumber("2.5"); err != nil || v != 2.5 {
		t.Fatalf("ParseNumber(2.5) = %v, %v", v, err)
	}
}

func TestRangeCheckDuration(t *testing.T) {
	every := Range{Min: 1, Max: MaxSeconds, Unit: "seconds"}
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{-5 * time.Minute, "must be at least 1s, not -5m0s"},
		{500 * time.Millisecond, "must be at least 1s, not 500ms"},
		{8 * 24 * time.Hour, "must be at most 168h0m0s, not 192h0m0s"},
	} {
		if err := every.CheckDuration(tc.d); err == nil || err.Error() != tc.want {
			t.Errorf("CheckDuration(%v) = %v, want %q", tc.d, err, tc.want)
		}
	}
	if err := every.CheckDuration(time.Second); err != nil {
		t.Errorf("CheckDuration(1s): %v", err)
	}
}
