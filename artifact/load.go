package artifact

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
)

// Artifact is a whole artifact loaded for analysis, records in file order.
type Artifact struct {
	// Path is the file read.
	Path string
	// Sessions holds every infer.session v1 record: normally the running
	// one first and the final one last.
	Sessions []Session
	// Header is the first infer.artifact v2 record, nil when there is none.
	Header *ArtifactHeader
	// Workload is the first infer.workload v1 record, nil when there is none.
	Workload *Workload
	// SLOs holds every infer.slo v1 record (analysis refuses an artifact
	// with more than one).
	SLOs            []SLORecord
	CacheStates     []CacheState
	PhaseWindows    []PhaseWindow
	Requests        []Request
	Capabilities    []Capabilities
	ClockAlignments []ClockAlignment
	// TelemetrySamples holds every infer.telemetry_sample v1 record.
	TelemetrySamples []TelemetrySample
	// Iterations holds every infer.iteration v2 record (engine steps imported from
	// profiler traces). The infer.activity_ref v3 records (one per GPU launch: millions for
	// a large trace) are not kept: Stats.Kinds counts them, and Read streams them.
	Iterations []Iteration
	// Others holds every record kept as *Raw (infer.request v2, vLLM scrapes
	// and spans, unknown kinds) and any infer.artifact or
	// infer.workload after the first. An infer.vllm_span v2 record has its
	// Raw.Context resolved (decode it with DecodeSpanRaw).
	Others []Raw
	// SpanContexts holds the file's infer.vllm_span_context records, by id.
	SpanContexts SpanContexts
	// Truncated is set when the last line was cut short and ignored.
	Truncated *Truncation
	// Stats is the read's summary.
	Stats Stats
}

// FinalSession returns the last infer.session record with a terminal status
// (completed, interrupted, incomplete), or nil when the artifact has none
// (the producer was killed before writing it).
func (a *Artifact) FinalSession() *Session {
	for i := len(a.Sessions) - 1; i >= 0; i-- {
		if a.Sessions[i].Terminal() {
			return &a.Sessions[i]
		}
	}
	return nil
}

// Validate checks what every analysis needs: at least one infer.session v1
// and one infer.request v1 record (the CLI exits with code 5 otherwise).
// The error wraps ErrInvalidArtifact.
func (a *Artifact) Validate() error { return a.ValidateRequests(len(a.Requests), "") }

// ValidateRequests is Validate's rule for a reader that keeps the artifact's requests
// elsewhere: requests is how many infer.request v1 records it kept, and requestNote is added
// to the "no infer.request record" message (why records it read were not kept). An artifact
// with no record at all (an empty file, or only blank lines) says so, whatever else it lacks.
func (a *Artifact) ValidateRequests(requests int, requestNote string) error {
	name := a.Path
	if name == "" {
		name = "artifact"
	}
	if a.Stats.Records == 0 && a.Truncated == nil && len(a.Sessions) == 0 && requests == 0 {
		if a.Stats.Lines == 0 {
			return fmt.Errorf("%w: %s is empty: an inferprobe artifact holds JSONL records, the first an infer.session", ErrInvalidArtifact, name)
		}
		return fmt.Errorf("%w: %s holds only blank lines: an inferprobe artifact holds JSONL records, the first an infer.session", ErrInvalidArtifact, name)
	}
	if len(a.Sessions) == 0 {
		return fmt.Errorf("%w: %s has no infer.session record%s", ErrInvalidArtifact, name, a.cutNote())
	}
	if requests == 0 {
		if n := a.Stats.Kinds[KindRequestV2]; n > 0 {
			return fmt.Errorf("%w: %s has no infer.request v1 record (only %d correlation-model infer.request v2 records)", ErrInvalidArtifact, name, n)
		}
		return fmt.Errorf("%w: %s has no infer.request record%s%s", ErrInvalidArtifact, name, requestNote, a.cutNote())
	}
	return nil
}

// cutNote is "" or, when the last line was cut short and ignored, a clause saying so: the
// record a reader misses may be on it (a file cut while it was written, or not JSONL).
func (a *Artifact) cutNote() string {
	if t := a.Truncated; t != nil {
		return fmt.Sprintf(" (its last line, line %d, %d bytes with no newline, is not valid JSON and was not read)", t.Line, t.Bytes)
	}
	return ""
}

// ReadFile loads the artifact at path; see ReadFileContext.
func ReadFile(path string) (*Artifact, error) {
	return ReadFileContext(context.Background(), path)
}

// ReadFileContext loads the artifact at path into memory, checking ctx
// every few thousand lines. It does not call Validate. A missing or
// unreadable file and every read error wrap ErrInvalidArtifact (and, for a
// missing file, fs.ErrNotExist); ctx's error is returned as is. Repeated
// low-cardinality strings of requests (session, case, phase, endpoint,
// model, status, sources, modes) share one copy.
func ReadFileContext(ctx context.Context, path string) (*Artifact, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidArtifact, err)
	}
	defer f.Close()
	a := &Artifact{Path: path}
	in := interner{}
	st, err := Read(f, func(rec Line) error {
		if rec.Line%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		return a.add(rec, in)
	})
	a.Stats = st
	a.Truncated = st.Truncated
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
			return nil, err
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return a, nil
}

// add files one record by its type: the first infer.artifact and
// infer.workload into Header and Workload (later ones into Others, as their
// text), every other typed record into its list, span contexts into
// SpanContexts, and *Raw into Others (a v2 span resolved against the contexts
// read so far). The repeated strings of a request share in's copies. The
// error, a *LineError, is a span naming an unknown context or a context
// redefined with other content.
func (a *Artifact) add(rec Line, in interner) error {
	switch v := rec.Value.(type) {
	case *Session:
		a.Sessions = append(a.Sessions, *v)
	case *ArtifactHeader:
		if a.Header == nil {
			a.Header = v
		} else {
			a.Others = append(a.Others, Raw{Kind: rec.Kind, JSON: bytes.Clone(rec.Raw)})
		}
	case *Workload:
		if a.Workload == nil {
			a.Workload = v
		} else {
			a.Others = append(a.Others, Raw{Kind: rec.Kind, JSON: bytes.Clone(rec.Raw)})
		}
	case *SLORecord:
		a.SLOs = append(a.SLOs, *v)
	case *CacheState:
		a.CacheStates = append(a.CacheStates, *v)
	case *PhaseWindow:
		a.PhaseWindows = append(a.PhaseWindows, *v)
	case *Request:
		for _, s := range []*string{&v.SessionID, &v.CaseID, &v.Phase, &v.Endpoint, &v.Model, &v.Status,
			&v.PromptTokenSource, &v.OutputTokenSource, &v.ArrivalMode, &v.PromptMode} {
			in.intern(s)
		}
		a.Requests = append(a.Requests, *v)
	case *Capabilities:
		a.Capabilities = append(a.Capabilities, *v)
	case *ClockAlignment:
		a.ClockAlignments = append(a.ClockAlignments, *v)
	case *TelemetrySample:
		a.TelemetrySamples = append(a.TelemetrySamples, *v)
	case *Iteration:
		a.Iterations = append(a.Iterations, *v)
	case *ActivityRef:
		// counted in Stats.Kinds only
	case *SpanContext:
		return a.KeepSpanContext(v, rec.Line)
	case *Raw:
		return a.KeepRaw(v, rec.Line)
	}
	return nil
}

// KeepSpanContext adds c, read at 1-based line, to a.SpanContexts; the error
// is a *LineError (field context_id) for an id defined before with other content.
func (a *Artifact) KeepSpanContext(c *SpanContext, line int) error {
	if err := a.SpanContexts.Add(c); err != nil {
		return &LineError{Line: line, Field: "context_id", Err: err}
	}
	return nil
}

// KeepRaw appends r, read at 1-based line, to a.Others, resolving an
// infer.vllm_span v2 record against a.SpanContexts first; the error is a
// *LineError (field context) for a context not defined earlier in the file.
func (a *Artifact) KeepRaw(r *Raw, line int) error {
	if err := a.SpanContexts.Resolve(r); err != nil {
		return &LineError{Line: line, Field: "context", Err: err}
	}
	a.Others = append(a.Others, *r)
	return nil
}

// interner keeps one copy of each low-cardinality string, up to 65,536
// distinct values (later new values are kept as they are).
type interner map[string]string

// intern replaces *s by the kept copy of its value, keeping it when new.
func (in interner) intern(s *string) {
	if v, ok := in[*s]; ok {
		*s = v
		return
	}
	if len(in) < 1<<16 {
		in[*s] = *s
	}
}
