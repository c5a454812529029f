package exporter

import (
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/receiver"
	"github.com/inferprobe/inferprobe/receiver/spanattr"
)

// Probe run outcomes (inferprobe_probe_runs_total{outcome}): the artifact's final session
// status, or RunFailed for a run that could not start (its artifact could not be opened).
const (
	RunCompleted   = artifact.StatusCompleted
	RunInterrupted = artifact.StatusInterrupted
	RunIncomplete  = artifact.StatusIncomplete
	RunFailed      = "failed"
)

// MaxPendingSpans bounds the spans a run keeps while waiting for the request record they
// belong to (a span can arrive before the client has recorded its request).
const MaxPendingSpans = 4096

// scheduleLagBoundMs is the dispatch-lag bound of a run that met its schedule (p99, ms).
const scheduleLagBoundMs = 1.0

// Run is the sink of one probe run: it receives the records written to the run's artifact
// (Write, from several goroutines) and publishes them under the probe's labels. Spans join
// their request by X-Request-Id (any form vLLM gives gen_ai.request.id) or, failing that, by
// trace id; the first span of a request is observed, later ones are ignored. Spans of
// warmup requests are recognised and ignored, like the requests themselves.
type Run struct {
	e  *Exporter
	l  Labels
	st *probeState // guarded by e.mu, as are inFlight and finished

	inFlight int64
	finished bool

	mu      sync.Mutex
	byXRID  map[string]requestRef // X-Request-Id → request
	byTrace map[string]string     // trace id → X-Request-Id
	spanned map[string]bool       // X-Request-Ids already given a span
	// pending holds the request spans that arrived before their request record, indexed by
	// every key that could join them ("x:" + candidate X-Request-Id, "t:" + trace id), so
	// that a new record looks up only its own spans; npending counts them.
	pending  map[string][]*pendingSpan
	npending int
	lagsMs   []float64 // dispatch lags of measured open-loop requests
	dropped  int
	held     int
	ok       int
}

type pendingSpan struct {
	rec  receiver.SpanRecord
	keys []string
}

type requestRef struct {
	caseID    string
	requestID string // the artifact's request_id (exemplar fallback)
	traceID   *string
	warmup    bool // a warmup request: its span is consumed, never observed
}

// StartRun marks the probe running and returns the sink of its new run. Runs of one probe
// may overlap (one draining while the next runs): inferprobe_probe_running stays 1 until
// every started run has finished, and inferprobe_in_flight_requests sums their requests.
func (e *Exporter) StartRun(l Labels) *Run {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.probes[l]
	if st == nil {
		st = &probeState{}
		e.probes[l] = st
	}
	st.runs++
	e.running.WithLabelValues(l.values()...).Set(1)
	e.inFlight.WithLabelValues(l.values()...).Set(float64(st.inFlight))
	return &Run{e: e, l: l, st: st, byXRID: map[string]requestRef{}, byTrace: map[string]string{}, spanned: map[string]bool{}, pending: map[string][]*pendingSpan{}}
}

// Sent notes a dispatched request (inferprobe_in_flight_requests). Ignored after Finish.
func (r *Run) Sent() {
	r.e.mu.Lock()
	defer r.e.mu.Unlock()
	if r.finished || r.st.forgotten.Load() {
		return
	}
	r.inFlight++
	r.st.inFlight++
	r.e.inFlight.WithLabelValues(r.l.values()...).Set(float64(r.st.inFlight))
}

// Ended notes a request that ended (after Sent). Ignored after Finish, which counts the
// run's outstanding requests as ended.
func (r *Run) Ended() {
	r.e.mu.Lock()
	defer r.e.mu.Unlock()
	if r.finished || r.inFlight == 0 || r.st.forgotten.Load() {
		return
	}
	r.inFlight--
	r.st.inFlight--
	r.e.inFlight.WithLabelValues(r.l.values()...).Set(float64(r.st.inFlight))
}

// Write publishes one record of the run: *artifact.Request (measured phase only) and
// receiver.SpanRecord / *receiver.SpanRecord (request spans). Other records are ignored. It
// never fails: the exporter must not stop a run. After ForgetProbe of the run's probe it
// publishes nothing.
func (r *Run) Write(rec any) error {
	if r.st.forgotten.Load() {
		return nil
	}
	switch v := rec.(type) {
	case *artifact.Request:
		r.request(v)
	case receiver.SpanRecord:
		r.span(&v)
	case *receiver.SpanRecord:
		r.span(v)
	}
	return nil
}

func (r *Run) request(rec *artifact.Request) {
	if rec.Phase != artifact.PhaseMeasured {
		if rec.XRequestID != nil && *rec.XRequestID != "" {
			r.mu.Lock()
			r.byXRID[*rec.XRequestID] = requestRef{warmup: true}
			if rec.TraceID != nil && *rec.TraceID != "" {
				r.byTrace[*rec.TraceID] = *rec.XRequestID
			}
			r.rejoinLocked(*rec.XRequestID, rec.TraceID)
			r.mu.Unlock()
		}
		return
	}
	e, l := r.e, r.l
	caseID := labelValue(rec.CaseID)
	e.requests.WithLabelValues(l.values(caseID, labelValue(rec.Status))...).Inc()
	ex := exemplar(rec.TraceID, rec.XRequestID, &rec.RequestID)
	ar := analyze.RequestFromRecord(rec)
	if rec.Status == artifact.RequestOK {
		for _, k := range []string{KeyTTFT, KeyTTFTFromIntended, KeyE2E, KeyE2EFromIntended, KeyTPOT} {
			if ms, ok := ar.MetricMs(k); ok {
				observe(e.hist[k].WithLabelValues(l.values(caseID)...), ms/1000, ex)
			}
		}
		if rec.PromptTokens != nil && *rec.PromptTokens >= 0 {
			e.promptTokens.WithLabelValues(l.values(caseID)...).Add(float64(*rec.PromptTokens))
		}
		if rec.OutputTokens != nil && *rec.OutputTokens >= 0 {
			e.outputTokens.WithLabelValues(l.values(caseID)...).Add(float64(*rec.OutputTokens))
		}
	}
	if rec.DispatchLagMS != nil {
		observe(e.hist[KeyDispatchLag].WithLabelValues(l.values(caseID)...), *rec.DispatchLagMS/1000, ex)
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	if rec.Status == artifact.RequestOK {
		r.ok++
	}
	if rec.Status == artifact.RequestDropped {
		r.dropped++
	}
	if rec.HeldForSlot != nil && *rec.HeldForSlot {
		r.held++
	}
	if rec.IntendedAtNS != nil && rec.DispatchLagMS != nil && rec.MaxInFlight != nil &&
		!math.IsNaN(*rec.DispatchLagMS) && !math.IsInf(*rec.DispatchLagMS, 0) {
		r.lagsMs = append(r.lagsMs, *rec.DispatchLagMS)
	}
	if rec.XRequestID == nil || *rec.XRequestID == "" {
		return
	}
	x := *rec.XRequestID
	r.byXRID[x] = requestRef{caseID: caseID, requestID: rec.RequestID, traceID: rec.TraceID}
	if rec.TraceID != nil && *rec.TraceID != "" {
		r.byTrace[*rec.TraceID] = x
	}
	r.rejoinLocked(x, rec.TraceID)
}

// rejoinLocked joins the pending spans that the newly recorded request (X-Request-Id x,
// trace id traceID) could join.
func (r *Run) rejoinLocked(x string, traceID *string) {
	if r.npending == 0 {
		return
	}
	// A copy: unpendLocked edits the lists in place.
	cands := slices.Clone(r.pending["x:"+x])
	if traceID != nil && *traceID != "" {
		cands = append(cands, r.pending["t:"+*traceID]...)
	}
	for _, ps := range cands {
		if ps.keys != nil && r.joinLocked(&ps.rec) {
			r.unpendLocked(ps)
		}
	}
}

// unpendLocked removes a pending span from every key it is indexed by.
func (r *Run) unpendLocked(ps *pendingSpan) {
	for _, k := range ps.keys {
		list := slices.DeleteFunc(r.pending[k], func(p *pendingSpan) bool { return p == ps })
		if len(list) == 0 {
			delete(r.pending, k)
		} else {
			r.pending[k] = list
		}
	}
	ps.keys = nil
	r.npending--
}

// pendingKeys returns the keys a span could join its request by (see Run.pending).
func pendingKeys(s *receiver.SpanRecord) []string {
	var keys []string
	if id, ok := s.String(spanattr.AttrRequestID); ok {
		for _, c := range receiver.CandidateRequestIDs(id) {
			keys = append(keys, "x:"+c)
		}
	}
	if s.TraceID != nil && *s.TraceID != "" {
		keys = append(keys, "t:"+*s.TraceID)
	}
	return keys
}

func (r *Run) span(s *receiver.SpanRecord) {
	if !s.IsRequestSpan() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.joinLocked(s) || r.npending >= MaxPendingSpans {
		return
	}
	keys := pendingKeys(s)
	if len(keys) == 0 {
		return // nothing could ever join it
	}
	ps := &pendingSpan{rec: *s, keys: keys}
	for _, k := range keys {
		r.pending[k] = append(r.pending[k], ps)
	}
	r.npending++
}

// joinLocked observes s for its request when that is known (true), or reports false.
func (r *Run) joinLocked(s *receiver.SpanRecord) bool {
	x := ""
	if id, ok := s.String(spanattr.AttrRequestID); ok {
		for _, c := range receiver.CandidateRequestIDs(id) {
			if _, ok := r.byXRID[c]; ok {
				x = c
				break
			}
		}
	}
	if x == "" && s.TraceID != nil {
		x = r.byTrace[*s.TraceID]
	}
	ref, ok := r.byXRID[x]
	if !ok {
		return false
	}
	if ref.warmup || r.spanned[x] {
		return true
	}
	r.spanned[x] = true
	ex := exemplar(ref.traceID, &x, &ref.requestID)
	for _, m := range []struct{ key, attr string }{
		{KeyServerQueue, spanattr.AttrTimeInQueue}, {KeyServerPrefill, spanattr.AttrTimeInModelPrefill},
		{KeyServerDecode, spanattr.AttrTimeInModelDecode}, {KeyServerTTFT, spanattr.AttrTimeToFirstToken},
		{KeyServerE2E, spanattr.AttrE2E},
	} {
		if v, ok := s.Float(m.attr); ok && v >= 0 {
			observe(r.e.hist[m.key].WithLabelValues(r.l.values(ref.caseID)...), v, ex)
		}
	}
	return true
}

// Finish publishes the end of the run: its outcome (Run* constants), when it ended, and its
// analysis report (nil when the artifact could not be analysed). From the report, per case:
// inferprobe_slo_requests_total advances by the evaluation's met/missed/unknown counts, and
// the attainment, goodput and span-join coverage gauges are replaced by this run's values
// (series of cases the run did not have are removed). Only the first call of a run counts,
// and none after ForgetProbe of the run's probe.
func (r *Run) Finish(outcome string, end time.Time, rep *analyze.Report) {
	e, l := r.e, r.l
	e.mu.Lock()
	if r.finished || r.st.forgotten.Load() {
		r.finished = true
		e.mu.Unlock()
		return
	}
	r.finished = true
	r.st.inFlight -= r.inFlight
	r.inFlight = 0
	r.st.runs--
	running := 0.0
	if r.st.runs > 0 {
		running = 1
	} else {
		delete(e.probes, l)
	}
	e.running.WithLabelValues(l.values()...).Set(running)
	e.inFlight.WithLabelValues(l.values()...).Set(float64(r.st.inFlight))
	e.mu.Unlock()

	r.mu.Lock()
	ok, dropped, held := r.ok, r.dropped, r.held
	lags := r.lagsMs
	r.lagsMs = nil
	clear(r.pending)
	r.npending = 0
	r.mu.Unlock()

	e.probeRuns.WithLabelValues(l.values(outcome)...).Inc()
	ts := float64(end.UnixNano()) / 1e9
	e.lastRun.WithLabelValues(l.values()...).Set(ts)
	if outcome == RunCompleted && ok > 0 {
		e.lastSuccess.WithLabelValues(l.values()...).Set(ts)
	}
	if outcome != RunFailed {
		met := dropped == 0 && held == 0
		if len(lags) > 0 {
			sort.Float64s(lags)
			if p99, ok := analyze.Quantile(lags, 0.99); ok && p99 > scheduleLagBoundMs {
				met = false
			}
		}
		v := 0.0
		if met {
			v = 1
		}
		e.scheduleMet.WithLabelValues(l.values()...).Set(v)
	}
	if rep == nil {
		return
	}
	m := l.match()
	e.attainment.DeletePartialMatch(m)
	e.goodput.DeletePartialMatch(m)
	e.coverage.DeletePartialMatch(m)
	for id, c := range rep.Cases {
		if c == nil {
			continue
		}
		caseID := labelValue(id)
		if cov := c.Population.ServerEvidenceCoverage; cov != nil {
			e.coverage.WithLabelValues(l.values(caseID)...).Set(*cov)
		}
		ev := c.SLO
		if ev == nil {
			continue
		}
		slo := labelValue(ev.SLOName)
		for _, o := range []struct {
			name string
			n    int
		}{{analyze.OutcomeMet, ev.Met}, {analyze.OutcomeMissed, ev.Missed}, {analyze.OutcomeUnknown, ev.Unknown}} {
			e.sloRequests.WithLabelValues(l.values(caseID, slo, o.name)...).Add(float64(max(o.n, 0)))
		}
		set := func(g *prometheus.GaugeVec, bound string, v *float64) {
			if v != nil {
				g.WithLabelValues(l.values(caseID, slo, bound)...).Set(*v)
			}
		}
		set(e.attainment, "lower", ev.AttainmentLower)
		set(e.attainment, "upper", ev.AttainmentUpper)
		set(e.goodput, "lower", ev.GoodputLowerRPS)
		set(e.goodput, "upper", ev.GoodputUpperRPS)
	}
}
