package artifact

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// MaxSeconds is the longest duration any setting takes — a measured window, a timeout, a
// drain, an interval, a replay offset: 7 days (604,800 s). Nothing a load test or a probe
// does waits longer, and a longer value is a typo (a unit mistaken, a digit too many).
const MaxSeconds = 7 * 24 * 60 * 60

// MinWindowSeconds is the shortest measured window (1 ms): a rate over a shorter window
// counts requests no server answered that fast.
const MinWindowSeconds = 0.001

// ErrOutOfRange is wrapped by ParseNumber's error for a number beyond float64's range
// (about ±1.8e308), such as 1e400.
var ErrOutOfRange = errors.New("out of range")

// ParseNumber parses a number setting as strconv.ParseFloat does. Errors: text that is not
// a number (`"fast" is not a number`), and a number beyond float64's range (`1e400 is out of
// range (float64 holds at most ±1.8e308)`, wrapping ErrOutOfRange) — not "infinite", since
// the user wrote a finite number. The value is checked against nothing else: see Range.
func ParseNumber(s string) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err == nil {
		return v, nil
	}
	if errors.Is(err, strconv.ErrRange) {
		return 0, fmt.Errorf("%s is %w (float64 holds at most ±%.2g)", clipText(s), ErrOutOfRange, math.MaxFloat64)
	}
	return 0, fmt.Errorf("%q is not a number", clipText(s))
}

// clipText shortens s to 40 bytes for an error message.
func clipText(s string) string {
	if len(s) > 40 {
		return strings.ToValidUTF8(s[:40], "") + "…"
	}
	return s
}

// Range is the rule of a number setting: a value within [Min, Max], Min itself excluded when
// MinExclusive, in Unit (plural: "seconds", "milliseconds"; "" for a plain number). Every
// flag and configuration value in seconds or milliseconds is checked with one, so that all of
// them say the same things the same way.
type Range struct {
	Min, Max     float64
	MinExclusive bool
	Unit         string
}

// Seconds is the Range of a duration in seconds from min to MaxSeconds.
func Seconds(min float64, minExclusive bool) Range {
	return Range{Min: min, Max: MaxSeconds, MinExclusive: minExclusive, Unit: "seconds"}
}

// Check is nil when v lies in r. Otherwise its error's text completes a sentence whose
// subject is the setting ("--duration " + text), and names the bound:
//
//	must be a number, not NaN
//	must be at most 604800 seconds (7 days), not 1e+300
//	must be at least 0.001 seconds (1 ms), not 1e-09
//	must be > 0 seconds, not -1
func (r Range) Check(v float64) error {
	return r.check(v, r.quantity, formatNumber)
}

// CheckDuration is Check for a duration written with its unit (a configuration's "5m"),
// r being in seconds: the bound and the value read as durations, e.g. "must be at least 1s,
// not -5m0s".
func (r Range) CheckDuration(d time.Duration) error {
	asDuration := func(secs float64) string { return time.Duration(secs * float64(time.Second)).String() }
	return r.check(d.Seconds(), asDuration, asDuration)
}

// check is Check with the bound and the value written by bound and value.
func (r Range) check(v float64, bound, value func(float64) string) error {
	switch {
	case math.IsNaN(v):
		return errors.New("must be a number, not NaN")
	case v > r.Max:
		return fmt.Errorf("must be at most %s, not %s", bound(r.Max), value(v))
	case r.MinExclusive && v <= r.Min:
		return fmt.Errorf("must be > %s, not %s", bound(r.Min), value(v))
	case v < r.Min:
		return fmt.Errorf("must be at least %s, not %s", bound(r.Min), value(v))
	}
	return nil
}

// quantity is v with r's unit and, for a time, its reading in days, hours, minutes or
// milliseconds when that reads better: "604800 seconds (7 days)", "0.001 seconds (1 ms)".
func (r Range) quantity(v float64) string {
	s := formatNumber(v)
	if r.Unit == "" {
		return s
	}
	s += " " + unitFor(v, r.Unit)
	secs := v
	switch r.Unit {
	case "milliseconds":
		secs = v / 1000
	case "seconds":
	default:
		return s
	}
	if h := readableSeconds(secs); h != "" {
		s += " (" + h + ")"
	}
	return s
}

// unitFor is unit as it reads after v: its first word without its plural s when v is 1
// ("1 token", "1 request per second"; a word of two letters, "ms", is kept), as given
// otherwise.
func unitFor(v float64, unit string) string {
	if v != 1 {
		return unit
	}
	word, rest, spaced := strings.Cut(unit, " ")
	if len(word) < 3 || !strings.HasSuffix(word, "s") { // "ms" is an abbreviation, not a plural
		return unit
	}
	if word = strings.TrimSuffix(word, "s"); spaced {
		return word + " " + rest
	}
	return word
}

// readableSeconds is secs in the largest whole unit among days, h, min (from a minute up)
// or in ms (under a second); "" when seconds read best.
func readableSeconds(secs float64) string {
	for _, u := range []struct {
		n    float64
		name string
	}{{86400, "days"}, {3600, "h"}, {60, "min"}} {
		if secs >= u.n && math.Mod(secs, u.n) == 0 {
			q := secs / u.n
			if q == 1 && u.name == "days" {
				return "1 day"
			}
			return formatNumber(q) + " " + u.name
		}
	}
	if secs > 0 && secs < 1 {
		return formatNumber(secs*1000) + " ms"
	}
	return ""
}

// formatNumber writes v in its shortest form: whole numbers under 1e21 in digits
// (604800000), others as %g does (0.001, 1e-09, 1e+300), infinities as +Inf and -Inf.
func formatNumber(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case v == math.Trunc(v) && math.Abs(v) < 1e21:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
