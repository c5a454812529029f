package analyze

import (
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
)

func seq(n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = float64(i + 1)
	}
	return out
}

func repeat(v float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// n=300 p95 = 285.05, n_min 230, n_min_exists 59, ranks (277, 293).
func TestEstimateSuccessful(t *testing.T) {
	e := EstimateSuccessful(seq(300), 0.95, DefaultRule)
	if !eq(e.ValueMs, 285.05) || e.N != 300 || !e.Sufficient || e.NMin != 230 || e.NMinExists != 59 || e.Penalized || e.Reason != nil ||
		e.Interval == nil || e.Interval.LowerRank != 277 || e.Interval.UpperRank != 293 || e.Interval.LowerMs != 277 || !eq(e.Interval.UpperMs, 293) || !eq(e.Interval.WidthMs, 16) {
		t.Fatalf("estimate %+v interval %+v", e, e.Interval)
	}
	if e := EstimateSuccessful(seq(100), 0.99, DefaultRule); e.Interval != nil || e.Sufficient || !eq(e.ValueMs, 99.01) || e.NMin != 1164 {
		t.Errorf("n=100 p99: %+v", e)
	}
	if e := EstimateSuccessful(nil, 0.5, DefaultRule); e.ValueMs != nil || e.Reason == nil || *e.Reason != ReasonNoValues || e.N != 0 || e.NMin != 20 || e.NMinExists != 6 {
		t.Errorf("no values: %+v", e)
	}
	// Unsorted input is sorted, not trusted.
	if e := EstimateSuccessful([]float64{3, 1, 2}, 0.5, DefaultRule); !eq(e.ValueMs, 2) {
		t.Errorf("unsorted median = %s", fstr(e.ValueMs))
	}
}

// The failure-penalised estimand, as a table.
func TestEstimatePenalized(t *testing.T) {
	timeouts90 := append(repeat(60000, 9), 59990)
	ninety := seq(90)
	wantP50, _ := Quantile(ninety, 0.5/0.9)
	all239 := append(seq(227), repeat(60000, 12)...)
	want239, _ := Quantile(all239, 0.95)
	cases := []struct {
		name      string
		in        PenalizedInput
		p         float64
		value     *float64
		penalized bool
		bound     *float64
		reason    string
		n         int
	}{
		{"90+10 p50 is the successes' quantile at 0.5/0.9", PenalizedInput{Values: ninety, Failures: 10}, 0.5, pf(wantP50), false, nil, "", 100},
		{"95+5 p95 is the largest success", PenalizedInput{Values: seq(95), Failures: 5}, 0.95, pf(95), false, nil, "", 100},
		{"90+10 p95 falls in the failure mass", PenalizedInput{Values: ninety, Failures: 10}, 0.95, nil, true, nil, "", 100},
		{"90+10 timeouts get an observed lower bound", PenalizedInput{Values: ninety, Failures: 10, TimeoutElapsedMs: timeouts90}, 0.95, nil, true, pf(60000), "", 100},
		{"a timeout list shorter than the failures gives no bound", PenalizedInput{Values: ninety, Failures: 10, TimeoutElapsedMs: timeouts90[:9]}, 0.95, nil, true, nil, "", 100},
		{"227 + 12 timeouts", PenalizedInput{Values: seq(227), Failures: 12, TimeoutElapsedMs: repeat(60000, 12)}, 0.95, nil, true, pf(want239), "", 239},
		{"no failures equals the successful estimand", PenalizedInput{Values: seq(300)}, 0.95, pf(285.05), false, nil, "", 300},
		{"a successful request without the value", PenalizedInput{Values: seq(9), SuccessfulMissing: 1, Failures: 2}, 0.5, nil, false, nil, ReasonSuccessfulValuesMissing, 12},
		{"no requests", PenalizedInput{}, 0.5, nil, false, nil, ReasonNoValues, 0},
		{"all failed", PenalizedInput{Failures: 4}, 0.5, nil, true, nil, "", 4},
		{"all timed out", PenalizedInput{Failures: 2, TimeoutElapsedMs: []float64{100, 300}}, 0.5, nil, true, pf(200), "", 2},
	}
	for _, c := range cases {
		e := EstimatePenalized(c.in, c.p, DefaultRule)
		reason := ""
		if e.Reason != nil {
			reason = *e.Reason
		}
		sameF := func(a, b *float64) bool { return (a == nil && b == nil) || (a != nil && b != nil && eq(a, *b)) }
		if !sameF(e.ValueMs, c.value) || e.Penalized != c.penalized || !sameF(e.ObservedLowerBoundMs, c.bound) || reason != c.reason || e.N != c.n {
			t.Errorf("%s: value %s penalized %v bound %s reason %q n %d", c.name, fstr(e.ValueMs), e.Penalized, fstr(e.ObservedLowerBoundMs), reason, e.N)
		}
	}
	// 0.9·227 + 6000 is what the 227 + 12 timeouts bound comes to.
	if !eq(pf(want239), 0.9*227+6000) {
		t.Errorf("bound %v, want %v", want239, 0.9*227+6000)
	}
	// The interval ranks failures worst: n=300, 290 successes + 10 failures, p95 → ranks
	// (277, 293), the upper one among the failures.
	e := EstimatePenalized(PenalizedInput{Values: seq(290), Failures: 10}, 0.95, DefaultRule)
	if e.Interval == nil || e.Interval.LowerRank != 277 || e.Interval.UpperRank != 293 || e.Interval.LowerMs != 277 || e.Interval.UpperMs != nil || e.Interval.WidthMs != nil || !e.Sufficient {
		t.Errorf("penalized interval %+v", e.Interval)
	}
	// A lower rank among failures: no interval.
	if e := EstimatePenalized(PenalizedInput{Values: seq(200), Failures: 100}, 0.95, DefaultRule); e.Interval != nil {
		t.Errorf("lower rank among failures gave %+v", e.Interval)
	}
	if e := EstimatePenalized(PenalizedInput{Values: seq(9), SuccessfulMissing: 1}, 0.5, DefaultRule); e.Interval != nil {
		t.Error("missing values still gave an interval")
	}
}

// The latency block: the failure-penalised estimand and timeouts, TPOT, and the server
// metrics only with spans.
func TestLatencyBlock(t *testing.T) {
	var requests []Request
	for i := 0; i < 90; i++ {
		requests = append(requests, okReq(i, pf(float64(i+1)), func(r *Request) { r.E2ELatencyMS = pf(float64(i + 1)) }))
	}
	for i := 90; i < 99; i++ {
		requests = append(requests, req(i, StatusTimeout, func(r *Request) { r.E2ELatencyMS = pf(60000) }))
	}
	requests = append(requests, req(99, StatusTimeout, func(r *Request) { r.E2ELatencyMS = pf(59990) }))
	block := LatencyOf(requests, DefaultRule, false)
	if block.Rule != DefaultRule || len(block.Metrics) != 5 {
		t.Fatalf("block %+v", block)
	}
	for _, key := range ServerMetrics {
		if _, ok := block.Metrics[key]; ok {
			t.Errorf("%s reported without joined spans", key)
		}
	}
	e2e := block.Metrics["client.e2e"].FailurePenalized["p95"]
	if !e2e.Penalized || e2e.ValueMs != nil || !eq(e2e.ObservedLowerBoundMs, 60000) {
		t.Errorf("client.e2e penalized p95 = %+v", e2e)
	}
	// Only client.e2e gets the bound.
	if b := block.Metrics["client.ttft"].FailurePenalized["p95"]; b.ObservedLowerBoundMs != nil || !b.Penalized {
		t.Errorf("client.ttft penalized p95 = %+v", b)
	}
	if s := block.Metrics["client.e2e"].Successful["p50"]; s.N != 90 || !eq(s.ValueMs, 45.5) {
		t.Errorf("client.e2e successful p50 = %+v", s)
	}
	if m := block.Metrics["client.e2e"]; m.Boundary != "client" || m.SuccessfulMissing != 0 {
		t.Errorf("metric %+v", m)
	}
	// Every success reported 10 output tokens through server usage: TPOT has all 90.
	if m := block.Metrics["client.tpot"]; m.SuccessfulMissing != 0 || m.Successful["p50"].N != 90 {
		t.Errorf("client.tpot %+v", m.Successful["p50"])
	}
	u := block.Unsuccessful["timeout"]
	if len(block.Unsuccessful) != 1 || u.Count != 10 || !eq(u.ElapsedMs.Min, 59990) || !eq(u.ElapsedMs.P50, 60000) || !eq(u.ElapsedMs.Max, 60000) || u.ElapsedMissing != 0 {
		t.Errorf("unsuccessful %+v", block.Unsuccessful)
	}

	// Timeouts 59990/60000 → min/p50/max 59990/59995/60000; dropped has no time;
	// cancelled counts send → end; an all-success case has none.
	mixed := []Request{
		req(0, StatusTimeout, func(r *Request) { r.E2ELatencyMS = pf(59990) }),
		req(1, StatusTimeout, func(r *Request) { r.E2ELatencyMS = pf(60000) }),
		req(2, StatusDropped),
		req(3, StatusCancelled),
	}
	un := LatencyOf(mixed, DefaultRule, false).Unsuccessful
	if tm := un["timeout"]; tm.Count != 2 || !eq(tm.ElapsedMs.Min, 59990) || !eq(tm.ElapsedMs.P50, 59995) || !eq(tm.ElapsedMs.Max, 60000) {
		t.Errorf("timeouts %+v", tm)
	}
	if d := un["dropped"]; d.Count != 1 || d.ElapsedMissing != 1 || d.ElapsedMs.Min != nil {
		t.Errorf("dropped %+v", d)
	}
	if c := un["cancelled"]; c.Count != 1 || c.ElapsedMissing != 0 || !eq(c.ElapsedMs.P50, 500) {
		t.Errorf("cancelled %+v", c)
	}
	if got := LatencyOf(reqs(3, StatusOK), DefaultRule, false).Unsuccessful; len(got) != 0 {
		t.Errorf("all-success unsuccessful = %v", got)
	}
	// A mixed failure set (a dropped one) gives client.e2e no bound.
	if e := LatencyOf(mixed, DefaultRule, false).Metrics["client.e2e"].FailurePenalized["p50"]; e.ObservedLowerBoundMs != nil {
		t.Errorf("bound with a dropped failure: %s", fstr(e.ObservedLowerBoundMs))
	}

	// TPOT = (e2e − ttft)/(tokens − 1) = 3.0 for 128 tokens.
	tpot := LatencyOf([]Request{okReq(0, pf(119), func(r *Request) { r.E2ELatencyMS = pf(500); r.OutputTokens = p64(128) })}, DefaultRule, false)
	if v := tpot.Metrics["client.tpot"].Successful["p50"]; !eq(v.ValueMs, 3) {
		t.Errorf("tpot = %s", fstr(v.ValueMs))
	}

	// Server metrics with joined spans; a quarantined span is successful_missing;
	// server p50 of 400/600 ms = 500.
	spans := []Request{
		okReq(0, pf(10), func(r *Request) { r.Span = map[string]any{"gen_ai.latency.e2e": 0.4} }),
		okReq(1, pf(10), func(r *Request) { r.Span = map[string]any{"gen_ai.latency.e2e": 0.6} }),
		okReq(2, pf(10), func(r *Request) { r.SpanMissingReason = "conflicting_spans" }),
	}
	sb := LatencyOf(spans, DefaultRule, true)
	m, ok := sb.Metrics["server.e2e"]
	if !ok || m.Boundary != "server" || m.SuccessfulMissing != 1 || !eq(m.Successful["p50"].ValueMs, 500) {
		t.Errorf("server.e2e %+v", m)
	}
	if pen := m.FailurePenalized["p50"]; pen.ValueMs != nil || *pen.Reason != ReasonSuccessfulValuesMissing {
		t.Errorf("server.e2e penalized %+v", pen)
	}
	// Non-streamed TTFT is missing on every success.
	ns := LatencyOf([]Request{okReq(0, nil), okReq(1, nil)}, DefaultRule, false).Metrics["client.ttft"]
	if ns.SuccessfulMissing != 2 || *ns.Successful["p50"].Reason != ReasonNoValues || *ns.FailurePenalized["p50"].Reason != ReasonSuccessfulValuesMissing {
		t.Errorf("non-streamed ttft %+v", ns)
	}
}

// Chunk gaps stay chunk-level; 8 chunks × 16 tokens → 16 tokens per chunk.
func TestStreaming(t *testing.T) {
	gaps := []float64{5, 5, 5, 5, 5, 5, 10}
	requests := []Request{
		okReq(0, pf(100), func(r *Request) { r.ChunkInterarrivalMS = gaps; r.OutputTokens = p64(128) }),
		// A non-streamed success and a failure are not streamed responses.
		okReq(1, nil),
		req(2, StatusError, func(r *Request) { r.Stream = true; r.TTFTMS = pf(5); r.ChunkInterarrivalMS = []float64{1} }),
		// A tokenizer-counted response counts chunks, not tokens per chunk.
		okReq(3, pf(100), func(r *Request) {
			r.ChunkInterarrivalMS = []float64{20}
			r.OutputTokenSource = "tiktoken"
			r.OutputTokens = p64(1000)
		}),
	}
	s := StreamingOf(requests)
	if s.Granularity != "chunk" || s.Responses != 2 || !eq(s.MeanTokensPerChunk, 16) || s.ChunkInterarrivalMs.N != 8 ||
		!eq(s.ChunkInterarrivalMs.Max, 20) || !eq(s.ChunkInterarrivalMs.P50, 5) || !eq(s.ContentChunksPerResponse.Max, 8) || !eq(s.ContentChunksPerResponse.P50, 5) {
		t.Errorf("streaming %+v", s)
	}
	if e := StreamingOf(nil); e.Responses != 0 || e.MeanTokensPerChunk != nil || e.ChunkInterarrivalMs.N != 0 || e.ContentChunksPerResponse.P50 != nil {
		t.Errorf("empty streaming %+v", e)
	}
}

func TestArrivalsPromptsTokens(t *testing.T) {
	held := func(r *Request) { r.HeldForSlot = artifact.Ptr(true) }
	requests := []Request{
		okReq(0, pf(10), func(r *Request) {
			r.DispatchLagMS = pf(1)
			r.InFlightAtDispatch = p64(1)
			r.PromptMode = "shared-prefix"
			r.PromptDigest = ps("a")
			r.PrefixGroup = p64(0)
			r.SharedPrefixTokens = p64(100)
			r.PromptTokens = p64(512)
			r.TotalTokens = p64(522)
		}),
		okReq(1, pf(10), held, func(r *Request) {
			r.DispatchLagMS = pf(101)
			r.InFlightAtDispatch = p64(1)
			r.PromptMode = "shared-prefix"
			r.PromptDigest = ps("b")
			r.PrefixGroup = p64(1)
			r.SharedPrefixTokens = p64(90)
			r.PromptTokens = p64(510)
			r.TotalTokens = p64(520)
			r.OutputTokenSource = "tiktoken"
		}),
		req(2, StatusDropped, held, func(r *Request) { r.PromptMode = "shared-prefix"; r.PromptDigest = ps("a") }),
		req(3, StatusTimeout, func(r *Request) { r.DispatchLagMS = pf(201) }),
	}
	w := window()
	a := ArrivalsOf(requests, w)
	if a.Mode != ModeFixedRate || a.Offered != 4 || a.Sent != 3 || a.Completed != 2 || a.Dropped != 1 || a.HeldForSlot != 1 ||
		len(a.Failed) != 1 || a.Failed["timeout"] != 1 || *a.PeakInFlight != 1 || !eq(a.DispatchLagMs.Max, 201) || !eq(a.DispatchLagMs.P50, 101) ||
		!eq(a.WindowSeconds, 1) || !eq(a.DrainSeconds, 1) || !eq(a.IntendedArrivalRatePerSecond, 10) {
		t.Errorf("arrivals %+v (rate %s)", a, fstr(a.IntendedArrivalRatePerSecond))
	}
	closed := ArrivalsOf(reqs(3, StatusOK, func(r *Request) { r.ArrivalMode = ModeClosed }), nil)
	if closed.Mode != ModeClosed || closed.IntendedArrivalRatePerSecond != nil || closed.WindowSeconds != nil {
		t.Errorf("closed arrivals %+v", closed)
	}
	// All intents at one instant (a single burst): no offered rate.
	burst := ArrivalsOf(reqs(3, StatusOK, func(r *Request) { r.IntendedAtNS = p64(start); r.ArrivalMode = ModeBurst }), nil)
	if burst.IntendedArrivalRatePerSecond != nil {
		t.Errorf("single burst rate %s", fstr(burst.IntendedArrivalRatePerSecond))
	}
	if m := ArrivalMode(append(reqs(1, StatusOK), req(1, StatusOK, func(r *Request) { r.ArrivalMode = ModePoisson })), nil); m != "mixed" {
		t.Errorf("mixed mode = %s", m)
	}

	w.PromptsDigest = ps("digest")
	p := PromptsOf(requests, w)
	if *p.Mode != "shared-prefix" || p.DistinctPrompts != 2 || p.PrefixGroupsUsed != 2 || *p.SharedPrefixTokens.Min != 90 || *p.SharedPrefixTokens.Max != 100 || *p.PromptsDigest != "digest" {
		t.Errorf("prompts %+v", p)
	}

	tok, lengths := TokensOf(requests)
	if tok.OutputTokens != 20 || tok.TotalTokens != 1042 || len(tok.OutputTokenSources) != 2 || tok.OutputTokenSources[0] != "server_usage" || tok.OutputTokenSources[1] != "tiktoken" {
		t.Errorf("tokens %+v", tok)
	}
	if !eq(lengths.PromptTokens.Min, 510) || !eq(lengths.PromptTokens.Max, 512) || !eq(lengths.OutputTokens.P50, 10) {
		t.Errorf("lengths %+v", lengths)
	}

	legacy := LegacyLatency(requests)
	if len(legacy) != 11 || !eq(legacy["e2e_p50"], 500) || !eq(legacy["ttft_p99"], 10) || legacy["first_chunk_p50"] != nil || !eq(legacy["e2e_from_intended_p95"], 500) {
		t.Errorf("legacy latency %v", legacy)
	}
}

func BenchmarkLatencyOf100k(b *testing.B) {
	requests := make([]Request, 100_000)
	for i := range requests {
		v := float64((i*7919)%100_000) / 10
		requests[i] = okReq(i, pf(v), func(r *Request) { r.E2ELatencyMS = pf(v * 3); r.DispatchLagMS = pf(1) })
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		LatencyOf(requests, DefaultRule, false)
	}
}
