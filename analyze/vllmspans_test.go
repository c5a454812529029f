package analyze

import (
	"encoding/json"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/join"
)

// A joined span whose latency attribute is out of range (1e308 s: ×1000 is +Inf), negative or
// not a number is left out of the case's span latencies, so the JSON report still encodes.
func TestCaseSpansLeaveOutInvalidLatencies(t *testing.T) {
	x := []string{"a", "b", "c", "d"}
	list := make([]Request, len(x))
	for i := range x {
		list[i].XRequestID = &x[i]
	}
	jr := join.Result{Joined: map[string]map[string]any{
		"a": {artifact.AttrE2E: 0.5, artifact.AttrTimeInQueue: 0.01},
		"b": {artifact.AttrE2E: 1e308, artifact.AttrTimeInQueue: -5.0},
		"c": {artifact.AttrE2E: 0.7, artifact.AttrTimeInQueue: "oops"},
		"d": {artifact.AttrE2E: json.Number("0.9")},
	}}
	cs := caseSpans(list, jr)
	if cs.RequestsWithSpan != 4 {
		t.Fatalf("requests with span %d, want 4", cs.RequestsWithSpan)
	}
	e2e, q := cs.Latency[artifact.AttrE2E], cs.Latency[artifact.AttrTimeInQueue]
	if e2e.N != 3 || *e2e.P50Ms != 700 || *e2e.MeanMs != 700 {
		t.Fatalf("e2e %d values, p50 %v, mean %v; want 3, 700, 700", e2e.N, *e2e.P50Ms, *e2e.MeanMs)
	}
	if q.N != 1 || *q.P50Ms != 10 {
		t.Fatalf("queue %d values, p50 %v; want 1, 10", q.N, *q.P50Ms)
	}
	if _, err := json.Marshal(cs); err != nil {
		t.Fatal(err)
	}
}
