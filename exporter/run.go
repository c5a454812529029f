package exporter

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/join"
)

// Probe run outcomes (inferprobe_probe_runs_total{outcome}): the RunJudgement's outcome.
const (
	RunCompleted   = artifact.RunCompleted
	RunInterrupted = artifact.RunInterrupted
	RunIncomplete  = artifact.RunIncomplete
	RunFailed      = artifact.RunFailed
)

// Run is the sink of one probe run (an artifact.Sink): it receives every record of the run —
// the same ones its artifact receives, and the transient ones — and publishes them under the
// probe's labels:
//
//   - artifact.RequestSent and *artifact.Request keep inferprobe_in_flight_requests (every
//     phase; a request recorded dropped was never sent);
//   - measured *artifact.Request records feed the request counters and the client latency
//     histograms, with each value the record's own definition gives (Request.ClientMetric);
//   - *artifact.Request and *artifact.Span records feed the run's live join (join.Live),
//     and once the run's judgement arrives, the server histograms get one sample per measured
//     request that join joined to exactly one span — a request quarantined as multiple_spans
//     or conflicting_spans adds none, as in the report;
//   - the *artifact.RunJudgement (the run's last record) publishes its outcome, its SLO
//     counters and bounds, span-join coverage and schedule.
//
// Write never fails: the exporter must not stop a run. A run whose probe is forgotten
// (ForgetProbe) while it is in progress is still published in full: every finished run is
// counted exactly once, whatever reloads happen around it.
type Run struct {
	e  *Exporter
	l  Labels
	st *probeState // guarded by e.mu, as are inFlight and finished

	inFlight int64
	finished bool

	live join.Live

	mu   sync.Mutex
	refs map[string]requestRef // measured requests by X-Request-Id (server samples' case and exemplar)
	ok   int                   // measured requests with status ok
}

type requestRef struct {
	caseID    string
	requestID string // the artifact's request_id (exemplar fallback)
	traceID   *string
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
	return &Run{e: e, l: l, st: st, refs: map[string]requestRef{}}
}

// Write publishes one record of the run (see Run); it always returns nil.
func (r *Run) Write(rec artifact.Record) error {
	switch v := rec.(type) {
	case *artifact.RequestSent:
		r.addInFlight(1)
	case *artifact.Request:
		if v.Status != artifact.RequestDropped {
			r.addInFlight(-1)
		}
		r.live.Add(v)
		if v.Phase == artifact.PhaseMeasured {
			r.request(v)
		}
	case *artifact.Span:
		r.live.Add(v) // every span: a re-delivery is recognised by its ids before its name

	case *artifact.RunJudgement:
		r.finish(v)
	}
	return nil
}

// Close ends the run; a run closed without its judgement counts as incomplete.
func (r *Run) Close() error {
	r.finish(&artifact.RunJudgement{Outcome: RunIncomplete, EndedAtNS: time.Now().UnixNano()})
	return nil
}

// addInFlight moves the run's and the probe's in-flight count by d (never below 0 for the
// run). Ignored once the run has finished.
func (r *Run) addInFlight(d int64) {
	r.e.mu.Lock()
	defer r.e.mu.Unlock()
	if r.finished || r.inFlight+d < 0 {
		return
	}
	r.inFlight += d
	r.st.inFlight += d
	r.e.inFlight.WithLabelValues(r.l.values()...).Set(float64(r.st.inFlight))
}

// clientKeys are the client histograms fed by every successful measured request.
var clientKeys = []string{KeyTTFT, KeyTTFTFromIntended, KeyE2E, KeyE2EFromIntended, KeyTPOT}

func (r *Run) request(rec *artifact.Request) {
	e, l := r.e, r.l
	caseID := labelValue(rec.CaseID)
	e.requests.WithLabelValues(l.values(caseID, labelValue(rec.Status))...).Inc()
	ex := exemplar(rec.TraceID, rec.XRequestID, &rec.RequestID)
	if rec.Status == artifact.RequestOK {
		for _, k := range clientKeys {
			if v := rec.ClientMetric(k); v.OK {
				e.observeKey(k, l, caseID, v.Ms/1000, ex)
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
		e.observeKey(KeyDispatchLag, l, caseID, *rec.DispatchLagMS/1000, ex)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if rec.Status == artifact.RequestOK {
		r.ok++
	}
	if rec.XRequestID != nil && *rec.XRequestID != "" {
		r.refs[*rec.XRequestID] = requestRef{caseID: caseID, requestID: rec.RequestID, traceID: rec.TraceID}
	}
}

// serverAttrs are the server histograms and the span attributes (seconds) they read.
var serverAttrs = []struct{ key, attr string }{
	{KeyServerQueue, artifact.AttrTimeInQueue}, {KeyServerPrefill, artifact.AttrTimeInModelPrefill},
	{KeyServerDecode, artifact.AttrTimeInModelDecode}, {KeyServerTTFT, artifact.AttrTimeToFirstToken},
	{KeyServerE2E, artifact.AttrE2E},
}

// observeServer publishes one sample per joined measured request from the run's join, in
// X-Request-Id order (a histogram's sum is then the same for the same run).
func (r *Run) observeServer() {
	res := r.live.Result()
	ids := slices.Sorted(maps.Keys(res.Joined))
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, x := range ids {
		attrs := res.Joined[x]
		ref, ok := r.refs[x]
		if !ok {
			continue
		}
		ex := exemplar(ref.traceID, &x, &ref.requestID)
		for _, m := range serverAttrs {
			if v, reason := artifact.SpanLatencySeconds(attrs, m.attr); reason == "" {
				r.e.observeKey(m.key, r.l, ref.caseID, v, ex)
			}
		}
	}
}

// finish publishes the end of the run (the judgement's outcome, end time and analysis). Only
// the first call of a run counts. The last run in progress of a forgotten probe then
// deletes the probe's gauges (ForgetProbe).
func (r *Run) finish(j *artifact.RunJudgement) {
	e, l := r.e, r.l
	e.mu.Lock()
	if r.finished {
		e.mu.Unlock()
		return
	}
	r.finished = true
	r.st.inFlight -= r.inFlight
	r.inFlight = 0
	r.st.runs--
	e.running.WithLabelValues(l.values()...).Set(float64(min(r.st.runs, 1)))
	e.inFlight.WithLabelValues(l.values()...).Set(float64(r.st.inFlight))
	e.mu.Unlock()

	r.observeServer()
	r.mu.Lock()
	ok := r.ok
	r.mu.Unlock()

	e.probeRuns.WithLabelValues(l.values(labelValue(j.Outcome))...).Inc()
	if j.Analysed {
		r.publishSLO(j)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	// The gauges are set under e.mu, so that a ForgetProbe between two of them cannot be
	// undone by the next one.
	ts := float64(j.EndedAtNS) / 1e9
	e.lastRun.WithLabelValues(l.values()...).Set(ts)
	if j.Outcome == RunCompleted && ok > 0 {
		e.lastSuccess.WithLabelValues(l.values()...).Set(ts)
	}
	if j.ScheduleMet != nil {
		v := 0.0
		if *j.ScheduleMet {
			v = 1
		}
		e.scheduleMet.WithLabelValues(l.values()...).Set(v)
	}
	if j.ClientLimited != nil {
		e.clientLimit.WithLabelValues(l.values()...).Set(boolGauge(*j.ClientLimited))
	}
	if j.Analysed {
		r.publishBounds(j)
	}
	if r.st.runs == 0 && e.probes[l] == r.st {
		delete(e.probes, l)
		if r.st.forget {
			e.deleteGauges(l)
		}
	}
}

// publishSLO adds the judged run's SLO outcomes to inferprobe_slo_requests_total.
func (r *Run) publishSLO(j *artifact.RunJudgement) {
	for _, c := range j.Cases {
		ev := c.SLO
		if ev == nil {
			continue
		}
		caseID, slo := labelValue(c.CaseID), labelValue(ev.Name)
		for _, o := range []struct {
			name string
			n    int
		}{{OutcomeMet, ev.Met}, {OutcomeMissed, ev.Missed}, {OutcomeUnknown, ev.Unknown}} {
			r.e.sloRequests.WithLabelValues(r.l.values(caseID, slo, o.name)...).Add(float64(max(o.n, 0)))
		}
	}
}

// publishBounds replaces the probe's attainment, goodput and coverage gauges with the judged
// run's. e.mu is held.
func (r *Run) publishBounds(j *artifact.RunJudgement) {
	e, l := r.e, r.l
	m := l.match()
	e.attainment.DeletePartialMatch(m)
	e.goodput.DeletePartialMatch(m)
	e.coverage.DeletePartialMatch(m)
	for _, c := range j.Cases {
		caseID := labelValue(c.CaseID)
		if c.SpanJoinCoverage != nil {
			e.coverage.WithLabelValues(l.values(caseID)...).Set(*c.SpanJoinCoverage)
		}
		ev := c.SLO
		if ev == nil {
			continue
		}
		slo := labelValue(ev.Name)
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

// SLO outcomes of inferprobe_slo_requests_total{outcome}.
const (
	OutcomeMet     = "met"
	OutcomeMissed  = "missed"
	OutcomeUnknown = "unknown"
)

// boolGauge is 1 for true, else 0.
func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
