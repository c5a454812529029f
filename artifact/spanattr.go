package artifact

import "math"

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

// MaxSpanLatencySeconds is the largest latency attribute a span may carry: 7 days, the
// longest window a run may have.
const MaxSpanLatencySeconds = 7 * 24 * 3600

// Reasons a span latency attribute is not used (SpanLatencySeconds).
const (
	ReasonNonFiniteValue        = "non_finite_value"
	ReasonNegativeValue         = "negative_value"
	ReasonOutOfRangeValue       = "out_of_range_value"
	ReasonSpanAttrMissingPrefix = "span_attribute_missing:" // + the attribute key
)

// SpanLatencySeconds reads the latency attribute key (seconds) of a vLLM span's attributes:
// the one rule the analysis, the SLO judgement and the live exporter apply. It returns the
// value and "" when the attribute is a number (as Span.Float reads it) that is finite, ≥ 0 and at most
// MaxSpanLatencySeconds; otherwise 0 and the reason: "span_attribute_missing:<key>" (absent,
// or not a number: another string, a bool, null), ReasonNonFiniteValue, ReasonNegativeValue
// or ReasonOutOfRangeValue. A value outside those bounds comes from a broken or hostile
// exporter; using it would turn a percentile or a sum into nonsense (or +Inf).
func SpanLatencySeconds(attrs map[string]any, key string) (float64, string) {
	f, ok := attrFloat(attrs[key])
	if !ok {
		return 0, ReasonSpanAttrMissingPrefix + key
	}
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0):
		return 0, ReasonNonFiniteValue
	case f < 0:
		return 0, ReasonNegativeValue
	case f > MaxSpanLatencySeconds:
		return 0, ReasonOutOfRangeValue
	}
	return f, ""
}
