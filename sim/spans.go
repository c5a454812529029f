package sim

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// tracerScope is the instrumentation scope of the spans (vLLM's front-end module name).
const tracerScope = "vllm.llm_engine"

// newTracerProvider builds the OTLP exporter and batch span processor of cfg, as vLLM's
// get_span_exporter does: gRPC (plaintext) unless the protocol is http/protobuf, in which
// case the endpoint is the full URL (a URL without a path posts to /v1/traces).
func newTracerProvider(ctx context.Context, cfg *Config) (*sdktrace.TracerProvider, error) {
	ep := strings.TrimSpace(cfg.OTLPTracesEndpoint)
	var exp sdktrace.SpanExporter
	var err error
	switch cfg.otlpProtocol() {
	case ProtocolGRPC:
		opts := []otlptracegrpc.Option{}
		if strings.Contains(ep, "://") {
			u, perr := url.Parse(ep)
			if perr != nil || u.Host == "" {
				return nil, fmt.Errorf("otlp traces endpoint %q: not a host:port or URL", ep)
			}
			opts = append(opts, otlptracegrpc.WithEndpoint(u.Host))
			if u.Scheme != "https" {
				opts = append(opts, otlptracegrpc.WithInsecure())
			}
		} else {
			opts = append(opts, otlptracegrpc.WithEndpoint(ep), otlptracegrpc.WithInsecure())
		}
		exp, err = otlptracegrpc.New(ctx, opts...)
	case ProtocolHTTPProtobuf:
		if !strings.Contains(ep, "://") {
			ep = "http://" + ep
		}
		u, perr := url.Parse(ep)
		if perr != nil || u.Host == "" {
			return nil, fmt.Errorf("otlp traces endpoint %q: not a URL", cfg.OTLPTracesEndpoint)
		}
		if u.Path == "" || u.Path == "/" {
			u.Path = "/v1/traces"
		}
		exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(u.String()))
	default:
		return nil, fmt.Errorf("unsupported OTLP traces protocol %q", cfg.otlpProtocol())
	}
	if err != nil {
		return nil, fmt.Errorf("otlp exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		attribute.String("vllm.instrumenting_module_name", tracerScope),
		attribute.Int("vllm.process_id", os.Getpid()),
	))
	if err != nil {
		res = resource.Default()
	}
	return sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(cfg.OTLPBatchDelay)),
	), nil
}

// spanAttributes returns the llm_request attributes of a finished sequence, derived from the
// same integer nanosecond stamps as the ground truth and the histograms.
func spanAttributes(s *seq) []attribute.KeyValue {
	sec := func(ns int64) float64 { return float64(ns) / 1e9 }
	attrs := []attribute.KeyValue{
		attribute.Float64(artifact.AttrTimeToFirstToken, sec(s.firstTokenNs-s.arrivalNs)),
		attribute.Float64(artifact.AttrE2E, sec(s.finishNs-s.arrivalNs)),
		attribute.Float64(artifact.AttrTimeInQueue, sec(s.scheduledNs-s.arrivalNs)),
		attribute.Int(artifact.AttrPromptTokens, s.promptLen),
		attribute.Int(artifact.AttrCompletionTokens, s.generated),
		attribute.Float64(artifact.AttrTimeInModelPrefill, sec(s.firstTokenNs-s.scheduledNs)),
		attribute.Float64(artifact.AttrTimeInModelDecode, sec(s.lastTokenNs-s.firstTokenNs)),
		attribute.Float64(artifact.AttrTimeInModelInference, sec(s.lastTokenNs-s.scheduledNs)),
		attribute.String(artifact.AttrRequestID, "chatcmpl-"+s.id),
	}
	// Omitted when falsy, as vLLM does.
	if s.topP != 0 {
		attrs = append(attrs, attribute.Float64(artifact.AttrTopP, s.topP))
	}
	if s.maxTokens != 0 {
		attrs = append(attrs, attribute.Int(artifact.AttrMaxTokens, s.maxTokens))
	}
	if s.temp != 0 {
		attrs = append(attrs, attribute.Float64(artifact.AttrTemperature, s.temp))
	}
	return append(attrs, attribute.Int(artifact.AttrN, 1))
}

// emitSpan records the llm_request span of a counted finish: kind SERVER, start = arrival,
// end = finish, parent = the request's traceparent when it had one.
func emitSpan(tracer trace.Tracer, s *seq) {
	parent := s.parent
	if parent == nil {
		parent = context.Background()
	}
	_, span := tracer.Start(parent, artifact.RequestSpanName,
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithTimestamp(time.Unix(0, s.arrivalNs)),
		trace.WithAttributes(spanAttributes(s)...))
	span.End(trace.WithTimestamp(time.Unix(0, s.finishNs)))
}
