package artifact

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Replay hands a sink the declared sessions' requests in file order, then the spans, and
// skips a request spliced in from another session.
func TestReplaySkipsUndeclaredSessions(t *testing.T) {
	lines := []string{
		`{"event_type":"infer.session","schema_version":1,"session_id":"s1","timestamp_ns":1,"status":"running"}`,
		`{"event_type":"infer.request","schema_version":1,"session_id":"s1","request_id":"a","case_id":"c","phase":"measured","status":"ok","timestamp_ns":2}`,
		`{"event_type":"infer.request","schema_version":1,"session_id":"other","request_id":"x","case_id":"c","phase":"measured","status":"ok","timestamp_ns":3}`,
		`{"event_type":"infer.request","schema_version":1,"session_id":"s1","request_id":"b","case_id":"c","phase":"measured","status":"error","timestamp_ns":4}`,
	}
	path := filepath.Join(t.TempDir(), "a.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if d := a.DeclaredSessions(); len(d) != 1 || !d["s1"] {
		t.Fatalf("declared %v", d)
	}
	mem := &Memory{}
	skipped, err := a.Replay(mem)
	if err != nil || skipped != 1 {
		t.Fatalf("skipped %d, err %v", skipped, err)
	}
	var ids []string
	for _, r := range mem.Records() {
		ids = append(ids, r.(*Request).RequestID)
	}
	if strings.Join(ids, " ") != "a b" {
		t.Fatalf("replayed %v", ids)
	}
}
