package receiver

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/internal/testkit"
)

var defaultScanLimits = scanLimits{maxElements: DefaultMaxExportElements, maxDepth: DefaultMaxValueDepth}

// checkSkipProof asserts the skip scan's rule on body: when it vouches for
// n spans, the full path decodes the body and converts exactly n spans,
// none rejected, and the pre-scan counts the same elements.
func checkSkipProof(t *testing.T, body []byte) (int, bool) {
	t.Helper()
	n, ok := skipScanProto(body, defaultScanLimits)
	if !ok {
		return 0, false
	}
	counts, err := scanProtoExport(body, defaultScanLimits)
	if err != nil {
		t.Fatalf("skip scan vouched for %d spans, the pre-scan refused: %v", n, err)
	}
	ereq := newExportRequest()
	if err := ereq.UnmarshalProto(body); err != nil {
		t.Fatalf("skip scan vouched for %d spans, the decoder refused: %v", n, err)
	}
	conv := convertTraces(ereq.Traces(), convertOptions{source: artifact.SpanSourceHTTP, strict: true})
	if len(conv.records) != n || conv.rejected != 0 || counts.Spans != n {
		t.Fatalf("skip scan vouched for %d spans; converted %d, rejected %d (%s), pre-scan %d", n, len(conv.records), conv.rejected, conv.reason, counts.Spans)
	}
	return n, true
}

// The skip scan vouches for real vLLM exports and for no export the full
// path would refuse or answer with partial_success.
func TestSkipScanProof(t *testing.T) {
	if n, ok := checkSkipProof(t, protoBody(t, vllmTraces(0, 7))); !ok || n != 7 {
		t.Fatalf("a vLLM export of 7 spans: %d %v", n, ok)
	}
	if n, ok := checkSkipProof(t, protoBody(t, ptrace.NewTraces())); !ok || n != 0 {
		t.Fatalf("an empty export: %d %v", n, ok)
	}
	bad := map[string]func(ptrace.Span){
		"no name":          func(s ptrace.Span) { s.SetName("") },
		"zero trace id":    func(s ptrace.Span) { s.SetTraceID([16]byte{}) },
		"zero span id":     func(s ptrace.Span) { s.SetSpanID([8]byte{}) },
		"end before start": func(s ptrace.Span) { s.SetEndTimestamp(s.StartTimestamp() - 1) },
		"start past int64": func(s ptrace.Span) { s.SetStartTimestamp(1 << 63) },
	}
	for name, spoil := range bad {
		td := vllmTraces(0, 3)
		spoil(td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(1))
		if _, ok := checkSkipProof(t, protoBody(t, td)); ok {
			t.Errorf("%s: vouched for", name)
		}
	}
	body := protoBody(t, vllmTraces(0, 2))
	for name, b := range map[string][]byte{
		"unknown field":  append(append([]byte(nil), body...), 0x10, 0x01), // request field 2, varint
		"truncated":      body[:len(body)-1],
		"short trace id": {0x0a, 0x0a, 0x12, 0x08, 0x12, 0x06, 0x0a, 0x03, 1, 2, 3, 0x2a, 0x01, 'x'},
	} {
		if _, ok := checkSkipProof(t, b); ok {
			t.Errorf("%s: vouched for", name)
		}
	}
	if _, ok := skipScanProto(body, scanLimits{maxElements: 10, maxDepth: 32}); ok {
		t.Error("vouched for an export over the element limit")
	}
}

// FuzzSkipScanProto: whatever the skip scan vouches for, the full path
// decodes and converts whole, with the same span count.
func FuzzSkipScanProto(f *testing.F) {
	f.Add(protoBody(f, vllmTraces(0, 2)))
	f.Add(protoBody(f, nestedTraces(f, 3)))
	f.Add([]byte{0x0a, 0x0a, 0x12, 0x08, 0x12, 0x06, 0x0a, 0x03, 1, 2, 3})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) { checkSkipProof(t, body) })
}

// nestedTraces is one vLLM span with an attribute of arrays and kvlists
// nested depth levels, an event and a link.
func nestedTraces(t testing.TB, depth int) ptrace.Traces {
	td := vllmTraces(0, 1)
	sp := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	v := sp.Attributes().PutEmptySlice("nested")
	for i := 0; i < depth; i++ {
		m := v.AppendEmpty().SetEmptyMap()
		m.PutStr("k", "v")
		v = m.PutEmptySlice("deeper")
	}
	addEventAndLink(sp)
	sp.Status().SetMessage("m")
	return td
}

// noRunSink is a SpanFilter that wants no span while want is false.
type noRunSink struct {
	want             atomic.Bool
	written, skipped atomic.Int64
}

func (s *noRunSink) Write(artifact.Record) error { s.written.Add(1); return nil }
func (s *noRunSink) Close() error                { return nil }
func (s *noRunSink) WantsSpans() bool            { return s.want.Load() }
func (s *noRunSink) SkipSpans(n int)             { s.skipped.Add(int64(n)) }

// A sink that wants no span gets valid exports as counts, over HTTP and
// gRPC; an export with an invalid span takes the full path (partial
// success, its valid spans written); once the sink wants spans they are
// written again.
func TestSkippedSpansAreCounted(t *testing.T) {
	sink := &noRunSink{}
	r := startReceiver(t, Options{Sink: sink})
	if resp, out := post(t, tracesURL(r), protoBody(t, vllmTraces(0, 5)), protoHdr); resp.StatusCode != 200 || !bytes.Equal(out, emptyExportResponse) {
		t.Fatalf("status %d body %q", resp.StatusCode, out)
	}
	if err := rawExportCall(t, r, protoBody(t, vllmTraces(1, 4)), false); err != nil {
		t.Fatal(err)
	}
	td := vllmTraces(2, 3)
	td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).SetName("")
	if resp, _ := post(t, tracesURL(r), protoBody(t, td), protoHdr); resp.StatusCode != 200 {
		t.Fatalf("partial: status %d", resp.StatusCode)
	}
	sink.want.Store(true)
	if resp, _ := post(t, tracesURL(r), protoBody(t, vllmTraces(3, 6)), protoHdr); resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	waitDelivered(t, r, 5+4+2+6)
	if sink.skipped.Load() != 9 || sink.written.Load() != 8 {
		t.Fatalf("skipped %d written %d, want 9 and 8", sink.skipped.Load(), sink.written.Load())
	}
	if s := r.Stats(); s.SpansSkipped != 9 || s.SpansHTTPProtobuf != 13 || s.SpansGRPC != 4 || s.SpansRejected != 1 || s.ExportsAccepted != 4 {
		t.Fatalf("stats %+v", s)
	}
}

// A JSON export always takes the full path.
func TestSkipIsProtobufOnly(t *testing.T) {
	sink := &noRunSink{}
	r := New(Options{Sink: sink})
	defer r.Close()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, TracesPath, bytes.NewReader(jsonBody(t, vllmTraces(0, 2))))
	req.Header.Set("Content-Type", "application/json")
	r.ServeHTTP(rec, req)
	if rec.Code != 200 || sink.skipped.Load() != 0 || r.Stats().SpansHTTPJSON != 2 {
		t.Fatalf("status %d skipped %d stats %+v", rec.Code, sink.skipped.Load(), r.Stats())
	}
}

// waitDelivered waits until n spans are delivered (written or skipped).
func waitDelivered(t *testing.T, r *Receiver, n int64) {
	t.Helper()
	testkit.WaitFor(t, "spans delivered", 10*time.Second, func() bool { return r.Stats().SpansDelivered == n })
}
