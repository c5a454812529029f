package receiver

import (
	"time"

	"github.com/inferprobe/inferprobe/artifact"
)

// Capability names of the span paths, used in Supported, Enabled and
// Collected.
const (
	CapHTTPProtobuf = "otlp_http_protobuf"
	CapHTTPJSON     = "otlp_http_json"
	CapGRPC         = "otlp_grpc"
	CapOTLPFile     = "otlp_json_file"
	CapJSONLFile    = "jsonl_file"
)

// Stats are the receiver's counters since New. Export counts are requests;
// span counts are spans.
type Stats struct {
	// HTTPRequests counts POST /v1/traces requests; GRPCRequests counts gRPC
	// Export calls (on the gRPC listener or, as GRPCOnHTTP, the HTTP one).
	HTTPRequests int64
	GRPCRequests int64
	GRPCOnHTTP   int64
	// ExportsAccepted counts exports answered 200 / OK (partial or not).
	ExportsAccepted int64
	// ExportsDirect counts the protobuf exports converted into records straight from their
	// wire bytes, with no pdata decoding (then accepted, or refused by a full queue).
	ExportsDirect int64
	// SpansReceived counts spans accepted into the queue, by path.
	SpansHTTPProtobuf int64
	SpansHTTPJSON     int64
	SpansGRPC         int64
	// SpansRejected counts invalid spans answered with partial_success;
	// PartialSuccesses the exports that carried them.
	SpansRejected    int64
	PartialSuccesses int64
	// SpansDelivered counts spans handed to the sink; SpansDropped those
	// queued but never delivered (Close, or a Shutdown deadline).
	SpansDelivered int64
	SpansDropped   int64
	// SpansSkipped counts the delivered spans handed to the sink's
	// SpanFilter.SkipSpans as a count, never decoded (the sink wanted none).
	SpansSkipped int64
	// Refusals: QueueFull (503 / Unavailable), Busy (429 /
	// ResourceExhausted: MaxConcurrentExports in flight), MemoryBusy (429 /
	// ResourceExhausted: the memory limiter is held by other exports),
	// TooLarge (413: the body's bytes), TooComplex (413 / ResourceExhausted
	// without RetryInfo: over the element or nesting limits, or a decode
	// cost over MemoryLimitBytes), BadRequests (400), UnsupportedMedia (415), MethodNotAllowed
	// (405), NotFound (404), AfterStop (503 while stopping), Timeouts (408).
	// ClosedUnread counts the HTTP/1.x refusals among them answered with
	// Connection: close and their body left unread (retryable refusals of a
	// body over 64 KiB or of unknown length, before it was read).
	ClosedUnread int64
	// ExportsWaited counts the OTLP/HTTP exports that found no room and
	// waited for it (see Options.AdmissionWait), admitted or not in the
	// end; WaitingExports is how many wait now.
	ExportsWaited    int64
	WaitingExports   int
	QueueFull        int64
	Busy             int64
	MemoryBusy       int64
	TooLarge         int64
	TooComplex       int64
	BadRequests      int64
	UnsupportedMedia int64
	MethodNotAllowed int64
	NotFound         int64
	AfterStop        int64
	Timeouts         int64
	// QueuedSpans and QueuedBytes are the queue's content now (estimated
	// bytes), including the batch being consumed.
	QueuedSpans int
	QueuedBytes int64
	// DecodeBytes is the memory limiter's charge now: the bytes held by the
	// exports being read and decoded; DecodeBytesPeak the highest it has
	// been since New (never over MemoryLimitBytes).
	DecodeBytes     int64
	DecodeBytesPeak int64
	// BindErrors are the listeners Listen could not bind.
	BindErrors []BindError
}

// SpansReceived is the total of spans accepted on every path.
func (s Stats) SpansReceived() int64 { return s.SpansHTTPProtobuf + s.SpansHTTPJSON + s.SpansGRPC }

// Stats returns a snapshot of the counters.
func (r *Receiver) Stats() Stats {
	c := &r.c
	qs, qb := r.q.queued()
	r.mu.Lock()
	bind := append([]BindError(nil), r.bindErrs...)
	r.mu.Unlock()
	return Stats{
		HTTPRequests: c.httpRequests.Load(), GRPCRequests: c.grpcRequests.Load(), GRPCOnHTTP: c.grpcOnHTTP.Load(),
		ExportsAccepted:   c.exportsAccepted.Load(),
		ExportsDirect:     c.exportsDirect.Load(),
		SpansHTTPProtobuf: c.spansHTTPProtobuf.Load(), SpansHTTPJSON: c.spansHTTPJSON.Load(), SpansGRPC: c.spansGRPC.Load(),
		SpansRejected: c.spansRejected.Load(), PartialSuccesses: c.partialSucc.Load(),
		SpansDelivered: c.spansDelivered.Load(), SpansDropped: c.spansDropped.Load(),
		SpansSkipped: c.spansSkipped.Load(),
		QueueFull:    c.queueFull.Load(), Busy: c.busy.Load(), MemoryBusy: c.memoryBusy.Load(),
		TooLarge: c.tooLarge.Load(), TooComplex: c.tooComplex.Load(), BadRequests: c.badRequests.Load(),
		UnsupportedMedia: c.unsupportedMedia.Load(), MethodNotAllowed: c.methodNotAllowed.Load(), NotFound: c.notFound.Load(),
		AfterStop: c.afterStop.Load(), Timeouts: c.timeouts.Load(), ClosedUnread: c.closedUnread.Load(),
		ExportsWaited: c.exportsWaited.Load(), WaitingExports: r.waits.waiting(),
		QueuedSpans: qs, QueuedBytes: qb, DecodeBytes: r.mem.inUse(), DecodeBytesPeak: r.mem.peak.Load(), BindErrors: bind,
	}
}

// Capabilities returns the receiver's infer.capabilities v2 record
// (component "vllm.spans"; EventID "capabilities:vllm.spans") for the run
// context ctx:
//
//   - Available: a listener is bound, or spans arrived through ServeHTTP;
//   - Supported: every span path inferprobe has (OTLP/HTTP protobuf and
//     JSON, OTLP/gRPC, OTLP JSON files, JSONL files);
//   - Enabled: the paths of the bound listeners (HTTP: protobuf and JSON;
//     gRPC) — or, without Listen, the HTTP paths;
//   - Collected: the paths that delivered at least one span;
//   - Metadata: "listen" {http, grpc: address or null}, "bind_errors"
//     [{protocol, address, error}], "counters" (Stats as snake_case
//     integers: http_requests, grpc_requests, spans_received,
//     spans_rejected, queue_full, busy, memory_busy, too_large,
//     too_complex, ...), "limits" (max_body_bytes, memory_limit_bytes,
//     max_export_elements, max_value_depth, queue_spans, queue_bytes,
//     max_concurrent_exports, retry_after_seconds), and
//     "per_request_attribution": "gen_ai.request.id" (vLLM's request
//     spans carry the request id there, so spans join requests one by one).
func (r *Receiver) Capabilities(ctx artifact.Context) artifact.Capabilities {
	s := r.Stats()
	httpAddr, grpcAddr := r.HTTPAddr(), r.GRPCAddr()
	r.mu.Lock()
	listened := r.listened && (httpAddr != "" || grpcAddr != "" || len(r.bindErrs) > 0)
	r.mu.Unlock()
	available := httpAddr != "" || grpcAddr != "" || s.SpansReceived() > 0
	var enabled []string
	if available {
		enabled = enabledPaths(httpAddr, grpcAddr, listened)
	}
	bind := make([]any, 0, len(s.BindErrors))
	for _, b := range s.BindErrors {
		bind = append(bind, map[string]any{"protocol": b.Protocol, "address": b.Addr, "error": b.Err.Error()})
	}
	return artifact.Capabilities{
		Context:   ctx,
		EventID:   "capabilities:" + artifact.ComponentSpans,
		Component: artifact.ComponentSpans,
		Available: available,
		Supported: []string{CapHTTPProtobuf, CapHTTPJSON, CapGRPC, CapOTLPFile, CapJSONLFile},
		Enabled:   enabled,
		Collected: collectedPaths(s),
		Metadata: map[string]any{
			"listen":                  map[string]any{"http": nullable(httpAddr), "grpc": nullable(grpcAddr)},
			"bind_errors":             bind,
			"counters":                s.counterMetadata(),
			"limits":                  r.limitMetadata(),
			"per_request_attribution": artifact.AttrRequestID,
		},
	}
}

// enabledPaths are the span paths of the bound listeners: the HTTP ones
// (protobuf and JSON) when the HTTP listener is bound or Listen was never
// called, and gRPC when its listener is bound.
func enabledPaths(httpAddr, grpcAddr string, listened bool) []string {
	var enabled []string
	if httpAddr != "" || !listened {
		enabled = append(enabled, CapHTTPProtobuf, CapHTTPJSON)
	}
	if grpcAddr != "" {
		enabled = append(enabled, CapGRPC)
	}
	return enabled
}

// collectedPaths are the span paths that delivered at least one span, in
// the order HTTP protobuf, HTTP JSON, gRPC; nil when none did.
func collectedPaths(s Stats) []string {
	var collected []string
	if s.SpansHTTPProtobuf > 0 {
		collected = append(collected, CapHTTPProtobuf)
	}
	if s.SpansHTTPJSON > 0 {
		collected = append(collected, CapHTTPJSON)
	}
	if s.SpansGRPC > 0 {
		collected = append(collected, CapGRPC)
	}
	return collected
}

// nullable is a bound address, or nil (JSON null) for "".
func nullable(a string) any {
	if a == "" {
		return nil
	}
	return a
}

// counterMetadata is the capabilities "counters" object: every counter as a
// snake_case int64.
func (s Stats) counterMetadata() map[string]any {
	return map[string]any{
		"http_requests":       s.HTTPRequests,
		"grpc_requests":       s.GRPCRequests,
		"grpc_on_http":        s.GRPCOnHTTP,
		"exports_accepted":    s.ExportsAccepted,
		"spans_received":      s.SpansReceived(),
		"spans_http_protobuf": s.SpansHTTPProtobuf,
		"spans_http_json":     s.SpansHTTPJSON,
		"spans_grpc":          s.SpansGRPC,
		"spans_rejected":      s.SpansRejected,
		"partial_successes":   s.PartialSuccesses,
		"spans_delivered":     s.SpansDelivered,
		"spans_dropped":       s.SpansDropped,
		"queue_full":          s.QueueFull,
		"busy":                s.Busy,
		"too_large":           s.TooLarge,
		"too_complex":         s.TooComplex,
		"memory_busy":         s.MemoryBusy,
		"bad_requests":        s.BadRequests,
		"unsupported_media":   s.UnsupportedMedia,
		"method_not_allowed":  s.MethodNotAllowed,
		"not_found":           s.NotFound,
		"after_stop":          s.AfterStop,
		"timeouts":            s.Timeouts,
		"closed_unread":       s.ClosedUnread,
		"bind_errors":         int64(len(s.BindErrors)),
	}
}

// limitMetadata is the capabilities "limits" object: the effective limits
// as int64, the retry delay in whole seconds rounded up.
func (r *Receiver) limitMetadata() map[string]any {
	return map[string]any{
		"max_body_bytes":         r.opts.MaxBodyBytes,
		"memory_limit_bytes":     r.opts.MemoryLimitBytes,
		"max_export_elements":    int64(r.opts.MaxExportElements),
		"max_value_depth":        int64(r.opts.MaxValueDepth),
		"queue_spans":            int64(r.opts.QueueSpans),
		"queue_bytes":            r.opts.QueueBytes,
		"max_concurrent_exports": int64(r.opts.MaxConcurrentExports),
		"retry_after_seconds":    int64((r.opts.RetryAfter + time.Second - 1) / time.Second),
	}
}
