package exporter

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/receiver"
	"github.com/inferprobe/inferprobe/receiver/spanattr"
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
	_ = r.Write("not a record")
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
		if id != "" && !containsString(receiver.CandidateRequestIDs(id), x("caseA", i)) {
			t.Fatalf("CandidateRequestIDs(%q) lacks %q", id, x("caseA", i))
		}
	}
	want := map[string][]float64{} // case → span k values observed
	for i, id := range forms {
		trace := ""
		if id == "" { // trace id only
			trace = traceOf("caseA", artifact.PhaseMeasured, i)
		}
		_ = r.Write(span(id, trace, float64(i+1)))
		want["caseA"] = append(want["caseA"], float64(i+1))
	}
	// A pointer works as well as a value.
	sp := span("chatcmpl-"+x("caseB", 0), "", 6.5)
	_ = r.Write(&sp)
	want["caseB"] = append(want["caseB"], 6.5)
	// Duplicates (any form, or by trace) are observed once.
	_ = r.Write(span(x("caseA", 0), "", 100))
	_ = r.Write(span("", traceOf("caseA", artifact.PhaseMeasured, 1), 100))
	_ = r.Write(span("cmpl-"+x("caseB", 0)+"-0", "", 100))
	// A non-request span is ignored, and does not use up its request's span.
	other := span("chatcmpl-"+x("caseA", 6), "", 200)
	other.Name = "http.request"
	_ = r.Write(other)
	_ = r.Write(span("chatcmpl-"+x("caseA", 6), "", 7))
	want["caseA"] = append(want["caseA"], 7)
	// Spans of requests the run never recorded create no series and stay pending (bounded).
	_ = r.Write(span("chatcmpl-inferprobe-other-caseZ_measured_0_1", "", 300))
	_ = r.Write(span("", strings.Repeat("f", 32), 300))
	_ = r.Write(span("", "", 300)) // nothing could join it: not even kept

	checkServer(t, e, probeA, want)
	r.mu.Lock()
	if r.npending != 2 {
		t.Errorf("%d pending spans, want 2", r.npending)
	}
	r.mu.Unlock()

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
	_ = r.Write(span("chatcmpl-"+*early.XRequestID, "", 4))
	_ = r.Write(span("", *byTrace.TraceID, 5))
	_ = r.Write(span("cmpl-"+*early.XRequestID+"-0", "", 99)) // a duplicate, also early
	checkServer(t, e, probeA, map[string][]float64{})
	_ = r.Write(early)
	checkServer(t, e, probeA, map[string][]float64{"caseC": {4}})
	_ = r.Write(byTrace)
	checkServer(t, e, probeA, map[string][]float64{"caseC": {4, 5}})
	r.mu.Lock()
	if r.npending != 0 || len(r.pending) != 0 {
		t.Errorf("pending %d (%d keys) after every request was recorded", r.npending, len(r.pending))
	}
	r.mu.Unlock()
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
	checkServer(t, e, probeA, map[string][]float64{})
	r.mu.Lock()
	if r.npending != 0 {
		t.Errorf("warmup spans left pending: %d", r.npending)
	}
	r.mu.Unlock()
}

func TestSpanValues(t *testing.T) {
	e := New(Options{})
	r := e.StartRun(probeA)
	rec := okRequest("caseA", artifact.PhaseMeasured, 0)
	_ = r.Write(rec)
	s := span("chatcmpl-"+*rec.XRequestID, "", 1)
	s.Attributes[spanattr.AttrTimeInQueue] = int64(2)                // an OTLP intValue
	s.Attributes[spanattr.AttrTimeInModelPrefill] = "0.5"            // not a number
	s.Attributes[spanattr.AttrTimeInModelDecode] = -0.1              // negative
	s.Attributes[spanattr.AttrTimeToFirstToken] = artifact.NaNString // NaN
	s.Attributes[spanattr.AttrE2E] = artifact.PosInfString           // +Inf
	_ = r.Write(s)
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

func TestMaxPendingSpans(t *testing.T) {
	e := New(Options{})
	r := e.StartRun(probeA)
	const n = MaxPendingSpans + 10
	for i := range n {
		_ = r.Write(span("chatcmpl-"+xrid("caseP", artifact.PhaseMeasured, i), "", 1))
	}
	r.mu.Lock()
	if r.npending != MaxPendingSpans {
		t.Errorf("%d pending, want %d", r.npending, MaxPendingSpans)
	}
	r.mu.Unlock()
	checkServer(t, e, probeA, map[string][]float64{})
	for i := range n {
		rec := okRequest("caseP", artifact.PhaseMeasured, i)
		_ = r.Write(rec)
	}
	fams := gather(t, e)
	if h := histogram(t, fams, "inferprobe_server_queue_seconds", probeA, "caseP"); h.GetSampleCount() != MaxPendingSpans {
		t.Errorf("%d joined, want the %d kept", h.GetSampleCount(), MaxPendingSpans)
	}
	r.mu.Lock()
	if r.npending != 0 || len(r.pending) != 0 {
		t.Errorf("pending %d (%d keys)", r.npending, len(r.pending))
	}
	r.mu.Unlock()
}

// evaluation judges recs with the flags policy crit as analyze does, over a 10 s interval.
func evaluation(t *testing.T, recs []*artifact.Request, crit ...string) *analyze.Evaluation {
	t.Helper()
	pol, err := analyze.ParseSLOFlags(crit)
	if err != nil {
		t.Fatal(err)
	}
	var rs []analyze.Request
	for _, rec := range recs {
		rs = append(rs, analyze.RequestFromRecord(rec))
	}
	return analyze.Evaluate(pol, "flags", rs, analyze.NewInterval(analyze.KindScheduledWindow, 0, 10e9, analyze.CohortArrival), nil)
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
	evA := evaluation(t, recsA, "ttft:60", "e2e:350")
	// ttft ≤ 60 ⇔ i ≤ 6; e2e ≤ 350 ⇔ i ≤ 7: met i = 0..6; missed 3 ok + 2 failures.
	if evA.Met != 7 || evA.Missed != 5 || evA.Unknown != 0 {
		t.Fatalf("analyze judged %d/%d/%d", evA.Met, evA.Missed, evA.Unknown)
	}
	evB := &analyze.Evaluation{SLOName: "cli", Met: 3, Missed: 1, Unknown: 2,
		AttainmentLower: p(0.5), AttainmentUpper: p(5.0 / 6), GoodputLowerRPS: p(0.3), GoodputUpperRPS: p(0.5)}
	rep := &analyze.Report{Cases: map[string]*analyze.CaseReport{
		"caseA": {Population: analyze.Population{ServerEvidenceCoverage: p(0.75)}, SLO: evA},
		"caseB": {Population: analyze.Population{ServerEvidenceCoverage: p(1.0)}, SLO: evB},
	}}
	end := time.Unix(1_700_000_123, 500_000_000)
	for run := 1; run <= 2; run++ {
		r := e.StartRun(probeA)
		for _, rec := range recsA {
			_ = r.Write(rec)
		}
		r.Finish(RunCompleted, end, rep)
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
		// A dropped request was written: the schedule was not met.
		if v := value(t, fams, "inferprobe_probe_schedule_met", probeLabels(probeA)); v != 0 {
			t.Errorf("schedule_met %v with a dropped request", v)
		}
	}

	// A report without caseB (and caseA without span evidence) removes those gauges; the
	// caseB counters stay as they were.
	r := e.StartRun(probeA)
	evA2 := *evA
	evA2.AttainmentUpper = nil
	r.Finish(RunInterrupted, end.Add(time.Minute), &analyze.Report{Cases: map[string]*analyze.CaseReport{"caseA": {SLO: &evA2}}})
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
	// An interrupted run moves last_run, not last_success; it met its (empty) schedule.
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
}

func TestFinishOutcomes(t *testing.T) {
	e := New(Options{})
	e.SetProbeConfig(probeA, 60, "", nil)
	t0 := time.Unix(1_700_000_000, 0)

	// Completed, but no request succeeded: no last_success.
	r := e.StartRun(probeA)
	_ = r.Write(failedRequest("caseA", artifact.PhaseMeasured, 0, artifact.RequestError))
	_ = r.Write(okRequest("caseA", artifact.PhaseWarmup, 1)) // warmup success does not count
	r.Finish(RunCompleted, t0, nil)
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
	r.Finish(RunIncomplete, t0.Add(time.Second), nil)
	// Failed: could not start.
	r = e.StartRun(probeA)
	r.Finish(RunFailed, t0.Add(2*time.Second), nil)
	r.Finish(RunFailed, t0.Add(3*time.Second), nil) // a second Finish counts nothing
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

// scheduleMet runs recs through a fresh run and returns inferprobe_probe_schedule_met.
func scheduleMet(t *testing.T, recs []*artifact.Request) float64 {
	t.Helper()
	e := New(Options{})
	r := e.StartRun(probeA)
	for _, rec := range recs {
		_ = r.Write(rec)
	}
	r.Finish(RunCompleted, time.Unix(1_700_000_000, 0), nil)
	return value(t, gather(t, e), "inferprobe_probe_schedule_met", probeLabels(probeA))
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
	closed := func(rs []*artifact.Request) []*artifact.Request {
		for _, r := range rs {
			r.MaxInFlight, r.Concurrency, r.ArrivalMode = nil, p(int64(4)), artifact.ArrivalClosed
		}
		return rs
	}
	held := okRequest("caseA", artifact.PhaseMeasured, 500)
	held.HeldForSlot = p(true)
	warmHeld := okRequest("caseA", artifact.PhaseWarmup, 501)
	warmHeld.HeldForSlot = p(true)
	for _, c := range []struct {
		name string
		recs []*artifact.Request
		want float64
	}{
		{"on time", lagged(50, 0.2, 0), 1},
		{"no requests", nil, 1},
		{"a dropped request", append(lagged(50, 0.2, 0), failedRequest("caseA", artifact.PhaseMeasured, 99, artifact.RequestDropped)), 0},
		{"a held request", append(lagged(50, 0.2, 0), held), 0},
		{"warmup dropped and held", append(lagged(5, 0.2, 0), failedRequest("caseA", artifact.PhaseWarmup, 99, artifact.RequestDropped), warmHeld), 1},
		// 100 at 0.5 ms and 1 at 5 ms: p99 (linear, rank 99 of 0..100) = 0.5 ms.
		{"p99 within 1 ms, max above", append(lagged(100, 0.5, 0), lagged(1, 5, 100)...), 1},
		// 100 at 0.5 ms and 2 at 5 ms: p99 at rank 99.99 = 4.955 ms.
		{"p99 above 1 ms", append(lagged(100, 0.5, 0), lagged(2, 5, 100)...), 0},
		{"p99 exactly 1 ms", lagged(10, 1, 0), 1},
		{"failed requests' lag counts", append(lagged(10, 0.1, 0), func() []*artifact.Request {
			var out []*artifact.Request
			for i := range 5 {
				f := failedRequest("caseA", artifact.PhaseMeasured, 50+i, artifact.RequestTimeout)
				f.DispatchLagMS = p(3.0)
				out = append(out, f)
			}
			return out
		}()...), 0},
		{"closed loop ignores lag", closed(lagged(10, 50, 0)), 1},
	} {
		if got := scheduleMet(t, c.recs); got != c.want {
			t.Errorf("%s: schedule_met %v, want %v", c.name, got, c.want)
		}
	}
}

func TestRunsOverlap(t *testing.T) {
	e := New(Options{})
	get := func(name string) float64 { return value(t, gather(t, e), name, probeLabels(probeA)) }
	r1 := e.StartRun(probeA)
	for range 3 {
		r1.Sent()
	}
	if v := get("inferprobe_in_flight_requests"); v != 3 {
		t.Errorf("in flight %v", v)
	}
	r2 := e.StartRun(probeA) // r1 still draining
	r2.Sent()
	r2.Sent()
	if v := get("inferprobe_in_flight_requests"); v != 5 {
		t.Errorf("in flight over two runs %v, want 5", v)
	}
	r1.Ended()
	r1.Finish(RunCompleted, time.Unix(1, 0), nil) // 2 of r1's requests abandoned
	if v := get("inferprobe_probe_running"); v != 1 {
		t.Errorf("running %v while r2 runs", v)
	}
	if v := get("inferprobe_in_flight_requests"); v != 2 {
		t.Errorf("in flight after r1 finished %v, want 2", v)
	}
	r1.Ended() // late: ignored
	r1.Sent()  // late: ignored
	if v := get("inferprobe_in_flight_requests"); v != 2 {
		t.Errorf("in flight after late calls %v, want 2", v)
	}
	r2.Ended()
	r2.Ended()
	r2.Ended() // one more than sent: no negative count
	if v := get("inferprobe_in_flight_requests"); v != 0 {
		t.Errorf("in flight %v, want 0", v)
	}
	r2.Sent()
	r2.Finish(RunCompleted, time.Unix(2, 0), nil)
	if get("inferprobe_probe_running") != 0 || get("inferprobe_in_flight_requests") != 0 {
		t.Error("running or in flight not back to 0")
	}
	// A probe forgotten mid-run (a reload) and started again: the old run is detached and
	// publishes nothing more, so it neither resurrects series nor clobbers the new run's.
	r3 := e.StartRun(probeA)
	r3.Sent()
	r3.Sent()
	e.ForgetProbe(probeA)
	if n, _ := testutil.GatherAndCount(e.Registry(), "inferprobe_probe_running", "inferprobe_in_flight_requests", "inferprobe_probe_runs_total"); n != 0 {
		t.Errorf("%d series left after ForgetProbe", n)
	}
	r4 := e.StartRun(probeA)
	r4.Sent()
	r3.Ended()
	_ = r3.Write(okRequest("caseOld", artifact.PhaseMeasured, 1))
	r3.Finish(RunInterrupted, time.Unix(3, 0), &analyze.Report{Cases: map[string]*analyze.CaseReport{
		"caseOld": {SLO: &analyze.Evaluation{SLOName: "x", Met: 1}}}})
	if get("inferprobe_probe_running") != 1 || get("inferprobe_in_flight_requests") != 1 {
		t.Errorf("the detached run changed the new run's gauges: running %v, in flight %v",
			get("inferprobe_probe_running"), get("inferprobe_in_flight_requests"))
	}
	fams := gather(t, e)
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			lm := labelMap(m)
			if lm[LabelCase] == "caseOld" || lm[LabelOutcome] == "interrupted" {
				t.Errorf("the detached run published %s{%s}", name, labelSet(m))
			}
		}
	}
	r4.Ended()
	r4.Finish(RunCompleted, time.Unix(4, 0), nil)
	if get("inferprobe_probe_running") != 0 || get("inferprobe_in_flight_requests") != 0 {
		t.Error("running or in flight not back to 0 after the new run")
	}
	if v := value(t, gather(t, e), "inferprobe_probe_runs_total", probeLabels(probeA, "outcome", "completed")); v != 1 {
		t.Errorf("runs completed %v", v)
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
				s := span("chatcmpl-"+*rec.XRequestID, "", 1)
				r.Sent()
				if i%2 == 0 { // span first, then record
					_ = r.Write(s)
					_ = r.Write(rec)
				} else {
					_ = r.Write(rec)
					_ = r.Write(&s)
				}
				_ = r.Write(span("", *rec.TraceID, 50)) // a duplicate by trace
				r.Ended()
			}
		}()
	}
	wg.Wait()
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
			t.Errorf("case%d: a duplicate span was observed (sum %v for %d)", c, h.GetSampleSum(), h.GetSampleCount())
		}
	}
	if total != workers*per || spans != workers*per {
		t.Errorf("requests %v, spans %d, want %d each", total, spans, workers*per)
	}
	if v := value(t, fams, "inferprobe_in_flight_requests", probeLabels(probeA)); v != 0 {
		t.Errorf("in flight %v", v)
	}
	r.mu.Lock()
	if r.npending != 0 {
		t.Errorf("%d spans left pending", r.npending)
	}
	r.mu.Unlock()
	r.Finish(RunCompleted, time.Unix(1, 0), nil)
}

func TestUnusableLabelValues(t *testing.T) {
	e := New(Options{})
	r := e.StartRun(probeA)
	rec := okRequest("case\xff", artifact.PhaseMeasured, 0)
	rec.Status = "weird\xfe"
	_ = r.Write(rec) // must not panic
	_ = r.Write(span("chatcmpl-"+*rec.XRequestID, "", 1))
	r.Finish(RunCompleted, time.Unix(1, 0), &analyze.Report{Cases: map[string]*analyze.CaseReport{
		"c\xff": {SLO: &analyze.Evaluation{SLOName: "s\xff", Met: 1, Missed: -1}}, "nil": nil,
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
	if math.IsNaN(value(t, fams, "inferprobe_probe_schedule_met", probeLabels(probeA))) {
		t.Error("schedule_met NaN")
	}
}
