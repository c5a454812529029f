package join

import (
	"reflect"
	"testing"
)

func span(trace, id, name, genID, digest string) Span {
	return Span{TraceID: trace, SpanID: id, Name: name, GenAIRequestID: genID, Digest: digest,
		Attributes: map[string]any{"gen_ai.latency.e2e": 0.5}}
}

func TestSpansJoinRules(t *testing.T) {
	reqs := []Request{
		{XRequestID: "x-a", TraceID: "ta", Measured: true},
		{XRequestID: "x-b", TraceID: "tb", Measured: true},
		{XRequestID: "x-c", TraceID: "tc", Measured: true},
		{XRequestID: "x-d", TraceID: "td", Measured: true},
		{XRequestID: "x-w", TraceID: "tw", Measured: false},
		{XRequestID: "", Measured: true}, // dropped: never sent
		{XRequestID: "x-e", TraceID: "te", Measured: true},
	}
	spans := []Span{
		span("ta", "1", "llm_request", "chatcmpl-x-a", "d1"),
		span("ta", "1", "llm_request", "chatcmpl-x-a", "d1"), // identical re-delivery
		span("ta", "1", "llm_request", "chatcmpl-x-a", "d1"), // and again
		span("tb", "2", "llm_request", "chatcmpl-x-b", "d2"),
		span("tb", "2", "llm_request", "chatcmpl-x-b", "other"), // conflicting re-delivery
		span("tc", "3", "llm_request", "chatcmpl-x-c", "d3"),
		span("tc", "4", "llm_request", "chatcmpl-x-c", "d4"), // a second distinct span
		span("tw", "5", "llm_request", "chatcmpl-x-w", "d5"), // warmup
		span("zz", "6", "llm_request", "chatcmpl-elsewhere", "d6"),
		span("zz", "7", "llm_request", "", "d7"),
		span("zz", "8", "http_request", "chatcmpl-x-d", "d8"),
		span("te", "9", "llm_request", "", "d9"), // no id attribute, but our trace id
	}
	r := Spans(reqs, spans)
	if r.Deliveries != 12 || r.Total != 9 || r.Duplicates != 2 || r.ConflictingDuplicates != 1 {
		t.Fatalf("deliveries %d total %d duplicates %d conflicting %d", r.Deliveries, r.Total, r.Duplicates, r.ConflictingDuplicates)
	}
	wantJoined := map[string]string{"x-a": "both", "x-e": "trace_id"}
	if !reflect.DeepEqual(r.JoinedBy, wantJoined) || len(r.Joined) != 2 {
		t.Fatalf("joined %v", r.JoinedBy)
	}
	if !reflect.DeepEqual(r.Quarantined, map[string]string{"x-b": ConflictingSpans, "x-c": MultipleSpans}) {
		t.Fatalf("quarantined %v", r.Quarantined)
	}
	want := map[string]int{NoRequestID: 1, RequestNotInRun: 1, WarmupRequest: 1, NotARequestSpan: 1}
	if !reflect.DeepEqual(r.UnjoinedByReason, want) {
		t.Fatalf("unjoined %v", r.UnjoinedByReason)
	}
	if r.Joined["x-a"]["gen_ai.latency.e2e"] != 0.5 {
		t.Fatal("joined attributes are the span's own")
	}
}

func TestSpansWithoutIDsAreDistinct(t *testing.T) {
	spans := []Span{span("", "", "llm_request", "chatcmpl-x-a", "d1"), span("", "", "llm_request", "chatcmpl-x-b", "d2")}
	r := Spans([]Request{{XRequestID: "x-a", Measured: true}, {XRequestID: "x-b", Measured: true}}, spans)
	if r.Total != 2 || r.ConflictingDuplicates != 0 || len(r.Joined) != 2 {
		t.Fatalf("total %d conflicting %d joined %d", r.Total, r.ConflictingDuplicates, len(r.Joined))
	}
}

// A span finds its request by gen_ai.request.id (verbatim or a vLLM form of it) before its
// trace id; both agreeing is "both".
func TestRequestLookup(t *testing.T) {
	idx := indexRequests([]Request{{XRequestID: "x-a", TraceID: "ta"}, {XRequestID: "x-b", TraceID: "tb"}, {TraceID: "tn"}})
	for _, tc := range []struct {
		genID, trace, want, by string
	}{
		{"chatcmpl-x-a", "ta", "x-a", "both"},
		{"x-a", "", "x-a", "request_id"},
		{"cmpl-x-a-0", "tb", "x-a", "request_id"}, // the id wins over another request's trace
		{"", "tb", "x-b", "trace_id"},
		{"chatcmpl-x-z", "tn", "", "request_id"}, // a request never sent is not indexed
	} {
		r, by := idx.lookup(&Span{GenAIRequestID: tc.genID, TraceID: tc.trace})
		got := ""
		if r != nil {
			got = r.XRequestID
		}
		if got != tc.want || by != tc.by {
			t.Errorf("lookup(%q, %q) = %q by %s, want %q by %s", tc.genID, tc.trace, got, by, tc.want, tc.by)
		}
	}
}
