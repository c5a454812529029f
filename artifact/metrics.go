package artifact

// Client metric keys of a request: the per-request client criteria an SLO names, the
// latency series the exporter publishes, and the client quantiles a report gives.
const (
	MetricTTFT             = "client.ttft"
	MetricTTFTFromIntended = "client.ttft_from_intended"
	MetricE2E              = "client.e2e"
	MetricE2EFromIntended  = "client.e2e_from_intended"
	MetricTPOT             = "client.tpot"
	// MetricE2EPerOutputToken is e2e ÷ output tokens (ms per token), the per-request value
	// whose p90 gives E2E normalized interactivity (1 / p90). Not an SLO criterion and not
	// among ClientMetrics: compare and pareto read it.
	MetricE2EPerOutputToken = "client.e2e_per_output_token"
)

// ClientMetrics are the client metric keys, in report order.
var ClientMetrics = []string{MetricTTFT, MetricTTFTFromIntended, MetricE2E, MetricE2EFromIntended, MetricTPOT}

// Reasons a request has no value for a client metric.
const (
	NoClientTTFT            = "no_client_ttft"
	NoDispatchLag           = "no_dispatch_lag"
	NoClientE2E             = "no_client_e2e"
	NoIntendedOrEndTime     = "no_intended_or_end_time"
	OutputNotServerReported = "output_tokens_not_server_reported"
	NoOutputTokens          = "no_output_tokens"
	SingleOutputToken       = "single_output_token"
	NoClientTTFTOrE2E       = "no_client_ttft_or_e2e"
	UnknownClientMetricKey  = "no_value"
)

// TokenSourceServerUsage is the prompt_token_source / output_token_source of a count the
// server reported in its usage block.
const TokenSourceServerUsage = "server_usage"

// MetricValue is one request's value of a client metric, in milliseconds, or why it has none.
// NotApplicable marks a request the metric does not apply to (TPOT of a single output
// token): an SLO counts it as meeting the limit.
type MetricValue struct {
	Ms            float64
	OK            bool
	NotApplicable bool
	Reason        string
}

func msValue(v *float64, reason string) MetricValue {
	if v == nil {
		return MetricValue{Reason: reason}
	}
	return MetricValue{Ms: *v, OK: true}
}

// ClientMetric computes one client metric of the request — the one definition that SLO
// judgement, the report's quantiles and the live exporter read:
//
//   - client.ttft: ttft_ms (send → first non-empty content, reasoning or tool-call delta);
//   - client.ttft_from_intended: ttft_ms + dispatch_lag_ms (from the scheduled arrival);
//   - client.e2e: e2e_latency_ms (send → end of stream);
//   - client.e2e_from_intended: ended_at_ns − intended_at_ns;
//   - client.tpot: (e2e − TTFT) / (output_tokens − 1), only with output tokens the server
//     reported (output_token_source "server_usage"); one output token or none is not
//     applicable;
//   - client.e2e_per_output_token: e2e / output_tokens, only with output tokens the server
//     reported, and at least one.
//
// An unknown key has no value (reason "no_value").
func (r *Request) ClientMetric(key string) MetricValue {
	switch key {
	case MetricTTFT:
		return msValue(r.TTFTMS, NoClientTTFT)
	case MetricTTFTFromIntended:
		if r.TTFTMS == nil {
			return MetricValue{Reason: NoClientTTFT}
		}
		if r.DispatchLagMS == nil {
			return MetricValue{Reason: NoDispatchLag}
		}
		return MetricValue{Ms: *r.TTFTMS + *r.DispatchLagMS, OK: true}
	case MetricE2E:
		return msValue(r.E2ELatencyMS, NoClientE2E)
	case MetricE2EFromIntended:
		if r.IntendedAtNS == nil || r.EndedAtNS == nil {
			return MetricValue{Reason: NoIntendedOrEndTime}
		}
		return MetricValue{Ms: float64(*r.EndedAtNS-*r.IntendedAtNS) / 1e6, OK: true}
	case MetricTPOT:
		if r.OutputTokenSource != TokenSourceServerUsage {
			return MetricValue{Reason: OutputNotServerReported}
		}
		if r.OutputTokens == nil {
			return MetricValue{Reason: NoOutputTokens}
		}
		if *r.OutputTokens <= 1 {
			return MetricValue{NotApplicable: true, Reason: SingleOutputToken}
		}
		if r.TTFTMS == nil || r.E2ELatencyMS == nil {
			return MetricValue{Reason: NoClientTTFTOrE2E}
		}
		return MetricValue{Ms: (*r.E2ELatencyMS - *r.TTFTMS) / float64(*r.OutputTokens-1), OK: true}
	case MetricE2EPerOutputToken:
		if r.OutputTokenSource != TokenSourceServerUsage {
			return MetricValue{Reason: OutputNotServerReported}
		}
		if r.OutputTokens == nil || *r.OutputTokens < 1 {
			return MetricValue{Reason: NoOutputTokens}
		}
		if r.E2ELatencyMS == nil {
			return MetricValue{Reason: NoClientE2E}
		}
		return MetricValue{Ms: *r.E2ELatencyMS / float64(*r.OutputTokens), OK: true}
	}
	return MetricValue{Reason: UnknownClientMetricKey}
}
