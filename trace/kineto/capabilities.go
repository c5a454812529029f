package kineto

import (
	"encoding/json"
	"fmt"

	"github.com/inferprobe/inferprobe/artifact"
)

// ComponentTraceKineto is the infer.capabilities component of the Kineto trace importer.
const ComponentTraceKineto = "trace.kineto"

// capabilities builds the infer.capabilities record of one trace file. Its metadata holds
// the file's Summary under "trace_file", the detail and limits, event_loss null (the
// profiler does not say what it dropped: unknown, never 0) and per_request_attribution
// "none" (a step serves many requests).
func capabilities(opts Options, sum Summary) *artifact.Capabilities {
	collected := []string{}
	if sum.Steps > 0 {
		collected = append(collected, artifact.EventIteration)
	}
	if sum.ActivityRefs > 0 {
		collected = append(collected, artifact.EventActivityRef)
	}
	return &artifact.Capabilities{
		Context:   opts.Context,
		EventID:   "capabilities/" + ComponentTraceKineto + "/" + sum.AttachmentID,
		Component: ComponentTraceKineto,
		Available: sum.Status == StatusImported,
		Supported: []string{artifact.EventIteration, artifact.EventActivityRef},
		Enabled:   []string{artifact.EventIteration, artifact.EventActivityRef},
		Collected: collected,
		Metadata: map[string]any{
			"trace_file":              sum,
			"detail":                  opts.Detail,
			"event_loss":              nil,
			"per_request_attribution": "none",
			"limits": map[string]any{
				"max_bytes":              opts.MaxBytes,
				"max_decompressed_bytes": opts.MaxDecompressedBytes,
				"max_event_bytes":        opts.MaxEventBytes,
			},
		},
	}
}

// ImportedFiles lists the trace files that the trace-importer capabilities records of run
// runID say were imported (Status "imported"): the Options.Imported of a re-import.
// Records of another run, or whose metadata does not decode, are passed over.
func ImportedFiles(caps []artifact.Capabilities, runID string) []FileKey {
	var out []FileKey
	for _, c := range caps {
		if c.Component != ComponentTraceKineto || c.Context.RunID != runID {
			continue
		}
		b, err := json.Marshal(c.Metadata["trace_file"])
		if err != nil {
			continue
		}
		var s Summary
		if json.Unmarshal(b, &s) != nil || s.Status != StatusImported {
			continue
		}
		out = append(out, s.FileKey)
	}
	return out
}

// String renders a summary as one line for the command's output.
func (s Summary) String() string {
	switch s.Status {
	case StatusOverMaxBytes:
		return fmt.Sprintf("%s: %d bytes, over the limit: registered, not parsed", s.Path, s.Bytes)
	case StatusAlreadyImported:
		if s.SameAs != "" && s.SameAs != s.Path {
			return fmt.Sprintf("%s: already imported (the same trace as %s)", s.Path, s.SameAs)
		}
		return fmt.Sprintf("%s: already imported", s.Path)
	}
	unresolved := int64(0)
	for _, n := range s.Unresolved {
		unresolved += n
	}
	steps := fmt.Sprintf("%d steps", s.Steps)
	if !s.StepsResolved {
		steps = "steps unresolved (no iteration annotation)"
	}
	return fmt.Sprintf("%s: %s, %d GPU activities (%d linked, %d unresolved) from %d launches (%d graph), %d activity refs",
		s.Path, steps, s.Activities, s.Linked, unresolved, s.Launches, s.GraphLaunches, s.ActivityRefs)
}
