package sim

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
)

// gotSpan is a received span, flattened.
type gotSpan struct {
	name      string
	kind      ptrace.SpanKind
	traceID   string
	spanID    string
	parentID  string
	start     int64
	end       int64
	scope     string
	attrs     map[string]any
	attrTypes map[string]pcommon.ValueType
}

type spanSink struct {
	mu    sync.Mutex
	spans []gotSpan
}

func (k *spanSink) add(td ptrace.Traces) {
	k.mu.Lock()
	defer k.mu.Unlock()
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			for x := 0; x < ss.Spans().Len(); x++ {
				sp := ss.Spans().At(x)
				g := gotSpan{
					name: sp.Name(), kind: sp.Kind(), traceID: sp.TraceID().String(), spanID: sp.SpanID().String(),
					parentID: sp.ParentSpanID().String(), start: int64(sp.StartTimestamp()), end: int64(sp.EndTimestamp()),
					scope: ss.Scope().Name(), attrs: map[string]any{}, attrTypes: map[string]pcommon.ValueType{},
				}
				for k, v := range sp.Attributes().All() {
					g.attrs[k] = v.AsRaw()
					g.attrTypes[k] = v.Type()
				}
				k.spans = append(k.spans, g)
			}
		}
	}
}

func (k *spanSink) all() []gotSpan {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]gotSpan(nil), k.spans...)
}

type grpcReceiver struct {
	ptraceotlp.UnimplementedGRPCServer
	sink *spanSink
}

func (r *grpcReceiver) Export(_ context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	td := ptrace.NewTraces()
	req.Traces().CopyTo(td)
	r.sink.add(td)
	return ptraceotlp.NewExportResponse(), nil
}

// startGRPCReceiver serves OTLP/gRPC on a loopback port and returns "127.0.0.1:PORT".
func startGRPCReceiver(t *testing.T, sink *spanSink) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	ptraceotlp.RegisterGRPCServer(gs, &grpcReceiver{sink: sink})
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	return ln.Addr().String()
}

// startHTTPReceiver serves OTLP/HTTP protobuf at /v1/traces and returns the full URL.
func startHTTPReceiver(t *testing.T, sink *spanSink) string {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, r *http.Request) {
		if ct := r.Header.Get("Content-Type"); ct != "application/x-protobuf" {
			http.Error(w, "content type "+ct, http.StatusUnsupportedMediaType)
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		req := ptraceotlp.NewExportRequest()
		if err := req.UnmarshalProto(b); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		sink.add(req.Traces())
		out, _ := ptraceotlp.NewExportResponse().MarshalProto()
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: mux}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	return "http://" + ln.Addr().String() + "/v1/traces"
}

func TestSpansGRPC(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "")
	sink := &spanSink{}
	cfg := fastConfig()
	cfg.OTLPTracesEndpoint = startGRPCReceiver(t, sink)
	checkSpans(t, cfg, sink)
}

func TestSpansHTTPProtobufFromEnv(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf")
	sink := &spanSink{}
	cfg := fastConfig()
	cfg.OTLPTracesEndpoint = startHTTPReceiver(t, sink)
	checkSpans(t, cfg, sink)
}

func TestSpansHTTPProtobufFromConfig(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc") // the Config field wins
	sink := &spanSink{}
	cfg := fastConfig()
	cfg.OTLPProtocol = ProtocolHTTPProtobuf
	cfg.OTLPTracesEndpoint = startHTTPReceiver(t, sink)
	checkSpans(t, cfg, sink)
}

func TestSpansBadProtocol(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json")
	cfg := fastConfig()
	cfg.OTLPTracesEndpoint = "127.0.0.1:4317"
	if _, err := Start(context.Background(), cfg, "127.0.0.1:0"); err == nil || !strings.Contains(err.Error(), "http/json") {
		t.Fatalf("Start with protocol http/json: %v", err)
	}
}

// checkSpans sends finished, parented, greedy and cancelled requests, and compares the spans
// with the ground truth.
func checkSpans(t *testing.T, cfg Config, sink *spanSink) {
	cfg.OTLPBatchDelay = 20 * time.Millisecond
	gtPath := withGroundTruth(t, &cfg)
	s := startSim(t, cfg)
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	reqs := []struct {
		id     string
		hdr    map[string]string
		extra  map[string]any
		stream bool
	}{
		{"sp-plain", nil, nil, true},
		{"sp-parent", map[string]string{"traceparent": "00-" + traceID + "-" + parentID + "-01"}, nil, true},
		{"sp-greedy", nil, map[string]any{"temperature": 0, "top_p": 0.5}, false},
	}
	for _, r := range reqs {
		h := map[string]string{"X-Request-Id": r.id}
		for k, v := range r.hdr {
			h[k] = v
		}
		resp := post(t, s.URL(), chatBody("tell me a story", 6, r.stream, r.extra), h)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	// A request the client abandons mid-stream gets no span.
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+"/v1/chat/completions", bytes.NewReader(chatBody("bye", 3000, true, map[string]any{"ignore_eos": true})))
	req.Header.Set("X-Request-Id", "sp-cancelled")
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if _, err := resp.Body.Read(buf); err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		mfs := scrape(t, s.URL())
		if mustSample(t, mfs, "vllm:num_requests_running", engine0) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := s.Close(); err != nil { // flushes the batch processor
		t.Fatal(err)
	}
	gts := gtByID(t, readGroundTruth(t, gtPath))
	if g := gts["sp-cancelled"]; g.Status != "cancelled" {
		t.Errorf("cancelled request has status %q", g.Status)
	}
	spans := map[string]gotSpan{}
	for _, sp := range sink.all() {
		if sp.name != artifact.RequestSpanName {
			t.Errorf("unexpected span %q", sp.name)
			continue
		}
		spans[fmt.Sprint(sp.attrs[artifact.AttrRequestID])] = sp
	}
	if len(spans) != 3 {
		t.Fatalf("got spans for %v, want the 3 finished requests", keys(spans))
	}
	for _, r := range reqs {
		sp, ok := spans["chatcmpl-"+r.id]
		if !ok {
			t.Errorf("no span for %s", r.id)
			continue
		}
		g := gts[r.id]
		if g.Status != "ok" {
			t.Fatalf("%s: status %q", r.id, g.Status)
		}
		if sp.kind != ptrace.SpanKindServer || sp.scope != tracerScope {
			t.Errorf("%s: kind %v scope %q", r.id, sp.kind, sp.scope)
		}
		if sp.start != *g.ArrivalNs || sp.end != *g.FinishedNs {
			t.Errorf("%s: span [%d,%d], ground truth [%d,%d]", r.id, sp.start, sp.end, *g.ArrivalNs, *g.FinishedNs)
		}
		sec := func(a, b int64) float64 { return float64(b-a) / 1e9 }
		wantF := map[string]float64{
			artifact.AttrTimeToFirstToken:     sec(*g.ArrivalNs, *g.FirstTokenNs),
			artifact.AttrE2E:                  sec(*g.ArrivalNs, *g.FinishedNs),
			artifact.AttrTimeInQueue:          sec(*g.ArrivalNs, *g.ScheduledNs),
			artifact.AttrTimeInModelPrefill:   sec(*g.ScheduledNs, *g.FirstTokenNs),
			artifact.AttrTimeInModelDecode:    sec(*g.FirstTokenNs, *g.LastTokenNs),
			artifact.AttrTimeInModelInference: sec(*g.ScheduledNs, *g.LastTokenNs),
		}
		for k, v := range wantF {
			if sp.attrTypes[k] != pcommon.ValueTypeDouble || sp.attrs[k] != v {
				t.Errorf("%s: %s = %v (%v), ground truth %v", r.id, k, sp.attrs[k], sp.attrTypes[k], v)
			}
		}
		wantI := map[string]int64{
			artifact.AttrPromptTokens: int64(*g.PromptTokens), artifact.AttrCompletionTokens: int64(*g.CompletionTokens),
			artifact.AttrMaxTokens: 6, artifact.AttrN: 1,
		}
		for k, v := range wantI {
			if sp.attrTypes[k] != pcommon.ValueTypeInt || sp.attrs[k] != v {
				t.Errorf("%s: %s = %v (%v), want %d", r.id, k, sp.attrs[k], sp.attrTypes[k], v)
			}
		}
		if *g.PromptTokens != 4 || *g.CompletionTokens != 6 {
			t.Errorf("%s: ground truth tokens %d/%d", r.id, *g.PromptTokens, *g.CompletionTokens)
		}
		switch r.id {
		case "sp-greedy":
			if _, ok := sp.attrs[artifact.AttrTemperature]; ok {
				t.Errorf("temperature 0 not omitted")
			}
			if sp.attrs[artifact.AttrTopP] != 0.5 {
				t.Errorf("top_p %v", sp.attrs[artifact.AttrTopP])
			}
		default:
			if sp.attrs[artifact.AttrTemperature] != 1.0 || sp.attrs[artifact.AttrTopP] != 1.0 {
				t.Errorf("%s: defaults temperature %v top_p %v", r.id, sp.attrs[artifact.AttrTemperature], sp.attrs[artifact.AttrTopP])
			}
		}
		if r.id == "sp-parent" {
			if sp.traceID != traceID || sp.parentID != parentID {
				t.Errorf("traceparent: trace %s parent %s", sp.traceID, sp.parentID)
			}
		} else if sp.parentID != "" || sp.traceID == traceID {
			t.Errorf("%s: root span expected, parent %q trace %s", r.id, sp.parentID, sp.traceID)
		}
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// A Close error is span-only when it is the span-export error itself, or a join (at any
// depth) of nothing else.
func TestSpanExportOnly(t *testing.T) {
	span := fmt.Errorf("%w: %w", ErrSpanExport, context.DeadlineExceeded)
	other := errors.New("ground truth: disk full")
	for _, c := range []struct {
		err  error
		want bool
	}{
		{span, true}, {errors.Join(span), true}, {errors.Join(errors.Join(span), span), true},
		{errors.Join(span, other), false}, {other, false}, {errors.Join(other), false},
		{errors.Join(errors.Join(span, other)), false},
	} {
		if got := SpanExportOnly(c.err); got != c.want {
			t.Errorf("SpanExportOnly(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
