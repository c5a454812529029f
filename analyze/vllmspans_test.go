package analyze

import (
	"encoding/json"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/join"
)

// A joined span whose latency attribute is out of range (1e308 s: ×1000 is +Inf), negative or
// not a number is left out of the case's span latencies, so the JSON report still encodes;
// each is counted by its reason ("oops" and an absent value alike: not a number), and the
// text line says so.
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
	if len(e2e.LeftOut) != 1 || e2e.LeftOut["out_of_range_value"] != 1 ||
		len(q.LeftOut) != 2 || q.LeftOut["negative_value"] != 1 || q.LeftOut["span_attribute_missing:"+artifact.AttrTimeInQueue] != 2 {
		t.Fatalf("left out: e2e %v, queue %v", e2e.LeftOut, q.LeftOut)
	}
	want := "  vllm spans: 4 of 4 requests; queue p50 10.00 ms (3 left out: 2 missing or not a number, 1 negative_value); residency, not GPU time"
	if got := caseSpansLine(cs); got != want {
		t.Fatalf("line\n got %q\nwant %q", got, want)
	}
	if _, err := json.Marshal(cs); err != nil {
		t.Fatal(err)
	}
}

// An attribute every joined span carries but none usably is shown as none, with its reasons;
// one no span carries is left off the line.
func TestCaseSpansLineNoUsableValue(t *testing.T) {
	x := []string{"a", "b"}
	list := make([]Request, 2)
	list[0].XRequestID, list[1].XRequestID = &x[0], &x[1]
	jr := join.Result{Joined: map[string]map[string]any{
		"a": {artifact.AttrTimeInQueue: -1.0},
		"b": {artifact.AttrTimeInQueue: "NaN"},
	}}
	want := "  vllm spans: 2 of 2 requests; queue none (2 left out: 1 negative_value, 1 non_finite_value); residency, not GPU time"
	if got := caseSpansLine(caseSpans(list, jr)); got != want {
		t.Fatalf("line\n got %q\nwant %q", got, want)
	}
}
