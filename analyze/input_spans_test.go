package analyze

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
)

// spanFixture writes two spans of one resource and scope through an artifact.Writer and
// returns the file's lines: the context line, then the two v2 span lines.
func spanFixture(t testing.TB) []string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "spans.jsonl")
	w, err := artifact.NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		s := &artifact.Span{SessionID: "s1", RunID: "run", Source: artifact.SpanSourceGRPC, Name: artifact.RequestSpanName,
			TraceID: ps(strings.Repeat("a", 31) + string(rune('0'+i))), SpanID: ps(strings.Repeat("b", 16)),
			StartUnixNS: p64(100), EndUnixNS: p64(200), Attributes: map[string]any{"n": int64(i)},
			Resource: map[string]any{"service.name": "vllm"}, Scope: map[string]any{"name": "vllm.llm_engine"}}
		if err := w.Write(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], `"infer.vllm_span_context"`) {
		t.Fatalf("writer wrote %q", data)
	}
	return lines
}

// spanContextID is the id of spanFixture's context.
func spanContextID(t testing.TB) string {
	c, err := artifact.DecodeSpanContext([]byte(strings.TrimSpace(spanFixture(t)[0])))
	if err != nil {
		t.Fatal(err)
	}
	return c.ID
}

// spanLines is spanFixture's lines with a blank line between the context and the spans (so
// small blocks cut them apart); without the context line when unknown.
func spanLines(t testing.TB, unknown bool) string {
	l := spanFixture(t)
	if unknown {
		return l[1] + l[2] + "\n"
	}
	return l[0] + "\n\n" + l[1] + l[2] + "\n"
}

// ReadInput resolves a v2 span against the context of an earlier block, and names the line
// of a span whose context the file does not define.
func TestReadInputSpanContexts(t *testing.T) {
	rich := richArtifact(t)
	for _, bs := range []int{1, 64, 1 << 20} {
		in, err := readFrom(t.Context(), strings.NewReader(rich+spanLines(t, false)), "a", readOptions{blockBytes: bs, workers: 3})
		if err != nil {
			t.Fatal(err)
		}
		spans, err := spanRecords(in.Artifact)
		if err != nil || len(spans) != 2 || spans[1].Resource["service.name"] != "vllm" || spans[1].Scope["name"] != "vllm.llm_engine" {
			t.Fatalf("block %d: spans %+v: %v", bs, spans, err)
		}
		n := strings.Count(rich, "\n")
		_, err = readFrom(t.Context(), strings.NewReader(rich+spanLines(t, true)), "a", readOptions{blockBytes: bs, workers: 3})
		var le *artifact.LineError
		if !errors.As(err, &le) || le.Line != n+1 || le.Field != "context" || !errors.Is(err, artifact.ErrUnknownSpanContext) {
			t.Fatalf("block %d: unknown context: %v, want line %d", bs, err, n+1)
		}
	}
}
