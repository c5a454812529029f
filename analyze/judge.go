package analyze

import (
	"github.com/inferprobe/inferprobe/artifact"
)

// Request statuses: the infer.request outcome statuses (artifact.Request*). Any other status
// is counted under population.other by name.
const (
	StatusOK              = artifact.RequestOK
	StatusError           = artifact.RequestError
	StatusTimeout         = artifact.RequestTimeout
	StatusCancelled       = artifact.RequestCancelled
	StatusDropped         = artifact.RequestDropped
	StatusUnreachable     = artifact.RequestUnreachable
	StatusDeliveryUnknown = artifact.RequestDeliveryUnknown
	StatusRejected        = artifact.RequestRejected
)

// Request is the analysis view of one measured infer.request v1 record: the record itself
// (artifact.Request, its fields and units as recorded; nil = not recorded) and the server
// evidence joined to it by x_request_id. Span holds the attributes of the request's joined
// vLLM span (gen_ai.latency.* in seconds) or nil; SpanMissingReason says why there is none
// ("" reads as no_joined_span; "conflicting_spans", "multiple_spans" for quarantined ones).
// ServerAdmitted is true when a server source confirmed it saw the request. The values the
// record's pointers point to may be shared with other requests (ReadInput packs equal values
// once): read them, never write through them.
//
// ReadInput may hold the chunk gaps packed instead of in ChunkInterarrivalMS (nil then):
// read them with ChunkGapsMS, and the record with its gaps with Record.
type Request struct {
	artifact.Request

	Span              map[string]any
	SpanMissingReason string
	ServerAdmitted    bool

	// gapCount chunk gaps, as whole nanoseconds, start at gapNS when packed (nil otherwise).
	gapCount int32
	gapNS    *int32
}

// heldForSlot reports whether the request waited for a free in-flight slot (held_for_slot
// true; null reads as false).
func heldForSlot(r *Request) bool { return r.HeldForSlot != nil && *r.HeldForSlot }

// Criterion outcomes, request outcomes and span outcomes.
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

// requestValue returns the value of a per-request criterion key for r: a client.* key is
// (*artifact.Request).ClientMetric, the one definition of the client metrics; a server key
// (SpanAttributes) reads the request's joined span, and without one has no value (reason
// SpanMissingReason, or no_joined_span); any other key has no value (no_value).
func requestValue(key string, r *Request) artifact.MetricValue {
	return r.Metric(key)
}

// Metric is the request's value of a per-request metric key: a client metric
// ((*artifact.Request).ClientMetric: the client.* keys, client.e2e_per_output_token
// included) or a server metric of SpanAttributes, read from the joined span (no span: the
// reason it is missing, else "no_joined_span"). An unknown key has no value ("no_value").
// The one reading that the report's quantiles, the SLO judgement, compare and pareto share.
func (r *Request) Metric(key string) artifact.MetricValue {
	if v := r.ClientMetric(key); v.Reason != artifact.UnknownClientMetricKey {
		return v
	}
	if attr, ok := SpanAttributes[key]; ok {
		if r.Span == nil {
			reason := r.SpanMissingReason
			if reason == "" {
				reason = "no_joined_span"
			}
			return artifact.MetricValue{Reason: reason}
		}
		return spanValue(r.Span, attr)
	}
	return artifact.MetricValue{Reason: artifact.UnknownClientMetricKey}
}

// spanValue reads a span latency attribute (seconds) as ms, by artifact.SpanLatencySeconds:
// an absent or non-numeric attribute is span_attribute_missing:<attr>; NaN/±Inf is
// non_finite_value, a negative value negative_value, one over 7 days out_of_range_value.
func spanValue(attrs map[string]any, attr string) artifact.MetricValue {
	seconds, reason := artifact.SpanLatencySeconds(attrs, attr)
	if reason != "" {
		return artifact.MetricValue{Reason: reason}
	}
	return artifact.MetricValue{Ms: seconds * 1000, OK: true}
}

// judgeValue applies one limit to one value (pass ⇔ value ≤ max, inclusive).
func judgeValue(v artifact.MetricValue, limit float64) (outcome, reason string) {
	switch {
	case v.NotApplicable:
		return OutcomeNotApplicable, v.Reason
	case !v.OK:
		if v.Reason == "" {
			return OutcomeUnknown, artifact.UnknownClientMetricKey
		}
		return OutcomeUnknown, v.Reason
	case !finite(v.Ms):
		return OutcomeUnknown, "non_finite_value"
	case v.Ms <= limit:
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
func judgeCriterion(c Criterion, r *Request, boundary string) (outcome string, v artifact.MetricValue, reason string) {
	if boundary != "" && c.Boundary != boundary {
		return OutcomeUnknown, artifact.MetricValue{}, c.Boundary + "_boundary"
	}
	def, _ := criterionDef(c.Key())
	if def.PerRequest == "" {
		return OutcomeUnknown, artifact.MetricValue{}, "aggregate_only"
	}
	v = requestValue(c.Key(), r)
	outcome, reason = judgeValue(v, c.MaxMs)
	return outcome, v, reason
}

func result(c Criterion, outcome string, v artifact.MetricValue, reason string) CriterionResult {
	res := CriterionResult{Key: c.Key(), Outcome: outcome, MaxMs: c.MaxMs, Reason: reason}
	if v.OK && finite(v.Ms) {
		res.ValueMs = f64Ptr(v.Ms)
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

// JudgeRequest judges one request against every criterion of the policy.
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

// Evaluation is a case judged against a policy: the stormlog.infer.slo_evaluation v1 record.
// Over every offered request (dropped included): attainment_lower = met/offered (unknown
// counted as missed), attainment_upper = (met+unknown)/offered; goodput = met (and met+unknown)
// per second of the case's rate interval, and the met requests' output tokens per second.
// EvidenceCoverage is the share of successful requests whose every criterion could be judged
// (nil when none succeeded). Status "unmeasurable" (with Reason "<key>: <reason>") nils every
// attainment and goodput figure, never 0. Rates are nil without an interval of positive length.
// CohortValid/CohortIssues repeat the case's cohort checks (nil/[] when no cohort was given).
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
	t := judgeAll(p, requests)
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
		Met:                 t.met,
		Missed:              offered - t.met - t.unknown,
		Unknown:             t.unknown,
		EvidenceCoverage:    share(t.complete, t.successful),
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
		cc, why := t.per[ci].counts(c, offered, t.successful)
		e.PerCriterion[c.Key()] = cc
		if reason == nil && why != "" {
			reason = strPtr(c.Key() + ": " + why)
		}
	}
	if reason != nil {
		e.Status = EvaluationUnmeasurable
		e.Reason = reason
		return e
	}
	e.AttainmentLower = share(t.met, offered)
	e.AttainmentUpper = share(t.met+t.unknown, offered)
	e.GoodputLowerRPS = Rate(float64(t.met), rate)
	e.GoodputUpperRPS = Rate(float64(t.met+t.unknown), rate)
	e.GoodputLowerOutputTPS = Rate(float64(t.goodTokens), rate)
	return e
}

// judgement is a case's requests judged against a policy: met and unknown requests (a
// request that is not ok, or fails a criterion, is missed), the successful ones and those
// whose every criterion could be judged, the met requests' output tokens, and each
// criterion's outcomes over the successful requests.
type judgement struct {
	met, unknown, successful, complete int
	goodTokens                         int64
	per                                []criterionTally
}

// criterionTally is one criterion's outcomes over a case's successful requests, with the
// unknown reasons counted in first-seen order.
type criterionTally struct {
	pass, fail, na, unknown int
	reasons                 map[string]int
	order                   []string
}

// judgeAll judges every request against every criterion of p.
func judgeAll(p *Policy, requests []Request) judgement {
	t := judgement{per: make([]criterionTally, len(p.Criteria))}
	for i := range t.per {
		t.per[i].reasons = map[string]int{}
	}
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
			if ok {
				t.per[ci].add(outcome, reason)
			}
		}
		if !ok {
			continue
		}
		t.successful++
		if !unk {
			t.complete++
		}
		switch {
		case fail:
		case unk:
			t.unknown++
		default:
			t.met++
			if r.OutputTokens != nil {
				t.goodTokens += *r.OutputTokens
			}
		}
	}
	return t
}

func (pc *criterionTally) add(outcome, reason string) {
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

// counts is the criterion's CriterionCounts over offered requests, and why the evaluation
// is unmeasurable because of it ("" when it is not): aggregate_only for a criterion without
// per-request values, else the most frequent unknown reason (first seen on ties) when no
// successful request could be judged on it.
func (pc *criterionTally) counts(c Criterion, offered, successful int) (CriterionCounts, string) {
	def, _ := criterionDef(c.Key())
	cc := CriterionCounts{Pass: pc.pass, Fail: pc.fail, NotApplicable: pc.na, Unknown: pc.unknown}
	unjudgeable := pc.unknown > 0 && pc.unknown == successful
	if def.PerRequest != "" && !unjudgeable {
		cc.AttainmentLower = share(pc.pass+pc.na, offered)
		cc.AttainmentUpper = share(pc.pass+pc.na+pc.unknown, offered)
	}
	switch {
	case def.PerRequest == "":
		return cc, "aggregate_only"
	case unjudgeable:
		best := pc.order[0]
		for _, r := range pc.order {
			if pc.reasons[r] > pc.reasons[best] {
				best = r
			}
		}
		return cc, best
	}
	return cc, ""
}
