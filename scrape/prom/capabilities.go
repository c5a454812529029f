package prom

import (
	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/engine"
)

// Capabilities builds the infer.capabilities v2 record of component
// "vllm.metrics" from a tally of the run's scrapes (nil reads as none):
// available when at least one scrape succeeded; supported lists every
// catalogue field; enabled and collected the fields the server exposed.
// Metadata: url, verified_vllm_version, ok_scrapes, failed_scrapes,
// last_error (null if none), restarts, observation_scope,
// per_request_attribution "none", interval_seconds, timeout_seconds,
// authorization ("bearer" or null), limits {max_body_bytes, max_series,
// max_line_chars}, and the engines, model_names, unknown_series,
// deprecated_series (with successors in deprecated_successors),
// removed_series, optional_present, optional_absent and absent names seen.
// ctx is the run's context (artifact.NewArtifactHeader(...).Context); its
// event id is "capability:vllm.metrics".
func (s *Scraper) Capabilities(ctx artifact.Context, t *engine.Tally) artifact.Capabilities {
	if t == nil {
		t = engine.NewTally()
	}
	enabled := engine.FieldsOf(t.Present())
	var lastErr *string
	if t.LastError != "" {
		lastErr = artifact.Ptr(t.LastError)
	}
	lim := s.cfg.Limits
	meta := map[string]any{
		"url":                     s.sourceURL,
		"verified_vllm_version":   engine.VerifiedVersion,
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
		"engines":               t.Engines(),
		"model_names":           t.ModelNames(),
		"unknown_series":        t.Unknown(),
		"deprecated_series":     t.Deprecated(),
		"deprecated_successors": t.DeprecatedSuccessors(),
		"removed_series":        t.Removed(),
		"optional_present":      t.OptionalPresent(),
		"optional_absent":       t.OptionalAbsent(),
		"absent":                t.Absent(),
	}
	return artifact.Capabilities{
		Context:   ctx,
		EventID:   "capability:" + artifact.ComponentMetrics,
		Metadata:  meta,
		Component: artifact.ComponentMetrics,
		Available: t.OK > 0,
		Supported: engine.Fields(),
		Enabled:   enabled,
		Collected: append([]string(nil), enabled...),
	}
}
