package receiver

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/inferprobe/inferprobe/artifact"
)

// exportWithSDK sends n llm_request spans with vLLM's attributes through a
// real OpenTelemetry SDK exporter, each the child of a remote parent (the
// client's traceparent), and flushes.
func exportWithSDK(t *testing.T, exp sdktrace.SpanExporter, n int, hostName string) {
	t.Helper()
	ctx := context.Background()
	res := resource.NewSchemaless(attribute.String("service.name", "vllm-server"), attribute.String("host.name", hostName),
		attribute.String("vllm.instrumenting_module_name", "vllm.llm_engine"), attribute.Int("vllm.process_id", 77))
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(time.Hour)))
	tracer := tp.Tracer("vllm.llm_engine")
	for i := 0; i < n; i++ {
		s := vllmSpec(7, i)
		parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: s.traceID, SpanID: s.parentID, TraceFlags: trace.FlagsSampled, Remote: true})
		_, sp := tracer.Start(trace.ContextWithRemoteSpanContext(ctx, parent), artifact.RequestSpanName,
			trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(time.Unix(0, s.startNS)),
			trace.WithAttributes(
				attribute.Float64(artifact.AttrTimeToFirstToken, s.ttft), attribute.Float64(artifact.AttrE2E, s.e2e),
				attribute.Float64(artifact.AttrTimeInQueue, 3.4356489777565e-05), attribute.Int64(artifact.AttrPromptTokens, s.prompt),
				attribute.Int64(artifact.AttrCompletionTokens, s.completion), attribute.String(artifact.AttrRequestID, "chatcmpl-"+s.xRequestID),
				attribute.Float64(artifact.AttrTopP, 1.0), attribute.Int(artifact.AttrMaxTokens, 128), attribute.Int(artifact.AttrN, 1),
				attribute.Int64("big", 1<<62+1)))
		sp.End(trace.WithTimestamp(time.Unix(0, s.endNS)))
	}
	if err := tp.ForceFlush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}

func checkSDKSpans(t *testing.T, got []artifact.Span, n int, source, hostName string) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("got %d spans, want %d", len(got), n)
	}
	byID := map[string]artifact.Span{}
	for _, r := range got {
		byID[*r.RequestID] = r
	}
	for i := 0; i < n; i++ {
		s := vllmSpec(7, i)
		r, ok := byID[s.xRequestID]
		if !ok {
			t.Fatalf("no span for %s", s.xRequestID)
		}
		if r.Source != source || r.Name != artifact.RequestSpanName || *r.Kind != "SERVER" || r.ClockDomain != hostName+"/unix_epoch_ns" {
			t.Fatalf("span %d: %q %q %q %q", i, r.Source, r.Name, *r.Kind, r.ClockDomain)
		}
		if *r.TraceID != fmt.Sprintf("%x", s.traceID) || *r.ParentSpanID != fmt.Sprintf("%x", s.parentID) || r.SpanID == nil {
			t.Fatalf("span %d ids: %s %v", i, *r.TraceID, r.ParentSpanID)
		}
		if *r.StartUnixNS != s.startNS || *r.EndUnixNS != s.endNS {
			t.Fatalf("span %d times %d %d", i, *r.StartUnixNS, *r.EndUnixNS)
		}
		if r.Attributes[artifact.AttrPromptTokens] != int64(512) || r.Attributes[artifact.AttrE2E] != s.e2e || r.Attributes["big"] != int64(1<<62+1) ||
			r.Attributes[artifact.AttrTopP] != 1.0 || r.Attributes[artifact.AttrMaxTokens] != int64(128) {
			t.Fatalf("span %d attributes %#v", i, r.Attributes)
		}
		if r.Resource["vllm.process_id"] != int64(77) || r.Scope["name"] != "vllm.llm_engine" {
			t.Fatalf("span %d resource %#v scope %#v", i, r.Resource, r.Scope)
		}
	}
}

func TestOTelSDKHTTPExporter(t *testing.T) {
	for _, gz := range []bool{false, true} {
		t.Run(fmt.Sprintf("gzip=%v", gz), func(t *testing.T) {
			col := newCollector()
			r := startReceiver(t, Options{SessionID: "sess-1", RunID: "run-1", Sink: col})
			opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(tracesURL(r))}
			if gz {
				opts = append(opts, otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
			}
			exp, err := otlptracehttp.New(context.Background(), opts...)
			if err != nil {
				t.Fatal(err)
			}
			exportWithSDK(t, exp, 20, "gpu-http")
			checkSDKSpans(t, col.wait(t, 20, 10*time.Second), 20, artifact.SpanSourceHTTP, "gpu-http")
			if st := r.Stats(); st.SpansHTTPProtobuf != 20 || st.HTTPRequests < 1 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

func TestOTelSDKGRPCExporter(t *testing.T) {
	for _, c := range []struct {
		name   string
		onHTTP bool
		gz     bool
	}{{"grpc port", false, false}, {"grpc port gzip", false, true}, {"http port (h2c)", true, false}} {
		t.Run(c.name, func(t *testing.T) {
			col := newCollector()
			r := startReceiver(t, Options{SessionID: "sess-1", RunID: "run-1", Sink: col})
			addr := r.GRPCAddr()
			if c.onHTTP {
				addr = r.HTTPAddr()
			}
			opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(addr), otlptracegrpc.WithInsecure()}
			if c.gz {
				opts = append(opts, otlptracegrpc.WithCompressor("gzip"))
			}
			exp, err := otlptracegrpc.New(context.Background(), opts...)
			if err != nil {
				t.Fatal(err)
			}
			exportWithSDK(t, exp, 20, "gpu-grpc")
			checkSDKSpans(t, col.wait(t, 20, 10*time.Second), 20, artifact.SpanSourceGRPC, "gpu-grpc")
			st := r.Stats()
			if st.SpansGRPC != 20 || (c.onHTTP && st.GRPCOnHTTP < 1) || (!c.onHTTP && st.GRPCOnHTTP != 0) {
				t.Fatalf("stats %+v", st)
			}
			caps := r.Capabilities(contextFor())
			if !caps.Available || strings.Join(caps.Collected, ",") != CapGRPC ||
				strings.Join(caps.Enabled, ",") != CapHTTPProtobuf+","+CapHTTPJSON+","+CapGRPC {
				t.Fatalf("capabilities %+v", caps)
			}
		})
	}
}

// An HTTP exporter with retries off sees the 503 of a full queue, after
// its export waited AdmissionWait for room.
func TestOTelSDKHTTPExporterSeesQueueFull(t *testing.T) {
	release := make(chan struct{})
	r := startReceiver(t, Options{QueueSpans: 5, AdmissionWait: time.Millisecond, Sink: artifact.SinkFunc(func(artifact.Record) error { <-release; return nil })})
	defer close(release)
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(tracesURL(r)),
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}))
	if err != nil {
		t.Fatal(err)
	}
	defer exp.Shutdown(context.Background())
	// Fill: one batch being consumed, one queued.
	for b := 0; b < 2; b++ {
		if resp, _ := post(t, tracesURL(r), protoBody(t, vllmTraces(b, 5)), protoHdr); resp.StatusCode != 200 && b == 0 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	tracer := sdktrace.NewTracerProvider().Tracer("x")
	_, sp := tracer.Start(context.Background(), artifact.RequestSpanName)
	sp.End()
	ro := sp.(sdktrace.ReadOnlySpan)
	err = exp.ExportSpans(context.Background(), []sdktrace.ReadOnlySpan{ro})
	if err == nil || !strings.Contains(err.Error(), "retry-able") || !strings.Contains(err.Error(), "span queue full") {
		t.Fatalf("export error %v, want a retryable queue-full refusal", err)
	}
}

// Hand-made gRPC exports: partial success, an element bomb (refused for
// good), busy and full queue with RetryInfo.
func TestGRPCAnswers(t *testing.T) {
	release := make(chan struct{})
	r := startReceiver(t, Options{SessionID: "sess-1", RunID: "run-1", QueueSpans: 10, MaxExportElements: 300,
		RetryAfter: 3 * time.Second, Sink: artifact.SinkFunc(func(artifact.Record) error { <-release; return nil })})
	defer close(release)
	cc, err := grpc.NewClient(r.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	client := ptraceotlp.NewGRPCClient(cc)
	ctx := context.Background()

	td := vllmTraces(0, 6)
	td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(3).SetSpanID(pcommon.SpanID{})
	resp, err := client.Export(ctx, ptraceotlp.NewExportRequestFromTraces(td))
	if err != nil {
		t.Fatal(err)
	}
	if ps := resp.PartialSuccess(); ps.RejectedSpans() != 1 || !strings.Contains(ps.ErrorMessage(), "span_id missing or all zero") {
		t.Fatalf("partial success %d %q", ps.RejectedSpans(), ps.ErrorMessage())
	}
	// 51 spans of 12 attributes each are over 300 elements: refused for
	// good (ResourceExhausted without RetryInfo), before decoding.
	_, err = client.Export(ctx, ptraceotlp.NewExportRequestFromTraces(vllmTraces(1, 51)))
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "more than 300 elements") || len(st.Details()) != 0 {
		t.Fatalf("element bomb: %v %v", err, st.Details())
	}
	// 5 spans held by the consumer, 6 more would pass 10.
	_, err = client.Export(ctx, ptraceotlp.NewExportRequestFromTraces(vllmTraces(2, 6)))
	st := status.Convert(err)
	if st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "span queue full") {
		t.Fatalf("queue full: %v", err)
	}
	var delay time.Duration
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			delay = ri.GetRetryDelay().AsDuration()
		}
	}
	if delay != 3*time.Second {
		t.Fatalf("retry delay %v", delay)
	}
	// Busy: take every slot by hand.
	for i := 0; i < cap(r.slots); i++ {
		r.slots <- struct{}{}
	}
	_, err = client.Export(ctx, ptraceotlp.NewExportRequestFromTraces(vllmTraces(3, 1)))
	for i := 0; i < cap(r.slots); i++ {
		<-r.slots
	}
	if status.Code(err) != codes.ResourceExhausted || len(status.Convert(err).Details()) != 1 {
		t.Fatalf("busy: %v", err)
	}
	s := r.Stats()
	if s.GRPCRequests != 4 || s.SpansGRPC != 5 || s.SpansRejected != 1 || s.QueueFull != 1 || s.Busy != 1 || s.TooComplex != 1 || s.TooLarge != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// A gRPC message over MaxBodyBytes is refused by the gRPC server itself.
func TestGRPCMessageTooLarge(t *testing.T) {
	r := startReceiver(t, Options{MaxBodyBytes: 64 << 10})
	cc, err := grpc.NewClient(r.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	_, err = ptraceotlp.NewGRPCClient(cc).Export(context.Background(), ptraceotlp.NewExportRequestFromTraces(vllmTraces(0, 300)))
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("err %v", err)
	}
}

// The same export delivered over HTTP protobuf, HTTP JSON and gRPC gives
// records with equal ids and equal content digests; a changed attribute
// under the same ids gives another digest (a conflicting span).
func TestRedeliveryDigests(t *testing.T) {
	col := newCollector()
	r := startReceiver(t, Options{SessionID: "sess-1", RunID: "run-1", Sink: col})
	td := vllmTraces(0, 3)
	post(t, tracesURL(r), protoBody(t, td), protoHdr)
	post(t, tracesURL(r), jsonBody(t, td), jsonHdr)
	cc, err := grpc.NewClient(r.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	if _, err := ptraceotlp.NewGRPCClient(cc).Export(context.Background(), ptraceotlp.NewExportRequestFromTraces(td)); err != nil {
		t.Fatal(err)
	}
	changed := vllmTraces(0, 3)
	changed.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(1).Attributes().PutInt(artifact.AttrCompletionTokens, 127)
	post(t, tracesURL(r), protoBody(t, changed), protoHdr)
	got := col.wait(t, 12, 5*time.Second)
	for i := 0; i < 3; i++ {
		first := got[i]
		for k := 1; k < 4; k++ {
			again := got[3*k+i]
			if *again.TraceID != *first.TraceID || *again.SpanID != *first.SpanID {
				t.Fatalf("delivery %d span %d: ids differ", k, i)
			}
			same := again.ContentDigest() == first.ContentDigest()
			if conflicting := k == 3 && i == 1; same == conflicting {
				t.Fatalf("delivery %d (%s) span %d: digest equal=%v", k, again.Source, i, same)
			}
		}
	}
}

func TestCapabilitiesRecord(t *testing.T) {
	col := newCollector()
	r := startReceiver(t, Options{Sink: col, QueueSpans: 1000, MaxBodyBytes: 1 << 20})
	post(t, tracesURL(r), jsonBody(t, vllmTraces(0, 4)), jsonHdr)
	post(t, tracesURL(r), []byte("x"), protoHdr)
	col.wait(t, 4, 5*time.Second)
	caps := r.Capabilities(contextFor())
	line, err := artifact.MarshalLine(caps)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"event_type":"infer.capabilities","schema_version":2`, `"event_id":"capabilities:vllm.spans"`, `"component":"vllm.spans"`,
		`"available":true`, `"supported":["otlp_http_protobuf","otlp_http_json","otlp_grpc","otlp_json_file","jsonl_file"]`,
		`"enabled":["otlp_http_protobuf","otlp_http_json","otlp_grpc"]`, `"collected":["otlp_http_json"]`,
		`"http_requests":2`, `"spans_received":4`, `"bad_requests":1`, `"queue_full":0`, `"bind_errors":[]`,
		`"queue_spans":1000`, `"max_body_bytes":1048576`, `"grpc":"127.0.0.1:`, `"per_request_attribution":"gen_ai.request.id"`,
	} {
		if !strings.Contains(string(line), want) {
			t.Errorf("capabilities line lacks %s:\n%s", want, line)
		}
	}
	// Without Listen (ServeHTTP mounted elsewhere), nothing received yet:
	// not available.
	idle := New(Options{})
	defer idle.Close()
	if c := idle.Capabilities(contextFor()); c.Available || len(c.Enabled) != 0 || len(c.Collected) != 0 {
		t.Fatalf("idle capabilities %+v", c)
	}
}
