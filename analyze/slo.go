package analyze

import (
	"sort"
	"strings"

	"github.com/inferprobe/inferprobe/artifact"
)

// SLO policy document constants. The format names are kept from the
// contract so policy files and artifacts interoperate with Stormlog's.
const (
	PolicyFormat     = "stormlog.infer.slo"
	PolicyVersion    = 1
	EvaluationFormat = "stormlog.infer.slo_evaluation"
	// EvaluationVersion is the version of the per-case evaluation record.
	EvaluationVersion = 1

	BoundaryClient = "client"
	BoundaryServer = "server"

	IntervalMeasuredWindow = "measured_window"
	IntervalSliding        = "sliding"

	PopulationOffered  = "offered"
	UnknownPolicyBound = "bounds"

	// FlagPolicyName is the name of a policy built from --slo flags.
	FlagPolicyName = "cli"

	// MaxPolicyBytes bounds a policy document (file or artifact record).
	MaxPolicyBytes = 1 << 20
	// maxFlagLength bounds one --slo value.
	maxFlagLength = 256
)

// CriterionDef says what a criterion key measures and where its values come from.
// PerRequest is empty for aggregate-only criteria (server.itl, server.tpot).
type CriterionDef struct {
	Boundary   string
	Metric     string
	Definition string
	PerRequest string
	Aggregate  string
}

// Key returns "boundary.metric".
func (d CriterionDef) Key() string { return d.Boundary + "." + d.Metric }

// Criteria lists the ten known criteria in report order. Client
// values come from inferprobe's own client records; server values only from the request's
// joined vLLM span (seconds × 1000) or, for itl/tpot, only from aggregate histograms. There is
// no client.itl: streamed chunks are not tokens.
var Criteria = []CriterionDef{
	{BoundaryClient, "ttft", "send to the first non-empty content delta, on the client", "infer.request ttft_ms", ""},
	{BoundaryClient, "ttft_from_intended", "intended arrival to the first non-empty content delta, on the client", "infer.request ttft_ms + dispatch_lag_ms", ""},
	{BoundaryClient, "e2e", "send to the end of the response, on the client", "infer.request e2e_latency_ms", ""},
	{BoundaryClient, "e2e_from_intended", "intended arrival to the end of the response, on the client", "infer.request ended_at_ns - intended_at_ns", ""},
	{BoundaryClient, "tpot", "(e2e - ttft) / (output_tokens - 1) with server-reported output tokens; a per-request mean", "infer.request with output_token_source server_usage", ""},
	{BoundaryServer, "ttft", "vLLM's own time to first token", "span gen_ai.latency.time_to_first_token", "vllm:time_to_first_token_seconds"},
	{BoundaryServer, "e2e", "vLLM's own end-to-end latency", "span gen_ai.latency.e2e", "vllm:e2e_request_latency_seconds"},
	{BoundaryServer, "queue", "vLLM's first wait in the scheduler queue", "span gen_ai.latency.time_in_queue", "vllm:request_queue_time_seconds"},
	{BoundaryServer, "itl", "vLLM's token-level latency as vLLM defines it", "", "vllm:inter_token_latency_seconds"},
	{BoundaryServer, "tpot", "vLLM's time per output token", "", "vllm:request_time_per_output_token_seconds"},
}

func criterionDef(key string) (CriterionDef, bool) {
	for _, d := range Criteria {
		if d.Key() == key {
			return d, true
		}
	}
	return CriterionDef{}, false
}

func knownKeys() string {
	keys := make([]string, len(Criteria))
	for i, d := range Criteria {
		keys[i] = d.Key()
	}
	sort.Strings(keys)
	return strings.Join(keys, ", ")
}

// Criterion is one latency limit: a request passes when its value is at most MaxMs
// (inclusive, as vLLM's --goodput). AttainmentTarget, when set, is a marginal target in (0, 1]
// for this criterion alone.
type Criterion struct {
	Metric           string
	Boundary         string
	MaxMs            float64
	AttainmentTarget *float64
}

// Key returns "boundary.metric", e.g. "client.ttft".
func (c Criterion) Key() string { return c.Boundary + "." + c.Metric }

// PolicyInterval is what attainment is judged over: Kind "measured_window" (a case's rate
// interval, offline) or "sliding" with Seconds > 0 (an online watcher's window).
type PolicyInterval struct {
	Kind    string
	Seconds *float64
}

// Policy is a validated stormlog.infer.slo v1 policy. AttainmentTarget is the joint target
// (every criterion passes) in (0, 1], or nil. Population is always "offered" and
// UnknownPolicy "bounds" in version 1.
type Policy struct {
	Name             string
	Criteria         []Criterion
	AttainmentTarget *float64
	Population       string
	UnknownPolicy    string
	Interval         PolicyInterval
}

// Document returns the policy as its versioned JSON document (a tree of map[string]any,
// []any, string, float64 and nil), the form recorded in infer.slo and digested. A criterion's
// attainment_target appears only when set; the policy's is always present (null when unset).
func (p *Policy) Document() map[string]any {
	criteria := make([]any, len(p.Criteria))
	for i, c := range p.Criteria {
		m := map[string]any{"metric": c.Metric, "boundary": c.Boundary, "max_ms": c.MaxMs}
		if c.AttainmentTarget != nil {
			m["attainment_target"] = *c.AttainmentTarget
		}
		criteria[i] = m
	}
	var target any
	if p.AttainmentTarget != nil {
		target = *p.AttainmentTarget
	}
	interval := map[string]any{"kind": p.Interval.Kind}
	if p.Interval.Kind == IntervalSliding && p.Interval.Seconds != nil {
		interval["seconds"] = *p.Interval.Seconds
	}
	return map[string]any{
		"format":            PolicyFormat,
		"version":           PolicyVersion,
		"name":              p.Name,
		"criteria":          criteria,
		"attainment_target": target,
		"population":        p.Population,
		"unknown_policy":    p.UnknownPolicy,
		"interval":          interval,
	}
}

// Digest returns the SHA-256 (64 lowercase hex digits) of the policy document's canonical
// JSON (artifact.Canonical: sorted keys, compact separators, integral numbers written as
// integers, so a max_ms of 500 and 500.0 digest alike).
func (p *Policy) Digest() string {
	d, err := artifact.Digest(p.Document())
	if err != nil {
		// A validated policy holds only finite numbers; this cannot happen.
		panic("analyze: policy digest: " + err.Error())
	}
	return d
}

// Criterion returns the policy's criterion with key, if any.
func (p *Policy) Criterion(key string) (Criterion, bool) {
	for _, c := range p.Criteria {
		if c.Key() == key {
			return c, true
		}
	}
	return Criterion{}, false
}
