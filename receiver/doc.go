// Package receiver receives vLLM's OpenTelemetry request spans: an OTLP
// trace receiver over HTTP (POST /v1/traces, protobuf and JSON, gzip) and
// gRPC (the OTLP TraceService), decoded with the OpenTelemetry Collector's
// pdata, and a reader for span files (`analyze --vllm-spans FILE`). Every
// span becomes an artifact.Span, the infer.vllm_span v1 record of the
// artifact, with its start and end as exact integer nanoseconds, its
// attributes under their native names, and the X-Request-Id recovered from
// gen_ai.request.id (CandidateRequestIDs).
//
// The receiver never holds unbounded memory: bodies are limited after
// decompression; before an export is decoded a wire pre-scan counts its
// elements and nesting (an element bomb is refused for good: 413, or
// ResourceExhausted without RetryInfo); one memory limiter shared by both
// transports charges each body as it is read and its decode cost before it
// is decoded; and decoded spans wait in a bounded queue for the single
// consumer. Beyond the limiter or the queue exporters are told to retry
// (429/503 with Retry-After, or gRPC ResourceExhausted/Unavailable with
// RetryInfo); no span count is limited, so no batch of real spans within
// the body limit is refused for good.
package receiver
