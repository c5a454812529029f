package receiver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/join"
)

// The real vLLM 0.30 span sample (stormlog fixture): 12 llm_request spans
// of warmup requests and 4 start-up spans, one per line.
func TestReadSpanFileFixture(t *testing.T) {
	spans, err := ReadSpanFile("testdata/q05_spans_sample.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(spans) != 16 {
		t.Fatalf("%d spans", len(spans))
	}
	requests, others := 0, 0
	for i, s := range spans {
		if s.Source != artifact.SpanSourceJSONL || s.ClockDomain != "unknown-host/unix_epoch_ns" || s.ReceivedAtNS != nil || s.TraceID != nil {
			t.Fatalf("span %d: %q %q %v %v", i, s.Source, s.ClockDomain, s.ReceivedAtNS, s.TraceID)
		}
		if s.IsRequestSpan() {
			want := fmt.Sprintf("q05-warmup-r%04d", requests)
			if s.RequestID == nil || *s.RequestID != want {
				t.Fatalf("span %d request id %v, want %s", i, s.RequestID, want)
			}
			if c := join.CandidateRequestIDs(s.Attributes[artifact.AttrRequestID].(string)); c[0] != want || c[1] != want+"-0" {
				t.Fatalf("candidates %q", c)
			}
			if p, ok := s.Int(artifact.AttrPromptTokens); !ok || p != 512 {
				t.Fatalf("prompt tokens %v", s.Attributes[artifact.AttrPromptTokens])
			}
			if s.Attributes[artifact.AttrTopP] != 1.0 { // written 1.0 by vLLM: stays a double
				t.Fatalf("top_p %#v", s.Attributes[artifact.AttrTopP])
			}
			requests++
		} else {
			if s.RequestID != nil {
				t.Fatalf("start-up span %q has request id %s", s.Name, *s.RequestID)
			}
			if s.Attributes["code.lineno"] == nil {
				t.Fatalf("start-up span attributes %#v", s.Attributes)
			}
			others++
		}
	}
	if requests != 12 || others != 4 {
		t.Fatalf("%d request spans, %d others", requests, others)
	}
	// Exact integer times, beyond float64's 2^53.
	if *spans[0].StartUnixNS != 1790960617392174336 || *spans[0].EndUnixNS != 1790960617881833007 || *spans[0].TimestampNS != 1790960617392174336 {
		t.Fatalf("first span %d..%d", *spans[0].StartUnixNS, *spans[0].EndUnixNS)
	}
	if e2e, _ := spans[0].Float(artifact.AttrE2E); e2e != 0.48922157287597656 {
		t.Fatalf("e2e %v", e2e)
	}
	if spans[12].Name != "Worker init" || *spans[12].StartUnixNS != 1790960599745931202 {
		t.Fatalf("span 12 %q %d", spans[12].Name, *spans[12].StartUnixNS)
	}
}

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// OTLP JSON exports (one per line, or one pretty-printed document) give
// the same span content as the receiver: equal content digests.
func TestReadSpanFileOTLPJSON(t *testing.T) {
	col := newCollector()
	r := startReceiver(t, Options{SessionID: "sess-1", RunID: "run-1", Sink: col})
	var lines [][]byte
	for b := 0; b < 3; b++ {
		lines = append(lines, jsonBody(t, vllmTraces(b, 4)))
		if resp, _ := post(t, tracesURL(r), protoBody(t, vllmTraces(b, 4)), protoHdr); resp.StatusCode != 200 {
			t.Fatal(resp.StatusCode)
		}
	}
	received := col.wait(t, 12, 5e9)
	digests := map[string]string{}
	for _, s := range received {
		digests[*s.SpanID] = s.ContentDigest()
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, lines[0], "", "  "); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string][]byte{
		"jsonl":  append(bytes.Join(lines, []byte("\n")), '\n'),
		"crlf":   bytes.Join(lines, []byte("\r\n\r\n")),
		"pretty": pretty.Bytes(),
	} {
		spans, err := ReadSpanFile(writeFile(t, name+".json", content))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := 12
		if name == "pretty" {
			want = 4
		}
		if len(spans) != want {
			t.Fatalf("%s: %d spans", name, len(spans))
		}
		for _, s := range spans {
			if s.Source != artifact.SpanSourceOTLPFile || s.ReceivedAtNS != nil || s.SessionID != "" {
				t.Fatalf("%s: %q %v %q", name, s.Source, s.ReceivedAtNS, s.SessionID)
			}
			if d := digests[*s.SpanID]; d == "" || d != s.ContentDigest() {
				t.Fatalf("%s: span %s digest %s, received %s", name, *s.SpanID, s.ContentDigest(), d)
			}
		}
		checkVLLMRecord(t, withRun(spans[1]), 0, 1, artifact.SpanSourceOTLPFile)
	}
}

// withRun stamps the ids and peer domain the receiver would have given.
func withRun(s artifact.Span) artifact.Span {
	s.SessionID, s.RunID, s.ClockDomain = "sess-1", "run-1", "127.0.0.1/unix_epoch_ns"
	return s
}

// An artifact (or a JSONL of infer.vllm_span records) is read back with its
// span records; other records are skipped.
func TestReadSpanFileArtifact(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.jsonl")
	w, err := artifact.NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	col := newCollector()
	r := startReceiver(t, Options{SessionID: "sess-1", RunID: "run-1", Sink: col})
	if resp, _ := post(t, tracesURL(r), protoBody(t, vllmTraces(0, 5)), protoHdr); resp.StatusCode != 200 {
		t.Fatal(resp.StatusCode)
	}
	received := col.wait(t, 5, 5e9)
	if err := w.Write(artifact.Session{SessionID: "sess-1", TimestampNS: baseNS, Status: artifact.StatusRunning}); err != nil {
		t.Fatal(err)
	}
	for _, s := range received {
		if err := w.Write(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Write(r.Capabilities(contextFor())); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	spans, err := ReadSpanFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(spans) != 5 {
		t.Fatalf("%d spans", len(spans))
	}
	for i, s := range spans {
		if s.Source != artifact.SpanSourceJSONL || s.SessionID != "sess-1" || *s.ReceivedAtNS != *received[i].ReceivedAtNS || s.ContentDigest() != received[i].ContentDigest() {
			t.Fatalf("span %d: %+v", i, s)
		}
		checkVLLMRecord(t, s, 0, i, artifact.SpanSourceJSONL)
	}
}

func TestReadSpanFileErrors(t *testing.T) {
	okLine := `{"name":"llm_request","start_unix_ns":1790960617392174336,"end_unix_ns":1790960617881833007,"attributes":{}}`
	for name, c := range map[string]struct {
		content string
		want    string
	}{
		"empty":            {"", "the file is empty"},
		"blank":            {"\n \n\t\n", "the file is empty"},
		"invalid json":     {okLine + "\n{\"name\": \n", "line 2: invalid spans file"},
		"not an object":    {okLine + "\n[1,2]\n", "line 2: invalid spans file: not a JSON object"},
		"no name":          {okLine + "\n{\"attributes\":{}}\n", "line 2: invalid spans file: neither an OTLP export"},
		"float start":      {`{"name":"x","start_unix_ns":1.7909606173921743e18}`, "line 1: invalid spans file: start_unix_ns: want an integer"},
		"end before start": {`{"name":"x","start_unix_ns":10,"end_unix_ns":9}`, "end_unix_ns 9 precedes start_unix_ns 10"},
		"base64 otlp id":   {`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"CvdlGRbNQ92ESOshHIAxnA==","spanId":"b7ad6b7169203331","name":"x"}]}]}]}`, "undecodable OTLP JSON export"},
		"otlp nameless":    {`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"b7ad6b7169203331"}]}]}]}`, "span without a name"},
		"only other kinds": {`{"event_type":"infer.session","schema_version":1}`, "no OTLP export, infer.vllm_span record or span object in it (1 other records skipped)"},
		"bad span record":  {`{"event_type":"infer.vllm_span","schema_version":1,"name":"x","trace_id":"zz"}`, "trace_id: want 32 hex digits"},
		"pretty invalid":   {"{\n \"resourceSpans\": [\n", "JSON value 1: invalid spans file"},
		"attr too deep":    {`{"name":"x","attributes":{"a":` + strings.Repeat("[", 80) + strings.Repeat("]", 80) + `}}`, "nested deeper than 64"},
	} {
		_, err := ReadSpanFile(writeFile(t, "spans.jsonl", []byte(c.content)))
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrInvalidSpanFile) {
			t.Errorf("%s: error %v, want %q wrapping ErrInvalidSpanFile", name, err, c.want)
		}
	}
	_, err := ReadSpanFile(filepath.Join(t.TempDir(), "missing.jsonl"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	if _, err := ReadSpanFile(t.TempDir()); !errors.Is(err, ErrInvalidSpanFile) {
		t.Fatalf("directory: %v", err)
	}
	// A valid OTLP export with no spans is not an error.
	spans, err := ReadSpanFile(writeFile(t, "empty-export.json", []byte(`{"resourceSpans":[]}`)))
	if err != nil || len(spans) != 0 {
		t.Fatalf("empty export: %v %d", err, len(spans))
	}
}
