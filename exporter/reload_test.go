package exporter

import (
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/inferprobe/inferprobe/artifact"
)

// TestForgetProbe: forgetting a probe without a run in progress deletes its gauges at once;
// its counters and histograms stay (every finished run stays counted) and go on when the
// probe is configured again; other probes' series are untouched.
func TestForgetProbe(t *testing.T) {
	e := New(Options{})
	feedAll(t, e, probeA)
	feedAll(t, e, probeB)
	before := gather(t, e)
	e.ForgetProbe(probeA)
	after := gather(t, e)
	for name := range catalogue {
		count := func(fams map[string]*dto.MetricFamily, probe string) int {
			n := 0
			for _, m := range fams[name].GetMetric() {
				if labelMap(m)[LabelProbe] == probe {
					n++
				}
			}
			return n
		}
		if nb, na := count(before, probeB.Probe), count(after, probeB.Probe); na != nb {
			t.Errorf("%s: probe %s had %d series, now %d", name, probeB.Probe, nb, na)
		}
		nb, na := count(before, probeA.Probe), count(after, probeA.Probe)
		switch before[name].GetType() {
		case dto.MetricType_GAUGE:
			if na != 0 {
				t.Errorf("%s: %d series of the forgotten probe survived", name, na)
			}
		default:
			if na != nb {
				t.Errorf("%s: the forgotten probe had %d series, now %d: its counters stay", name, nb, na)
			}
		}
	}
	// The counters keep their values, probe B's too.
	for _, l := range []Labels{probeA, probeB} {
		if v := value(t, after, "inferprobe_requests_total", caseLabels(l, "caseA", "status", "ok")); v != 6 {
			t.Errorf("probe %s ok requests %v", l.Probe, v)
		}
		if v := value(t, after, "inferprobe_slo_requests_total", caseLabels(l, "caseA", "slo", "chat", "outcome", "missed")); v != 8 {
			t.Errorf("probe %s missed %v", l.Probe, v)
		}
		if v := value(t, after, "inferprobe_probe_runs_total", probeLabels(l, "outcome", "completed")); v != 1 {
			t.Errorf("probe %s completed runs %v", l.Probe, v)
		}
	}
	// Per-target and receiver series are not per-probe and stay.
	if v := value(t, after, "inferprobe_scrape_up", map[string]string{"target": "vllm"}); v != 1 {
		t.Errorf("scrape_up %v", v)
	}
	if v := value(t, after, "inferprobe_receiver_spans_unrouted_total", nil); v != 2 {
		t.Errorf("unrouted %v", v)
	}
	// A probe that comes back goes on counting.
	e.SetProbeConfig(probeA, 60, "", nil)
	r := e.StartRun(probeA)
	_ = r.Write(okRequest("caseA", artifact.PhaseMeasured, 0))
	fams := gather(t, e)
	if v := value(t, fams, "inferprobe_requests_total", caseLabels(probeA, "caseA", "status", "ok")); v != 7 {
		t.Errorf("after coming back: %v ok requests, want 7", v)
	}
	if v := value(t, fams, "inferprobe_probe_interval_seconds", probeLabels(probeA)); v != 60 {
		t.Errorf("after coming back: interval %v", v)
	}
}

// TestForgetProbeMidRun: forgetting a probe whose run is in progress keeps its gauges until
// that run has published its end; the run is counted and stays counted, the gauges go.
func TestForgetProbeMidRun(t *testing.T) {
	e := New(Options{})
	e.SetProbeConfig(probeA, 300, "chat", p(0.99))
	r := e.StartRun(probeA)
	rec := okRequest("caseA", artifact.PhaseMeasured, 1)
	_ = r.Write(sent(rec))
	e.ForgetProbe(probeA)
	_ = r.Write(rec)
	_ = r.Write(&artifact.RunJudgement{Outcome: RunInterrupted, EndedAtNS: time.Unix(3, 0).UnixNano(), Analysed: true, ScheduleMet: p(true),
		Cases: []artifact.CaseJudgement{{CaseID: "caseA", SpanJoinCoverage: p(1.0), SLO: &artifact.SLOJudgement{Name: "chat", Met: 1, AttainmentLower: p(1.0)}}}})
	fams := gather(t, e)
	if v := value(t, fams, "inferprobe_probe_runs_total", probeLabels(probeA, "outcome", "interrupted")); v != 1 {
		t.Errorf("interrupted runs %v, want 1", v)
	}
	if v := value(t, fams, "inferprobe_requests_total", caseLabels(probeA, "caseA", "status", "ok")); v != 1 {
		t.Errorf("ok requests %v, want 1", v)
	}
	if v := value(t, fams, "inferprobe_slo_requests_total", caseLabels(probeA, "caseA", "slo", "chat", "outcome", "met")); v != 1 {
		t.Errorf("met requests %v, want 1", v)
	}
	for _, name := range []string{"inferprobe_probe_running", "inferprobe_in_flight_requests", "inferprobe_probe_interval_seconds",
		"inferprobe_slo_objective_ratio", "inferprobe_slo_attainment_ratio", "inferprobe_span_join_coverage_ratio",
		"inferprobe_probe_last_run_timestamp_seconds", "inferprobe_probe_schedule_met"} {
		if m := metric(t, fams, name, probeLabels(probeA)); m != nil {
			t.Errorf("%s{%s} survived the forgotten probe's last run", name, labelSet(m))
		}
	}
}

// ttftBounds are the classic bucket boundaries of inferprobe_ttft_seconds, and the count of
// its probe A series.
func ttftBounds(t *testing.T, e *Exporter) (map[float64]bool, uint64) {
	t.Helper()
	out, n := map[float64]bool{}, uint64(0)
	for _, m := range gather(t, e)["inferprobe_ttft_seconds"].GetMetric() {
		if labelMap(m)[LabelProbe] != probeA.Probe {
			continue
		}
		n += m.GetHistogram().GetSampleCount()
		for _, b := range m.GetHistogram().GetBucket() {
			out[b.GetUpperBound()] = true
		}
	}
	return out, n
}

// TestSetThresholds: new SLO limits replace the histograms whose buckets change, in the same
// registry, while counters, gauges and untouched histograms keep their values; a run in
// progress goes on publishing into the new histograms.
func TestSetThresholds(t *testing.T) {
	e := New(Options{Thresholds: map[string][]float64{KeyTTFT: {0.444}}})
	e.SetProbeConfig(probeA, 300, "chat", p(0.99))
	r := e.StartRun(probeA)
	for i := range 3 {
		_ = r.Write(okRequest("caseA", artifact.PhaseMeasured, i))
	}
	if b, n := ttftBounds(t, e); !b[0.444] || n != 3 {
		t.Fatalf("before: ttft buckets %v, %d samples", b, n)
	}
	okBefore := value(t, gather(t, e), "inferprobe_requests_total", caseLabels(probeA, "caseA", "status", "ok"))
	e2e := metric(t, gather(t, e), "inferprobe_e2e_seconds", caseLabels(probeA, "caseA")).GetHistogram().GetSampleCount()
	if err := e.SetThresholds(map[string][]float64{KeyTTFT: {0.123}}); err != nil {
		t.Fatal(err)
	}
	if _, n := ttftBounds(t, e); n != 0 {
		t.Fatalf("after: the ttft histogram has %d samples, want a new, empty one", n)
	}
	fams := gather(t, e)
	if v := value(t, fams, "inferprobe_requests_total", caseLabels(probeA, "caseA", "status", "ok")); v != okBefore || v != 3 {
		t.Errorf("ok requests %v after new thresholds, want 3", v)
	}
	if n := metric(t, fams, "inferprobe_e2e_seconds", caseLabels(probeA, "caseA")).GetHistogram().GetSampleCount(); n != e2e {
		t.Errorf("the e2e histogram (no threshold changed) has %d samples, had %d", n, e2e)
	}
	if v := value(t, fams, "inferprobe_probe_running", probeLabels(probeA)); v != 1 {
		t.Errorf("running %v", v)
	}
	_ = r.Write(okRequest("caseA", artifact.PhaseMeasured, 3))
	if b, n := ttftBounds(t, e); !b[0.123] || b[0.444] || n != 1 {
		t.Errorf("the run in progress: ttft buckets %v, %d samples: want 0.123 and not 0.444, 1 sample", b, n)
	}
	// The same limits again change nothing.
	if err := e.SetThresholds(map[string][]float64{KeyTTFT: {0.123}}); err != nil {
		t.Fatal(err)
	}
	if _, n := ttftBounds(t, e); n != 1 {
		t.Errorf("unchanged thresholds emptied the ttft histogram (%d samples)", n)
	}
}
