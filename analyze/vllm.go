package analyze

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/join"
)

// SpanLatencyAttributes are the vLLM span attributes summarised per case (seconds on the
// span, reported in ms). They are residency in the server's stages, not GPU time.
var SpanLatencyAttributes = []string{
	artifact.AttrTimeInQueue,
	artifact.AttrTimeToFirstToken,
	artifact.AttrTimeInModelPrefill,
	artifact.AttrTimeInModelDecode,
	artifact.AttrTimeInModelInference,
	artifact.AttrE2E,
}

// spanNote labels the per-case span block.
const spanNote = "server-reported residency per request (queue, prefill, decode), not GPU time"

// SpanSummary is telemetry.vllm.spans: the whole run's span deliveries and join.
type SpanSummary struct {
	Total                 int            `json:"total"`
	Joined                int            `json:"joined"`
	Deliveries            int            `json:"deliveries"`
	Duplicates            int            `json:"duplicates"`
	ConflictingDuplicates int            `json:"conflicting_duplicates"`
	QuarantinedRequests   map[string]int `json:"quarantined_requests"`
	UnjoinedByReason      map[string]int `json:"unjoined_by_reason"`
	JoinedBy              map[string]int `json:"joined_by"`
	Sources               map[string]int `json:"sources"`
}

// CaseSpans is telemetry.vllm.cases[id].spans.
type CaseSpans struct {
	Requests            int                    `json:"requests"`
	RequestsWithSpan    int                    `json:"requests_with_span"`
	QuarantinedRequests int                    `json:"quarantined_requests"`
	Latency             map[string]SpanLatency `json:"latency"`
	Note                string                 `json:"note"`
}

// SpanLatency is n / p50 / p95 / mean of one span attribute over a case's joined spans, in
// ms, and LeftOut: how many joined spans gave no usable value, by artifact.SpanLatencySeconds'
// reason (span_attribute_missing:<attr>, non_finite_value, negative_value,
// out_of_range_value); empty when every joined span gave one.
type SpanLatency struct {
	N       int            `json:"n"`
	P50Ms   *float64       `json:"p50_ms"`
	P95Ms   *float64       `json:"p95_ms"`
	MeanMs  *float64       `json:"mean_ms"`
	LeftOut map[string]int `json:"left_out"`
}

// vllmResult is what the vLLM analysis adds to a report.
type vllmResult struct {
	block  *VLLMBlock
	spans  *SpanSummary
	server *ServerEvidence // nil without spans
}

// spanRecords decodes the artifact's infer.vllm_span records.
func spanRecords(a *artifact.Artifact) ([]artifact.Span, error) {
	var out []artifact.Span
	for i := range a.Others {
		if a.Others[i].Kind.EventType != artifact.EventSpan {
			continue
		}
		rec, err := artifact.DecodeSpanRaw(a.Others[i])
		if err != nil {
			return nil, fmt.Errorf("%w: span %d of the artifact: %w", artifact.ErrInvalidArtifact, len(out)+1, err)
		}
		out = append(out, rec)
	}
	return out, nil
}

// StateNotCollected marks a telemetry.vllm case block of a run without /metrics scrapes.
const StateNotCollected = "not_collected"

// spanCapability returns the artifact's span receiver capability record, nil without one.
func spanCapability(a *artifact.Artifact) *artifact.Capabilities {
	for i := range a.Capabilities {
		if a.Capabilities[i].Component == artifact.ComponentSpans {
			return &a.Capabilities[i]
		}
	}
	return nil
}

// analyzeVLLM builds telemetry.vllm from the artifact's scrape and span records plus extra
// spans (analyze --vllm-spans), and the server evidence of the span join. Scrapes give the
// per-engine deltas (VLLMBlockOf); spans are joined to the requests (join.Spans) and
// summarised per case. Without spans and without a span receiver's capability record the
// block is the scrapes' alone and there is no server evidence; with a capability record of a
// receiver that never ran (not available) and no span, the span summary is given but the
// server evidence stays unknown (nil). Errors: an undecodable scrape or span record (both
// wrap artifact.ErrInvalidArtifact).
func analyzeVLLM(in *Input, extra []artifact.Span) (*vllmResult, error) {
	a := in.Artifact
	block, err := VLLMBlockOf(a)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", artifact.ErrInvalidArtifact, err)
	}
	spans, err := spanRecords(a)
	if err != nil {
		return nil, err
	}
	spans = append(spans, extra...)
	res := &vllmResult{block: block}
	spanCap := spanCapability(a)
	if len(spans) == 0 && spanCap == nil {
		return res, nil
	}
	collectSpans(block)
	jr, sources := joinSpans(in, spans)
	res.spans = spanSummary(jr, sources)
	block.Spans = res.spans
	if len(spans) == 0 && spanCap != nil && !spanCap.Available {
		// No receiver ran (every listener failed to bind): nothing was observed, so the
		// server's admission is unknown (null), not zero.
		return res, nil
	}
	res.server = serverEvidence(jr)
	for id, list := range in.Cases {
		cb := block.Cases[id]
		if cb == nil {
			cb = &VLLMCaseBlock{State: StateNotCollected, Reasons: []string{}}
			block.Cases[id] = cb
		}
		cb.Spans = caseSpans(list, jr)
	}
	return res, nil
}

// collectSpans readies the telemetry.vllm block for spans: collected, and with case blocks
// that say not_collected when the run had no /metrics scrape at all (the scraper was not
// configured, which is not a failed or missing scrape).
func collectSpans(block *VLLMBlock) {
	if block.Engine == nil || block.Engine.Scrapes.OK+block.Engine.Scrapes.Failed == 0 {
		for id := range block.Cases {
			block.Cases[id] = &VLLMCaseBlock{State: StateNotCollected, Reasons: []string{}}
		}
	}
	if block.Status != VLLMCollected {
		block.Status, block.ObservationScope, block.Note = VLLMCollected, artifact.ScopeEngineAggregate, VLLMNote
	}
	if block.Cases == nil {
		block.Cases = map[string]*VLLMCaseBlock{}
	}
}

// joinSpans joins spans to the sent requests of the input (measured, and the warmup ones so
// that their spans are told apart), and counts the spans by source.
func joinSpans(in *Input, spans []artifact.Span) (join.Result, map[string]int) {
	var reqs []join.Request
	for _, list := range in.Cases {
		for i := range list {
			if jr, ok := join.RequestOf(&list[i].Request); ok {
				reqs = append(reqs, jr)
			}
		}
	}
	reqs = append(reqs, in.Warmup...)
	js := make([]join.Span, len(spans))
	sources := map[string]int{}
	for i := range spans {
		js[i] = join.SpanOf(&spans[i])
		sources[spans[i].Source]++
	}
	return join.Spans(reqs, js), sources
}

// spanSummary is telemetry.vllm.spans of a join.
func spanSummary(jr join.Result, sources map[string]int) *SpanSummary {
	sum := &SpanSummary{
		Total: jr.Total, Joined: len(jr.Joined), Deliveries: jr.Deliveries, Duplicates: jr.Duplicates,
		ConflictingDuplicates: jr.ConflictingDuplicates, QuarantinedRequests: jr.QuarantinedByReason,
		UnjoinedByReason: jr.UnjoinedByReason, JoinedBy: map[string]int{}, Sources: sources,
	}
	for _, by := range jr.JoinedBy {
		sum.JoinedBy[by]++
	}
	return sum
}

// serverEvidence is the span join's server evidence: the joined requests' span attributes,
// the quarantined requests, and every request of either as admitted.
func serverEvidence(jr join.Result) *ServerEvidence {
	ev := &ServerEvidence{Spans: jr.Joined, Quarantined: jr.Quarantined, Admitted: map[string]bool{}}
	for x := range jr.Joined {
		ev.Admitted[x] = true
	}
	for x := range jr.Quarantined {
		ev.Admitted[x] = true
	}
	return ev
}

// caseSpans summarises the spans of one case's requests (those with an x_request_id): how
// many have a joined span, how many were quarantined, and each SpanLatencyAttributes value
// of the joined spans (seconds → ms; only the values artifact.SpanLatencySeconds accepts:
// finite, ≥ 0, at most 7 days).
func caseSpans(list []Request, jr join.Result) *CaseSpans {
	cs := &CaseSpans{Latency: map[string]SpanLatency{}, Note: spanNote}
	byAttr := map[string][]float64{}
	leftOut := map[string]map[string]int{}
	for i := range list {
		x := list[i].XRequestID
		if x == nil {
			continue
		}
		cs.Requests++
		if _, q := jr.Quarantined[*x]; q {
			cs.QuarantinedRequests++
			continue
		}
		attrs, ok := jr.Joined[*x]
		if !ok {
			continue
		}
		cs.RequestsWithSpan++
		for _, k := range SpanLatencyAttributes {
			v, reason := artifact.SpanLatencySeconds(attrs, k)
			if reason == "" {
				byAttr[k] = append(byAttr[k], v*1000)
				continue
			}
			if leftOut[k] == nil {
				leftOut[k] = map[string]int{}
			}
			leftOut[k][reason]++
		}
	}
	for _, k := range SpanLatencyAttributes {
		l := summarizeMs(byAttr[k])
		l.LeftOut = leftOut[k]
		if l.LeftOut == nil {
			l.LeftOut = map[string]int{}
		}
		cs.Latency[k] = l
	}
	return cs
}

func summarizeMs(v []float64) SpanLatency {
	out := SpanLatency{N: len(v)}
	if len(v) == 0 {
		return out
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	p50, _ := Quantile(s, 0.5)
	p95, _ := Quantile(s, 0.95)
	total := 0.0
	for _, x := range s {
		total += x
	}
	mean := total / float64(len(s))
	out.P50Ms, out.P95Ms, out.MeanMs = &p50, &p95, &mean
	return out
}

// renderVLLMSummary writes the report header's vLLM lines.
func renderVLLMSummary(w io.Writer, r *Report) error {
	if r.vllm == nil || r.vllm.block == nil {
		return nil
	}
	if e := r.vllm.block.Engine; e != nil && e.Scrapes.OK+e.Scrapes.Failed > 0 {
		if err := RenderVLLMSummary(w, r.vllm.block, nil); err != nil {
			return err
		}
	}
	if s := r.vllm.spans; s != nil {
		_, err := fmt.Fprintf(w, "vLLM spans: %d received (%d deliveries), %d joined%s\n", s.Total, s.Deliveries, s.Joined, unjoinedText(s))
		return err
	}
	return nil
}

func unjoinedText(s *SpanSummary) string {
	var parts []string
	keys := make([]string, 0, len(s.UnjoinedByReason))
	for k := range s.UnjoinedByReason {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if n := s.UnjoinedByReason[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, n))
		}
	}
	for _, k := range []string{join.ConflictingSpans, join.MultipleSpans} {
		if n := s.QuarantinedRequests[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("quarantined %s %d", k, n))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "; unjoined: " + strings.Join(parts, ", ")
}

// renderVLLMCase writes a case's vLLM lines: the engine deltas and the span line.
func renderVLLMCase(w io.Writer, r *Report, id string) error {
	if r.vllm == nil || r.vllm.block == nil || r.vllm.block.Cases == nil {
		return nil
	}
	cb := r.vllm.block.Cases[id]
	if cb == nil {
		return nil
	}
	if len(cb.Engines) > 0 || (cb.State != StateResolved && cb.State != StateNotCollected) {
		if err := RenderVLLMCase(w, cb); err != nil {
			return err
		}
	}
	cs := cb.Spans
	if cs == nil {
		return nil
	}
	_, err := fmt.Fprintln(w, caseSpansLine(cs))
	return err
}

// caseSpansLine is a case's span line, e.g.
//
//	vllm spans: 40 of 40 requests; queue p50 8.11 ms (4 left out: 3 negative_value, 1 non_finite_value), prefill p50 2.10 ms, model_decode p50 40.02 ms; residency, not GPU time
func caseSpansLine(cs *CaseSpans) string {
	line := fmt.Sprintf("  vllm spans: %d of %d requests", cs.RequestsWithSpan, cs.Requests)
	if cs.QuarantinedRequests > 0 {
		line += fmt.Sprintf(" (%d quarantined)", cs.QuarantinedRequests)
	}
	var parts []string
	for _, k := range []string{"gen_ai.latency.time_in_queue", "gen_ai.latency.time_in_model_prefill", "gen_ai.latency.time_in_model_decode"} {
		l := cs.Latency[k]
		name := strings.TrimPrefix(strings.TrimPrefix(k, "gen_ai.latency."), "time_in_")
		if l.P50Ms != nil {
			parts = append(parts, fmt.Sprintf("%s p50 %.2f ms%s", name, *l.P50Ms, leftOutText(l.LeftOut)))
		} else if onlyInvalid(l.LeftOut) {
			parts = append(parts, fmt.Sprintf("%s none%s", name, leftOutText(l.LeftOut)))
		}
	}
	if len(parts) > 0 {
		line += "; " + strings.Join(parts, ", ")
	}
	line += "; residency, not GPU time"
	return line
}

// onlyInvalid reports whether some value of leftOut was present but unusable (a reason other
// than missing): an attribute no span carries is not worth a part of the line.
func onlyInvalid(leftOut map[string]int) bool {
	for r := range leftOut {
		if !strings.HasPrefix(r, artifact.ReasonSpanAttrMissingPrefix) {
			return true
		}
	}
	return false
}

// leftOutText is " (4 left out: 3 negative_value, 1 missing or not a number)" — reasons by
// count, then name; a span_attribute_missing reason is "missing or not a number", its
// attribute being the part's — or "" when nothing was left out.
func leftOutText(leftOut map[string]int) string {
	if len(leftOut) == 0 {
		return ""
	}
	reasons := make([]string, 0, len(leftOut))
	total := 0
	for r, n := range leftOut {
		reasons = append(reasons, r)
		total += n
	}
	sort.Slice(reasons, func(i, j int) bool {
		if leftOut[reasons[i]] != leftOut[reasons[j]] {
			return leftOut[reasons[i]] > leftOut[reasons[j]]
		}
		return reasons[i] < reasons[j]
	})
	parts := make([]string, len(reasons))
	for i, r := range reasons {
		name := r
		if strings.HasPrefix(r, artifact.ReasonSpanAttrMissingPrefix) {
			name = "missing or not a number"
		}
		parts[i] = fmt.Sprintf("%d %s", leftOut[r], name)
	}
	return fmt.Sprintf(" (%d left out: %s)", total, strings.Join(parts, ", "))
}
