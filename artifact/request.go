package artifact

// Request outcome statuses of infer.request v1 (Request.Status).
const (
	RequestOK              = "ok"
	RequestTimeout         = "timeout"
	RequestRejected        = "rejected"
	RequestUnreachable     = "unreachable"
	RequestDeliveryUnknown = "delivery_unknown"
	RequestError           = "error"
	RequestDropped         = "dropped"
	RequestCancelled       = "cancelled"
)

// Request is the infer.request v1 record: one client request as observed by
// inferprobe: what it sent, when each part of the answer arrived, and how
// its tokens were counted. Times ending in _ns are wall-clock Unix epoch nanoseconds,
// durations ending in _ms are milliseconds measured on the monotonic clock.
// Every value that can be unknown is a pointer and is written as null, never
// 0. The v2 infer.request (correlation model) is a different record; see
// KindRequestV2.
type Request struct {
	SessionID string `json:"session_id"`
	// RequestID is "<case_id>_<phase>_<worker>_<index>".
	RequestID string `json:"request_id"`
	CaseID    string `json:"case_id"`
	Phase     string `json:"phase"`
	// TimestampNS equals StartedAtNS.
	TimestampNS *int64 `json:"timestamp_ns"`
	// StartedAtNS is when the request was sent; EndedAtNS when it ended.
	StartedAtNS *int64 `json:"started_at_ns"`
	EndedAtNS   *int64 `json:"ended_at_ns"`
	// Endpoint is the URL through RedactURL.
	Endpoint string `json:"endpoint"`
	Model    string `json:"model"`
	// Concurrency is the closed-loop worker count; null for open loops.
	Concurrency *int64 `json:"concurrency"`
	// MaxInFlight is the open-loop in-flight cap; null for closed loops.
	MaxInFlight        *int64 `json:"max_in_flight"`
	TargetInputTokens  int64  `json:"target_input_tokens"`
	TargetOutputTokens int64  `json:"target_output_tokens"`
	Stream             bool   `json:"stream"`
	// Status is one of the Request* outcome constants.
	Status string `json:"status"`
	// E2ELatencyMS is send → end of response (after [DONE] when streaming);
	// null for dropped/cancelled requests.
	E2ELatencyMS *float64 `json:"e2e_latency_ms"`
	// TTFTMS is send → first non-empty content, reasoning or tool-call
	// delta; null without streaming or without output.
	TTFTMS *float64 `json:"ttft_ms"`
	// FirstChunkLatencyMS is send → first SSE data event.
	FirstChunkLatencyMS *float64 `json:"first_chunk_latency_ms"`
	// ChunkInterarrivalMS are the gaps between content chunks (chunk-level,
	// never inter-token latency); written as [] when empty.
	ChunkInterarrivalMS []float64 `json:"chunk_interarrival_ms"`
	PromptTokens        *int64    `json:"prompt_tokens"`
	// PromptTokenSource is "server_usage", a tokenizer name, or "estimated".
	PromptTokenSource string  `json:"prompt_token_source"`
	PromptTokenExact  bool    `json:"prompt_token_exact"`
	OutputTokens      *int64  `json:"output_tokens"`
	OutputTokenSource string  `json:"output_token_source"`
	OutputTokenExact  bool    `json:"output_token_exact"`
	TotalTokens       *int64  `json:"total_tokens"`
	FinishReason      *string `json:"finish_reason"`
	ErrorType         *string `json:"error_type"`
	ErrorMessage      *string `json:"error_message"`
	HTTPStatus        *int64  `json:"http_status"`
	// ArrivalMode is the case's arrival mode ("closed", "poisson", ...).
	ArrivalMode  string `json:"arrival_mode"`
	RequestIndex *int64 `json:"request_index"`
	// IntendedAtNS is the scheduled arrival time.
	IntendedAtNS *int64 `json:"intended_at_ns"`
	// DispatchLagMS is sent − intended, in ms.
	DispatchLagMS      *float64 `json:"dispatch_lag_ms"`
	HeldForSlot        *bool    `json:"held_for_slot"`
	InFlightAtDispatch *int64   `json:"in_flight_at_dispatch"`
	// PromptMode is "repeat", "unique" or "shared-prefix".
	PromptMode         string  `json:"prompt_mode"`
	PromptID           *string `json:"prompt_id"`
	PrefixGroup        *int64  `json:"prefix_group"`
	SharedPrefixTokens *int64  `json:"shared_prefix_tokens"`
	PromptDigest       *string `json:"prompt_digest"`
	// XRequestID is the X-Request-Id sent, "inferprobe-<run_id>-<request_id>";
	// null for a request never sent.
	XRequestID *string `json:"x_request_id"`
	// TraceID is an inferprobe addition to the Stormlog v1 record: the W3C
	// trace id (32 lowercase hex digits) of the traceparent header sent with
	// the request, so server spans can be joined by trace as well as by
	// X-Request-Id; null for a request never sent.
	TraceID *string `json:"trace_id"`
	// FirstAnswerMS is an inferprobe addition to the Stormlog v1 record: send
	// → first non-empty non-reasoning content (or tool-call) delta, in ms,
	// when the model streamed reasoning first (time to first answer token);
	// null otherwise or when no answer arrived.
	FirstAnswerMS *float64 `json:"first_answer_ms"`
	// ServerErrorType and ServerErrorCode are inferprobe additions to the
	// Stormlog v1 record: the "type" and "code" of the error the server sent
	// (an error object in a 2xx stream or body, or the body of a non-2xx
	// answer), e.g. "InternalServerError" and "500"; null when it sent none
	// (http_status stays the status line). A JSON string is kept as sent, a
	// number as its JSON literal (500 → "500"), any other value as its compact
	// JSON text, so a code is never coerced to an integer.
	ServerErrorType *string `json:"server_error_type"`
	ServerErrorCode *string `json:"server_error_code"`
	// Shard is an inferprobe addition to the Stormlog v1 record: the index
	// (0 ≤ shard < shards) of the load-generator shard that sent the request
	// in a sharded run (profile --shards N); omitted in an unsharded run.
	// request_id, request_index and x_request_id stay global.
	Shard *int64 `json:"shard,omitempty"`
}

func (Request) selfEncoding() {}

// RecordKind returns KindRequest.
func (Request) RecordKind() Kind { return KindRequest }

// MarshalJSON writes the record with its event_type and schema_version;
// a nil ChunkInterarrivalMS is written as []. The line is what encoding/json
// writes for the fields, written without reflection (appendRequestLine); a NaN
// or infinite float is an encoding/json error.
func (r Request) MarshalJSON() ([]byte, error) { return r.marshalLine() }

// marshalLine is MarshalJSON for a record the caller holds.
func (r *Request) marshalLine() ([]byte, error) {
	if b, ok := appendRequestLine(getLine(), r); ok {
		return b, nil
	}
	return r.marshalReflect()
}

// marshalReflect is MarshalJSON through encoding/json. Not inlined: its copy of the
// record would sit in marshalLine's frame on every send goroutine's stack.
//
//go:noinline
func (r *Request) marshalReflect() ([]byte, error) {
	type plain Request
	p := plain(*r)
	if p.ChunkInterarrivalMS == nil {
		p.ChunkInterarrivalMS = []float64{}
	}
	return withKind(KindRequest, p)
}
