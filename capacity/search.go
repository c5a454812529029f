package capacity

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/artifact"
)

// Stage is one run of a probe: Requests measured requests at Value (workers, or requests
// per second) with its own Seed, judged under Rule. Probe is the probe's 1-based index and
// Stage the run's 1-based number within it (2 and up are extensions).
type Stage struct {
	Probe, Stage int
	Value        float64
	Requests     int
	Seed         int64
	Rule         analyze.Rule
}

// Outcome is what one stage found: its decision (pass, fail, extend, or unsustainable when
// a backlog guard stopped it), its tests' bounds, the measured requests it sent, its
// artifact path ("" for a prober without one) and why it is unsustainable.
type Outcome struct {
	Decision string
	Tests    []artifact.SearchTest
	Requests int
	Artifact string
	Reason   string
	// Note is what the search's warnings should say of this run, "" for nothing (e.g. "none
	// of its 104 requests succeeded: 104× unreachable, connection refused").
	Note string
}

// Prober runs the stages of a search. Probe must return a decision made from its own run
// only; an error ends the search (a context error included).
type Prober interface {
	Probe(ctx context.Context, s Stage) (Outcome, error)
}

// Defaults of Options.
const (
	DefaultTolerance           = 0.1
	DefaultConfidence          = 0.95
	DefaultMaxProbes           = 12
	DefaultMaxRequestsPerProbe = 1000
	DefaultGrowth              = 2.0
	DefaultQuantile            = 0.95
	// DefaultMin and DefaultMax are the range of `inferprobe search` and of a search probe
	// when they give none (Options has no default range).
	DefaultMin = 1.0
	DefaultMax = 256.0
)

// Options configure a search. Over is artifact.OverConcurrency (integer values) or
// artifact.OverRate; the search stays within [Min, Max] (0 < Min < Max, finite; Min ≥ 1 for
// concurrency). Tolerance is relative, in (0, 1); Confidence the nominal confidence of each
// probe's decision, in (0, 1). MaxProbes bounds the probed values (≥ 2); each probe starts
// with Requests measured requests (0: the fewest with which its tests can decide) and
// doubles them on every extension up to MaxRequestsPerProbe. Growth (> 1) multiplies the
// value while bracketing. Tests are the questions every probe answers (TestsOf). Seed is the
// first run's seed: run i of the search uses Seed + i − 1. Zero values take the defaults.
type Options struct {
	Over                string
	Min, Max            float64
	Tolerance           float64
	Confidence          float64
	MaxProbes           int
	Requests            int
	MaxRequestsPerProbe int
	Growth              float64
	Tests               []Test
	Seed                int64
	SearchID            string
}

// withDefaults fills zero values and validates the options.
func (o Options) withDefaults() (Options, error) {
	if o.Over == "" {
		o.Over = artifact.OverConcurrency
	}
	if o.Tolerance == 0 {
		o.Tolerance = DefaultTolerance
	}
	if o.Confidence == 0 {
		o.Confidence = DefaultConfidence
	}
	if o.MaxProbes == 0 {
		o.MaxProbes = DefaultMaxProbes
	}
	if o.MaxRequestsPerProbe == 0 {
		o.MaxRequestsPerProbe = DefaultMaxRequestsPerProbe
	}
	if o.Growth == 0 {
		o.Growth = DefaultGrowth
	}
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	switch {
	case o.Over != artifact.OverConcurrency && o.Over != artifact.OverRate:
		return o, fmt.Errorf("--over must be concurrency or rate, not %q", o.Over)
	case !finite(o.Min) || !finite(o.Max) || !(o.Min > 0 && o.Min < o.Max):
		return o, fmt.Errorf("--min and --max must be finite with 0 < min < max (got %g, %g)", o.Min, o.Max)
	case o.Over == artifact.OverConcurrency && (o.Min != math.Trunc(o.Min) || o.Max != math.Trunc(o.Max) || o.Max > 1e6):
		return o, fmt.Errorf("concurrency --min and --max must be whole numbers up to 1000000 (got %g, %g)", o.Min, o.Max)
	case !(o.Tolerance > 0 && o.Tolerance < 1):
		return o, fmt.Errorf("--tolerance must be between 0 and 1, not %g", o.Tolerance)
	case !(o.Confidence > 0 && o.Confidence < 1):
		return o, fmt.Errorf("--confidence must be between 0 and 1, not %g", o.Confidence)
	case o.MaxProbes < 2 || o.MaxProbes > 1000:
		return o, fmt.Errorf("--max-probes must be between 2 and 1000, not %d", o.MaxProbes)
	case o.Requests < 0 || o.MaxRequestsPerProbe < 1 || o.MaxRequestsPerProbe > 10_000_000:
		return o, errors.New("--requests must be ≥ 0 and --max-requests-per-probe between 1 and 10000000")
	case !(o.Growth > 1 && o.Growth <= 100):
		return o, fmt.Errorf("the growth factor must be in (1, 100], not %g", o.Growth)
	case len(o.Tests) == 0:
		return o, errors.New("a search needs at least one test (an SLO criterion)")
	}
	for _, t := range o.Tests {
		if !(t.Level > 0 && t.Level < 1) && !(t.Kind == artifact.TestAttainment && t.Level == 1) {
			return o, fmt.Errorf("%s: the level must be in (0, 1), not %g", t.Name(), t.Level)
		}
	}
	return o, nil
}

// Plan is how a search sizes its probes: the first stage's requests, the most stages a
// probe may take (each doubling the requests, the last capped at MaxRequestsPerProbe), and
// the rule every look uses. Its confidence is the nominal one split over every look and
// test (Bonferroni): 1 − (1 − Confidence)/(Looks × tests), so that the chance that any of a
// probe's decisions is wrong stays below 1 − Confidence however early it stops.
type Plan struct {
	First int
	Looks int
	Rule  analyze.Rule
}

// PlanOf sizes the probes of o (defaults applied). Errors: invalid options, or a
// MaxRequestsPerProbe too small for any test to decide at the look confidence.
func PlanOf(o Options) (Plan, error) {
	o, err := o.withDefaults()
	if err != nil {
		return Plan{}, err
	}
	first := o.Requests
	if first == 0 {
		first = minimumDecisive(o.Tests, o.Confidence)
	}
	looks := stagesOf(min(first, o.MaxRequestsPerProbe), o.MaxRequestsPerProbe)
	conf := 1 - (1-o.Confidence)/float64(looks*len(o.Tests))
	rule := analyze.Rule{Confidence: conf, Margin: 0, Tails: analyze.TailsSymmetric}
	if o.Requests == 0 {
		first = minimumDecisive(o.Tests, conf)
	}
	if o.Requests > o.MaxRequestsPerProbe {
		return Plan{}, fmt.Errorf("--requests %d is more than --max-requests-per-probe %d", o.Requests, o.MaxRequestsPerProbe)
	}
	if first > o.MaxRequestsPerProbe {
		return Plan{}, fmt.Errorf("--max-requests-per-probe %d is too small: a decision at confidence %.4g needs at least %d requests", o.MaxRequestsPerProbe, conf, first)
	}
	return Plan{First: first, Looks: looks, Rule: rule}, nil
}

// stagesOf counts the stages first, 2·first, 4·first, … up to limit (the last capped).
func stagesOf(first, limit int) int {
	n := 1
	for size := first; size < limit; size *= 2 {
		n++
	}
	return n
}

// minimumDecisive is the fewest requests with which every test can decide at confidence:
// the quantile interval must exist (analyze.MinimumN, symmetric, margin 0), and an
// attainment test must be able to pass with every request good ((α/2)^(1/n) ≥ target).
func minimumDecisive(tests []Test, confidence float64) int {
	rule := analyze.Rule{Confidence: confidence, Margin: 0, Tails: analyze.TailsSymmetric}
	n := 1
	for _, t := range tests {
		switch t.Kind {
		case artifact.TestQuantile:
			if m, err := analyze.MinimumN(t.Level, rule); err == nil {
				n = max(n, m)
			}
		case artifact.TestAttainment:
			if t.Level < 1 {
				m := math.Ceil(math.Log((1-confidence)/2) / math.Log(t.Level))
				n = max(n, int(math.Min(m, 1e7)))
			}
		}
	}
	return n
}
