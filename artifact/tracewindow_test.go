package artifact

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestTraceWindowMarshal(t *testing.T) {
	w := TraceWindow{SessionID: "s", CaseID: "c1", Phase: "measured", StartOutcome: StartRejected, StopReason: StopStartRejected}
	b, err := json.Marshal(&w)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if !strings.HasPrefix(s, `{"event_type":"infer.trace_window","schema_version":1,`) {
		t.Fatalf("header: %s", s)
	}
	for _, want := range []string{`"trace_files":[]`, `"stop_status":null`, `"start_outcome":"rejected"`, `"profiler_may_be_running":false`} {
		if !strings.Contains(s, want) {
			t.Errorf("missing %s in %s", want, s)
		}
	}
	if w.RecordKind() != KindTraceWindow || IsTransient(&w) {
		t.Fatal("kind")
	}
}
