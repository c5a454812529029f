package analyze

import (
	"math"
	"testing"
)

func flags(t *testing.T, items ...string) *Policy {
	t.Helper()
	p, err := ParseSLOFlags(items)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func criterion(j RequestJudgement, key string) CriterionResult {
	for _, c := range j.Criteria {
		if c.Key == key {
			return c
		}
	}
	return CriterionResult{}
}

// The per-request judgement, as a table.
func TestJudgeRequest(t *testing.T) {
	cases := []struct {
		name     string
		policy   []string
		request  Request
		outcome  string
		key      string
		crit     string
		reason   string
		valueMs  float64 // checked when crit is pass/fail
		hasValue bool
	}{
		{"inclusive limit", []string{"ttft:100"}, okReq(0, pf(100)), OutcomeMet, "client.ttft", OutcomePass, "", 100, true},
		{"over the limit", []string{"ttft:100"}, okReq(0, pf(100.001)), OutcomeMissed, "client.ttft", OutcomeFail, "", 100.001, true},
		{"fail beside unknown is missed", []string{"ttft:100", "server.ttft:100"}, okReq(0, pf(300)), OutcomeMissed, "server.ttft", OutcomeUnknown, "no_joined_span", 0, false},
		{"unknown alone is unknown", []string{"ttft:100", "server.ttft:100"}, okReq(0, pf(30)), OutcomeUnknown, "server.ttft", OutcomeUnknown, "no_joined_span", 0, false},
		{"non-streamed ttft", []string{"ttft:100"}, okReq(0, nil), OutcomeUnknown, "client.ttft", OutcomeUnknown, "no_client_ttft", 0, false},
		{"error status is missed even when criteria pass", []string{"e2e:1000"}, req(0, StatusError, func(r *Request) { r.E2ELatencyMS = pf(20) }), OutcomeMissed, "client.e2e", OutcomePass, "", 20, true},
		{"dropped is missed", []string{"e2e:1000"}, req(0, StatusDropped), OutcomeMissed, "client.e2e", OutcomeUnknown, "no_client_e2e", 0, false},
		{"timeout is missed", []string{"ttft:100"}, req(0, StatusTimeout), OutcomeMissed, "client.ttft", OutcomeUnknown, "no_client_ttft", 0, false},
		{"unknown status is missed", []string{"ttft:100"}, okReq(0, pf(10), func(r *Request) { r.Status = "mystery" }), OutcomeMissed, "client.ttft", OutcomePass, "", 10, true},
		{"tpot with tiktoken counts", []string{"tpot:50"}, okReq(0, pf(100), func(r *Request) { r.OutputTokenSource = "tiktoken" }), OutcomeUnknown, "client.tpot", OutcomeUnknown, "output_tokens_not_server_reported", 0, false},
		{"tpot one token", []string{"tpot:1"}, okReq(0, pf(100), func(r *Request) { r.OutputTokens = p64(1) }), OutcomeMet, "client.tpot", OutcomeNotApplicable, "single_output_token", 0, false},
		{"tpot value", []string{"tpot:3"}, okReq(0, pf(119), func(r *Request) { r.E2ELatencyMS = pf(500); r.OutputTokens = p64(128) }), OutcomeMet, "client.tpot", OutcomePass, "", 3, true},
		{"tpot no tokens", []string{"tpot:3"}, okReq(0, pf(119), func(r *Request) { r.OutputTokens = nil }), OutcomeUnknown, "client.tpot", OutcomeUnknown, "no_output_tokens", 0, false},
		{"tpot no ttft", []string{"tpot:3"}, okReq(0, nil), OutcomeUnknown, "client.tpot", OutcomeUnknown, "no_client_ttft_or_e2e", 0, false},
		{"ttft from intended", []string{"ttft_from_intended:150"}, okReq(0, pf(100), func(r *Request) { r.DispatchLagMS = pf(50) }), OutcomeMet, "client.ttft_from_intended", OutcomePass, "", 150, true},
		{"no dispatch lag", []string{"ttft_from_intended:150"}, okReq(0, pf(100)), OutcomeUnknown, "client.ttft_from_intended", OutcomeUnknown, "no_dispatch_lag", 0, false},
		{"e2e from intended", []string{"e2e_from_intended:600"}, okReq(0, pf(100), func(r *Request) { r.IntendedAtNS = p64(*r.StartedAtNS - 100_000_000) }), OutcomeMet, "client.e2e_from_intended", OutcomePass, "", 600, true},
		{"no intended time", []string{"e2e_from_intended:600"}, okReq(0, pf(100), func(r *Request) { r.IntendedAtNS = nil }), OutcomeUnknown, "client.e2e_from_intended", OutcomeUnknown, "no_intended_or_end_time", 0, false},
		{"server span value", []string{"server.ttft:100"}, okReq(0, pf(100), func(r *Request) { r.Span = map[string]any{"gen_ai.latency.time_to_first_token": 0.1} }), OutcomeMet, "server.ttft", OutcomePass, "", 100, true},
		{"server never from client values", []string{"server.e2e:1000"}, okReq(0, pf(100), func(r *Request) { r.Span = map[string]any{} }), OutcomeUnknown, "server.e2e", OutcomeUnknown, "span_attribute_missing:gen_ai.latency.e2e", 0, false},
		{"span attribute string", []string{"server.queue:100"}, okReq(0, pf(1), func(r *Request) { r.Span = map[string]any{"gen_ai.latency.time_in_queue": "0.1"} }), OutcomeUnknown, "server.queue", OutcomeUnknown, "span_attribute_missing:gen_ai.latency.time_in_queue", 0, false},
		{"span attribute bool", []string{"server.queue:100"}, okReq(0, pf(1), func(r *Request) { r.Span = map[string]any{"gen_ai.latency.time_in_queue": true} }), OutcomeUnknown, "server.queue", OutcomeUnknown, "span_attribute_missing:gen_ai.latency.time_in_queue", 0, false},
		{"span attribute NaN", []string{"server.queue:100"}, okReq(0, pf(1), func(r *Request) { r.Span = map[string]any{"gen_ai.latency.time_in_queue": math.NaN()} }), OutcomeUnknown, "server.queue", OutcomeUnknown, "non_finite_value", 0, false},
		{"span attribute negative", []string{"server.queue:100"}, okReq(0, pf(1), func(r *Request) { r.Span = map[string]any{"gen_ai.latency.time_in_queue": -5.0} }), OutcomeUnknown, "server.queue", OutcomeUnknown, "negative_value", 0, false},
		{"span attribute 1e308", []string{"server.e2e:100"}, okReq(0, pf(1), func(r *Request) { r.Span = map[string]any{"gen_ai.latency.e2e": 1e308} }), OutcomeUnknown, "server.e2e", OutcomeUnknown, "out_of_range_value", 0, false},
		{"quarantined span", []string{"server.ttft:100"}, okReq(0, pf(1), func(r *Request) { r.SpanMissingReason = "conflicting_spans" }), OutcomeUnknown, "server.ttft", OutcomeUnknown, "conflicting_spans", 0, false},
		{"aggregate only", []string{"server.itl:50"}, okReq(0, pf(1)), OutcomeUnknown, "server.itl", OutcomeUnknown, "aggregate_only", 0, false},
	}
	for _, c := range cases {
		p := flags(t, c.policy...)
		j := p.JudgeRequest(&c.request)
		got := criterion(j, c.key)
		if j.Outcome != c.outcome || got.Outcome != c.crit || got.Reason != c.reason || j.Status != c.request.Status {
			t.Errorf("%s: outcome %s, %s = %s (%q); want %s, %s (%q)", c.name, j.Outcome, c.key, got.Outcome, got.Reason, c.outcome, c.crit, c.reason)
		}
		if c.hasValue != (got.ValueMs != nil) || (c.hasValue && !eq(got.ValueMs, c.valueMs)) {
			t.Errorf("%s: value %s, want %v", c.name, fstr(got.ValueMs), c.valueMs)
		}
	}
}

// A span is judged on server criteria only; never "met".
func TestJudgeSpan(t *testing.T) {
	p := flags(t, "ttft:100", "server.ttft:200")
	j := p.JudgeSpan(map[string]any{"gen_ai.latency.time_to_first_token": 0.1})
	if j.Outcome != OutcomeUnknown || j.ServiceSuccess != "unverified" {
		t.Fatalf("span judgement %+v", j)
	}
	if c := j.Criteria[0]; c.Outcome != OutcomeUnknown || c.Reason != "client_boundary" {
		t.Errorf("client criterion on a span = %+v", c)
	}
	if c := j.Criteria[1]; c.Outcome != OutcomePass || !eq(c.ValueMs, 100) {
		t.Errorf("server criterion on a span = %+v", c)
	}
	only := flags(t, "server.ttft:200").JudgeSpan(map[string]any{"gen_ai.latency.time_to_first_token": 0.1})
	if only.Outcome != CriteriaMet {
		t.Errorf("server-only span outcome = %s", only.Outcome)
	}
	missed := flags(t, "server.ttft:50", "ttft:1").JudgeSpan(map[string]any{"gen_ai.latency.time_to_first_token": 0.1})
	if missed.Outcome != CriteriaMissed {
		t.Errorf("failing span outcome = %s", missed.Outcome)
	}
	if j := flags(t, "server.e2e:50").JudgeSpan(nil); j.Outcome != OutcomeUnknown {
		t.Errorf("nil attributes outcome = %s", j.Outcome)
	}
}

// Attainment and goodput, as a table.
func TestEvaluate(t *testing.T) {
	span := func(s float64) func(*Request) {
		return func(r *Request) { r.Span = map[string]any{"gen_ai.latency.time_to_first_token": s} }
	}
	fourSeconds := NewInterval(KindMeasuredSpan, 0, 4*second, CohortAllMeasured)
	type want struct {
		status               string
		reason               string
		offered, met, missed int
		unknown              int
		lower, upper         *float64
		lowerRPS, upperRPS   *float64
		outputTPS, coverage  *float64
		criterionKey         string
		pass, fail, na, unk  int
		critLower, critUpper *float64
	}
	cases := []struct {
		name     string
		policy   []string
		requests []Request
		rate     *MeasuredInterval
		want     want
	}{
		{"item 54 goodput", []string{"ttft:200"},
			[]Request{okReq(0, pf(100)), okReq(1, pf(300)), okReq(2, pf(150)), req(3, StatusTimeout)}, oneSecond,
			want{EvaluationEvaluated, "", 4, 2, 2, 0, pf(0.5), pf(0.5), pf(2), pf(2), pf(20), pf(1), "client.ttft", 2, 1, 0, 0, pf(0.5), pf(0.5)}},
		{"item 55 quarantined span widens the bounds", []string{"ttft:200", "server.ttft:200"},
			[]Request{okReq(0, pf(100), span(0.1)), okReq(1, pf(100), span(0.1)), okReq(2, pf(100), span(0.1)),
				okReq(3, pf(100), func(r *Request) { r.SpanMissingReason = "conflicting_spans" })}, oneSecond,
			want{EvaluationEvaluated, "", 4, 3, 0, 1, pf(0.75), pf(1), pf(3), pf(4), pf(30), pf(0.75), "server.ttft", 3, 0, 0, 1, pf(0.75), pf(1)}},
		{"item 56 all failed is evaluated", []string{"ttft:200"}, reqs(5, StatusError), oneSecond,
			want{EvaluationEvaluated, "", 5, 0, 5, 0, pf(0), pf(0), pf(0), pf(0), pf(0), nil, "client.ttft", 0, 0, 0, 0, pf(0), pf(0)}},
		{"item 56 non-streamed ttft is unmeasurable", []string{"ttft:200"},
			[]Request{okReq(0, nil), okReq(1, nil), okReq(2, nil)}, oneSecond,
			want{EvaluationUnmeasurable, "client.ttft: no_client_ttft", 3, 0, 0, 3, nil, nil, nil, nil, nil, pf(0), "client.ttft", 0, 0, 0, 3, nil, nil}},
		{"item 56 aggregate only", []string{"server.itl:50"}, []Request{okReq(0, pf(100))}, oneSecond,
			want{EvaluationUnmeasurable, "server.itl: aggregate_only", 1, 0, 0, 1, nil, nil, nil, nil, nil, pf(0), "server.itl", 0, 0, 0, 1, nil, nil}},
		{"item 56 aggregate only, nothing succeeded", []string{"server.itl:50"},
			[]Request{okReq(0, nil, func(r *Request) { r.Status = StatusError })}, oneSecond,
			want{EvaluationUnmeasurable, "server.itl: aggregate_only", 1, 0, 1, 0, nil, nil, nil, nil, nil, nil, "server.itl", 0, 0, 0, 0, nil, nil}},
		{"item 57 joint vs marginal", []string{"ttft:200", "e2e:800"},
			[]Request{okReq(0, pf(100)), okReq(1, pf(300)), okReq(2, pf(100), func(r *Request) { r.E2ELatencyMS = pf(900) })}, oneSecond,
			want{EvaluationEvaluated, "", 3, 1, 2, 0, pf(1.0 / 3), pf(1.0 / 3), pf(1), pf(1), pf(10), pf(1), "client.e2e", 2, 1, 0, 0, pf(2.0 / 3), pf(2.0 / 3)}},
		{"item 58 closed loop over 4 s", []string{"e2e:200"},
			[]Request{okReq(0, nil, func(r *Request) { r.E2ELatencyMS = pf(100) }), okReq(1, nil, func(r *Request) { r.E2ELatencyMS = pf(150) }),
				okReq(2, nil, func(r *Request) { r.E2ELatencyMS = pf(250) }), okReq(3, nil, func(r *Request) { r.E2ELatencyMS = pf(300) })}, fourSeconds,
			want{EvaluationEvaluated, "", 4, 2, 2, 0, pf(0.5), pf(0.5), pf(0.5), pf(0.5), pf(5), pf(1), "client.e2e", 2, 2, 0, 0, pf(0.5), pf(0.5)}},
		{"tpot one token is good and judged", []string{"tpot:1"},
			[]Request{okReq(0, pf(100), func(r *Request) { r.OutputTokens = p64(1) }), okReq(1, pf(100), func(r *Request) { r.OutputTokens = p64(1) })}, oneSecond,
			want{EvaluationEvaluated, "", 2, 2, 0, 0, pf(1), pf(1), pf(2), pf(2), pf(2), pf(1), "client.tpot", 0, 0, 2, 0, pf(1), pf(1)}},
		{"item 33 no rate interval: attainment only", []string{"e2e:1000"}, reqs(10, StatusOK, func(r *Request) { r.E2ELatencyMS = pf(500) }), nil,
			want{EvaluationEvaluated, "", 10, 10, 0, 0, pf(1), pf(1), nil, nil, nil, pf(1), "client.e2e", 10, 0, 0, 0, pf(1), pf(1)}},
		{"zero-length interval: no rate", []string{"e2e:1000"}, reqs(2, StatusOK, func(r *Request) { r.E2ELatencyMS = pf(500) }), NewInterval(KindMeasuredSpan, 5, 5, CohortAllMeasured),
			want{EvaluationEvaluated, "", 2, 2, 0, 0, pf(1), pf(1), nil, nil, nil, pf(1), "client.e2e", 2, 0, 0, 0, pf(1), pf(1)}},
	}
	same := func(a *float64, b *float64) bool {
		if a == nil || b == nil {
			return a == nil && b == nil
		}
		return eq(a, *b)
	}
	for _, c := range cases {
		e := Evaluate(flags(t, c.policy...), "flags", c.requests, c.rate, nil)
		w := c.want
		reason := ""
		if e.Reason != nil {
			reason = *e.Reason
		}
		if e.Status != w.status || reason != w.reason || e.Offered != w.offered || e.Met != w.met || e.Missed != w.missed || e.Unknown != w.unknown {
			t.Errorf("%s: %s %q offered %d met %d missed %d unknown %d", c.name, e.Status, reason, e.Offered, e.Met, e.Missed, e.Unknown)
		}
		if !same(e.AttainmentLower, w.lower) || !same(e.AttainmentUpper, w.upper) || !same(e.GoodputLowerRPS, w.lowerRPS) ||
			!same(e.GoodputUpperRPS, w.upperRPS) || !same(e.GoodputLowerOutputTPS, w.outputTPS) || !same(e.EvidenceCoverage, w.coverage) {
			t.Errorf("%s: attainment %s-%s goodput %s-%s tps %s coverage %s", c.name, fstr(e.AttainmentLower), fstr(e.AttainmentUpper),
				fstr(e.GoodputLowerRPS), fstr(e.GoodputUpperRPS), fstr(e.GoodputLowerOutputTPS), fstr(e.EvidenceCoverage))
		}
		cc := e.PerCriterion[w.criterionKey]
		if cc.Pass != w.pass || cc.Fail != w.fail || cc.NotApplicable != w.na || cc.Unknown != w.unk ||
			!same(cc.AttainmentLower, w.critLower) || !same(cc.AttainmentUpper, w.critUpper) {
			t.Errorf("%s: per_criterion[%s] = %+v (%s-%s)", c.name, w.criterionKey, cc, fstr(cc.AttainmentLower), fstr(cc.AttainmentUpper))
		}
		if e.Format != EvaluationFormat || e.Version != 1 || e.SLOName != "cli" || e.SLOSource != "flags" ||
			e.PopulationDeclared != PopulationOffered || e.PopulationEvaluated != PopulationOffered || e.Interval != c.rate || e.CohortValid != nil {
			t.Errorf("%s: record fields %+v", c.name, e)
		}
	}
}

// The evaluation carries its cohort's validity (ten copies of one record are not a cohort).
func TestEvaluateCarriesCohort(t *testing.T) {
	requests := make([]Request, 10)
	for i := range requests {
		requests[i] = okReq(0, pf(100))
	}
	pop, _ := Populate(CaseInput{CaseID: "c1", Requests: requests})
	e := Evaluate(flags(t, "ttft:200"), "file", requests, oneSecond, &pop)
	if e.CohortValid == nil || *e.CohortValid || !contains(e.CohortIssues, "duplicate_request_id: 9") || !contains(e.CohortIssues, "duplicate_x_request_id: 9") {
		t.Errorf("cohort %v %v", e.CohortValid, e.CohortIssues)
	}
	if e.SLOSource != "file" || e.SLODigest != flags(t, "ttft:200").Digest() {
		t.Errorf("source/digest %s %s", e.SLOSource, e.SLODigest)
	}
}

// The most common unknown reason names an unmeasurable criterion.
func TestUnmeasurableReasonIsTheMostCommon(t *testing.T) {
	p := flags(t, "server.ttft:100")
	requests := []Request{
		okReq(0, pf(1), func(r *Request) { r.SpanMissingReason = "multiple_spans" }),
		okReq(1, pf(1)), okReq(2, pf(1)),
	}
	e := Evaluate(p, "flags", requests, oneSecond, nil)
	if e.Status != EvaluationUnmeasurable || *e.Reason != "server.ttft: no_joined_span" {
		t.Errorf("status %s reason %v", e.Status, fstrS(e.Reason))
	}
}

func fstrS(s *string) string {
	if s == nil {
		return "nil"
	}
	return *s
}
