package receiver

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
)

// An artifact as the Writer writes it (span contexts, v2 span lines) is a spans file: each
// span comes back with its context's resource and scope; a span before its context is an
// error naming the line.
func TestReadSpanFileArtifactV2(t *testing.T) {
	recs := convertTraces(vllmTraces(0, 3), convertOptions{source: artifact.SpanSourceHTTP, strict: true}).records
	path := filepath.Join(t.TempDir(), "run.jsonl")
	w, err := artifact.NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		if err := w.Write(&recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := ReadSpanFile(path)
	if err != nil || len(got) != len(recs) {
		t.Fatalf("%d spans: %v", len(got), err)
	}
	for i := range got {
		if !reflect.DeepEqual(got[i].Resource, recs[i].Resource) || !reflect.DeepEqual(got[i].Scope, recs[i].Scope) ||
			got[i].ContentDigest() != recs[i].ContentDigest() || got[i].Source != artifact.SpanSourceJSONL {
			t.Fatalf("span %d: %+v", i, got[i])
		}
	}
	data, _ := os.ReadFile(path)
	lines := strings.SplitAfter(string(data), "\n")
	swapped := filepath.Join(t.TempDir(), "swapped.jsonl")
	_ = os.WriteFile(swapped, []byte(lines[1]+lines[0]), 0o600)
	if _, err := ReadSpanFile(swapped); !errors.Is(err, ErrInvalidSpanFile) || !strings.Contains(err.Error(), "line 1: ") || !strings.Contains(err.Error(), "unknown infer.vllm_span_context") {
		t.Fatalf("span before its context: %v", err)
	}
}
