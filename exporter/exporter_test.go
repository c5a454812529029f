package exporter

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/inferprobe/inferprobe/artifact"
)

// catalogue is every inferprobe_ family the exporter publishes (docs/reference/metrics.md is
// generated from Series), with its label names.
var catalogue = map[string][]string{
	"inferprobe_requests_total":                         {"case", "model", "probe", "status", "target"},
	"inferprobe_ttft_seconds":                           {"case", "model", "probe", "target"},
	"inferprobe_ttft_from_intended_seconds":             {"case", "model", "probe", "target"},
	"inferprobe_e2e_seconds":                            {"case", "model", "probe", "target"},
	"inferprobe_e2e_from_intended_seconds":              {"case", "model", "probe", "target"},
	"inferprobe_tpot_seconds":                           {"case", "model", "probe", "target"},
	"inferprobe_dispatch_lag_seconds":                   {"case", "model", "probe", "target"},
	"inferprobe_prompt_tokens_total":                    {"case", "model", "probe", "target"},
	"inferprobe_output_tokens_total":                    {"case", "model", "probe", "target"},
	"inferprobe_server_queue_seconds":                   {"case", "model", "probe", "target"},
	"inferprobe_server_prefill_seconds":                 {"case", "model", "probe", "target"},
	"inferprobe_server_decode_seconds":                  {"case", "model", "probe", "target"},
	"inferprobe_server_ttft_seconds":                    {"case", "model", "probe", "target"},
	"inferprobe_server_e2e_seconds":                     {"case", "model", "probe", "target"},
	"inferprobe_slo_requests_total":                     {"case", "model", "outcome", "probe", "slo", "target"},
	"inferprobe_slo_objective_ratio":                    {"model", "probe", "slo", "target"},
	"inferprobe_slo_attainment_ratio":                   {"bound", "case", "model", "probe", "slo", "target"},
	"inferprobe_goodput_requests_per_second":            {"bound", "case", "model", "probe", "slo", "target"},
	"inferprobe_span_join_coverage_ratio":               {"case", "model", "probe", "target"},
	"inferprobe_probe_runs_total":                       {"model", "outcome", "probe", "target"},
	"inferprobe_probe_last_success_timestamp_seconds":   {"model", "probe", "target"},
	"inferprobe_probe_last_run_timestamp_seconds":       {"model", "probe", "target"},
	"inferprobe_probe_interval_seconds":                 {"model", "probe", "target"},
	"inferprobe_probe_running":                          {"model", "probe", "target"},
	"inferprobe_in_flight_requests":                     {"model", "probe", "target"},
	"inferprobe_probe_schedule_met":                     {"model", "probe", "target"},
	"inferprobe_scrape_up":                              {"target"},
	"inferprobe_scrape_duration_seconds":                {"target"},
	"inferprobe_receiver_spans_received_total":          {"transport"},
	"inferprobe_receiver_spans_rejected_total":          {},
	"inferprobe_receiver_spans_dropped_total":           {},
	"inferprobe_receiver_spans_unrouted_total":          {},
	"inferprobe_build_info":                             {"goversion", "version"},
	"inferprobe_capacity":                               {"bound", "model", "over", "probe", "target"},
	"inferprobe_capacity_previous":                      {"bound", "model", "over", "probe", "target"},
	"inferprobe_capacity_binding_criterion":             {"criterion", "model", "probe", "target"},
	"inferprobe_capacity_last_search_timestamp_seconds": {"model", "probe", "target"},
	"inferprobe_capacity_searches_total":                {"model", "outcome", "probe", "target"},
}

// feedAll gives every family of the catalogue samples for probe l: config, a run with
// requests of every status and their spans, a finished report, a scrape, the receiver.
func feedAll(t *testing.T, e *Exporter, l Labels) {
	t.Helper()
	e.SetProbeConfig(l, 300, "chat", p(0.99))
	r := e.StartRun(l)
	for i := range 6 {
		rec := okRequest("caseA", artifact.PhaseMeasured, i)
		for _, rec := range []artifact.Record{sent(rec), rec, span("chatcmpl-"+*rec.XRequestID, "", float64(i+1))} {
			if err := r.Write(rec); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i, st := range []string{artifact.RequestTimeout, artifact.RequestRejected, artifact.RequestUnreachable,
		artifact.RequestDeliveryUnknown, artifact.RequestError, artifact.RequestDropped, artifact.RequestCancelled} {
		rec := failedRequest("caseA", artifact.PhaseMeasured, 20+i, st)
		if st != artifact.RequestDropped {
			_ = r.Write(sent(rec))
		}
		_ = r.Write(rec)
	}
	// A dropped request was written: the schedule was not met.
	if err := r.Write(&artifact.RunJudgement{Outcome: RunCompleted, EndedAtNS: time.Unix(1_700_000_100, 0).UnixNano(),
		Analysed: true, ScheduleMet: p(false), Cases: []artifact.CaseJudgement{{
			CaseID: "caseA", SpanJoinCoverage: p(1.0), SLO: &artifact.SLOJudgement{
				Name: "chat", Met: 5, Missed: 8, Unknown: 0,
				AttainmentLower: p(5.0 / 13), AttainmentUpper: p(5.0 / 13), GoodputLowerRPS: p(0.5), GoodputUpperRPS: p(0.5),
			}}}}); err != nil {
		t.Fatal(err)
	}
	e.ScrapeResult(l.Target, true, 120*time.Millisecond)
	e.SpanUnrouted()
	// Two completed searches: the second moves the first's bracket to _previous.
	e.InitSearches(l)
	for _, lower := range []float64{8, 4} {
		e.SearchFinished(l, &artifact.Search{Over: artifact.OverConcurrency, Status: artifact.SearchFound,
			BracketLower: p(lower), BracketUpper: p(lower + 1), BindingCriterion: p("client.ttft p95")},
			artifact.SearchFound, time.Unix(1_700_000_200, 0))
	}
}

func TestPromlint(t *testing.T) {
	e := New(Options{Version: "v0.1.0", Thresholds: map[string][]float64{KeyTTFT: {0.5}}})
	e.WatchReceiver(func() ReceiverCounts { return ReceiverCounts{HTTPProtobuf: 1} })
	feedAll(t, e, probeA)
	fams := gather(t, e)
	for name := range catalogue {
		if len(fams[name].GetMetric()) == 0 {
			t.Errorf("%s has no samples; the lint would not see it", name)
		}
	}
	problems, err := testutil.GatherAndLint(e.Registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, pr := range problems {
		if strings.HasPrefix(pr.Metric, "inferprobe_") {
			t.Errorf("promlint: %s: %s", pr.Metric, pr.Text)
		}
	}
	// The linter does report problems when there are some (the check above can fail).
	bad := &dto.MetricFamily{Name: p("inferprobe_bad_milliseconds"), Help: p("x"), Type: dto.MetricType_COUNTER.Enum(),
		Metric: []*dto.Metric{{Counter: &dto.Counter{Value: p(1.0)}}}}
	if pr, _ := promlint.NewWithMetricFamilies([]*dto.MetricFamily{bad}).Lint(); len(pr) == 0 {
		t.Error("promlint found nothing wrong with a counter in milliseconds without _total")
	}
}

func TestCatalogueLabelSets(t *testing.T) {
	e := New(Options{Version: "v1.2.3"})
	e.WatchReceiver(func() ReceiverCounts { return ReceiverCounts{} })
	feedAll(t, e, probeA)
	fams := gather(t, e)
	for name, f := range fams {
		if !strings.HasPrefix(name, "inferprobe_") {
			if !strings.HasPrefix(name, "go_") && !strings.HasPrefix(name, "process_") &&
				!strings.HasPrefix(name, "promhttp_") {
				t.Errorf("unexpected family %s", name)
			}
			continue
		}
		want, ok := catalogue[name]
		if !ok {
			t.Errorf("%s is not in the catalogue", name)
			continue
		}
		for _, m := range f.GetMetric() {
			var got []string
			for _, lp := range m.GetLabel() {
				got = append(got, lp.GetName())
			}
			sort.Strings(got)
			if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
				t.Errorf("%s{%s}: label names %v, want %v", name, labelSet(m), got, want)
			}
		}
	}
	for name := range catalogue {
		if fams[name] == nil {
			t.Errorf("%s missing", name)
		}
	}
	if got := value(t, fams, "inferprobe_build_info", map[string]string{"version": "v1.2.3"}); got != 1 {
		t.Errorf("build_info = %v", got)
	}
	// Label values that are open-ended sets in the catalogue.
	for _, c := range []struct {
		name, label string
		want        []string
	}{
		{"inferprobe_requests_total", "status", []string{"cancelled", "delivery_unknown", "dropped", "error", "ok", "rejected", "timeout", "unreachable"}},
		{"inferprobe_probe_runs_total", "outcome", []string{"completed", "failed", "incomplete", "interrupted"}},
		{"inferprobe_slo_requests_total", "outcome", []string{"met", "missed", "unknown"}},
		{"inferprobe_slo_attainment_ratio", "bound", []string{"lower", "upper"}},
		{"inferprobe_goodput_requests_per_second", "bound", []string{"lower", "upper"}},
	} {
		var got []string
		for _, m := range fams[c.name].GetMetric() {
			got = append(got, labelMap(m)[c.label])
		}
		sort.Strings(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s %s values %v, want %v", c.name, c.label, got, c.want)
		}
	}
}

func TestBucketsFor(t *testing.T) {
	opts := Options{Thresholds: map[string][]float64{
		KeyTTFT: {0.5, 0.15, 0.333, 0.333, math.NaN(), math.Inf(1), math.Inf(-1), -0.2, 0},
		KeyE2E:  {2.2},
	}}
	b := BucketsFor(KeyTTFT, opts)
	def := BucketsFor(KeyTTFT, Options{})
	if len(def) != len(latencyBuckets) || !slices.Equal(def, latencyBuckets) {
		t.Fatalf("defaults %v", def)
	}
	if len(b) != len(def)+1 {
		t.Errorf("len %d, want %d (defaults + 0.333): %v", len(b), len(def)+1, b)
	}
	for _, want := range []float64{0.15, 0.5, 0.333} {
		n := 0
		for _, v := range b {
			if v == want {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%v appears %d times in %v", want, n, b)
		}
	}
	for i, v := range b {
		if !(v > 0) || math.IsInf(v, 0) {
			t.Errorf("bucket %v", v)
		}
		if i > 0 && !(b[i-1] < v) {
			t.Errorf("not strictly increasing at %d: %v", i, b)
		}
	}
	if slices.Contains(BucketsFor(KeyE2E, opts), 0.333) || !slices.Contains(BucketsFor(KeyE2E, opts), 2.2) {
		t.Errorf("e2e buckets %v", BucketsFor(KeyE2E, opts))
	}
	if slices.Contains(BucketsFor(KeyTTFT, opts), 2.2) {
		t.Error("an e2e threshold leaked into TTFT")
	}
	if got := BucketsFor("client.nope", opts); got != nil {
		t.Errorf("unknown key: %v", got)
	}
	// The defaults are not modified by merging.
	if slices.Contains(latencyBuckets, 0.333) {
		t.Error("BucketsFor changed the shared defaults")
	}
}

func TestRegistryBucketsHoldThresholds(t *testing.T) {
	opts := Options{Thresholds: map[string][]float64{KeyTTFT: {0.333, 0.15}, KeyTPOT: {0.0123}}}
	e := New(opts)
	r := e.StartRun(probeA)
	rec := okRequest("caseA", artifact.PhaseMeasured, 1)
	rec.TTFTMS = p(333.0) // exactly the threshold: within the limit, so in the 0.333 bucket
	_ = r.Write(rec)
	rec2 := okRequest("caseA", artifact.PhaseMeasured, 2)
	rec2.TTFTMS = p(333.5)
	_ = r.Write(rec2)
	fams := gather(t, e)
	h := histogram(t, fams, "inferprobe_ttft_seconds", probeA, "caseA")
	var bounds []float64
	counts := map[float64]uint64{}
	for _, bk := range h.GetBucket() {
		bounds = append(bounds, bk.GetUpperBound())
		counts[bk.GetUpperBound()] = bk.GetCumulativeCount()
	}
	if !slices.Equal(bounds, BucketsFor(KeyTTFT, opts)) {
		t.Errorf("bounds %v, want %v", bounds, BucketsFor(KeyTTFT, opts))
	}
	if counts[0.333] != 1 || counts[0.3] != 0 || counts[0.4] != 2 {
		t.Errorf("cumulative counts at 0.3/0.333/0.4: %d/%d/%d, want 0/1/2", counts[0.3], counts[0.333], counts[0.4])
	}
	tp := histogram(t, fams, "inferprobe_tpot_seconds", probeA, "caseA")
	found := false
	for _, bk := range tp.GetBucket() {
		found = found || bk.GetUpperBound() == 0.0123
	}
	if !found {
		t.Error("TPOT threshold 0.0123 is not a bucket")
	}
}

func TestExemplarLabels(t *testing.T) {
	tr := strings.Repeat("a", 32)
	for _, c := range []struct {
		name        string
		xrid, trace *string
		want        map[string]string
	}{
		{"both", p("inferprobe-r1-c_measured_0_1"), &tr, map[string]string{"request_id": "inferprobe-r1-c_measured_0_1", "trace_id": tr}},
		{"none", nil, nil, nil},
		{"empty", p(""), p(""), nil},
		{"request only", p("x1"), nil, map[string]string{"request_id": "x1"}},
		{"long request id", p(strings.Repeat("r", 200)), &tr, map[string]string{"trace_id": tr}},
		// 10 + 118 = 128 runes with no trace: exactly the limit fits.
		{"request id at the limit", p(strings.Repeat("é", 118)), nil, map[string]string{"request_id": strings.Repeat("é", 118)}},
		{"request id over the limit", p(strings.Repeat("é", 119)), nil, nil},
		{"invalid utf-8", p("ab\xff"), &tr, map[string]string{"trace_id": tr}},
		{"long trace", p("x1"), p(strings.Repeat("t", 125)), map[string]string{"request_id": "x1"}},
	} {
		if c.name == "long request id" {
			// The artifact's request_id stands in when the X-Request-Id does not fit.
			if got := exemplar(&tr, c.xrid, p("c1_in8_out8_measured_0_3")); got["request_id"] != "c1_in8_out8_measured_0_3" || got["trace_id"] != tr {
				t.Errorf("fallback: %v", got)
			}
		}
		got := exemplar(c.trace, c.xrid)
		if len(got) != len(c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
			continue
		}
		for k, v := range c.want {
			if got[k] != v {
				t.Errorf("%s: %s=%q, want %q", c.name, k, got[k], v)
			}
		}
	}
}

// scrape GETs the handler with accept and returns the response's content type and body.
func scrape(t *testing.T, url, accept string) (string, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	return resp.Header.Get("Content-Type"), body
}

// bucketLines returns the lines of name_bucket for case c.
func bucketLines(body, name, c string) []string {
	var out []string
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, name+"_bucket{") && strings.Contains(line, `case="`+c+`"`) {
			out = append(out, line)
		}
	}
	return out
}

func TestHandlerExemplars(t *testing.T) {
	e := New(Options{})
	srv := httptest.NewServer(e.Handler())
	defer srv.Close()
	r := e.StartRun(probeA)
	rec := okRequest("caseA", artifact.PhaseMeasured, 3)
	_ = r.Write(rec)
	long := okRequest("caseLong", artifact.PhaseMeasured, 4)
	long.XRequestID = p(strings.Repeat("x", 200))
	_ = r.Write(long) // must not panic
	bad := okRequest("caseBad", artifact.PhaseMeasured, 5)
	bad.XRequestID = p("inferprobe-\xff\xfe")
	_ = r.Write(bad) // must not panic
	_ = r.Write(span("chatcmpl-"+*rec.XRequestID, "", 2))
	// Server samples (and their exemplars) come with the run's judgement.
	_ = r.Write(ended(RunCompleted, time.Unix(1_700_000_000, 0)))

	ct, body := scrape(t, srv.URL, "application/openmetrics-text; version=1.0.0")
	if !strings.HasPrefix(ct, "application/openmetrics-text") {
		t.Fatalf("content type %q", ct)
	}
	text := string(body)
	exemplarOn := func(name, c string) []string {
		var ex []string
		for _, line := range bucketLines(text, name, c) {
			if _, after, ok := strings.Cut(line, " # {"); ok {
				ex = append(ex, after)
			}
		}
		return ex
	}
	for _, name := range []string{"inferprobe_ttft_seconds", "inferprobe_e2e_seconds", "inferprobe_dispatch_lag_seconds", "inferprobe_server_ttft_seconds"} {
		ex := exemplarOn(name, "caseA")
		if len(ex) != 1 {
			t.Fatalf("%s: %d exemplars, want 1:\n%s", name, len(ex), strings.Join(bucketLines(text, name, "caseA"), "\n"))
		}
		if !strings.Contains(ex[0], `request_id="`+*rec.XRequestID+`"`) || !strings.Contains(ex[0], `trace_id="`+*rec.TraceID+`"`) {
			t.Errorf("%s exemplar %q lacks the request's ids", name, ex[0])
		}
	}
	// The TTFT exemplar sits on the bucket the value fell in: 49 ms → le 0.05.
	for _, line := range bucketLines(text, "inferprobe_ttft_seconds", "caseA") {
		if strings.Contains(line, " # {") && !strings.Contains(line, `le="0.05"`) {
			t.Errorf("exemplar on the wrong bucket: %s", line)
		}
	}
	for _, c := range []string{"caseLong", "caseBad"} {
		ex := exemplarOn("inferprobe_ttft_seconds", c)
		if len(ex) != 1 {
			t.Fatalf("%s: %d exemplars", c, len(ex))
		}
		// The X-Request-Id does not fit (too long) or is not UTF-8: the artifact's request_id
		// stands in for it.
		i := map[string]int{"caseLong": 4, "caseBad": 5}[c]
		if !strings.Contains(ex[0], fmt.Sprintf(`request_id="%s_measured_0_%d"`, c, i)) || !strings.Contains(ex[0], `trace_id="`+traceOf(c, artifact.PhaseMeasured, i)+`"`) {
			t.Errorf("%s exemplar %q: want the trace id and the artifact's request_id", c, ex[0])
		}
	}
	if !strings.HasSuffix(strings.TrimSpace(text), "# EOF") {
		t.Error("OpenMetrics body does not end with # EOF")
	}

	ct, body = scrape(t, srv.URL, "")
	if !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("plain content type %q", ct)
	}
	if strings.Contains(string(body), "# {") || strings.Contains(string(body), "request_id") {
		t.Error("the plain text format carries exemplars")
	}
	if len(bucketLines(string(body), "inferprobe_ttft_seconds", "caseA")) == 0 {
		t.Error("plain text has no ttft buckets")
	}
}

func TestHandlerProtobufNativeHistograms(t *testing.T) {
	for _, native := range []bool{true, false} {
		e := New(Options{NoNativeHistograms: !native})
		srv := httptest.NewServer(e.Handler())
		r := e.StartRun(probeA)
		for i := range 5 {
			_ = r.Write(okRequest("caseA", artifact.PhaseMeasured, i))
		}
		ct, body := scrape(t, srv.URL, string(expfmt.NewFormat(expfmt.TypeProtoDelim)))
		srv.Close()
		if !strings.HasPrefix(ct, "application/vnd.google.protobuf") {
			t.Fatalf("content type %q", ct)
		}
		dec := expfmt.NewDecoder(strings.NewReader(string(body)), expfmt.ResponseFormat(http.Header{"Content-Type": {ct}}))
		var h *dto.Histogram
		for {
			mf := &dto.MetricFamily{}
			if err := dec.Decode(mf); err == io.EOF {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			if mf.GetName() == "inferprobe_ttft_seconds" {
				h = mf.GetMetric()[0].GetHistogram()
			}
		}
		if h == nil {
			t.Fatal("no inferprobe_ttft_seconds")
		}
		if h.GetSampleCount() != 5 || len(h.GetBucket()) != len(latencyBuckets) {
			t.Errorf("native=%v: count %d, %d classic buckets", native, h.GetSampleCount(), len(h.GetBucket()))
		}
		if native {
			// Bucket factor 1.1 is schema 3 (2^(2^-3) ≈ 1.09 is the largest growth ≤ 1.1).
			if h.Schema == nil || h.GetSchema() != 3 || h.ZeroThreshold == nil || !(h.GetZeroThreshold() > 0) {
				t.Errorf("native fields: schema %v, zero threshold %v", h.Schema, h.ZeroThreshold)
			}
			var n uint32
			for _, s := range h.GetPositiveSpan() {
				n += s.GetLength()
			}
			if n == 0 || len(h.GetPositiveDelta()) == 0 {
				t.Error("no native positive buckets")
			}
			if len(h.GetExemplars()) == 0 {
				t.Error("no native exemplars")
			}
		} else if h.Schema != nil || len(h.GetPositiveSpan()) != 0 {
			t.Errorf("NoNativeHistograms still gives schema %v", h.Schema)
		}
	}
}

func TestProbeConfig(t *testing.T) {
	e := New(Options{})
	e.SetProbeConfig(probeA, 300, "chat", p(0.995))
	fams := gather(t, e)
	if v := value(t, fams, "inferprobe_probe_interval_seconds", probeLabels(probeA)); v != 300 {
		t.Errorf("interval %v", v)
	}
	for _, name := range []string{"inferprobe_probe_running", "inferprobe_in_flight_requests"} {
		if v := value(t, fams, name, probeLabels(probeA)); v != 0 {
			t.Errorf("%s = %v", name, v)
		}
	}
	if got := series(fams, "inferprobe_probe_runs_total"); len(got) != 4 {
		t.Errorf("probe_runs_total series %v", got)
	}
	for _, o := range []string{"completed", "interrupted", "incomplete", "failed"} {
		if v := value(t, fams, "inferprobe_probe_runs_total", probeLabels(probeA, "outcome", o)); v != 0 {
			t.Errorf("runs{%s} = %v", o, v)
		}
	}
	if got, want := series(fams, "inferprobe_slo_objective_ratio"), []string{"model=facebook/opt-125m,probe=steady,slo=chat,target=vllm"}; !slices.Equal(got, want) {
		t.Errorf("objective series %v, want %v", got, want)
	}
	if v := value(t, fams, "inferprobe_slo_objective_ratio", probeLabels(probeA, "slo", "chat")); v != 0.995 {
		t.Errorf("objective %v", v)
	}
	// A running probe reconfigured keeps running = 1; a changed SLO replaces the objective.
	e.StartRun(probeA)
	e.SetProbeConfig(probeA, 60, "chat2", p(0.9))
	fams = gather(t, e)
	if v := value(t, fams, "inferprobe_probe_running", probeLabels(probeA)); v != 1 {
		t.Errorf("running after reload %v", v)
	}
	if got := series(fams, "inferprobe_slo_objective_ratio"); len(got) != 1 || !strings.Contains(got[0], "slo=chat2") {
		t.Errorf("objective series after reload %v", got)
	}
	e.SetProbeConfig(probeA, 60, "", nil)
	if n, _ := testutil.GatherAndCount(e.Registry(), "inferprobe_slo_objective_ratio"); n != 0 {
		t.Errorf("objective without SLO: %d series", n)
	}
}

func TestScrapeAndUnrouted(t *testing.T) {
	e := New(Options{})
	e.ScrapeResult("vllm", true, 250*time.Millisecond)
	e.ScrapeResult("other", false, 2*time.Second)
	e.ScrapeResult("vllm", true, 125*time.Millisecond) // the last one counts
	for range 3 {
		e.SpanUnrouted()
	}
	e.SpansUnrouted(512)
	e.SpansUnrouted(-4) // nothing
	fams := gather(t, e)
	for _, c := range []struct {
		name, target string
		want         float64
	}{
		{"inferprobe_scrape_up", "vllm", 1}, {"inferprobe_scrape_up", "other", 0},
		{"inferprobe_scrape_duration_seconds", "vllm", 0.125}, {"inferprobe_scrape_duration_seconds", "other", 2},
	} {
		if v := value(t, fams, c.name, map[string]string{"target": c.target}); v != c.want {
			t.Errorf("%s{%s} = %v, want %v", c.name, c.target, v, c.want)
		}
	}
	if v := value(t, fams, "inferprobe_receiver_spans_unrouted_total", nil); v != 515 {
		t.Errorf("unrouted %v", v)
	}
	e.ForgetTarget("other")
	fams = gather(t, e)
	for _, name := range []string{"inferprobe_scrape_up", "inferprobe_scrape_duration_seconds"} {
		if got := series(fams, name); !slices.Equal(got, []string{"target=vllm"}) {
			t.Errorf("%s after ForgetTarget: %v", name, got)
		}
	}
}

func TestWatchReceiver(t *testing.T) {
	e := New(Options{})
	var n atomic.Int64
	n.Store(1)
	e.WatchReceiver(func() ReceiverCounts {
		k := n.Load()
		return ReceiverCounts{HTTPProtobuf: 5 * k, HTTPJSON: 7 * k, GRPC: 11 * k, Rejected: 2 * k, Dropped: 3 * k}
	})
	for _, k := range []float64{1, 10} {
		n.Store(int64(k))
		fams := gather(t, e)
		if got := series(fams, "inferprobe_receiver_spans_received_total"); !slices.Equal(got, []string{"transport=grpc", "transport=http_json", "transport=http_protobuf"}) {
			t.Errorf("received series %v", got)
		}
		for tr, want := range map[string]float64{"http_protobuf": 5 * k, "http_json": 7 * k, "grpc": 11 * k} {
			if v := value(t, fams, "inferprobe_receiver_spans_received_total", map[string]string{"transport": tr}); v != want {
				t.Errorf("received{%s} = %v, want %v", tr, v, want)
			}
		}
		if v := value(t, fams, "inferprobe_receiver_spans_rejected_total", nil); v != 2*k {
			t.Errorf("rejected %v", v)
		}
		if v := value(t, fams, "inferprobe_receiver_spans_dropped_total", nil); v != 3*k {
			t.Errorf("dropped %v", v)
		}
		if fams["inferprobe_receiver_spans_received_total"].GetType() != dto.MetricType_COUNTER {
			t.Error("received is not a counter")
		}
	}
}

// A probe's labels that are not valid UTF-8 (a model name from a command line) are
// exported with U+FFFD for the bad bytes; client_golang would panic on them as given.
func TestLabelsNotUTF8(t *testing.T) {
	e := New(Options{Version: "v0.1.0", Thresholds: map[string][]float64{KeyTTFT: {0.5}}})
	l := Labels{Target: "vllm\xff", Model: "m\x01\xfe", Probe: "steady"}
	feedAll(t, e, l)
	seen := 0
	for name, mf := range gather(t, e) {
		for _, m := range mf.GetMetric() {
			lm := labelMap(m)
			if model, ok := lm["model"]; ok {
				if model != "m\x01\uFFFD" || lm["target"] != "vllm\uFFFD" {
					t.Fatalf("%s: labels %v", name, lm)
				}
				seen++
			}
		}
	}
	if seen < 20 {
		t.Fatalf("%d series carry the model label", seen)
	}
}
