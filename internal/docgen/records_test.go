package docgen

import (
	"os"
	"strings"
	"testing"
)

// TestEveryEventTypeIsDocumented: every event type the artifact package declares has a
// section in the generated records page or is described in the hand-written artifact format
// page, so a new record type cannot go undocumented.
func TestEveryEventTypeIsDocumented(t *testing.T) {
	types, err := recordEventTypes("../../artifact")
	if err != nil {
		t.Fatal(err)
	}
	if len(types) < 15 {
		t.Fatalf("found %d event types in the artifact package: %v", len(types), types)
	}
	page, err := RecordsPage("../../artifact")
	if err != nil {
		t.Fatal(err)
	}
	format, err := os.ReadFile("../../docs/reference/artifact.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, et := range types {
		if !strings.Contains(string(page), "\n## "+et+" v") && !strings.Contains(string(format), "`"+et+"`") {
			t.Errorf("%s is neither a section of records.md (add its Go type to docgen.Records) nor described in docs/reference/artifact.md", et)
		}
	}
}

// TestRecordsPageRows: each record's section lists its fields with their JSON type, unit and
// the doc comment without the Go name; nested objects as dotted paths.
func TestRecordsPageRows(t *testing.T) {
	page, err := RecordsPage("../../artifact")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"## infer.request v1",
		"| `ttft_ms` | number or null | ms | Send → first non-empty content, reasoning or tool-call delta; null without streaming or without output. |",
		"| `shard` | integer or null, omitted when empty | — |",
		"| `config.arrivals[].rate_per_second` | number or null, omitted when empty | per second |",
		"| `session_id` | string | — | The session (one run's artifact) the record belongs to",
	} {
		if !strings.Contains(string(page), want) {
			t.Errorf("records.md lacks %q", want)
		}
	}
}

func TestPlainAndUnits(t *testing.T) {
	for _, c := range []struct{ ident, doc, want string }{
		{"TTFTMS", "TTFTMS is send → first delta.", "Send → first delta."},
		{"Spans", "Spans are the spans.", "The spans."},
		{"TimestampNS", "TimestampNS equals StartedAtNS.", "Equals StartedAtNS."},
		{"X", "Something else.", "Something else."},
	} {
		if got := plain(c.ident, c.doc); got != c.want {
			t.Errorf("plain(%q, %q) = %q, want %q", c.ident, c.doc, got, c.want)
		}
	}
	for path, want := range map[string]string{"a.started_at_ns": "ns", "e2e_latency_ms": "ms", "x[].bytes": "—",
		"window_seconds": "s", "memory_limit_bytes": "bytes", "busy_share": "ratio (0–1)", "model": "—"} {
		if got := unitOfField(path); got != want {
			t.Errorf("unitOfField(%q) = %q, want %q", path, got, want)
		}
	}
}
