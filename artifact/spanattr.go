package artifact

// vLLM's per-request span and its attributes, as vLLM's tracing module
// (SpanAttributes) and its V1 output processor write them: the one
// definition that the simulated engine emits and the receiver, join,
// exporter and analysis read. Latencies are float seconds, counts integers.

// RequestSpanName is the name of vLLM's per-request span (kind SERVER, start = arrival,
// end = finish); only spans of this name are joined to requests.
const RequestSpanName = "llm_request"

// Attribute keys of the llm_request span.
const (
	// AttrRequestID carries vLLM's request id, which embeds the client's X-Request-Id
	// (chatcmpl-<id>, cmpl-<id>-<i>, …).
	AttrRequestID            = "gen_ai.request.id"
	AttrPromptTokens         = "gen_ai.usage.prompt_tokens"
	AttrCompletionTokens     = "gen_ai.usage.completion_tokens"
	AttrTimeToFirstToken     = "gen_ai.latency.time_to_first_token"
	AttrE2E                  = "gen_ai.latency.e2e"
	AttrTimeInQueue          = "gen_ai.latency.time_in_queue"
	AttrTimeInModelPrefill   = "gen_ai.latency.time_in_model_prefill"
	AttrTimeInModelDecode    = "gen_ai.latency.time_in_model_decode"
	AttrTimeInModelInference = "gen_ai.latency.time_in_model_inference"
	AttrTopP                 = "gen_ai.request.top_p"
	AttrMaxTokens            = "gen_ai.request.max_tokens"
	AttrTemperature          = "gen_ai.request.temperature"
	AttrN                    = "gen_ai.request.n"
)
