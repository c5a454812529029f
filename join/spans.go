// Package join joins the server's own account of each request to the request inferprobe sent:
// vLLM `llm_request` spans to infer.request records by the X-Request-Id vLLM carries in
// gen_ai.request.id and, independently, by the trace id of the traceparent inferprobe sent.
//
// Deliveries are deduplicated by (trace_id, span_id) — an identical re-delivery weighs once,
// the same ids with different content quarantine the request (conflicting_spans); two
// distinct spans for one request quarantine it (multiple_spans); spans that join nothing are
// counted by reason. Server latencies never borrow client values: a request without a usable
// span has none.
//
// The package also joins server telemetry (process RSS, GPU memory, on the server host's
// clock) to the client's case windows: JoinServer and the telemetry_*.go files.
package join

import (
	"sort"

	"github.com/inferprobe/inferprobe/artifact"
)

// Reasons of the report's telemetry.vllm.spans.unjoined_by_reason (spans that join no
// request) and of quarantined requests.
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
	// equal digests are the same span re-delivered. When it is "" and the span came from a
	// record (SpanOf), the record's ContentDigest is taken, only if a second delivery of the
	// same ids needs the comparison.
	Digest string
	rec    *artifact.Span
	// Attributes are the span's attributes (gen_ai.latency.* in seconds); they become the
	// request's server evidence when it joins.
	Attributes map[string]any
}

// digest returns Digest, computing it from the span's record the first time.
func (s *Span) digest() string {
	if s.Digest == "" && s.rec != nil {
		s.Digest = s.rec.ContentDigest()
	}
	return s.Digest
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
	distinct := res.dedupe(spans)
	res.Total = len(distinct)
	matched, xs := res.match(indexRequests(reqs), distinct)
	res.settle(matched, xs)
	return res
}

// requestIndex finds the run's sent requests by x_request_id and by trace id.
type requestIndex struct {
	byX, byTrace map[string]*Request
}

// indexRequests indexes the requests that were sent (non-empty XRequestID); a later
// request with the same id or trace id replaces an earlier one.
func indexRequests(reqs []Request) requestIndex {
	idx := requestIndex{byX: make(map[string]*Request, len(reqs)), byTrace: make(map[string]*Request, len(reqs))}
	for i := range reqs {
		r := &reqs[i]
		if r.XRequestID == "" {
			continue
		}
		idx.byX[r.XRequestID] = r
		if r.TraceID != "" {
			idx.byTrace[r.TraceID] = r
		}
	}
	return idx
}

// delivery is one distinct span; conflicting is set when a re-delivery of its
// (trace_id, span_id) had different content.
type delivery struct {
	span        *Span
	conflicting bool
}

// dedupe counts the deliveries and returns the distinct spans in order of first delivery.
// Deliveries are keyed by (trace_id, span_id): an equal digest is a duplicate, another
// digest a conflicting duplicate. A span without both ids cannot be recognised as a
// re-delivery: it is its own span, keyed by its position.
func (res *Result) dedupe(spans []Span) []*delivery {
	type key struct {
		trace, span string
		pos         int
	}
	unique := map[key]*delivery{}
	var order []*delivery
	for i := range spans {
		s := &spans[i]
		res.Deliveries++
		k := key{trace: s.TraceID, span: s.SpanID}
		if s.TraceID == "" || s.SpanID == "" {
			k.pos = i + 1
		}
		if e, ok := unique[k]; ok {
			if e.span.digest() == s.digest() {
				res.Duplicates++
			} else {
				res.ConflictingDuplicates++
				e.conflicting = true
			}
			continue
		}
		e := &delivery{span: s}
		unique[k] = e
		order = append(order, e)
	}
	return order
}

// requestMatch is the spans that joined one measured request, and how the first was found.
type requestMatch struct {
	spans       []*Span
	conflicting bool
	by          string
}

// match joins each distinct span to a request (lookup) and counts the spans that join
// nothing by reason: not an llm_request span, no request found (no_request_id without a
// gen_ai.request.id, else request_not_in_run), or a warmup request. It returns the matches
// by x_request_id and those ids sorted.
func (res *Result) match(idx requestIndex, distinct []*delivery) (map[string]*requestMatch, []string) {
	matched := map[string]*requestMatch{}
	var xs []string
	for _, e := range distinct {
		s := e.span
		if s.Name != artifact.RequestSpanName {
			res.UnjoinedByReason[NotARequestSpan]++
			continue
		}
		r, by := idx.lookup(s)
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
			m = &requestMatch{by: by}
			matched[r.XRequestID] = m
			xs = append(xs, r.XRequestID)
		}
		m.spans = append(m.spans, s)
		m.conflicting = m.conflicting || e.conflicting
	}
	sort.Strings(xs)
	return matched, xs
}

// lookup finds the request of span s and says how: "request_id" when gen_ai.request.id
// names it, "both" when the trace id names the same request too, "trace_id" when only
// the trace id names one; nil when neither does. The request id is tried verbatim (an
// X-Request-Id recorded as sent), then in every form vLLM derives from one
// (CandidateRequestIDs: chatcmpl-/cmpl- prefixes, prompt indexes, parallel-sampling
// children, the internal uniquifying suffix); the first match wins.
func (idx requestIndex) lookup(s *Span) (*Request, string) {
	var byID *Request
	for _, c := range append([]string{s.GenAIRequestID}, CandidateRequestIDs(s.GenAIRequestID)...) {
		if r := idx.byX[c]; r != nil {
			byID = r
			break
		}
	}
	byTr := idx.byTrace[s.TraceID]
	switch {
	case byID != nil && byTr == byID:
		return byID, "both"
	case byID == nil && byTr != nil:
		return byTr, "trace_id"
	}
	return byID, "request_id"
}

// settle joins each matched request (xs: their ids, in order) whose one span came without
// conflict, and quarantines the others: conflicting_spans when a span had a conflicting
// re-delivery, multiple_spans when two distinct spans joined it.
func (res *Result) settle(matched map[string]*requestMatch, xs []string) {
	for _, x := range xs {
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
}
