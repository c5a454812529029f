package loadgen

import (
	"time"

	"github.com/inferprobe/inferprobe/artifact"
)

// A timeSetting is a duration of the workload, given in seconds (a flag, a workload key):
// its flag, the range every value given must lie in, and the Config field it sets. The one
// table serves both Workload.Config, which checks the seconds as written (before they
// become a time.Duration, which 1e300 s would overflow), and Config.Validate, which checks
// a Config built directly, so that both say the same thing.
type timeSetting struct {
	flag  string
	rule  artifact.Range
	field func(c *Config) *time.Duration
	// given is the value as written (nil: not given, the default applies); optional
	// settings whose unset value is 0 are checked only when nonzero in a Config.
	given    func(w *Workload) *float64
	optional bool
}

// timeSettings: every duration is at most artifact.MaxSeconds; a measured window (duration)
// is at least artifact.MinWindowSeconds, so that a rate never divides by a window no
// server could be measured in.
var timeSettings = []timeSetting{
	{flag: "timeout", rule: artifact.Seconds(0, true), field: func(c *Config) *time.Duration { return &c.Timeout },
		given: func(w *Workload) *float64 { return w.Timeout }},
	{flag: "drain-timeout", rule: artifact.Seconds(0, true), field: func(c *Config) *time.Duration { return &c.DrainTimeout },
		given: func(w *Workload) *float64 { return w.DrainTimeout }, optional: true},
	{flag: "duration", rule: artifact.Seconds(artifact.MinWindowSeconds, false), field: func(c *Config) *time.Duration { return &c.Duration },
		given: func(w *Workload) *float64 { return w.Duration }, optional: true},
	{flag: "burst-interval", rule: artifact.Seconds(0, true), field: func(c *Config) *time.Duration { return &c.BurstInterval },
		given: func(w *Workload) *float64 { return nonZero(w.BurstInterval) }, optional: true},
	{flag: "cache-reset-timeout", rule: artifact.Seconds(0, false), field: func(c *Config) *time.Duration { return &c.CacheResetTimeout },
		given: func(w *Workload) *float64 { return w.CacheResetTimeout }},
}

// nonZero is &v, or nil for 0 (a plain float field's "not given").
func nonZero(v float64) *float64 {
	if v == 0 {
		return nil
	}
	return &v
}

// setTimes checks each duration given in seconds against its setting's range and sets it on
// c; a setting not given takes its default (timeout 60 s, cache-reset-timeout 10 s) or
// stays 0 (unset). Errors are *UsageError: "--duration must be at most 604800 seconds (7
// days), not 1e+300".
func (w *Workload) setTimes(c *Config) error {
	defaults := map[string]float64{"timeout": DefaultTimeout.Seconds(), "cache-reset-timeout": DefaultCacheResetTimeout.Seconds()}
	for _, s := range timeSettings {
		p := s.given(w)
		if p == nil {
			*s.field(c) = seconds(defaults[s.flag])
			continue
		}
		if err := s.rule.Check(*p); err != nil {
			return flagErr(s.flag, "--%s %v", s.flag, err)
		}
		*s.field(c) = seconds(*p)
	}
	return nil
}

// seconds converts seconds within artifact.MaxSeconds to a time.Duration.
func seconds(v float64) time.Duration { return time.Duration(v * float64(time.Second)) }

// validateTimes checks the Config's durations against the same ranges: timeout and
// cache-reset-timeout always (after Defaults), the optional ones when set (nonzero).
func (c *Config) validateTimes() error {
	for _, s := range timeSettings {
		d := *s.field(c)
		if s.optional && d == 0 {
			continue
		}
		if err := s.rule.Check(d.Seconds()); err != nil {
			return flagErr(s.flag, "--%s %v", s.flag, err)
		}
	}
	return nil
}
