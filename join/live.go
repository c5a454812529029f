package join

import (
	"strings"
	"sync"

	"github.com/inferprobe/inferprobe/artifact"
)

// SpanOf is the join's view of a recorded span: its ids, name, gen_ai.request.id and
// attributes (shared, not copied), and the record itself, whose content digest
// (artifact.Span.ContentDigest) is computed only when a re-delivery of the same ids must
// be compared with it. The record must not change afterwards.
func SpanOf(s *artifact.Span) Span {
	js := Span{Name: s.Name, Attributes: s.Attributes, rec: s}
	if s.TraceID != nil {
		js.TraceID = *s.TraceID
	}
	if s.SpanID != nil {
		js.SpanID = *s.SpanID
	}
	if id, ok := s.String(artifact.AttrRequestID); ok {
		js.GenAIRequestID = id
	}
	return js
}

// RequestOf is the join's view of a recorded request: its x_request_id, trace id and whether
// it is measured. ok is false for a request never sent (no x_request_id), which joins nothing.
func RequestOf(r *artifact.Request) (Request, bool) {
	if r.XRequestID == nil || *r.XRequestID == "" {
		return Request{}, false
	}
	jr := Request{XRequestID: *r.XRequestID, Measured: r.Phase == artifact.PhaseMeasured}
	if r.TraceID != nil {
		jr.TraceID = *r.TraceID
	}
	return jr, true
}

// Live is the join of one run as its records arrive — the live exporter's — with exactly the
// rules of Spans: Add takes the run's infer.request and infer.vllm_span records in any order
// (a span can arrive before its request is recorded), and Result applies Spans to everything
// added so far. A request with several distinct spans, or a re-delivered span whose content
// changed, is quarantined there, so a live consumer that publishes a server sample only from
// Result, once the run's spans have drained, publishes exactly the server evidence the
// run's report uses. Live is safe for concurrent use.
type Live struct {
	mu    sync.Mutex
	reqs  []Request        // the sent requests' join keys (not the records)
	spans []*artifact.Span // by reference: a span's attributes are its evidence
}

// Add adds a *artifact.Request (its join keys, when it was sent) or a *artifact.Span
// (kept by reference: it must not change afterwards); other records are ignored.
func (l *Live) Add(rec artifact.Record) {
	switch v := rec.(type) {
	case *artifact.Request:
		if jr, ok := RequestOf(v); ok {
			l.mu.Lock()
			l.reqs = append(l.reqs, jr)
			l.mu.Unlock()
		}
	case *artifact.Span:
		l.mu.Lock()
		l.spans = append(l.spans, v)
		l.mu.Unlock()
	}
}

// Result is Spans over the requests and spans added so far.
func (l *Live) Result() Result {
	l.mu.Lock()
	reqs, spans := l.reqs[:len(l.reqs):len(l.reqs)], l.spans
	l.mu.Unlock()
	js := make([]Span, len(spans))
	for i, s := range spans {
		js[i] = SpanOf(s)
	}
	return Spans(reqs, js)
}

// Router decides which of the runs accepting spans a delivered span belongs to (the daemon,
// whose one receiver serves every probe run): the run whose X-Request-Id prefix
// (artifact.XRequestIDPrefix) one of the span's candidate request ids carries
// (CandidateRequestIDs of gen_ai.request.id), else the run that sent a request under the
// span's trace id. A span no run claims is unrouted. Router is safe for concurrent use.
type Router struct {
	mu   sync.RWMutex
	runs map[string]*Route // by run id
}

// Route is one run registered with a Router. It is an artifact.Sink of the run's records:
// each artifact.RequestSent (and infer.request) teaches it a trace id of the run, so that
// spans without a usable gen_ai.request.id still find their run.
type Route struct {
	r      *Router
	runID  string
	prefix string
	traces sync.Map // trace id → struct{}
}

// Add registers a run; its spans route to it until Remove.
func (rt *Router) Add(runID string) *Route {
	r := &Route{r: rt, runID: runID, prefix: artifact.XRequestIDPrefix(runID)}
	rt.mu.Lock()
	if rt.runs == nil {
		rt.runs = map[string]*Route{}
	}
	rt.runs[runID] = r
	rt.mu.Unlock()
	return r
}

// RunID is the run the route is for.
func (r *Route) RunID() string { return r.runID }

// Remove unregisters the run: no span routes to it any more.
func (r *Route) Remove() {
	r.r.mu.Lock()
	if r.r.runs[r.runID] == r {
		delete(r.r.runs, r.runID)
	}
	r.r.mu.Unlock()
}

// Write learns the trace id of an artifact.RequestSent or *artifact.Request; it never fails.
func (r *Route) Write(rec artifact.Record) error {
	switch v := rec.(type) {
	case *artifact.RequestSent:
		if v.TraceID != "" {
			r.traces.Store(v.TraceID, struct{}{})
		}
	case *artifact.Request:
		if v.TraceID != nil && *v.TraceID != "" {
			r.traces.Store(*v.TraceID, struct{}{})
		}
	}
	return nil
}

// Close does nothing: Remove ends the routing.
func (r *Route) Close() error { return nil }

// Route returns the run id the span belongs to, or ok false.
func (rt *Router) Route(s *artifact.Span) (runID string, ok bool) {
	rt.mu.RLock()
	defer rt.mu.RUnlock()
	if id, ok := s.String(artifact.AttrRequestID); ok {
		for _, c := range CandidateRequestIDs(id) {
			for _, r := range rt.runs {
				if strings.HasPrefix(c, r.prefix) {
					return r.runID, true
				}
			}
		}
	}
	if s.TraceID != nil {
		for _, r := range rt.runs {
			if _, ok := r.traces.Load(*s.TraceID); ok {
				return r.runID, true
			}
		}
	}
	return "", false
}
