package exporter

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/join"
)

// expected accumulates what the exporter should publish for a set of records, computed from
// the record fields with the catalogue's definitions (not through analyze).
type expected struct {
	status map[[2]string]float64 // case, status → requests
	count  map[[2]string]uint64  // family, case → observations
	sum    map[[2]string]float64 // family, case → sum of seconds
	tokens map[[2]string]float64 // family, case → tokens
	cases  map[string]bool       // cases with any measured request
}

func newExpected() *expected {
	return &expected{status: map[[2]string]float64{}, count: map[[2]string]uint64{}, sum: map[[2]string]float64{},
		tokens: map[[2]string]float64{}, cases: map[string]bool{}}
}

func (x *expected) obs(family, c string, seconds float64) {
	x.count[[2]string{family, c}]++
	x.sum[[2]string{family, c}] += seconds
}

func (x *expected) add(r *artifact.Request) {
	if r.Phase != artifact.PhaseMeasured {
		return
	}
	c := r.CaseID
	x.cases[c] = true
	x.status[[2]string{c, r.Status}]++
	if r.DispatchLagMS != nil {
		x.obs("inferprobe_dispatch_lag_seconds", c, *r.DispatchLagMS/1000)
	}
	if r.Status != artifact.RequestOK {
		return
	}
	if r.TTFTMS != nil {
		x.obs("inferprobe_ttft_seconds", c, *r.TTFTMS/1000)
		if r.DispatchLagMS != nil {
			x.obs("inferprobe_ttft_from_intended_seconds", c, (*r.TTFTMS+*r.DispatchLagMS)/1000)
		}
	}
	if r.E2ELatencyMS != nil {
		x.obs("inferprobe_e2e_seconds", c, *r.E2ELatencyMS/1000)
	}
	if r.IntendedAtNS != nil && r.EndedAtNS != nil {
		x.obs("inferprobe_e2e_from_intended_seconds", c, float64(*r.EndedAtNS-*r.IntendedAtNS)/1e9)
	}
	if r.OutputTokenSource == "server_usage" && r.OutputTokens != nil && *r.OutputTokens >= 2 && r.TTFTMS != nil && r.E2ELatencyMS != nil {
		x.obs("inferprobe_tpot_seconds", c, (*r.E2ELatencyMS-*r.TTFTMS)/float64(*r.OutputTokens-1)/1000)
	}
	if r.PromptTokens != nil {
		x.tokens[[2]string{"inferprobe_prompt_tokens_total", c}] += float64(*r.PromptTokens)
	}
	if r.OutputTokens != nil {
		x.tokens[[2]string{"inferprobe_output_tokens_total", c}] += float64(*r.OutputTokens)
	}
}

var clientHistograms = []string{"inferprobe_ttft_seconds", "inferprobe_ttft_from_intended_seconds", "inferprobe_e2e_seconds",
	"inferprobe_e2e_from_intended_seconds", "inferprobe_tpot_seconds", "inferprobe_dispatch_lag_seconds"}

var serverHistograms = []string{"inferprobe_server_queue_seconds", "inferprobe_server_prefill_seconds",
	"inferprobe_server_decode_seconds", "inferprobe_server_ttft_seconds", "inferprobe_server_e2e_seconds"}

// serverFactor is each server histogram's multiple of a span's k (see span).
var serverFactor = map[string]float64{"inferprobe_server_queue_seconds": 1, "inferprobe_server_prefill_seconds": 2,
	"inferprobe_server_decode_seconds": 10, "inferprobe_server_ttft_seconds": 3, "inferprobe_server_e2e_seconds": 13}

// check compares the registry with x for probe l.
func (x *expected) check(t *testing.T, e *Exporter, l Labels) {
	t.Helper()
	fams := gather(t, e)
	n := 0
	for _, m := range fams["inferprobe_requests_total"].GetMetric() {
		lm := labelMap(m)
		if lm[LabelProbe] != l.Probe {
			continue
		}
		n++
		want := x.status[[2]string{lm[LabelCase], lm[LabelStatus]}]
		if got := m.GetCounter().GetValue(); got != want {
			t.Errorf("requests_total{case=%s,status=%s} = %v, want %v", lm[LabelCase], lm[LabelStatus], got, want)
		}
	}
	if n != len(x.status) {
		t.Errorf("%d requests_total series, want %d", n, len(x.status))
	}
	for _, name := range clientHistograms {
		got := map[string]bool{}
		for _, m := range fams[name].GetMetric() {
			lm := labelMap(m)
			if lm[LabelProbe] != l.Probe {
				continue
			}
			c := lm[LabelCase]
			got[c] = true
			h := m.GetHistogram()
			k := [2]string{name, c}
			if h.GetSampleCount() != x.count[k] || !approx(h.GetSampleSum(), x.sum[k]) {
				t.Errorf("%s{case=%s}: count %d sum %.9g, want %d %.9g", name, c, h.GetSampleCount(), h.GetSampleSum(), x.count[k], x.sum[k])
			}
			if x.count[k] == 0 {
				t.Errorf("%s{case=%s} exists without observations", name, c)
			}
		}
		for k, v := range x.count {
			if k[0] == name && v > 0 && !got[k[1]] {
				t.Errorf("%s{case=%s} missing (want %d observations)", name, k[1], v)
			}
		}
	}
	for _, name := range []string{"inferprobe_prompt_tokens_total", "inferprobe_output_tokens_total"} {
		for c := range x.cases {
			want, ok := x.tokens[[2]string{name, c}]
			m := metric(t, fams, name, caseLabels(l, c))
			switch {
			case !ok && m != nil:
				t.Errorf("%s{case=%s} = %v, want no series", name, c, m.GetCounter().GetValue())
			case ok && m == nil:
				t.Errorf("%s{case=%s} missing", name, c)
			case ok && m.GetCounter().GetValue() != want:
				t.Errorf("%s{case=%s} = %v, want %v", name, c, m.GetCounter().GetValue(), want)
			}
		}
	}
}

func TestRequestsPublished(t *testing.T) {
	e := New(Options{})
	r := e.StartRun(probeA)
	x := newExpected()
	var recs []*artifact.Request
	for i := range 12 {
		recs = append(recs, okRequest("caseA", artifact.PhaseMeasured, i))
	}
	for i := range 7 {
		recs = append(recs, okRequest("caseB", artifact.PhaseMeasured, i+3))
	}
	for i, st := range []string{artifact.RequestTimeout, artifact.RequestRejected, artifact.RequestUnreachable,
		artifact.RequestDeliveryUnknown, artifact.RequestError, artifact.RequestDropped, artifact.RequestCancelled,
		artifact.RequestDropped, artifact.RequestTimeout} {
		recs = append(recs, failedRequest("caseA", artifact.PhaseMeasured, 30+i, st))
	}
	recs = append(recs, failedRequest("caseB", artifact.PhaseMeasured, 50, artifact.RequestTimeout))
	// Warmup: counted nowhere, even with large values, even in a case of its own.
	for i := range 3 {
		w := okRequest("caseA", artifact.PhaseWarmup, 100+i)
		w.TTFTMS, w.E2ELatencyMS = p(9000.0), p(20000.0)
		recs = append(recs, w, okRequest("caseW", artifact.PhaseWarmup, i))
	}
	recs = append(recs, failedRequest("caseA", artifact.PhaseWarmup, 110, artifact.RequestDropped))
	for _, rec := range recs {
		x.add(rec)
		if err := r.Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	// Records the run does not publish are ignored.
	_ = r.Write(artifact.Session{Status: artifact.StatusRunning})
	_ = r.Write(&artifact.Session{Status: artifact.StatusRunning})
	_ = r.Write(nil)

	x.check(t, e, probeA)

	// Spot checks with values worked out by hand, so that the checker itself is checked.
	fams := gather(t, e)
	if v := value(t, fams, "inferprobe_requests_total", caseLabels(probeA, "caseA", "status", "ok")); v != 12 {
		t.Errorf("ok caseA %v", v)
	}
	if v := value(t, fams, "inferprobe_requests_total", caseLabels(probeA, "caseA", "status", "dropped")); v != 2 {
		t.Errorf("dropped caseA %v", v)
	}
	// caseB ok i = 3..9: TTFT 40+3i ms → sum = 7·40 + 3·42 = 406 ms.
	if h := histogram(t, fams, "inferprobe_ttft_seconds", probeA, "caseB"); h.GetSampleCount() != 7 || !approx(h.GetSampleSum(), 0.406) {
		t.Errorf("caseB ttft count %d sum %v, want 7 0.406", h.GetSampleCount(), h.GetSampleSum())
	}
	// caseB TPOT: i = 3,6,7,9 (i%4 != 0, i%5 != 0): (260+4i)/(9+i) ms.
	wantTPOT := 0.0
	for _, i := range []float64{3, 6, 7, 9} {
		wantTPOT += (260 + 4*i) / (9 + i) / 1000
	}
	if h := histogram(t, fams, "inferprobe_tpot_seconds", probeA, "caseB"); h.GetSampleCount() != 4 || !approx(h.GetSampleSum(), wantTPOT) {
		t.Errorf("caseB tpot count %d sum %v, want 4 %v", h.GetSampleCount(), h.GetSampleSum(), wantTPOT)
	}
	// Dispatch lag counts every sent measured request: caseA 12 ok + 7 sent failures.
	if h := histogram(t, fams, "inferprobe_dispatch_lag_seconds", probeA, "caseA"); h.GetSampleCount() != 19 {
		t.Errorf("caseA dispatch lag count %d, want 19", h.GetSampleCount())
	}
	// Output tokens: ok only. caseB i = 3..9, none with i%4 == 0 except 4 and 8 (1 token).
	if v := value(t, fams, "inferprobe_output_tokens_total", caseLabels(probeA, "caseB")); v != (13+15+16+17+19)+1+1 {
		t.Errorf("caseB output tokens %v", v)
	}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			if labelMap(m)[LabelCase] == "caseW" {
				t.Errorf("warmup-only case has %s{%s}", name, labelSet(m))
			}
		}
	}
}

// judged is the judgement of a completed run that was analysed, with no case verdicts.
func judged(end time.Time) *artifact.RunJudgement {
	return &artifact.RunJudgement{Outcome: RunCompleted, EndedAtNS: end.UnixNano(), Analysed: true}
}

func TestSpansJoined(t *testing.T) {
	e := New(Options{})
	r := e.StartRun(probeA)
	x := func(c string, i int) string { return xrid(c, artifact.PhaseMeasured, i) }
	for i := range 8 {
		_ = r.Write(okRequest("caseA", artifact.PhaseMeasured, i))
	}
	_ = r.Write(okRequest("caseB", artifact.PhaseMeasured, 0))

	// The gen_ai.request.id forms the join understands.
	forms := []string{"chatcmpl-" + x("caseA", 0), x("caseA", 1), "cmpl-" + x("caseA", 2) + "-0", "",
		"chatcmpl-" + x("caseA", 4) + "-1a2b3c4d", "0_chatcmpl-" + x("caseA", 5)}
	for i, id := range forms {
		if id != "" && !containsString(join.CandidateRequestIDs(id), x("caseA", i)) {
			t.Fatalf("CandidateRequestIDs(%q) lacks %q", id, x("caseA", i))
		}
	}
	want := map[string][]float64{} // case → span k values observed
	var delivered []*artifact.Span
	for i, id := range forms {
		// A trace id no request of the run sent, so that a span with an id joins by that id;
		// the one without an id carries its request's trace id and joins by it.
		trace := fmt.Sprintf("%032x", 0xabc00+i)
		if id == "" {
			trace = traceOf("caseA", artifact.PhaseMeasured, i)
		}
		s := withIDs(span(id, "", float64(i+1)), trace, fmt.Sprintf("%016x", 0xa0+i))
		_ = r.Write(s)
		delivered = append(delivered, s)
		want["caseA"] = append(want["caseA"], float64(i+1))
	}
	sp := withIDs(span("chatcmpl-"+x("caseB", 0), "", 6.5), traceOf("caseB", artifact.PhaseMeasured, 0), "00000000000000b0")
	_ = r.Write(sp)
	delivered = append(delivered, sp)
	want["caseB"] = append(want["caseB"], 6.5)
	// Re-deliveries (the same ids and content, whichever form joined them) are observed once.
	for _, s := range delivered {
		_ = r.Write(redelivered(s))
	}
	// A non-request span is ignored, and does not use up its request's span.
	other := span("chatcmpl-"+x("caseA", 6), "", 200)
	other.Name = "http.request"
	_ = r.Write(other)
	_ = r.Write(span("chatcmpl-"+x("caseA", 6), "", 7))
	want["caseA"] = append(want["caseA"], 7)
	// Spans of requests the run never recorded create no series.
	_ = r.Write(span("chatcmpl-inferprobe-other-caseZ_measured_0_1", "", 300))
	_ = r.Write(span("", strings.Repeat("f", 32), 300))
	_ = r.Write(span("", "", 300)) // nothing could join it

	// Server samples wait for the run's judgement.
	checkServer(t, e, probeA, map[string][]float64{})
	res := r.live.Result()
	if n := res.UnjoinedByReason[join.RequestNotInRun]; n != 1 {
		t.Errorf("%d spans unjoined as request_not_in_run, want 1", n)
	}
	if n := res.UnjoinedByReason[join.NoRequestID]; n != 2 {
		t.Errorf("%d spans unjoined as no_request_id, want 2", n)
	}
	if res.Duplicates != len(delivered) || len(res.Quarantined) != 0 {
		t.Errorf("%d duplicates, %d quarantined; want %d, 0", res.Duplicates, len(res.Quarantined), len(delivered))
	}
	_ = r.Write(judged(time.Unix(1_700_000_000, 0)))
	checkServer(t, e, probeA, want)
	// A second judgement, and Close, observe nothing more.
	_ = r.Write(judged(time.Unix(1_700_000_001, 0)))
	_ = r.Close()
	checkServer(t, e, probeA, want)

	// The exemplar of a span observation names the request and its trace.
	m := metric(t, gather(t, e), "inferprobe_server_ttft_seconds", caseLabels(probeA, "caseB"))
	var ex *dto.Exemplar
	for _, b := range m.GetHistogram().GetBucket() {
		if b.GetExemplar() != nil {
			ex = b.GetExemplar()
		}
	}
	if ex == nil {
		t.Fatal("no exemplar on server_ttft")
	}
	lm := map[string]string{}
	for _, lp := range ex.GetLabel() {
		lm[lp.GetName()] = lp.GetValue()
	}
	if lm["request_id"] != x("caseB", 0) || lm["trace_id"] != traceOf("caseB", artifact.PhaseMeasured, 0) || !approx(ex.GetValue(), 0.0195) {
		t.Errorf("exemplar %v value %v", lm, ex.GetValue())
	}
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// checkServer checks the server histograms of probe l against the span k values per case.
func checkServer(t *testing.T, e *Exporter, l Labels, want map[string][]float64) {
	t.Helper()
	fams := gather(t, e)
	for _, name := range serverHistograms {
		n := 0
		for _, m := range fams[name].GetMetric() {
			if labelMap(m)[LabelProbe] == l.Probe {
				n++
			}
		}
		if n != len(want) {
			t.Errorf("%s: %d series for probe %s, want %d (%v)", name, n, l.Probe, len(want), series(fams, name))
		}
		for c, ks := range want {
			h := histogram(t, fams, name, l, c)
			if h == nil {
				t.Errorf("%s{case=%s} missing", name, c)
				continue
			}
			sum := 0.0
			for _, k := range ks {
				sum += serverFactor[name] * k / 1000
			}
			if h.GetSampleCount() != uint64(len(ks)) || !approx(h.GetSampleSum(), sum) {
				t.Errorf("%s{case=%s}: count %d sum %v, want %d %v", name, c, h.GetSampleCount(), h.GetSampleSum(), len(ks), sum)
			}
		}
	}
}

func TestSpanBeforeRecord(t *testing.T) {
	e := New(Options{})
	r := e.StartRun(probeA)
	early := okRequest("caseC", artifact.PhaseMeasured, 1)
	byTrace := okRequest("caseC", artifact.PhaseMeasured, 2)
	es := withIDs(span("chatcmpl-"+*early.XRequestID, "", 4), strings.Repeat("e", 32), "00000000000000e1")
	_ = r.Write(es)
	_ = r.Write(span("", *byTrace.TraceID, 5))
	_ = r.Write(redelivered(es)) // a re-delivery, also early
	checkServer(t, e, probeA, map[string][]float64{})
	_ = r.Write(early)
	checkServer(t, e, probeA, map[string][]float64{})
	_ = r.Write(byTrace)
	// Both requests are recorded, but the run is not judged yet.
	checkServer(t, e, probeA, map[string][]float64{})
	_ = r.Write(judged(time.Unix(1_700_000_000, 0)))
	checkServer(t, e, probeA, map[string][]float64{"caseC": {4, 5}})
}

func TestWarmupSpansIgnored(t *testing.T) {
	e := New(Options{})
	r := e.StartRun(probeA)
	w1 := okRequest("caseA", artifact.PhaseWarmup, 0)
	w2 := okRequest("caseA", artifact.PhaseWarmup, 1)
	_ = r.Write(span("chatcmpl-"+*w1.XRequestID, "", 1)) // before its record
	_ = r.Write(span("", *w1.TraceID, 1))
	_ = r.Write(w1)
	_ = r.Write(w2)
	_ = r.Write(span("chatcmpl-"+*w2.XRequestID, "", 1)) // after its record
	// A measured request of another case, so that the judgement observably publishes spans.
	m := okRequest("caseM", artifact.PhaseMeasured, 0)
	_ = r.Write(m)
	_ = r.Write(span("chatcmpl-"+*m.XRequestID, "", 2))
	checkServer(t, e, probeA, map[string][]float64{})
	// The warmup spans are recognised as warmup (their requests are known), not left unjoined
	// for want of a request.
	res := r.live.Result()
	if n := res.UnjoinedByReason[join.WarmupRequest]; n != 3 {
		t.Errorf("%d spans unjoined as warmup, want 3 (%v)", n, res.UnjoinedByReason)
	}
	_ = r.Write(judged(time.Unix(1_700_000_000, 0)))
	checkServer(t, e, probeA, map[string][]float64{"caseM": {2}})
}

func TestSpanValues(t *testing.T) {
	e := New(Options{})
	r := e.StartRun(probeA)
	rec := okRequest("caseA", artifact.PhaseMeasured, 0)
	_ = r.Write(rec)
	s := span("chatcmpl-"+*rec.XRequestID, "", 1)
	s.Attributes[artifact.AttrTimeInQueue] = int64(2)                // an OTLP intValue
	s.Attributes[artifact.AttrTimeInModelPrefill] = "0.5"            // not a number
	s.Attributes[artifact.AttrTimeInModelDecode] = -0.1              // negative
	s.Attributes[artifact.AttrTimeToFirstToken] = artifact.NaNString // NaN
	s.Attributes[artifact.AttrE2E] = artifact.PosInfString           // +Inf
	_ = r.Write(s)
	if h := histogram(t, gather(t, e), "inferprobe_server_queue_seconds", probeA, "caseA"); h != nil {
		t.Errorf("queue observed before the judgement: %v", h)
	}
	_ = r.Write(judged(time.Unix(1_700_000_000, 0)))
	fams := gather(t, e)
	if h := histogram(t, fams, "inferprobe_server_queue_seconds", probeA, "caseA"); h.GetSampleCount() != 1 || h.GetSampleSum() != 2 {
		t.Errorf("queue from int64: %v", h)
	}
	for _, name := range []string{"inferprobe_server_prefill_seconds", "inferprobe_server_decode_seconds",
		"inferprobe_server_ttft_seconds", "inferprobe_server_e2e_seconds"} {
		if h := histogram(t, fams, name, probeA, "caseA"); h != nil && h.GetSampleCount() != 0 {
			t.Errorf("%s observed an unusable value: count %d sum %v", name, h.GetSampleCount(), h.GetSampleSum())
		}
	}
}

// TestQuarantinedSpansAddNoServerSample: a request with two distinct spans, or whose span is
// re-delivered with a changed content, is quarantined by the join and adds no server sample;
// the published samples are exactly those of join.Spans over the same records, as the
// report's are.
func TestQuarantinedSpansAddNoServerSample(t *testing.T) {
	e := New(Options{})
	r := e.StartRun(probeA)
	multi := okRequest("caseQ", artifact.PhaseMeasured, 0)
	conflict := okRequest("caseQ", artifact.PhaseMeasured, 1)
	single := okRequest("caseQ", artifact.PhaseMeasured, 2)
	reqs := []*artifact.Request{multi, conflict, single}

	// multi: two distinct spans (different span ids).
	m1 := withIDs(span("chatcmpl-"+*multi.XRequestID, "", 1), *multi.TraceID, "00000000000000a1")
	m2 := withIDs(span("chatcmpl-"+*multi.XRequestID, "", 2), *multi.TraceID, "00000000000000a2")
	// conflict: one span re-delivered with a changed attribute (same trace id and span id).
	c1 := withIDs(span("chatcmpl-"+*conflict.XRequestID, "", 3), *conflict.TraceID, "00000000000000b1")
	c2 := withIDs(span("chatcmpl-"+*conflict.XRequestID, "", 3), *conflict.TraceID, "00000000000000b1")
	c2.Attributes[artifact.AttrTimeInQueue] = 0.5
	// single: one span, delivered twice identically.
	s1 := withIDs(span("chatcmpl-"+*single.XRequestID, "", 4), *single.TraceID, "00000000000000c1")
	s2 := redelivered(s1)
	spans := []*artifact.Span{m1, c1, s1, m2, c2, s2}
	if c1.ContentDigest() == c2.ContentDigest() || s1.ContentDigest() != s2.ContentDigest() {
		t.Fatal("the conflicting re-delivery has the same digest, or the identical one another")
	}

	// Some spans before their requests, some after.
	for _, s := range spans[:3] {
		_ = r.Write(s)
	}
	for _, rec := range reqs {
		_ = r.Write(rec)
	}
	for _, s := range spans[3:] {
		_ = r.Write(s)
	}
	checkServer(t, e, probeA, map[string][]float64{})
	_ = r.Write(judged(time.Unix(1_700_000_000, 0)))
	checkServer(t, e, probeA, map[string][]float64{"caseQ": {4}})

	// The report's join over the same records.
	var jr []join.Request
	for _, rec := range reqs {
		if q, ok := join.RequestOf(rec); ok {
			jr = append(jr, q)
		}
	}
	var js []join.Span
	for _, s := range spans {
		js = append(js, join.SpanOf(s))
	}
	rep := join.Spans(jr, js)
	wantQ := map[string]string{*multi.XRequestID: join.MultipleSpans, *conflict.XRequestID: join.ConflictingSpans}
	if fmt.Sprint(rep.Quarantined) != fmt.Sprint(wantQ) {
		t.Errorf("report quarantined %v, want %v", rep.Quarantined, wantQ)
	}
	if len(rep.Joined) != 1 || rep.Joined[*single.XRequestID] == nil {
		t.Errorf("report joined %v, want only %s", rep.Joined, *single.XRequestID)
	}
	live := r.live.Result()
	if fmt.Sprint(live.Quarantined) != fmt.Sprint(rep.Quarantined) {
		t.Errorf("live quarantined %v, report %v", live.Quarantined, rep.Quarantined)
	}
	if len(live.Joined) != len(rep.Joined) || live.Joined[*single.XRequestID] == nil {
		t.Errorf("live joined %v, report %v", live.Joined, rep.Joined)
	}
	// One server sample per request the report joined.
	if h := histogram(t, gather(t, e), "inferprobe_server_e2e_seconds", probeA, "caseQ"); h.GetSampleCount() != uint64(len(rep.Joined)) {
		t.Errorf("%d server samples, report joined %d", h.GetSampleCount(), len(rep.Joined))
	}
}

func TestFinishReport(t *testing.T) {
	e := New(Options{})
	e.SetProbeConfig(probeA, 300, "cli", p(0.99))
	// caseA: ok i = 0..9 (TTFT 40+3i, e2e 300+7i), a timeout and a dropped request.
	var recsA []*artifact.Request
	for i := range 10 {
		recsA = append(recsA, okRequest("caseA", artifact.PhaseMeasured, i))
	}
	recsA = append(recsA, failedRequest("caseA", artifact.PhaseMeasured, 20, artifact.RequestTimeout),
		failedRequest("caseA", artifact.PhaseMeasured, 21, artifact.RequestDropped))
	// The judgement of ttft:60, e2e:350 over a 10 s interval: ttft ≤ 60 ⇔ i ≤ 6; e2e ≤ 350 ⇔
	// i ≤ 7: met i = 0..6; missed 3 ok + 2 failures; attainment 7/12 either way; goodput
	// 7 / 10 s.
	evA := artifact.SLOJudgement{Name: "cli", Met: 7, Missed: 5, Unknown: 0,
		AttainmentLower: p(7.0 / 12), AttainmentUpper: p(7.0 / 12), GoodputLowerRPS: p(0.7), GoodputUpperRPS: p(0.7)}
	evB := artifact.SLOJudgement{Name: "cli", Met: 3, Missed: 1, Unknown: 2,
		AttainmentLower: p(0.5), AttainmentUpper: p(5.0 / 6), GoodputLowerRPS: p(0.3), GoodputUpperRPS: p(0.5)}
	end := time.Unix(1_700_000_123, 500_000_000)
	// A dropped request was written: the schedule was not met.
	j := &artifact.RunJudgement{Outcome: RunCompleted, EndedAtNS: end.UnixNano(), Analysed: true, ScheduleMet: p(false),
		Cases: []artifact.CaseJudgement{
			{CaseID: "caseA", SpanJoinCoverage: p(0.75), SLO: &evA},
			{CaseID: "caseB", SpanJoinCoverage: p(1.0), SLO: &evB},
		}}
	for run := 1; run <= 2; run++ {
		r := e.StartRun(probeA)
		for _, rec := range recsA {
			_ = r.Write(rec)
		}
		_ = r.Write(j)
		fams := gather(t, e)
		k := float64(run)
		for _, c := range []struct {
			c, o string
			n    float64
		}{{"caseA", "met", 7}, {"caseA", "missed", 5}, {"caseA", "unknown", 0}, {"caseB", "met", 3}, {"caseB", "missed", 1}, {"caseB", "unknown", 2}} {
			if v := value(t, fams, "inferprobe_slo_requests_total", caseLabels(probeA, c.c, "slo", "cli", "outcome", c.o)); v != k*c.n {
				t.Errorf("run %d: slo_requests{%s,%s} = %v, want %v", run, c.c, c.o, v, k*c.n)
			}
		}
		for _, c := range []struct {
			name, c, bound string
			want           float64
		}{
			{"inferprobe_slo_attainment_ratio", "caseA", "lower", 7.0 / 12}, {"inferprobe_slo_attainment_ratio", "caseA", "upper", 7.0 / 12},
			{"inferprobe_goodput_requests_per_second", "caseA", "lower", 0.7}, {"inferprobe_goodput_requests_per_second", "caseA", "upper", 0.7},
			{"inferprobe_slo_attainment_ratio", "caseB", "lower", 0.5}, {"inferprobe_slo_attainment_ratio", "caseB", "upper", 5.0 / 6},
			{"inferprobe_goodput_requests_per_second", "caseB", "lower", 0.3}, {"inferprobe_goodput_requests_per_second", "caseB", "upper", 0.5},
		} {
			if v := value(t, fams, c.name, caseLabels(probeA, c.c, "slo", "cli", "bound", c.bound)); !approx(v, c.want) {
				t.Errorf("%s{%s,%s} = %v, want %v", c.name, c.c, c.bound, v, c.want)
			}
		}
		for c, want := range map[string]float64{"caseA": 0.75, "caseB": 1} {
			if v := value(t, fams, "inferprobe_span_join_coverage_ratio", caseLabels(probeA, c)); v != want {
				t.Errorf("coverage %s = %v", c, v)
			}
		}
		if v := value(t, fams, "inferprobe_probe_runs_total", probeLabels(probeA, "outcome", "completed")); v != k {
			t.Errorf("runs completed %v", v)
		}
		for _, name := range []string{"inferprobe_probe_last_run_timestamp_seconds", "inferprobe_probe_last_success_timestamp_seconds"} {
			if v := value(t, fams, name, probeLabels(probeA)); v != 1_700_000_123.5 {
				t.Errorf("%s = %v", name, v)
			}
		}
		if v := value(t, fams, "inferprobe_probe_running", probeLabels(probeA)); v != 0 {
			t.Errorf("running %v", v)
		}
		if v := value(t, fams, "inferprobe_probe_schedule_met", probeLabels(probeA)); v != 0 {
			t.Errorf("schedule_met %v with a dropped request", v)
		}
	}

	// A judgement without caseB (and caseA without span evidence) removes those gauges; the
	// caseB counters stay as they were.
	r := e.StartRun(probeA)
	evA2 := evA
	evA2.AttainmentUpper = nil
	// An interrupted run that met its (empty) schedule.
	_ = r.Write(&artifact.RunJudgement{Outcome: RunInterrupted, EndedAtNS: end.Add(time.Minute).UnixNano(), Analysed: true,
		ScheduleMet: p(true), Cases: []artifact.CaseJudgement{{CaseID: "caseA", SLO: &evA2}}})
	fams := gather(t, e)
	for _, name := range []string{"inferprobe_slo_attainment_ratio", "inferprobe_goodput_requests_per_second", "inferprobe_span_join_coverage_ratio"} {
		for _, m := range fams[name].GetMetric() {
			if labelMap(m)[LabelCase] == "caseB" {
				t.Errorf("%s{%s} survived a run without caseB", name, labelSet(m))
			}
		}
	}
	if metric(t, fams, "inferprobe_span_join_coverage_ratio", caseLabels(probeA, "caseA")) != nil {
		t.Error("caseA coverage kept from an older run")
	}
	if metric(t, fams, "inferprobe_slo_attainment_ratio", caseLabels(probeA, "caseA", "bound", "upper")) != nil {
		t.Error("caseA upper attainment kept from an older run")
	}
	if v := value(t, fams, "inferprobe_slo_requests_total", caseLabels(probeA, "caseB", "slo", "cli", "outcome", "unknown")); v != 4 {
		t.Errorf("caseB unknown after a run without it: %v", v)
	}
	if v := value(t, fams, "inferprobe_slo_requests_total", caseLabels(probeA, "caseA", "slo", "cli", "outcome", "met")); v != 21 {
		t.Errorf("caseA met after three runs: %v", v)
	}
	// An interrupted run moves last_run, not last_success.
	if v := value(t, fams, "inferprobe_probe_last_run_timestamp_seconds", probeLabels(probeA)); v != 1_700_000_183.5 {
		t.Errorf("last_run %v", v)
	}
	if v := value(t, fams, "inferprobe_probe_last_success_timestamp_seconds", probeLabels(probeA)); v != 1_700_000_123.5 {
		t.Errorf("last_success %v", v)
	}
	if v := value(t, fams, "inferprobe_probe_runs_total", probeLabels(probeA, "outcome", "interrupted")); v != 1 {
		t.Errorf("interrupted %v", v)
	}
	if v := value(t, fams, "inferprobe_probe_schedule_met", probeLabels(probeA)); v != 1 {
		t.Errorf("schedule_met %v", v)
	}
	// The objective is the configuration's, untouched by runs.
	if v := value(t, fams, "inferprobe_slo_objective_ratio", probeLabels(probeA, "slo", "cli")); v != 0.99 {
		t.Errorf("objective %v", v)
	}
	// A judgement that could not be analysed leaves the last analysed run's gauges.
	r = e.StartRun(probeA)
	_ = r.Write(ended(RunCompleted, end.Add(2*time.Minute)))
	fams = gather(t, e)
	if v := value(t, fams, "inferprobe_slo_attainment_ratio", caseLabels(probeA, "caseA", "slo", "cli", "bound", "lower")); !approx(v, 7.0/12) {
		t.Errorf("attainment after an unanalysed run %v", v)
	}
	if v := value(t, fams, "inferprobe_slo_requests_total", caseLabels(probeA, "caseA", "slo", "cli", "outcome", "met")); v != 21 {
		t.Errorf("caseA met after an unanalysed run: %v", v)
	}
}

func TestFinishOutcomes(t *testing.T) {
	e := New(Options{})
	e.SetProbeConfig(probeA, 60, "", nil)
	t0 := time.Unix(1_700_000_000, 0)

	// Completed, but no request succeeded: no last_success.
	r := e.StartRun(probeA)
	_ = r.Write(failedRequest("caseA", artifact.PhaseMeasured, 0, artifact.RequestError))
	_ = r.Write(okRequest("caseA", artifact.PhaseWarmup, 1)) // warmup success does not count
	_ = r.Write(ended(RunCompleted, t0))
	fams := gather(t, e)
	if m := metric(t, fams, "inferprobe_probe_last_success_timestamp_seconds", probeLabels(probeA)); m != nil {
		t.Errorf("last_success = %v without a successful request", m.GetGauge().GetValue())
	}
	if v := value(t, fams, "inferprobe_probe_last_run_timestamp_seconds", probeLabels(probeA)); v != 1_700_000_000 {
		t.Errorf("last_run %v", v)
	}

	// Incomplete with a success: no last_success either.
	r = e.StartRun(probeA)
	_ = r.Write(okRequest("caseA", artifact.PhaseMeasured, 2))
	_ = r.Write(ended(RunIncomplete, t0.Add(time.Second)))
	// Failed: could not start.
	r = e.StartRun(probeA)
	_ = r.Write(ended(RunFailed, t0.Add(2*time.Second)))
	_ = r.Write(ended(RunFailed, t0.Add(3*time.Second))) // a second judgement counts nothing
	_ = r.Close()                                        // nor does Close after one
	fams = gather(t, e)
	for o, want := range map[string]float64{"completed": 1, "incomplete": 1, "failed": 1, "interrupted": 0} {
		if v := value(t, fams, "inferprobe_probe_runs_total", probeLabels(probeA, "outcome", o)); v != want {
			t.Errorf("runs{%s} = %v, want %v", o, v, want)
		}
	}
	if m := metric(t, fams, "inferprobe_probe_last_success_timestamp_seconds", probeLabels(probeA)); m != nil {
		t.Errorf("last_success = %v", m.GetGauge().GetValue())
	}
	if v := value(t, fams, "inferprobe_probe_last_run_timestamp_seconds", probeLabels(probeA)); v != 1_700_000_002 {
		t.Errorf("last_run %v", v)
	}
	if v := value(t, fams, "inferprobe_probe_running", probeLabels(probeA)); v != 0 {
		t.Errorf("running %v", v)
	}
}

func TestCloseWithoutJudgement(t *testing.T) {
	e := New(Options{})
	e.SetProbeConfig(probeA, 60, "", nil)
	r := e.StartRun(probeA)
	done := okRequest("caseA", artifact.PhaseMeasured, 0)
	_ = r.Write(sent(done))
	_ = r.Write(sent(okRequest("caseA", artifact.PhaseMeasured, 1))) // never recorded
	_ = r.Write(done)
	_ = r.Write(span("chatcmpl-"+*done.XRequestID, "", 2))
	before := time.Now()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	fams := gather(t, e)
	for o, want := range map[string]float64{"completed": 0, "incomplete": 1, "failed": 0, "interrupted": 0} {
		if v := value(t, fams, "inferprobe_probe_runs_total", probeLabels(probeA, "outcome", o)); v != want {
			t.Errorf("runs{%s} = %v, want %v", o, v, want)
		}
	}
	for name, want := range map[string]float64{"inferprobe_probe_running": 0, "inferprobe_in_flight_requests": 0} {
		if v := value(t, fams, name, probeLabels(probeA)); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}
	if v := value(t, fams, "inferprobe_probe_last_run_timestamp_seconds", probeLabels(probeA)); v < float64(before.UnixNano())/1e9 || v > float64(after.UnixNano())/1e9 {
		t.Errorf("last_run %v, want between %v and %v", v, before, after)
	}
	if m := metric(t, fams, "inferprobe_probe_last_success_timestamp_seconds", probeLabels(probeA)); m != nil {
		t.Errorf("last_success = %v after an incomplete run", m.GetGauge().GetValue())
	}
	// The run's spans are published when Close ends it.
	checkServer(t, e, probeA, map[string][]float64{"caseA": {2}})
	_ = r.Close()
	_ = r.Write(judged(after))
	if v := value(t, gather(t, e), "inferprobe_probe_runs_total", probeLabels(probeA, "outcome", "incomplete")); v != 1 {
		t.Errorf("incomplete %v after a second Close", v)
	}
	if v := value(t, gather(t, e), "inferprobe_probe_runs_total", probeLabels(probeA, "outcome", "completed")); v != 0 {
		t.Errorf("completed %v after a judgement past Close", v)
	}
	checkServer(t, e, probeA, map[string][]float64{"caseA": {2}})
}

func TestScheduleMet(t *testing.T) {
	lagged := func(n int, lag float64, first int) []*artifact.Request {
		var out []*artifact.Request
		for i := range n {
			r := okRequest("caseA", artifact.PhaseMeasured, first+i)
			r.DispatchLagMS = p(lag)
			out = append(out, r)
		}
		return out
	}
	held := okRequest("caseA", artifact.PhaseMeasured, 500)
	held.HeldForSlot = p(true)
	// The judgement decides, whatever the records say.
	for _, c := range []struct {
		name string
		recs []*artifact.Request
	}{
		{"on time", lagged(50, 0.2, 0)},
		{"no requests", nil},
		{"a dropped request", append(lagged(50, 0.2, 0), failedRequest("caseA", artifact.PhaseMeasured, 99, artifact.RequestDropped))},
		{"a held request", append(lagged(50, 0.2, 0), held)},
		{"p99 above 1 ms", append(lagged(100, 0.5, 0), lagged(2, 5, 100)...)},
	} {
		for _, met := range []bool{true, false} {
			e := New(Options{})
			r := e.StartRun(probeA)
			for _, rec := range c.recs {
				_ = r.Write(rec)
			}
			_ = r.Write(&artifact.RunJudgement{Outcome: RunCompleted, EndedAtNS: 1, Analysed: true, ScheduleMet: p(met)})
			want := map[bool]float64{true: 1, false: 0}[met]
			if got := value(t, gather(t, e), "inferprobe_probe_schedule_met", probeLabels(probeA)); got != want {
				t.Errorf("%s, judged met=%v: schedule_met %v, want %v", c.name, met, got, want)
			}
		}
	}

	// Over runs of one probe: nil leaves the gauge as it was.
	e := New(Options{})
	for i, c := range []struct {
		met     *bool
		outcome string
		want    *float64 // nil: no series
	}{
		{nil, RunCompleted, nil},
		{p(true), RunCompleted, p(1.0)},
		{nil, RunFailed, p(1.0)},
		{p(false), RunInterrupted, p(0.0)},
		{nil, RunIncomplete, p(0.0)},
		{p(true), RunCompleted, p(1.0)},
	} {
		r := e.StartRun(probeA)
		_ = r.Write(&artifact.RunJudgement{Outcome: c.outcome, EndedAtNS: int64(i + 1), Analysed: c.met != nil, ScheduleMet: c.met})
		m := metric(t, gather(t, e), "inferprobe_probe_schedule_met", probeLabels(probeA))
		switch {
		case c.want == nil && m != nil:
			t.Errorf("run %d: schedule_met %v, want no series", i, m.GetGauge().GetValue())
		case c.want != nil && m == nil:
			t.Errorf("run %d: no schedule_met, want %v", i, *c.want)
		case c.want != nil && m.GetGauge().GetValue() != *c.want:
			t.Errorf("run %d: schedule_met %v, want %v", i, m.GetGauge().GetValue(), *c.want)
		}
	}
}

func TestInFlightRecords(t *testing.T) {
	e := New(Options{})
	get := func() float64 { return value(t, gather(t, e), "inferprobe_in_flight_requests", probeLabels(probeA)) }
	r := e.StartRun(probeA)
	w := okRequest("caseA", artifact.PhaseWarmup, 0)
	m1 := failedRequest("caseA", artifact.PhaseMeasured, 1, artifact.RequestTimeout)
	m2 := okRequest("caseA", artifact.PhaseMeasured, 2)
	for _, rec := range []*artifact.Request{w, m1, m2} {
		_ = r.Write(sent(rec))
	}
	if v := get(); v != 3 {
		t.Errorf("in flight %v after 3 sent, want 3", v)
	}
	// A dropped request was never sent: its record ends nothing.
	_ = r.Write(failedRequest("caseA", artifact.PhaseMeasured, 3, artifact.RequestDropped))
	_ = r.Write(failedRequest("caseA", artifact.PhaseWarmup, 4, artifact.RequestDropped))
	if v := get(); v != 3 {
		t.Errorf("in flight %v after dropped records, want 3", v)
	}
	// Every other record ends one, in any phase and with any status.
	_ = r.Write(w)
	if v := get(); v != 2 {
		t.Errorf("in flight %v after a warmup record, want 2", v)
	}
	_ = r.Write(m1)
	if v := get(); v != 1 {
		t.Errorf("in flight %v after a timeout record, want 1", v)
	}
	// Other records leave it.
	_ = r.Write(span("chatcmpl-"+*m2.XRequestID, "", 1))
	_ = r.Write(&artifact.Session{Status: artifact.StatusRunning})
	if v := get(); v != 1 {
		t.Errorf("in flight %v after a span and a session record, want 1", v)
	}
	_ = r.Write(m2)
	if v := get(); v != 0 {
		t.Errorf("in flight %v, want 0", v)
	}
	_ = r.Write(ended(RunCompleted, time.Unix(1, 0)))
}

func TestRunsOverlap(t *testing.T) {
	e := New(Options{})
	get := func(name string) float64 { return value(t, gather(t, e), name, probeLabels(probeA)) }
	n := 0
	// next is a new request of case c, and the RequestSent of its dispatch.
	next := func(c string) (*artifact.Request, *artifact.RequestSent) {
		n++
		rec := okRequest(c, artifact.PhaseMeasured, n)
		return rec, sent(rec)
	}
	r1 := e.StartRun(probeA)
	var r1recs []*artifact.Request
	for range 3 {
		rec, s := next("caseA")
		_ = r1.Write(s)
		r1recs = append(r1recs, rec)
	}
	if v := get("inferprobe_in_flight_requests"); v != 3 {
		t.Errorf("in flight %v", v)
	}
	r2 := e.StartRun(probeA) // r1 still draining
	var r2recs []*artifact.Request
	for range 2 {
		rec, s := next("caseA")
		_ = r2.Write(s)
		r2recs = append(r2recs, rec)
	}
	if v := get("inferprobe_in_flight_requests"); v != 5 {
		t.Errorf("in flight over two runs %v, want 5", v)
	}
	_ = r1.Write(r1recs[0])
	_ = r1.Write(ended(RunCompleted, time.Unix(1, 0))) // 2 of r1's requests abandoned
	if v := get("inferprobe_probe_running"); v != 1 {
		t.Errorf("running %v while r2 runs", v)
	}
	if v := get("inferprobe_in_flight_requests"); v != 2 {
		t.Errorf("in flight after r1 finished %v, want 2", v)
	}
	_ = r1.Write(r1recs[1]) // late: ignored
	_, late := next("caseA")
	_ = r1.Write(late) // late: ignored
	if v := get("inferprobe_in_flight_requests"); v != 2 {
		t.Errorf("in flight after late records %v, want 2", v)
	}
	_ = r2.Write(r2recs[0])
	_ = r2.Write(r2recs[1])
	extra, _ := next("caseA")
	_ = r2.Write(extra) // one more ended than sent: no negative count
	if v := get("inferprobe_in_flight_requests"); v != 0 {
		t.Errorf("in flight %v, want 0", v)
	}
	_, s := next("caseA")
	_ = r2.Write(s)
	_ = r2.Write(ended(RunCompleted, time.Unix(2, 0)))
	if get("inferprobe_probe_running") != 0 || get("inferprobe_in_flight_requests") != 0 {
		t.Error("running or in flight not back to 0")
	}
	// A probe forgotten mid-run (a reload) and configured again: the old run is still
	// published in full and counted once, beside the new run.
	r3 := e.StartRun(probeA)
	old1, s1 := next("caseOld")
	_, s2 := next("caseOld")
	_ = r3.Write(s1)
	_ = r3.Write(s2)
	e.ForgetProbe(probeA)
	if get("inferprobe_probe_running") != 1 || get("inferprobe_in_flight_requests") != 2 {
		t.Error("ForgetProbe deleted the gauges of a run in progress")
	}
	e.SetProbeConfig(probeA, 60, "", nil)
	r4 := e.StartRun(probeA)
	new1, s4 := next("caseA")
	_ = r4.Write(s4)
	_ = r3.Write(old1)
	_ = r3.Write(span("chatcmpl-"+*old1.XRequestID, "", 1))
	_ = r3.Write(&artifact.RunJudgement{Outcome: RunInterrupted, EndedAtNS: time.Unix(3, 0).UnixNano(), Analysed: true, ScheduleMet: p(true),
		Cases: []artifact.CaseJudgement{{CaseID: "caseOld", SpanJoinCoverage: p(1.0), SLO: &artifact.SLOJudgement{Name: "x", Met: 1}}}})
	_ = r3.Close()
	if get("inferprobe_probe_running") != 1 || get("inferprobe_in_flight_requests") != 1 {
		t.Errorf("after the old run: running %v, in flight %v, want the new run's 1 and 1",
			get("inferprobe_probe_running"), get("inferprobe_in_flight_requests"))
	}
	fams := gather(t, e)
	if v := value(t, fams, "inferprobe_probe_runs_total", probeLabels(probeA, "outcome", "interrupted")); v != 1 {
		t.Errorf("the old run counted %v times as interrupted, want once", v)
	}
	if v := value(t, fams, "inferprobe_slo_requests_total", caseLabels(probeA, "caseOld", "slo", "x", "outcome", "met")); v != 1 {
		t.Errorf("the old run's met requests %v, want 1", v)
	}
	_ = r4.Write(new1)
	_ = r4.Write(ended(RunCompleted, time.Unix(4, 0)))
	if get("inferprobe_probe_running") != 0 || get("inferprobe_in_flight_requests") != 0 {
		t.Error("running or in flight not back to 0 after the new run")
	}
	if v := value(t, gather(t, e), "inferprobe_probe_runs_total", probeLabels(probeA, "outcome", "completed")); v != 3 {
		t.Errorf("runs completed %v, want 3 (r1, r2, r4)", v)
	}
}

func TestConcurrentWrites(t *testing.T) {
	e := New(Options{})
	r := e.StartRun(probeA)
	const workers, per = 8, 150
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var gw sync.WaitGroup
	gw.Add(1)
	go func() { // scrapes while writing
		defer gw.Done()
		for {
			select {
			case <-stop:
				return
			default:
				if _, err := e.Registry().Gather(); err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := fmt.Sprintf("case%d", w%3)
			for i := range per {
				idx := w*per + i
				rec := okRequest(c, artifact.PhaseMeasured, idx)
				s := withIDs(span("chatcmpl-"+*rec.XRequestID, "", 1), *rec.TraceID, fmt.Sprintf("%016x", idx+1))
				_ = r.Write(sent(rec))
				if i%2 == 0 { // span first, then record
					_ = r.Write(s)
					_ = r.Write(rec)
				} else {
					_ = r.Write(rec)
					_ = r.Write(s)
				}
				_ = r.Write(redelivered(s)) // a re-delivery
			}
		}()
	}
	wg.Wait()
	if v := value(t, gather(t, e), "inferprobe_in_flight_requests", probeLabels(probeA)); v != 0 {
		t.Errorf("in flight %v", v)
	}
	for c := range 3 {
		if h := histogram(t, gather(t, e), "inferprobe_server_queue_seconds", probeA, fmt.Sprintf("case%d", c)); h != nil {
			t.Errorf("case%d: server samples before the judgement: %d", c, h.GetSampleCount())
		}
	}
	_ = r.Write(judged(time.Unix(1, 0)))
	close(stop)
	gw.Wait()
	fams := gather(t, e)
	var total float64
	var spans uint64
	for c := range 3 {
		total += value(t, fams, "inferprobe_requests_total", caseLabels(probeA, fmt.Sprintf("case%d", c), "status", "ok"))
		h := histogram(t, fams, "inferprobe_server_queue_seconds", probeA, fmt.Sprintf("case%d", c))
		spans += h.GetSampleCount()
		if !approx(h.GetSampleSum(), float64(h.GetSampleCount())/1000) {
			t.Errorf("case%d: sum %v for %d samples of 1 ms", c, h.GetSampleSum(), h.GetSampleCount())
		}
	}
	if total != workers*per || spans != workers*per {
		t.Errorf("requests %v, spans %d, want %d each", total, spans, workers*per)
	}
}

func TestUnusableLabelValues(t *testing.T) {
	e := New(Options{})
	r := e.StartRun(probeA)
	rec := okRequest("case\xff", artifact.PhaseMeasured, 0)
	rec.Status = "weird\xfe"
	_ = r.Write(rec) // must not panic
	_ = r.Write(span("chatcmpl-"+*rec.XRequestID, "", 1))
	_ = r.Write(&artifact.RunJudgement{Outcome: RunCompleted, EndedAtNS: time.Unix(1, 0).UnixNano(), Analysed: true, ScheduleMet: p(true),
		Cases: []artifact.CaseJudgement{
			{CaseID: "c\xff", SLO: &artifact.SLOJudgement{Name: "s\xff", Met: 1, Missed: -1}},
			{CaseID: "nil"},
		}})
	fams := gather(t, e)
	if v := value(t, fams, "inferprobe_requests_total", caseLabels(probeA, "case\uFFFD", "status", "weird\uFFFD")); v != 1 {
		t.Errorf("requests %v", v)
	}
	if h := histogram(t, fams, "inferprobe_server_queue_seconds", probeA, "case\uFFFD"); h.GetSampleCount() != 1 {
		t.Errorf("span not joined: %v", h)
	}
	if v := value(t, fams, "inferprobe_slo_requests_total", caseLabels(probeA, "c\uFFFD", "slo", "s\uFFFD", "outcome", "missed")); v != 0 {
		t.Errorf("negative count gave %v", v)
	}
	if v := value(t, fams, "inferprobe_slo_requests_total", caseLabels(probeA, "c\uFFFD", "slo", "s\uFFFD", "outcome", "met")); v != 1 {
		t.Errorf("met %v", v)
	}
	if v := value(t, fams, "inferprobe_probe_schedule_met", probeLabels(probeA)); v != 1 {
		t.Errorf("schedule_met %v", v)
	}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			if labelMap(m)[LabelCase] == "nil" {
				t.Errorf("a case without coverage or SLO published %s{%s}", name, labelSet(m))
			}
		}
	}
}
