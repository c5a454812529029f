package tables

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
)

const t0 = int64(1_700_000_000_000_000_000)

// req is a request of session s1, case c1, sent with trace id trace.
func req(id, phase, status string, intendedMS int64, e2eMS float64, prompt, output int64, promptSrc string, trace string) *artifact.Request {
	r := &artifact.Request{SessionID: "s1", RequestID: id, CaseID: "c1", Phase: phase, Status: status,
		IntendedAtNS: artifact.Ptr(t0 + intendedMS*1_000_000), XRequestID: artifact.Ptr("inferprobe-run-" + id),
		TraceID: artifact.Ptr(trace)}
	if status == artifact.RequestOK {
		r.E2ELatencyMS = artifact.Ptr(e2eMS)
		r.PromptTokens, r.PromptTokenSource = artifact.Ptr(prompt), promptSrc
		r.OutputTokens, r.OutputTokenSource = artifact.Ptr(output), artifact.TokenSourceServerUsage
	}
	return r
}

func span(trace, spanID string, queue, prefill, decode float64) *artifact.Span {
	return &artifact.Span{Name: artifact.RequestSpanName, TraceID: artifact.Ptr(trace), SpanID: artifact.Ptr(spanID),
		Attributes: map[string]any{artifact.AttrTimeInQueue: queue, artifact.AttrTimeInModelPrefill: prefill,
			artifact.AttrTimeInModelDecode: decode}}
}

func trace(c byte) string {
	b := make([]byte, 32)
	for i := range b {
		b[i] = c
	}
	return string(b)
}

// smallRun is four measured requests and a warmup one: 0_2 and 0_10 completed with joined
// spans, 0_3 timed out (inter-arrival only), 0_4 completed with estimated prompt tokens and
// two distinct spans (quarantined: no span columns).
func smallRun() []artifact.Record {
	return []artifact.Record{
		req("c1_warmup_0_0", artifact.PhaseWarmup, artifact.RequestOK, -1000, 900, 100, 10, artifact.TokenSourceServerUsage, trace('f')),
		span(trace('f'), "f000000000000001", 0.1, 0.1, 0.1),
		req("c1_measured_0_2", artifact.PhaseMeasured, artifact.RequestOK, 0, 1500, 100, 50, artifact.TokenSourceServerUsage, trace('a')),
		span(trace('a'), "a000000000000001", 0.1, 0.2, 1.0),
		span(trace('b'), "b000000000000001", 0.05, 0.1, 0.6), // before its request
		req("c1_measured_0_10", artifact.PhaseMeasured, artifact.RequestOK, 250, 800, 100, 40, artifact.TokenSourceServerUsage, trace('b')),
		req("c1_measured_0_3", artifact.PhaseMeasured, artifact.RequestTimeout, 500, 0, 0, 0, "", trace('c')),
		req("c1_measured_0_4", artifact.PhaseMeasured, artifact.RequestOK, 1000, 1000, 100, 20, "estimated", trace('d')),
		span(trace('d'), "d000000000000001", 0.1, 0.1, 0.1),
		span(trace('d'), "d000000000000002", 0.1, 0.1, 0.2),
		&artifact.Session{SessionID: "s1"},
	}
}

func writeTables(t *testing.T, dir string, recs []artifact.Record) {
	t.Helper()
	s := New(dir)
	for _, r := range recs {
		if err := s.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestTablesRequestMetricsGolden(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	writeTables(t, dir, smallRun())
	want := "Request Id,request_e2e_time,request_e2e_time_normalized,request_scheduling_delay,request_execution_time," +
		"request_execution_time_normalized,request_prefill_time,request_decode_time,request_decode_time_normalized," +
		"request_unaccounted_time,request_inter_arrival_delay,request_num_prompt_tokens,request_num_gen_tokens\n" +
		"c1_measured_0_10,0.8000,0.0200,0.0500,0.7500,0.0187,0.1000,0.6000,0.0150,0.0500,0.2500,100.0000,40.0000\n" +
		"c1_measured_0_2,1.5000,0.0300,0.1000,1.4000,0.0280,0.2000,1.0000,0.0200,0.2000,,100.0000,50.0000\n" +
		"c1_measured_0_3,,,,,,,,,,0.2500,,\n" +
		"c1_measured_0_4,1.0000,0.0500,,,,,,,,0.5000,,20.0000\n"
	if got := readFile(t, filepath.Join(dir, RequestMetricsFile)); got != want {
		t.Errorf("request_metrics.csv:\n%s\nwant:\n%s", got, want)
	}
	cdfs := map[string]string{
		"request_e2e_time":            "request_e2e_time,cdf\n0.8,0.0\n1.0,0.5\n1.5,1.0\n",
		"request_num_gen_tokens":      "request_num_gen_tokens,cdf\n20,0.0\n40,0.5\n50,1.0\n",
		"request_num_prompt_tokens":   "request_num_prompt_tokens,cdf\n100,0.0\n100,1.0\n",
		"request_scheduling_delay":    "request_scheduling_delay,cdf\n0.05,0.0\n0.1,1.0\n",
		"request_inter_arrival_delay": "request_inter_arrival_delay,cdf\n0.25,0.0\n0.25,0.5\n0.5,1.0\n",
		"request_decode_time":         "request_decode_time,cdf\n0.6,0.0\n1.0,1.0\n",
		"request_prefill_time":        "request_prefill_time,cdf\n0.1,0.0\n0.2,1.0\n",
	}
	for m, want := range cdfs {
		if got := readFile(t, filepath.Join(dir, RequestPlotsDir, m+".csv")); got != want {
			t.Errorf("%s.csv = %q, want %q", m, got, want)
		}
	}
	entries, err := os.ReadDir(filepath.Join(dir, RequestPlotsDir))
	var csvs, pngs []string
	for _, e := range entries {
		switch filepath.Ext(e.Name()) {
		case ".csv":
			csvs = append(csvs, e.Name())
		case ".png":
			pngs = append(pngs, e.Name())
		}
	}
	// One CDF per written column (12) and the arrival series (no request records an end
	// time: no completion series); a picture of each, and a histogram of the inter-arrival
	// delay and the two token counts.
	if err != nil || len(csvs) != 13 || len(pngs) != 16 {
		t.Errorf("request_plots holds %d CSVs and %d PNGs (%v), want 13 and 16: %v %v", len(csvs), len(pngs), err, csvs, pngs)
	}
	// Arrivals at intended 0, 250, 500 and 1000 ms.
	want = "Time (s),request_arrival\n0.0,1\n0.25,2\n0.5,3\n1.0,4\n"
	if got := readFile(t, filepath.Join(dir, RequestPlotsDir, "request_arrival_time_series.csv")); got != want {
		t.Errorf("request_arrival_time_series.csv = %q, want %q", got, want)
	}
}

func TestTablesManifest(t *testing.T) {
	dir := t.TempDir()
	writeTables(t, dir, smallRun())
	var m Manifest
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(dir, ManifestFile))), &m); err != nil {
		t.Fatal(err)
	}
	rm := m.RequestMetrics
	if m.Schema != ManifestSchema || m.Version != 1 || rm.File != RequestMetricsFile || rm.Rows != 4 || rm.RowOrder != RowOrderRequestID {
		t.Errorf("manifest head: %+v", m)
	}
	if len(rm.Columns) != 22 || rm.Columns[0].Name != "Request Id" || rm.Columns[21].Name != "request_num_forward_passes" {
		t.Fatalf("manifest lists %d columns", len(rm.Columns))
	}
	by := map[string]ColumnEntry{}
	for _, c := range rm.Columns {
		by[c.Name] = c
	}
	checks := []ColumnEntry{
		{Name: "request_e2e_time", Written: true, Source: SourceClient, Unit: "s", Values: 3},
		{Name: "request_scheduling_delay", Written: true, Source: SourceSpan, Unit: "s", Values: 2},
		{Name: "request_unaccounted_time", Written: true, Source: SourceClientSpan, Unit: "s", Values: 2},
		{Name: "request_inter_arrival_delay", Written: true, Source: SourceSchedule, Unit: "s", Values: 3},
		{Name: "request_num_prompt_tokens", Written: true, Source: SourceServerUsage, Unit: "tokens", Values: 2},
		{Name: "request_num_blocks", Source: SourceNone, Unit: "blocks", Why: whyBlocks},
		{Name: "request_kv_transfer_time", Source: SourceNone, Unit: "s", Why: whyKV},
		{Name: "request_scheduling_delay_prefill", Source: SourceNone, Unit: "s", Why: whyPhaseQueue},
		{Name: "request_num_forward_passes", Source: SourceNone, Unit: "forward passes", Why: whyPasses},
	}
	for _, want := range checks {
		got := by[want.Name]
		got.Definition = ""
		if got != want {
			t.Errorf("column %s: %+v, want %+v", want.Name, got, want)
		}
		if by[want.Name].Definition == "" {
			t.Errorf("column %s has no definition", want.Name)
		}
	}
	if len(m.RequestPlots) != 12 || m.RequestPlots[0] != "request_plots/request_e2e_time.csv" {
		t.Errorf("request_plots: %v", m.RequestPlots)
	}
	if s := m.RequestSeries; len(s) != 2 || !s[0].Written || s[0].Rows != 4 || s[1].Written || s[1].Why != whyNoCompletion {
		t.Errorf("request_series: %+v", s)
	}
	if !slices.Equal(m.Batches.Files, batchFiles) || m.Batches.Written || m.Batches.Why != whyNoSteps {
		t.Errorf("batches: %+v", m.Batches)
	}
	if m.SpanJoin.Joined != 2 || m.SpanJoin.Quarantined["multiple_spans"] != 1 || len(m.SpanJoin.Quarantined) != 1 {
		t.Errorf("span_join: %+v", m.SpanJoin)
	}
}

// A directory written again without spans loses the span columns' CDFs, and the manifest
// says why they are missing.
func TestTablesRewriteWithoutSpans(t *testing.T) {
	dir := t.TempDir()
	writeTables(t, dir, smallRun())
	var noSpans []artifact.Record
	for _, r := range smallRun() {
		if _, ok := r.(*artifact.Span); !ok {
			noSpans = append(noSpans, r)
		}
	}
	writeTables(t, dir, noSpans)
	if _, err := os.Stat(filepath.Join(dir, RequestPlotsDir, "request_scheduling_delay.csv")); !os.IsNotExist(err) {
		t.Errorf("stale request_scheduling_delay.csv: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, RequestPlotsDir, "request_e2e_time.csv")); err != nil {
		t.Errorf("request_e2e_time.csv: %v", err)
	}
	var m Manifest
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(dir, ManifestFile))), &m); err != nil {
		t.Fatal(err)
	}
	for _, c := range m.RequestMetrics.Columns {
		if c.Name == "request_decode_time" && (c.Written || c.Why != whyNoSpan || c.Source != SourceSpan) {
			t.Errorf("request_decode_time without spans: %+v", c)
		}
	}
}

// One written column keeps the rows in record order (no merge in sangam); an integer
// column without a missing cell is written as integers.
func TestTablesOneColumnRecordOrder(t *testing.T) {
	dir := t.TempDir()
	var recs []artifact.Record
	for i, id := range []string{"c1_measured_0_9", "c1_measured_0_10", "c1_measured_0_1"} {
		r := &artifact.Request{SessionID: "s1", RequestID: id, CaseID: "c1", Phase: artifact.PhaseMeasured,
			Status: artifact.RequestDropped, IntendedAtNS: artifact.Ptr(t0 + int64(i)*500_000_000)}
		recs = append(recs, r)
	}
	writeTables(t, dir, recs)
	want := "Request Id,request_inter_arrival_delay\nc1_measured_0_10,0.5000\nc1_measured_0_1,0.5000\n"
	if got := readFile(t, filepath.Join(dir, RequestMetricsFile)); got != want {
		t.Errorf("request_metrics.csv = %q, want %q", got, want)
	}
	dir2 := t.TempDir()
	writeTables(t, dir2, []artifact.Record{
		req("b", artifact.PhaseMeasured, artifact.RequestOK, 0, 100, 7, 3, artifact.TokenSourceServerUsage, trace('a')),
		req("a", artifact.PhaseMeasured, artifact.RequestOK, 100, 200, 8, 4, artifact.TokenSourceServerUsage, trace('b')),
	})
	want = "Request Id,request_e2e_time,request_e2e_time_normalized,request_inter_arrival_delay,request_num_prompt_tokens,request_num_gen_tokens\n" +
		"a,0.2000,0.0500,0.1000,8,4\nb,0.1000,0.0333,,7,3\n"
	if got := readFile(t, filepath.Join(dir2, RequestMetricsFile)); got != want {
		t.Errorf("request_metrics.csv = %q, want %q", got, want)
	}
}

// A run without any request (its artifact could not be opened) writes nothing; one with
// only warmup requests writes a header-only request_metrics.csv.
func TestTablesEmptyRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	writeTables(t, dir, []artifact.Record{&artifact.RunJudgement{Outcome: "failed"}})
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("a run without requests created %s: %v", dir, err)
	}
	writeTables(t, dir, smallRun()[:2])
	if got := readFile(t, filepath.Join(dir, RequestMetricsFile)); got != "Request Id\n" {
		t.Errorf("warmup-only request_metrics.csv = %q", got)
	}
}
