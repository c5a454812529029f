package tables

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/artifact"
)

// WriteInput writes an artifact read for analysis (analyze.ReadInput, which streams the file
// and packs the requests, so that a large artifact is read once and held once) to the Sink:
// the sent warmup requests' join keys, the measured requests (each case's in file order, the
// cases in the order of their first request's record time, which is the file order of a run
// whose cases follow one another), the infer.vllm_span records and the infer.vllm_scrape
// records, and the header, clock alignments and imported steps (infer.iteration) that place
// the per-batch files. The Sink keeps pointers into in (a request whose chunk gaps
// analyze.ReadInput packed is written as a copy with them, Request.Record; read with
// analyze.ReadInputRecords to have none): in must not change afterwards. Errors: an
// undecodable span or scrape record (wrapping artifact.ErrInvalidArtifact), naming in's path.
func (s *Sink) WriteInput(in *analyze.Input) error {
	for _, w := range in.Warmup {
		r := &artifact.Request{Phase: artifact.PhaseWarmup, XRequestID: artifact.Ptr(w.XRequestID)}
		if w.TraceID != "" {
			r.TraceID = artifact.Ptr(w.TraceID)
		}
		if err := s.Write(r); err != nil {
			return err
		}
	}
	ids := make([]string, 0, len(in.Cases))
	for id, rs := range in.Cases {
		if len(rs) > 0 {
			ids = append(ids, id)
		}
	}
	first := func(id string) int64 {
		if t := in.Cases[id][0].TimestampNS; t != nil {
			return *t
		}
		return 0
	}
	slices.SortStableFunc(ids, func(a, b string) int { return cmp.Or(cmp.Compare(first(a), first(b)), cmp.Compare(a, b)) })
	for _, id := range ids {
		rs := in.Cases[id]
		for i := range rs {
			if err := s.Write(rs[i].Record()); err != nil { // its chunk gaps as recorded
				return err
			}
		}
	}
	a := in.Artifact
	if a.Header != nil {
		if err := s.Write(a.Header); err != nil {
			return err
		}
	}
	for i := range a.ClockAlignments {
		if err := s.Write(&a.ClockAlignments[i]); err != nil {
			return err
		}
	}
	for i := range a.Iterations {
		if err := s.Write(&a.Iterations[i]); err != nil {
			return err
		}
	}
	for i := range a.Others {
		if a.Others[i].Kind.EventType != artifact.EventSpan {
			continue
		}
		sp, err := artifact.DecodeSpanRaw(a.Others[i])
		if err != nil {
			return fmt.Errorf("%w: %s: infer.vllm_span: %w", artifact.ErrInvalidArtifact, a.Path, err)
		}
		if err := s.Write(&sp); err != nil {
			return err
		}
	}
	scrapes, err := artifact.MetricsScrapes(a)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", artifact.ErrInvalidArtifact, a.Path, err)
	}
	for i := range scrapes {
		if err := s.Write(&scrapes[i]); err != nil {
			return err
		}
	}
	return nil
}
