package daemon

import (
	"math"
	"regexp"

	"github.com/inferprobe/inferprobe/analyze"
)

// SLO is a validated policy with its objective.
type SLO struct {
	Name      string
	Source    string // analyze.SourceFlags or analyze.SourceFile
	Policy    *analyze.Policy
	Objective float64
}

// sloNameRe is analyze's rule for a policy name (stormlog.infer.slo v1 "name"): an SLO's name
// becomes the name of the policy recorded in every run's infer.slo record, which analysis
// (the daemon's own, and `inferprobe analyze`) parses again and refuses otherwise.
var sloNameRe = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// loadSLO validates an SLO policy, given as criteria or a policy file, and its objective.
func loadSLO(key string, s SLOFile) (*SLO, error) {
	if !sloNameRe.MatchString(s.Name) {
		return nil, cfgErr(key+".name", "want a lowercase letter, then up to 63 lowercase letters, digits or '_' (an SLO policy name), not %q", s.Name)
	}
	out := &SLO{Name: s.Name}
	var err error
	switch {
	case len(s.Criteria) > 0 && s.File != "":
		return nil, cfgErr(key, "criteria and file are mutually exclusive")
	case len(s.Criteria) > 0:
		out.Source = analyze.SourceFlags
		if out.Policy, err = analyze.ParseSLOFlags(s.Criteria); err != nil {
			return nil, cfgErr(key+".criteria", "%v", err)
		}
		out.Policy.Name = s.Name // the policy (and the slo label) takes the configured name
	case s.File != "":
		out.Source = analyze.SourceFile
		if out.Policy, err = analyze.ParsePolicyFile(s.File); err != nil {
			return nil, cfgErr(key+".file", "%v", err)
		}
		if out.Policy.Name != s.Name {
			return nil, cfgErr(key+".name", "must equal the name of the policy in %s (%q)", s.File, out.Policy.Name)
		}
		if out.Policy.Interval.Kind != analyze.IntervalMeasuredWindow {
			return nil, cfgErr(key+".file", "probes judge over the measured window (interval.kind %q)", out.Policy.Interval.Kind)
		}
	default:
		return nil, cfgErr(key, "criteria or file is required")
	}
	out.Objective = DefaultObjective
	if out.Policy.AttainmentTarget != nil {
		out.Objective = *out.Policy.AttainmentTarget
	}
	if s.Objective != nil {
		if out.Policy.AttainmentTarget != nil {
			return nil, cfgErr(key+".objective", "the policy sets its attainment_target already")
		}
		if o := *s.Objective; !(o > 0 && o < 1) || math.IsNaN(o) {
			return nil, cfgErr(key+".objective", "must be within (0, 1), not %v", o)
		}
		out.Objective = *s.Objective
	}
	if out.Objective >= 1 {
		return nil, cfgErr(key, "an attainment target of 1 leaves no error budget for burn-rate alerts")
	}
	return out, nil
}
