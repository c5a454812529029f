package receiver

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/inferprobe/inferprobe/artifact"
)

// baseNS is a fixed span start (2026-10-03, beyond float64's exact range).
const baseNS int64 = 1790960617392174336

// spanSpec describes a test span.
type spanSpec struct {
	xRequestID string
	traceID    [16]byte
	spanID     [8]byte
	parentID   [8]byte
	startNS    int64
	endNS      int64
	prompt     int64
	completion int64
	ttft, e2e  float64
}

// vllmSpec returns the spec of span i of a batch: unique ids, a parent, and
// vLLM's latency attributes.
func vllmSpec(batch, i int) spanSpec {
	var s spanSpec
	binary.BigEndian.PutUint64(s.traceID[:8], uint64(batch)+1)
	binary.BigEndian.PutUint64(s.traceID[8:], uint64(i)+1)
	binary.BigEndian.PutUint64(s.spanID[:], uint64(batch)<<32|uint64(i)+1)
	binary.BigEndian.PutUint64(s.parentID[:], uint64(i)+0xabc)
	s.xRequestID = fmt.Sprintf("inferprobe-run-1-c8_in512_out128_measured_%d_%d", batch, i)
	s.startNS = baseNS + int64(i)*1_000_003
	s.endNS = s.startNS + 489_659_671
	s.prompt = 512
	s.completion = 128
	s.ttft = 0.04058551788330078
	s.e2e = 0.48922157287597656
	return s
}

// addSpan appends a vLLM-like llm_request span to ss.
func addSpan(ss ptrace.ScopeSpans, s spanSpec) ptrace.Span {
	sp := ss.Spans().AppendEmpty()
	sp.SetName(artifact.RequestSpanName)
	sp.SetKind(ptrace.SpanKindServer)
	sp.SetTraceID(pcommon.TraceID(s.traceID))
	sp.SetSpanID(pcommon.SpanID(s.spanID))
	sp.SetParentSpanID(pcommon.SpanID(s.parentID))
	sp.SetStartTimestamp(pcommon.Timestamp(s.startNS))
	sp.SetEndTimestamp(pcommon.Timestamp(s.endNS))
	a := sp.Attributes()
	a.PutDouble(artifact.AttrTimeToFirstToken, s.ttft)
	a.PutDouble(artifact.AttrE2E, s.e2e)
	a.PutDouble(artifact.AttrTimeInQueue, 3.4356489777565e-05)
	a.PutInt(artifact.AttrPromptTokens, s.prompt)
	a.PutInt(artifact.AttrCompletionTokens, s.completion)
	a.PutDouble(artifact.AttrTimeInModelPrefill, 0.027541324496269226)
	a.PutDouble(artifact.AttrTimeInModelDecode, 0.44931017979979515)
	a.PutDouble(artifact.AttrTimeInModelInference, 0.4768515042960644)
	a.PutStr(artifact.AttrRequestID, "chatcmpl-"+s.xRequestID)
	a.PutDouble(artifact.AttrTopP, 1.0)
	a.PutInt(artifact.AttrMaxTokens, 128)
	a.PutInt(artifact.AttrN, 1)
	return sp
}

// vllmTraces returns n vLLM-like spans in one resource and scope, as vLLM's
// front end exports them.
func vllmTraces(batch, n int) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	ra := rs.Resource().Attributes()
	ra.PutStr("service.name", "vllm-server")
	ra.PutStr("telemetry.sdk.language", "python")
	ra.PutStr("telemetry.sdk.name", "opentelemetry")
	ra.PutStr("telemetry.sdk.version", "1.38.0")
	ra.PutStr("vllm.instrumenting_module_name", "vllm.llm_engine")
	ra.PutInt("vllm.process_id", 4242)
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("vllm.llm_engine")
	for i := 0; i < n; i++ {
		addSpan(ss, vllmSpec(batch, i))
	}
	return td
}

func protoBody(t testing.TB, td ptrace.Traces) []byte {
	t.Helper()
	b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func jsonBody(t testing.TB, td ptrace.Traces) []byte {
	t.Helper()
	b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func gzipped(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// collector is a sink that keeps every span.
type collector struct {
	mu    sync.Mutex
	spans []artifact.Span
	added chan struct{}
}

func newCollector() *collector { return &collector{added: make(chan struct{}, 1)} }

func (c *collector) Close() error { return nil }

func (c *collector) Write(rec artifact.Record) error {
	r := *rec.(*artifact.Span)
	c.mu.Lock()
	c.spans = append(c.spans, r)
	c.mu.Unlock()
	select {
	case c.added <- struct{}{}:
	default:
	}
	return nil
}

func (c *collector) all() []artifact.Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]artifact.Span(nil), c.spans...)
}

// wait returns once n spans arrived, or fails after timeout.
func (c *collector) wait(t testing.TB, n int, timeout time.Duration) []artifact.Span {
	t.Helper()
	deadline := time.After(timeout)
	for {
		if s := c.all(); len(s) >= n {
			return s
		}
		select {
		case <-c.added:
		case <-deadline:
			t.Fatalf("got %d spans, want %d within %v", len(c.all()), n, timeout)
		}
	}
}

// post sends body to url with the given headers.
func post(t testing.TB, url string, body []byte, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, out
}

// decodeStatus decodes a google.rpc.Status error body in the answer's format.
func decodeStatus(t testing.TB, resp *http.Response, body []byte) *spb.Status {
	t.Helper()
	st := &spb.Status{}
	var err error
	if resp.Header.Get("Content-Type") == "application/json" {
		err = protojson.Unmarshal(body, st)
	} else {
		err = proto.Unmarshal(body, st)
	}
	if err != nil {
		t.Fatalf("error body %q is not a google.rpc.Status: %v", body, err)
	}
	return st
}

// decodeResponse decodes an ExportTraceServiceResponse in the answer's format.
func decodeResponse(t testing.TB, resp *http.Response, body []byte) ptraceotlp.ExportResponse {
	t.Helper()
	er := ptraceotlp.NewExportResponse()
	var err error
	if resp.Header.Get("Content-Type") == "application/json" {
		err = er.UnmarshalJSON(body)
	} else {
		err = er.UnmarshalProto(body)
	}
	if err != nil {
		t.Fatalf("response %q is not an ExportTraceServiceResponse: %v", body, err)
	}
	return er
}

// startReceiver starts a Receiver on loopback (HTTP and gRPC, ports picked)
// and shuts it down at cleanup.
func startReceiver(t testing.TB, opts Options) *Receiver {
	t.Helper()
	r := New(opts)
	if err := r.Listen(context.Background(), "127.0.0.1:0", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = r.Shutdown(ctx)
	})
	return r
}

func tracesURL(r *Receiver) string { return "http://" + r.HTTPAddr() + TracesPath }

func errorsAs(err error, target any) bool { return errors.As(err, target) }

// contextFor is a run context for capability records.
func contextFor() artifact.Context {
	return artifact.NewArtifactHeader("run-1", "sess-1", "v0.0.0-test", baseNS, artifact.Host{Name: "client"}, 4242).Context
}

// addEventAndLink gives sp one event (name "e", int attribute i=1) and one link (trace id
// 01…, span id 02…).
func addEventAndLink(sp ptrace.Span) {
	ev := sp.Events().AppendEmpty()
	ev.SetName("e")
	ev.Attributes().PutInt("i", 1)
	ln := sp.Links().AppendEmpty()
	ln.SetTraceID([16]byte{1})
	ln.SetSpanID([8]byte{2})
}
