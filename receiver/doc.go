// Package receiver receives vLLM's OpenTelemetry request spans: an OTLP
// trace receiver over HTTP (POST /v1/traces, protobuf and JSON, gzip) and
// gRPC (the OTLP TraceService), decoded with the OpenTelemetry Collector's
// pdata, and a reader for span files (`analyze --vllm-spans FILE`). Every
// span becomes an artifact.VLLMSpan, the infer.vllm_span v1 record of the
// artifact, with its start and end as exact integer nanoseconds, its
// attributes under their native names, and the X-Request-Id recovered from
// gen_ai.request.id (CandidateRequestIDs).
//
// The receiver never holds unbounded memory: bodies are limited after
// decompression, the exports decoded at once are limited, and decoded spans
// wait in a bounded queue for the single consumer; beyond these limits
// exporters are told to retry (429/503 with Retry-After, or gRPC
// ResourceExhausted/Unavailable with RetryInfo).
package receiver
