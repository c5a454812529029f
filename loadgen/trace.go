package loadgen

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/loadgen/schedule"
)

// TraceInputError is an --arrival-trace that cannot be read or is invalid: exit code 5.
type TraceInputError struct{ Err error }

func (e *TraceInputError) Error() string { return "--arrival-trace: " + e.Err.Error() }
func (e *TraceInputError) Unwrap() error { return e.Err }

// Trace sources recorded under the workload's arrival.trace.source.
const (
	TraceSourceOffsets  = "offset_ms trace"
	TraceSourceArtifact = "inferprobe artifact"
)

// LoadArrivalTrace reads an --arrival-trace file into cfg (Trace, TraceSource, TraceCase,
// TraceDigest). The file is either JSON lines of {"offset_ms": n} or an inferprobe (or
// Stormlog) artifact, whose measured, non-dropped requests of one case are replayed at their
// intended_at_ns (started_at_ns when no intended time was recorded). caseID picks the case
// when the artifact has several. Errors: *TraceInputError for an unreadable or invalid file
// (exit 5); *UsageError when the case is missing or ambiguous (exit 2).
func LoadArrivalTrace(cfg *Config, path, caseID string) error {
	f, err := os.Open(path)
	if err != nil {
		return &TraceInputError{Err: err}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, schedule.MaxTraceBytes+1))
	if err != nil {
		return &TraceInputError{Err: err}
	}
	offsets, digest, err := schedule.ReadOffsetTrace(bytes.NewReader(data), MaxArrivals)
	if err == nil {
		if caseID != "" {
			return flagErr("arrival-trace-case", "--arrival-trace-case applies to an artifact trace, and %s is an offset_ms trace", path)
		}
		cfg.Trace, cfg.TraceDigest, cfg.TraceSource, cfg.TraceCase = offsets, digest, TraceSourceOffsets, ""
		return nil
	}
	if !errors.Is(err, schedule.ErrNotOffsetTrace) {
		return &TraceInputError{Err: err}
	}
	byCase := map[string][]int64{}
	_, err = artifact.Read(bytes.NewReader(data), func(rec artifact.Line) error {
		r, ok := rec.Value.(*artifact.Request)
		if !ok || r.Phase != artifact.PhaseMeasured || r.Status == artifact.RequestDropped {
			return nil
		}
		at := r.IntendedAtNS
		if at == nil {
			at = r.StartedAtNS
		}
		if at == nil {
			return nil
		}
		byCase[r.CaseID] = append(byCase[r.CaseID], *at)
		return nil
	})
	if err != nil {
		return &TraceInputError{Err: err}
	}
	if len(byCase) == 0 {
		return &TraceInputError{Err: fmt.Errorf("%s has neither offset_ms lines nor measured requests", path)}
	}
	cases := make([]string, 0, len(byCase))
	for c := range byCase {
		cases = append(cases, c)
	}
	sort.Strings(cases)
	if caseID == "" {
		if len(cases) > 1 {
			return flagErr("arrival-trace", "the artifact trace has several cases (%s): pick one with --arrival-trace-case", strings.Join(cases, ", "))
		}
		caseID = cases[0]
	}
	times, ok := byCase[caseID]
	if !ok {
		return flagErr("arrival-trace-case", "the artifact trace has no measured requests of case %q (cases: %s)", caseID, strings.Join(cases, ", "))
	}
	if len(times) > MaxArrivals {
		return &TraceInputError{Err: schedule.ErrTooManyArrivals}
	}
	// Seconds as float64 lose sub-microsecond precision on epoch times: shift by the
	// minimum in integer ns first.
	first := times[0]
	for _, t := range times {
		first = min(first, t)
	}
	secs := make([]float64, len(times))
	for i, t := range times {
		secs[i] = float64(t-first) / 1e9
	}
	offsets, digest, err = schedule.TraceFromSeconds(secs)
	if err != nil {
		return &TraceInputError{Err: err}
	}
	cfg.Trace, cfg.TraceDigest, cfg.TraceSource, cfg.TraceCase = offsets, digest, TraceSourceArtifact, caseID
	return nil
}
