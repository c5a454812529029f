// Package join joins the server's own account of each request to the request inferprobe sent:
// vLLM `llm_request` spans to infer.request records by the X-Request-Id vLLM carries in
// gen_ai.request.id and, independently, by the trace id of the traceparent inferprobe sent.
//
// The rules are stormlog's (shared/research/stormlog.md §4.4, §5 items 81–82): deliveries are
// deduplicated by (trace_id, span_id) — an identical re-delivery weighs once, the same ids
// with different content quarantine the request (conflicting_spans); two distinct spans for
// one request quarantine it (multiple_spans); spans that join nothing are counted by reason.
// Server latencies never borrow client values: a request without a usable span has none.
package join

import (
	"sort"

	"github.com/inferprobe/inferprobe/artifact"
)

// Unjoined reasons (stormlog.md §2.6 telemetry.vllm.spans.unjoined_by_reason).
const (
	NoRequestID      = "no_request_id"      // neither gen_ai.request.id nor a trace id of the run
	RequestNotInRun  = "request_not_in_run" // an id that no request of this run sent
	WarmupRequest    = "warmup_request"     // joins a warmup request (excluded from analysis)
	NotARequestSpan  = "not_a_request_span" // not named llm_request
	ConflictingSpans = "conflicting_spans"  // quarantine: one (trace_id, span_id) delivered with different content
	MultipleSpans    = "multiple_spans"     // quarantine: two distinct spans for one request
)

// Span is what the join needs of one delivered span.
type Span struct {
	TraceID, SpanID string // lowercase hex
	Name            string
	// GenAIRequestID is the gen_ai.request.id attribute, "" when absent or not a string.
	GenAIRequestID string
	// Digest identifies the span's content: two deliveries of one (trace_id, span_id) with
	// equal digests are the same span re-delivered.
	Digest string
	// Attributes are the span's attributes (gen_ai.latency.* in seconds); they become the
	// request's server evidence when it joins.
	Attributes map[string]any
}

// Request is what the join needs of one recorded request.
type Request struct {
	XRequestID string // as recorded (never rebuilt); "" for a request never sent
	TraceID    string // the traceparent trace id recorded; "" when none
	Measured   bool   // phase measured (false: warmup)
}

// Result is the join of one run's spans to its requests.
type Result struct {
	// Joined holds the attributes of the one span of each joined measured request, by
	// x_request_id.
	Joined map[string]map[string]any
	// JoinedBy says how each joined request was found: "request_id", "trace_id" or "both".
	JoinedBy map[string]string
	// Quarantined holds the requests whose spans were refused, with the reason.
	Quarantined map[string]string

	Deliveries            int            // spans delivered, re-deliveries included
	Total                 int            // distinct (trace_id, span_id)
	Duplicates            int            // identical re-deliveries
	ConflictingDuplicates int            // re-deliveries with different content
	UnjoinedByReason      map[string]int // every reason key present, zero included
	QuarantinedByReason   map[string]int
}

// Spans joins spans to requests. Requests never sent (empty XRequestID) join nothing. A span
// without a trace id or span id is never taken for a re-delivery of another.
func Spans(reqs []Request, spans []Span) Result {
	res := Result{
		Joined:              map[string]map[string]any{},
		JoinedBy:            map[string]string{},
		Quarantined:         map[string]string{},
		UnjoinedByReason:    map[string]int{NoRequestID: 0, RequestNotInRun: 0, WarmupRequest: 0, NotARequestSpan: 0},
		QuarantinedByReason: map[string]int{},
	}
	byX := make(map[string]*Request, len(reqs))
	byTrace := make(map[string]*Request, len(reqs))
	for i := range reqs {
		r := &reqs[i]
		if r.XRequestID == "" {
			continue
		}
		byX[r.XRequestID] = r
		if r.TraceID != "" {
			byTrace[r.TraceID] = r
		}
	}

	// Deduplicate deliveries by (trace_id, span_id).
	// Spans without both ids (some files) cannot be recognised as re-deliveries: each is its
	// own span, keyed by its position.
	type key struct {
		trace, span string
		pos         int
	}
	type entry struct {
		span        *Span
		conflicting bool
	}
	unique := map[key]*entry{}
	var order []key
	for i := range spans {
		s := &spans[i]
		res.Deliveries++
		k := key{trace: s.TraceID, span: s.SpanID}
		if s.TraceID == "" || s.SpanID == "" {
			k.pos = i + 1
		}
		if e, ok := unique[k]; ok {
			if e.span.Digest == s.Digest {
				res.Duplicates++
			} else {
				res.ConflictingDuplicates++
				e.conflicting = true
			}
			continue
		}
		unique[k] = &entry{span: s}
		order = append(order, k)
	}
	res.Total = len(order)

	// Match each distinct span to a request.
	type match struct {
		spans       []*Span
		conflicting bool
		by          string
	}
	matched := map[string]*match{}
	var matchedOrder []string
	for _, k := range order {
		e := unique[k]
		s := e.span
		if s.Name != artifact.RequestSpanName {
			res.UnjoinedByReason[NotARequestSpan]++
			continue
		}
		var byID *Request
		// The id itself first (an X-Request-Id recorded verbatim), then every form vLLM
		// derives from one (CandidateRequestIDs: chatcmpl-/cmpl- prefixes, prompt
		// indexes, parallel-sampling children, the internal uniquifying suffix).
		for _, c := range append([]string{s.GenAIRequestID}, CandidateRequestIDs(s.GenAIRequestID)...) {
			if r := byX[c]; r != nil {
				byID = r
				break
			}
		}
		byTr := byTrace[s.TraceID]
		r, by := byID, "request_id"
		switch {
		case byID != nil && byTr == byID:
			by = "both"
		case byID == nil && byTr != nil:
			r, by = byTr, "trace_id"
		}
		if r == nil {
			if s.GenAIRequestID == "" {
				res.UnjoinedByReason[NoRequestID]++
			} else {
				res.UnjoinedByReason[RequestNotInRun]++
			}
			continue
		}
		if !r.Measured {
			res.UnjoinedByReason[WarmupRequest]++
			continue
		}
		m := matched[r.XRequestID]
		if m == nil {
			m = &match{by: by}
			matched[r.XRequestID] = m
			matchedOrder = append(matchedOrder, r.XRequestID)
		}
		m.spans = append(m.spans, s)
		m.conflicting = m.conflicting || e.conflicting
	}
	sort.Strings(matchedOrder)
	for _, x := range matchedOrder {
		m := matched[x]
		switch {
		case m.conflicting:
			res.Quarantined[x] = ConflictingSpans
		case len(m.spans) > 1:
			res.Quarantined[x] = MultipleSpans
		default:
			res.Joined[x] = m.spans[0].Attributes
			res.JoinedBy[x] = m.by
			continue
		}
		res.QuarantinedByReason[res.Quarantined[x]]++
	}
	return res
}
