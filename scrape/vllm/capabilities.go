package vllm

import (
	"github.com/inferprobe/inferprobe/artifact"
)

// Tally accumulates what a run's scrapes found, without keeping the scrapes
// themselves: counts, the last error, and the union of their discoveries.
// Not safe for concurrent use (PhaseSampler guards its own).
type Tally struct {
	// OK and Failed count scrapes by status.
	OK, Failed int
	// LastError is the error of the latest failed scrape; "" if none.
	LastError string
	// Restarts counts changes of the exporter's process start between
	// consecutive ok scrapes.
	Restarts int

	present, unknown, deprecated, removed map[string]bool
	optPresent, engines, models           map[string]bool
	optAbsent, absent                     map[string]bool // intersections over ok scrapes
	lastStart                             *int64
	seenOK                                bool
}

// NewTally returns an empty tally.
func NewTally() *Tally {
	return &Tally{
		present: map[string]bool{}, unknown: map[string]bool{}, deprecated: map[string]bool{},
		removed: map[string]bool{}, optPresent: map[string]bool{}, engines: map[string]bool{},
		models: map[string]bool{}, optAbsent: map[string]bool{}, absent: map[string]bool{},
	}
}

// TallyOf tallies scrapes in the order given.
func TallyOf(scrapes []artifact.VLLMScrape) *Tally {
	t := NewTally()
	for i := range scrapes {
		t.Add(&scrapes[i])
	}
	return t
}

// Add counts one scrape.
func (t *Tally) Add(r *artifact.VLLMScrape) {
	if !r.OK() || r.Discovery == nil {
		t.Failed++
		if r.Error != nil {
			t.LastError = *r.Error
		}
		return
	}
	t.OK++
	d := r.Discovery
	for _, pair := range []struct {
		dst   map[string]bool
		names []string
	}{{t.present, d.Present}, {t.unknown, d.Unknown}, {t.deprecated, d.DeprecatedPresent}, {t.removed, d.RemovedPresent},
		{t.optPresent, d.OptionalPresent}, {t.engines, d.Engines}, {t.models, d.ModelNames}} {
		for _, n := range pair.names {
			pair.dst[n] = true
		}
	}
	intersect := func(dst map[string]bool, names []string) {
		if !t.seenOK {
			for _, n := range names {
				dst[n] = true
			}
			return
		}
		keep := map[string]bool{}
		for _, n := range names {
			keep[n] = true
		}
		for n := range dst {
			if !keep[n] {
				delete(dst, n)
			}
		}
	}
	intersect(t.optAbsent, d.OptionalAbsent)
	intersect(t.absent, d.Absent)
	if t.seenOK && !sameStart(t.lastStart, d.ProcessStartNS) {
		t.Restarts++
	}
	t.lastStart, t.seenOK = d.ProcessStartNS, true
}

func (t *Tally) clone() *Tally {
	c := *t
	for _, p := range []*map[string]bool{&c.present, &c.unknown, &c.deprecated, &c.removed, &c.optPresent, &c.engines, &c.models, &c.optAbsent, &c.absent} {
		m := make(map[string]bool, len(*p))
		for k, v := range *p {
			m[k] = v
		}
		*p = m
	}
	return &c
}

// Engines returns the engine labels seen on ok scrapes, sorted.
func (t *Tally) Engines() []string { return sortedKeys(t.engines) }

// sameStart compares two optional process starts (two unknowns are the same).
func sameStart(a, b *int64) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// Capabilities builds the infer.capabilities v2 record of component
// "vllm.metrics" (stormlog.md §2.5): available when at least one scrape
// succeeded; supported lists every catalogue field; enabled and collected
// the fields the server exposed. Metadata: url, verified_vllm_version,
// ok_scrapes, failed_scrapes, last_error (null if none), restarts,
// observation_scope, per_request_attribution "none", interval_seconds,
// timeout_seconds, authorization ("bearer" or null), limits
// {max_body_bytes, max_series, max_line_chars}, and the engines,
// model_names, unknown_series, deprecated_series (with successors in
// deprecated_successors), removed_series, optional_present,
// optional_absent and absent names seen. ctx is the run's context
// (artifact.NewArtifactHeader(...).Context); its event id is
// "capability:vllm.metrics".
func (s *Scraper) Capabilities(ctx artifact.Context, t *Tally) artifact.Capabilities {
	if t == nil {
		t = NewTally()
	}
	enabled := fieldNames(sortedKeys(t.present))
	successors := map[string]string{}
	for n := range t.deprecated {
		if r, ok := LookupRetired(n); ok {
			successors[n] = r.Successor
		}
	}
	var lastErr *string
	if t.LastError != "" {
		lastErr = artifact.Ptr(t.LastError)
	}
	lim := s.cfg.Limits
	meta := map[string]any{
		"url":                     s.sourceURL,
		"verified_vllm_version":   VerifiedVersion,
		"ok_scrapes":              t.OK,
		"failed_scrapes":          t.Failed,
		"last_error":              lastErr,
		"restarts":                t.Restarts,
		"observation_scope":       artifact.ScopeEngineAggregate,
		"per_request_attribution": "none",
		"interval_seconds":        s.cfg.Interval.Seconds(),
		"timeout_seconds":         s.cfg.Timeout.Seconds(),
		"authorization":           s.Authorization(),
		"limits": map[string]any{
			"max_body_bytes": lim.MaxBodyBytes,
			"max_series":     lim.MaxSeries,
			"max_line_chars": lim.MaxLineChars,
		},
		"engines":               sortedKeys(t.engines),
		"model_names":           sortedKeys(t.models),
		"unknown_series":        sortedKeys(t.unknown),
		"deprecated_series":     sortedKeys(t.deprecated),
		"deprecated_successors": successors,
		"removed_series":        sortedKeys(t.removed),
		"optional_present":      sortedKeys(t.optPresent),
		"optional_absent":       sortedKeys(t.optAbsent),
		"absent":                sortedKeys(t.absent),
	}
	return artifact.Capabilities{
		Context:   ctx,
		EventID:   "capability:" + artifact.ComponentVLLMMetrics,
		Metadata:  meta,
		Component: artifact.ComponentVLLMMetrics,
		Available: t.OK > 0,
		Supported: catalogueFields(),
		Enabled:   enabled,
		Collected: append([]string(nil), enabled...),
	}
}
