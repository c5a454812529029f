package analyze

import (
	"encoding/json"
	"math"
	"reflect"
	"strconv"

	"github.com/inferprobe/inferprobe/artifact"
)

// Request statuses (stormlog.md §2.5; seed "Request outcomes"). Any other status is counted
// under population.other by name.
const (
	StatusOK              = "ok"
	StatusError           = "error"
	StatusTimeout         = "timeout"
	StatusCancelled       = "cancelled"
	StatusDropped         = "dropped"
	StatusUnreachable     = "unreachable"
	StatusDeliveryUnknown = "delivery_unknown"
	StatusRejected        = "rejected"
)

// Request is the analysis view of one measured infer.request v1 record: the fields analysis
// reads, with the artifact's names and units (times *_Ns are Unix epoch nanoseconds, *_Ms
// milliseconds; nil = not recorded). ChunkGapsMs are the gaps between content chunks
// (chunk-level, never token-level). Span holds the attributes of the request's joined vLLM
// span (gen_ai.latency.* in seconds) or nil; SpanMissingReason says why there is none
// ("" reads as no_joined_span; "conflicting_spans", "multiple_spans" for quarantined ones).
// ServerAdmitted is true when a server source confirmed it saw the request.
type Request struct {
	SessionID         string
	RequestID         string
	CaseID            string
	XRequestID        *string
	TraceID           *string // the traceparent trace id sent (span join by trace)
	RequestIndex      *int64
	Status            string
	StartedAtNs       *int64
	EndedAtNs         *int64
	IntendedAtNs      *int64
	E2EMs             *float64
	TTFTMs            *float64
	FirstChunkMs      *float64
	DispatchLagMs     *float64
	ChunkGapsMs       []float64
	Stream            bool
	PromptTokens      *int64
	OutputTokens      *int64
	TotalTokens       *int64
	OutputTokenSource string
	// HTTPStatus, ErrorType and ErrorMessage say why a request failed (nil when it did not,
	// or when the record does not say).
	HTTPStatus         *int64
	ErrorType          *string
	ErrorMessage       *string
	ArrivalMode        string
	HeldForSlot        bool
	InFlightAtDispatch *int64
	PromptMode         string
	PromptID           *string
	PromptDigest       *string
	PrefixGroup        *int64
	SharedPrefixTokens *int64

	Span              map[string]any
	SpanMissingReason string
	ServerAdmitted    bool
}

// Criterion outcomes, request outcomes and span outcomes (stormlog.md §3.2).
const (
	OutcomePass          = "pass"
	OutcomeFail          = "fail"
	OutcomeNotApplicable = "not_applicable"
	OutcomeUnknown       = "unknown"

	OutcomeMet    = "met"
	OutcomeMissed = "missed"

	CriteriaMet    = "criteria_met"
	CriteriaMissed = "criteria_missed"
)

// SpanAttributes maps the per-request server criteria to vLLM's span attributes (seconds).
var SpanAttributes = map[string]string{
	"server.ttft":  "gen_ai.latency.time_to_first_token",
	"server.e2e":   "gen_ai.latency.e2e",
	"server.queue": "gen_ai.latency.time_in_queue",
}

// metricValue is a criterion's value in ms for one request, or why there is none.
type metricValue struct {
	ms            float64
	ok            bool
	notApplicable bool
	reason        string
}

func value(v *float64, reason string) metricValue {
	if v == nil {
		return metricValue{reason: reason}
	}
	return metricValue{ms: *v, ok: true}
}

// requestValue returns the value of a per-request criterion key for r (stormlog.md §3.2).
func requestValue(key string, r *Request) metricValue {
	switch key {
	case "client.ttft":
		return value(r.TTFTMs, "no_client_ttft")
	case "client.ttft_from_intended":
		if r.TTFTMs == nil {
			return metricValue{reason: "no_client_ttft"}
		}
		if r.DispatchLagMs == nil {
			return metricValue{reason: "no_dispatch_lag"}
		}
		return metricValue{ms: *r.TTFTMs + *r.DispatchLagMs, ok: true}
	case "client.e2e":
		return value(r.E2EMs, "no_client_e2e")
	case "client.e2e_from_intended":
		if r.IntendedAtNs == nil || r.EndedAtNs == nil {
			return metricValue{reason: "no_intended_or_end_time"}
		}
		return metricValue{ms: float64(*r.EndedAtNs-*r.IntendedAtNs) / 1e6, ok: true}
	case "client.tpot":
		// vLLM's benchmark formula, only with the output token count the server reported; one
		// output token or none has no TPOT and counts as meeting the limit.
		if r.OutputTokenSource != "server_usage" {
			return metricValue{reason: "output_tokens_not_server_reported"}
		}
		if r.OutputTokens == nil {
			return metricValue{reason: "no_output_tokens"}
		}
		if *r.OutputTokens <= 1 {
			return metricValue{notApplicable: true, reason: "single_output_token"}
		}
		if r.TTFTMs == nil || r.E2EMs == nil {
			return metricValue{reason: "no_client_ttft_or_e2e"}
		}
		return metricValue{ms: (*r.E2EMs - *r.TTFTMs) / float64(*r.OutputTokens-1), ok: true}
	}
	if attr, ok := SpanAttributes[key]; ok {
		if r.Span == nil {
			reason := r.SpanMissingReason
			if reason == "" {
				reason = "no_joined_span"
			}
			return metricValue{reason: reason}
		}
		return spanValue(r.Span, attr)
	}
	return metricValue{reason: "no_value"}
}

// spanValue reads a span attribute in seconds as ms. A missing or non-numeric attribute
// (string, bool, …) is span_attribute_missing:<attr>; NaN/±Inf is non_finite_value.
func spanValue(attrs map[string]any, attr string) metricValue {
	seconds, ok := numberOf(attrs[attr])
	if !ok {
		return metricValue{reason: "span_attribute_missing:" + attr}
	}
	return metricValue{ms: seconds * 1000, ok: true}
}

// numberOf accepts JSON-decoded numbers (float64, json.Number, Go integer types); booleans,
// strings and anything else are not numbers.
func numberOf(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		return f, err == nil
	}
	// Named float types (e.g. a record package's Float).
	if rv := reflect.ValueOf(v); rv.IsValid() && (rv.Kind() == reflect.Float64 || rv.Kind() == reflect.Float32) {
		return rv.Float(), true
	}
	return 0, false
}

// judgeValue applies one limit to one value (pass ⇔ value ≤ max, inclusive).
func judgeValue(v metricValue, limit float64) (outcome, reason string) {
	switch {
	case v.notApplicable:
		return OutcomeNotApplicable, v.reason
	case !v.ok:
		if v.reason == "" {
			return OutcomeUnknown, "no_value"
		}
		return OutcomeUnknown, v.reason
	case math.IsNaN(v.ms) || math.IsInf(v.ms, 0):
		return OutcomeUnknown, "non_finite_value"
	case v.ms <= limit:
		return OutcomePass, ""
	}
	return OutcomeFail, ""
}

// CriterionResult is how one criterion judged one request or span: Outcome is pass, fail,
// not_applicable or unknown; ValueMs the judged value (nil when none); Reason why it is
// unknown or not applicable ("" otherwise).
type CriterionResult struct {
	Key     string   `json:"key"`
	Outcome string   `json:"outcome"`
	ValueMs *float64 `json:"value_ms"`
	MaxMs   float64  `json:"max_ms"`
	Reason  string   `json:"reason,omitempty"`
}

// RequestJudgement is a client request judged against a policy. Outcome (first rule that
// applies): status ≠ ok → missed; any criterion fails → missed; any unknown → unknown; else
// met. Criteria are judged for failed requests too, for diagnosis.
type RequestJudgement struct {
	Outcome  string            `json:"outcome"`
	Status   string            `json:"status"`
	Criteria []CriterionResult `json:"criteria"`
}

// SpanJudgement is an engine-finished span judged against a policy's server criteria. Client
// criteria are unknown (client_boundary); the outcome is criteria_met, criteria_missed or
// unknown, never met: a span does not show that the request succeeded (ServiceSuccess is
// always "unverified").
type SpanJudgement struct {
	Outcome        string            `json:"outcome"`
	Criteria       []CriterionResult `json:"criteria"`
	ServiceSuccess string            `json:"service_success"`
}

// judgeCriterion judges c for r; boundary "" means both boundaries are judged.
func judgeCriterion(c Criterion, r *Request, boundary string) (outcome string, v metricValue, reason string) {
	if boundary != "" && c.Boundary != boundary {
		return OutcomeUnknown, metricValue{}, c.Boundary + "_boundary"
	}
	def, _ := criterionDef(c.Key())
	if def.PerRequest == "" {
		return OutcomeUnknown, metricValue{}, "aggregate_only"
	}
	v = requestValue(c.Key(), r)
	outcome, reason = judgeValue(v, c.MaxMs)
	return outcome, v, reason
}

func result(c Criterion, outcome string, v metricValue, reason string) CriterionResult {
	res := CriterionResult{Key: c.Key(), Outcome: outcome, MaxMs: c.MaxMs, Reason: reason}
	if v.ok && !math.IsNaN(v.ms) && !math.IsInf(v.ms, 0) {
		res.ValueMs = f64Ptr(v.ms)
	}
	return res
}

func combine(results []CriterionResult) string {
	unknown := false
	for _, r := range results {
		switch r.Outcome {
		case OutcomeFail:
			return CriteriaMissed
		case OutcomeUnknown:
			unknown = true
		}
	}
	if unknown {
		return OutcomeUnknown
	}
	return CriteriaMet
}

// JudgeRequest judges one request against every criterion of the policy (stormlog.md §3.2).
// Client criteria read the request; server criteria read only its joined span.
func (p *Policy) JudgeRequest(r *Request) RequestJudgement {
	results := make([]CriterionResult, len(p.Criteria))
	for i, c := range p.Criteria {
		outcome, v, reason := judgeCriterion(c, r, "")
		results[i] = result(c, outcome, v, reason)
	}
	outcome := OutcomeMissed
	if r.Status == StatusOK {
		switch combine(results) {
		case CriteriaMet:
			outcome = OutcomeMet
		case OutcomeUnknown:
			outcome = OutcomeUnknown
		}
	}
	return RequestJudgement{Outcome: outcome, Status: r.Status, Criteria: results}
}

// JudgeSpan judges a vLLM span's attributes (gen_ai.latency.* seconds) against the policy's
// server criteria; client criteria are unknown with reason client_boundary.
func (p *Policy) JudgeSpan(attributes map[string]any) SpanJudgement {
	r := &Request{Span: attributes}
	if attributes == nil {
		r.Span = map[string]any{}
	}
	results := make([]CriterionResult, len(p.Criteria))
	for i, c := range p.Criteria {
		outcome, v, reason := judgeCriterion(c, r, BoundaryServer)
		results[i] = result(c, outcome, v, reason)
	}
	return SpanJudgement{Outcome: combine(results), Criteria: results, ServiceSuccess: "unverified"}
}

// CriterionCounts is one criterion over a case: outcomes among successful requests, and its
// marginal attainment bounds over every offered request — (pass + not_applicable)/offered
// and (pass + not_applicable + unknown)/offered. The bounds are nil for an aggregate-only
// criterion and for one no successful request could be judged on.
type CriterionCounts struct {
	Pass            int      `json:"pass"`
	Fail            int      `json:"fail"`
	NotApplicable   int      `json:"not_applicable"`
	Unknown         int      `json:"unknown"`
	AttainmentLower *float64 `json:"attainment_lower"`
	AttainmentUpper *float64 `json:"attainment_upper"`
}

// Evaluation is a case judged against a policy: the stormlog.infer.slo_evaluation v1 record
// (stormlog.md §3.4). Over every offered request (dropped included): attainment_lower =
// met/offered (unknown counted as missed), attainment_upper = (met+unknown)/offered; goodput
// = met (and met+unknown) per second of the case's rate interval, and the met requests'
// output tokens per second. EvidenceCoverage is the share of successful requests whose every
// criterion could be judged (nil when none succeeded). Status "unmeasurable" (with Reason
// "<key>: <reason>") nils every attainment and goodput figure, never 0. Rates are nil without
// an interval of positive length. CohortValid/CohortIssues repeat the case's cohort checks
// (nil/[] when no cohort was given).
type Evaluation struct {
	Format                       string                     `json:"format"`
	Version                      int                        `json:"version"`
	SLOName                      string                     `json:"slo_name"`
	SLODigest                    string                     `json:"slo_digest"`
	SLOSource                    string                     `json:"slo_source"`
	Status                       string                     `json:"status"`
	Reason                       *string                    `json:"reason"`
	PopulationDeclared           string                     `json:"population_declared"`
	PopulationEvaluated          string                     `json:"population_evaluated"`
	Offered                      int                        `json:"offered"`
	Met                          int                        `json:"met"`
	Missed                       int                        `json:"missed"`
	Unknown                      int                        `json:"unknown"`
	AttainmentLower              *float64                   `json:"attainment_lower"`
	AttainmentUpper              *float64                   `json:"attainment_upper"`
	EvidenceCoverage             *float64                   `json:"evidence_coverage"`
	PerCriterion                 map[string]CriterionCounts `json:"per_criterion"`
	Interval                     *MeasuredInterval          `json:"interval"`
	GoodputLowerRPS              *float64                   `json:"goodput_lower_rps"`
	GoodputUpperRPS              *float64                   `json:"goodput_upper_rps"`
	GoodputLowerOutputTPS        *float64                   `json:"goodput_lower_output_tps"`
	RealizedOfferedRatePerSecond *float64                   `json:"realized_offered_rate_per_second"`
	CohortValid                  *bool                      `json:"cohort_valid"`
	CohortIssues                 []string                   `json:"cohort_issues"`
}

// Evaluation statuses.
const (
	EvaluationEvaluated    = "evaluated"
	EvaluationUnmeasurable = "unmeasurable"
)

func share(part, whole int) *float64 {
	if whole == 0 {
		return nil
	}
	return f64Ptr(float64(part) / float64(whole))
}

// Evaluate judges a case's offered requests (every measured request, dropped included)
// against p; rates divide by rate (the case's rate interval, or nil); source is "flags",
// "file" or "artifact"; cohort, when non-nil, is the case's population whose validity the
// evaluation carries.
func Evaluate(p *Policy, source string, requests []Request, rate *MeasuredInterval, cohort *Population) *Evaluation {
	type counts struct {
		pass, fail, na, unknown int
		reasons                 map[string]int
		order                   []string
	}
	per := make([]counts, len(p.Criteria))
	for i := range per {
		per[i].reasons = map[string]int{}
	}
	met, unknown, successful, complete := 0, 0, 0, 0
	var goodTokens int64
	for i := range requests {
		r := &requests[i]
		ok := r.Status == StatusOK
		fail, unk := false, false
		for ci, c := range p.Criteria {
			outcome, _, reason := judgeCriterion(c, r, "")
			switch outcome {
			case OutcomeFail:
				fail = true
			case OutcomeUnknown:
				unk = true
			}
			if !ok {
				continue
			}
			pc := &per[ci]
			switch outcome {
			case OutcomePass:
				pc.pass++
			case OutcomeFail:
				pc.fail++
			case OutcomeNotApplicable:
				pc.na++
			case OutcomeUnknown:
				pc.unknown++
				if pc.reasons[reason] == 0 {
					pc.order = append(pc.order, reason)
				}
				pc.reasons[reason]++
			}
		}
		if !ok {
			continue
		}
		successful++
		if !unk {
			complete++
		}
		switch {
		case fail:
		case unk:
			unknown++
		default:
			met++
			if r.OutputTokens != nil {
				goodTokens += *r.OutputTokens
			}
		}
	}
	offered := len(requests)
	e := &Evaluation{
		Format:              EvaluationFormat,
		Version:             EvaluationVersion,
		SLOName:             p.Name,
		SLODigest:           p.Digest(),
		SLOSource:           source,
		Status:              EvaluationEvaluated,
		PopulationDeclared:  p.Population,
		PopulationEvaluated: PopulationOffered,
		Offered:             offered,
		Met:                 met,
		Missed:              offered - met - unknown,
		Unknown:             unknown,
		EvidenceCoverage:    share(complete, successful),
		PerCriterion:        make(map[string]CriterionCounts, len(p.Criteria)),
		Interval:            rate,
		CohortIssues:        []string{},
	}
	if cohort != nil {
		e.CohortValid = boolPtr(cohort.CohortValid)
		e.CohortIssues = append([]string{}, cohort.Issues...)
	}
	var reason *string
	for ci, c := range p.Criteria {
		pc := per[ci]
		def, _ := criterionDef(c.Key())
		cc := CriterionCounts{Pass: pc.pass, Fail: pc.fail, NotApplicable: pc.na, Unknown: pc.unknown}
		unjudgeable := pc.unknown > 0 && pc.unknown == successful
		if def.PerRequest != "" && !unjudgeable {
			cc.AttainmentLower = share(pc.pass+pc.na, offered)
			cc.AttainmentUpper = share(pc.pass+pc.na+pc.unknown, offered)
		}
		e.PerCriterion[c.Key()] = cc
		if reason != nil {
			continue
		}
		if def.PerRequest == "" {
			reason = strPtr(c.Key() + ": aggregate_only")
		} else if unjudgeable {
			best := pc.order[0]
			for _, r := range pc.order {
				if pc.reasons[r] > pc.reasons[best] {
					best = r
				}
			}
			reason = strPtr(c.Key() + ": " + best)
		}
	}
	if reason != nil {
		e.Status = EvaluationUnmeasurable
		e.Reason = reason
		return e
	}
	e.AttainmentLower = share(met, offered)
	e.AttainmentUpper = share(met+unknown, offered)
	e.GoodputLowerRPS = Rate(float64(met), rate)
	e.GoodputUpperRPS = Rate(float64(met+unknown), rate)
	e.GoodputLowerOutputTPS = Rate(float64(goodTokens), rate)
	return e
}

// RequestFromRecord is the analysis view of one infer.request record, without server
// evidence (Span nil). Live consumers (the exporter) use it to read a request's metrics
// exactly as the report and SLO judgement read them.
func RequestFromRecord(r *artifact.Request) Request { return fromArtifact(r, nil) }

// MetricMs returns the value in milliseconds of a per-request client metric key
// ("client.ttft", "client.ttft_from_intended", "client.e2e", "client.e2e_from_intended",
// "client.tpot") with the definitions SLO judgement uses (README "Metric definitions"); ok is
// false when the request has no value for it (e.g. TPOT without server-reported usage, or
// with one output token).
func (r *Request) MetricMs(key string) (ms float64, ok bool) {
	v := requestValue(key, r)
	return v.ms, v.ok
}
