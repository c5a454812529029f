package artifact

import (
	"encoding/json"
)

// Raw is a record kept as its JSON text: every kind this package does not
// decode into a typed record (infer.request v2, infer.vllm_scrape,
// infer.vllm_span v1 and v2, infer.system_sample,
// infer.summary, unknown types and versions, and objects without an
// event_type). Writing a Raw writes JSON as it is (compacted); it must be an
// object carrying its own event_type and schema_version. The Writer makes two
// exceptions: an infer.vllm_span v2 Raw is re-encoded against the writing
// file's own contexts, and an infer.vllm_span_context Raw is skipped.
type Raw struct {
	Kind Kind
	JSON json.RawMessage
	// Context is the span context (session, run, source, clock domain,
	// resource, scope, attribute keys) of an infer.vllm_span v2 line
	// (KindVLLMSpanV2), resolved by the reader from the file's earlier
	// infer.vllm_span_context line (SpanContexts.Resolve); nil for every
	// other kind and for a Raw built by hand.
	Context *SpanContext
}

// RecordKind returns the kind the line carried.
func (r Raw) RecordKind() Kind { return r.Kind }

// MarshalJSON returns the kept JSON text.
func (r Raw) MarshalJSON() ([]byte, error) {
	if len(r.JSON) == 0 {
		return []byte("null"), nil
	}
	return r.JSON, nil
}

// Ptr returns a pointer to a copy of v, for the nullable fields of records.
func Ptr[T any](v T) *T { return &v }
