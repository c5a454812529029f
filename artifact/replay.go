package artifact

import "fmt"

// DeclaredSessions is the set of session ids that the artifact's infer.session records
// declare. A record of any other session was spliced in from another run's artifact: it
// belongs to no run of this file, and no analysis or table counts it.
func (a *Artifact) DeclaredSessions() map[string]bool {
	declared := make(map[string]bool, len(a.Sessions))
	for i := range a.Sessions {
		declared[a.Sessions[i].SessionID] = true
	}
	return declared
}

// Replay writes the artifact's infer.request v1 records (file order) and then its
// infer.vllm_span records to sink, as the producers wrote them during the run, for a sink
// used offline. Requests of a session the artifact does not declare (DeclaredSessions) are
// skipped and counted in skipped. Errors: an undecodable infer.vllm_span (wrapping
// ErrInvalidArtifact), and the sink's first Write error.
func (a *Artifact) Replay(sink Sink) (skipped int, err error) {
	declared := a.DeclaredSessions()
	for i := range a.Requests {
		if !declared[a.Requests[i].SessionID] {
			skipped++
			continue
		}
		if err := sink.Write(&a.Requests[i]); err != nil {
			return skipped, err
		}
	}
	for i := range a.Others {
		if a.Others[i].Kind.EventType != EventSpan {
			continue
		}
		s, err := DecodeSpanRaw(a.Others[i])
		if err != nil {
			return skipped, fmt.Errorf("%w: %s: infer.vllm_span: %w", ErrInvalidArtifact, a.Path, err)
		}
		if err := sink.Write(&s); err != nil {
			return skipped, err
		}
	}
	return skipped, nil
}
