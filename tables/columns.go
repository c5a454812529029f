package tables

import (
	"math"

	"github.com/inferprobe/inferprobe/artifact"
)

// Sources of a column's values (manifest.json "source").
const (
	SourceClient      = "client"           // the infer.request record, as the client measured it
	SourceSpan        = "vllm_span"        // the request's joined vLLM llm_request span
	SourceClientSpan  = "client+vllm_span" // a client value combined with span values
	SourceSchedule    = "schedule"         // the intended (scheduled) arrival times
	SourceServerUsage = "server_usage"     // the usage block the server answered with
	SourceNone        = "none"             // no source observes it: the column is left out
)

// rowInput is what one measured request's row is computed from.
type rowInput struct {
	req *artifact.Request
	// completed is status ok: only a completed request has latency and token columns.
	completed bool
	// span holds the attributes of the request's joined span; nil when none joined.
	span *artifact.Span
	// interArrival is the gap in seconds from the previous intended arrival; hasIA is false
	// for a case's first arrival and for a request without an intended time.
	interArrival float64
	hasIA        bool
}

// column is one of sangam's request_metrics.csv columns: its source, unit and definition (for
// a column no source observes, source is SourceNone, the definition is sangam's, value is nil
// and why says why it is left out). value returns false for a request without a value.
type column struct {
	name, source, unit, definition, why string
	integer                             bool
	value                               func(*rowInput) (float64, bool)
}

// Why texts of the columns no source observes.
const (
	whyBlocks = "sangam generates a request in blocks, each with its own admission queue; " +
		"vLLM's llm_request span and the client see one request, with one time_in_queue (request_scheduling_delay)"
	whyPhaseQueue = "vLLM's llm_request span reports one time_in_queue, not split into prefill and decode waits"
	whyKV         = "no KV-cache transfer is observed: vLLM's llm_request span has no transfer time"
	whyPasses     = "neither the client nor vLLM's llm_request span reports forward passes per request"
)

// columns are sangam's request_metrics.csv columns after "Request Id", in sangam's order.
var columns = []column{
	{name: "request_e2e_time", source: SourceClient, unit: "s",
		definition: "client e2e latency (send to end of response, client.e2e) of a completed request",
		value:      e2e},
	{name: "request_e2e_time_normalized", source: SourceClient, unit: "s/token",
		definition: "request_e2e_time / output tokens (server-reported usage, at least one)",
		value:      perToken(e2e)},
	{name: "request_e2e_time_excl_first_block_queue", source: SourceNone, unit: "s", why: whyBlocks,
		definition: "e2e latency minus the first block's queue wait before prefill"},
	{name: "request_e2e_time_excl_first_block_queue_normalized", source: SourceNone, unit: "s/token", why: whyBlocks,
		definition: "request_e2e_time_excl_first_block_queue / output tokens"},
	{name: "request_first_block_queue", source: SourceNone, unit: "s", why: whyBlocks,
		definition: "the first block's queue wait before prefill (admission delay)"},
	{name: "request_scheduling_delay", source: SourceSpan, unit: "s",
		definition: "the joined span's gen_ai.latency.time_in_queue of a completed request",
		value:      queue},
	{name: "request_scheduling_delay_prefill", source: SourceNone, unit: "s", why: whyPhaseQueue,
		definition: "queue wait before prefill phases"},
	{name: "request_scheduling_delay_decode", source: SourceNone, unit: "s", why: whyPhaseQueue,
		definition: "queue wait before decode phases"},
	{name: "request_execution_time", source: SourceClientSpan, unit: "s",
		definition: "request_e2e_time − request_scheduling_delay (client e2e minus the span's queue time)",
		value:      execution},
	{name: "request_execution_time_normalized", source: SourceClientSpan, unit: "s/token",
		definition: "request_execution_time / output tokens (server-reported usage, at least one)",
		value:      perToken(execution)},
	{name: "request_prefill_time", source: SourceSpan, unit: "s",
		definition: "the joined span's gen_ai.latency.time_in_model_prefill of a completed request",
		value:      prefill},
	{name: "request_kv_transfer_time", source: SourceNone, unit: "s", why: whyKV,
		definition: "KV-cache transfer time, all blocks"},
	{name: "request_kv_transfer_time_nonoverlapped", source: SourceNone, unit: "s", why: whyKV,
		definition: "the part of the KV-cache transfer time not overlapped with prefill"},
	{name: "request_decode_time", source: SourceSpan, unit: "s",
		definition: "the joined span's gen_ai.latency.time_in_model_decode of a completed request",
		value:      decode},
	{name: "request_decode_time_normalized", source: SourceSpan, unit: "s/token",
		definition: "request_decode_time / output tokens (server-reported usage, at least one)",
		value:      perToken(decode)},
	{name: "request_unaccounted_time", source: SourceClientSpan, unit: "s",
		definition: "request_e2e_time − (request_scheduling_delay + request_prefill_time + request_decode_time): " +
			"client time the server's span does not account for (network, HTTP, tokenisation, streaming)",
		value: unaccounted},
	{name: "request_inter_arrival_delay", source: SourceSchedule, unit: "s",
		definition: "intended arrival − the previous intended arrival of the same session and case " +
			"(every measured request with an intended time, sent or not; none for a case's first)",
		value: func(in *rowInput) (float64, bool) { return in.interArrival, in.hasIA }},
	{name: "request_num_prompt_tokens", source: SourceServerUsage, unit: "tokens", integer: true,
		definition: "prompt_tokens of a completed request, when the server reported it (prompt_token_source server_usage)",
		value:      promptTokens},
	{name: "request_num_gen_tokens", source: SourceServerUsage, unit: "tokens", integer: true,
		definition: "output_tokens of a completed request, when the server reported it (output_token_source server_usage)",
		value:      outputTokens},
	{name: "request_num_blocks", source: SourceNone, unit: "blocks", integer: true, why: whyBlocks,
		definition: "blocks the request is generated in"},
	{name: "request_num_forward_passes", source: SourceNone, unit: "forward passes", integer: true, why: whyPasses,
		definition: "forward passes (prefill and decode) of the request"},
}

// e2e is client.e2e in seconds (artifact.Request.ClientMetric) of a completed request.
func e2e(in *rowInput) (float64, bool) {
	if !in.completed {
		return 0, false
	}
	mv := in.req.ClientMetric(artifact.MetricE2E)
	return mv.Ms / 1000, mv.OK && finite(mv.Ms)
}

// spanSeconds is a gen_ai.latency.* attribute (seconds) of a completed request's joined
// span, when artifact.SpanLatencySeconds accepts it (finite, ≥ 0, at most 7 days).
func spanSeconds(in *rowInput, key string) (float64, bool) {
	if !in.completed || in.span == nil {
		return 0, false
	}
	v, reason := artifact.SpanLatencySeconds(in.span.Attributes, key)
	return v, reason == ""
}

func queue(in *rowInput) (float64, bool)   { return spanSeconds(in, artifact.AttrTimeInQueue) }
func prefill(in *rowInput) (float64, bool) { return spanSeconds(in, artifact.AttrTimeInModelPrefill) }
func decode(in *rowInput) (float64, bool)  { return spanSeconds(in, artifact.AttrTimeInModelDecode) }

func execution(in *rowInput) (float64, bool) {
	e, ok1 := e2e(in)
	q, ok2 := queue(in)
	return e - q, ok1 && ok2
}

func unaccounted(in *rowInput) (float64, bool) {
	e, ok1 := e2e(in)
	q, ok2 := queue(in)
	p, ok3 := prefill(in)
	d, ok4 := decode(in)
	return e - (q + p + d), ok1 && ok2 && ok3 && ok4
}

// perToken divides f by the server-reported output tokens (at least one).
func perToken(f func(*rowInput) (float64, bool)) func(*rowInput) (float64, bool) {
	return func(in *rowInput) (float64, bool) {
		n, ok := outputTokens(in)
		if !ok || n < 1 {
			return 0, false
		}
		v, ok := f(in)
		return v / n, ok
	}
}

func promptTokens(in *rowInput) (float64, bool) {
	r := in.req
	if !in.completed || r.PromptTokenSource != artifact.TokenSourceServerUsage || r.PromptTokens == nil {
		return 0, false
	}
	return float64(*r.PromptTokens), true
}

func outputTokens(in *rowInput) (float64, bool) {
	r := in.req
	if !in.completed || r.OutputTokenSource != artifact.TokenSourceServerUsage || r.OutputTokens == nil {
		return 0, false
	}
	return float64(*r.OutputTokens), true
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
