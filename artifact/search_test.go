package artifact

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestSearchRecordLine(t *testing.T) {
	s := Search{SearchID: "s1", Over: OverConcurrency, Min: 1, Max: 64, Tolerance: 0.1, Confidence: 0.95, Status: SearchNone,
		Boundary: BoundaryUnknown, Probes: []SearchProbe{{Index: 1, Value: 1, Decision: DecisionFail, Requests: 104, Stages: 1,
			Tests: []SearchTest{{Kind: TestQuantile, Key: "client.e2e", Level: 0.95, Threshold: 10, Lower: Ptr(12.5), Decision: DecisionFail}}}},
		Warnings: []string{}}
	line, err := MarshalLine(&s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(line), `{"event_type":"infer.search","schema_version":1,"search_id":"s1",`) {
		t.Fatalf("line %s", line)
	}
	var back map[string]any
	if err := json.Unmarshal(line, &back); err != nil {
		t.Fatal(err)
	}
	probe := back["probes"].([]any)[0].(map[string]any)
	test := probe["tests"].([]any)[0].(map[string]any)
	if back["capacity"] != nil || back["bracket_upper"] != nil || back["status"] != "none" || probe["requests"] != float64(104) ||
		test["lower"] != 12.5 || test["upper"] != nil {
		t.Fatalf("decoded %v", back)
	}
	if s.RecordKind() != KindSearch || IsTransient(&s) {
		t.Fatal("kind")
	}
}
