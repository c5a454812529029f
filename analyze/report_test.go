package analyze

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
)

type rec map[string]any

func (r rec) with(kv ...any) rec {
	out := rec{}
	for k, v := range r {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}

// writeArtifact writes records as JSONL and reads it back through the artifact reader.
func writeArtifact(t *testing.T, records ...rec) *artifact.Artifact {
	t.Helper()
	var b bytes.Buffer
	for _, r := range records {
		line, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	path := filepath.Join(t.TempDir(), "infer.jsonl")
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := artifact.ReadFile(path)
	if err != nil {
		t.Fatalf("ReadFile: %v\n%s", err, b.String())
	}
	return a
}

func sessionRec(status string) rec {
	return rec{"event_type": "infer.session", "schema_version": 1, "session_id": "s1", "timestamp_ns": start, "status": status}
}

// requestRec is the JSON twin of req(): case c1, sent at START + i·0.1 s, 0.5 s long.
func requestRec(i int, status string, kv ...any) rec {
	at := start + int64(i)*second/10
	r := rec{
		"event_type": "infer.request", "schema_version": 1, "session_id": "s1", "case_id": "c1", "phase": "measured",
		"request_id": fmt.Sprintf("c1_measured_%d", i), "x_request_id": fmt.Sprintf("stormlog-run-c1_measured_%d", i),
		"request_index": i, "status": status, "intended_at_ns": at, "started_at_ns": at, "timestamp_ns": at, "ended_at_ns": at + second/2,
		"arrival_mode": "fixed-rate", "stream": true, "chunk_interarrival_ms": []float64{},
	}
	if status == "ok" {
		r = r.with("e2e_latency_ms", 500.0, "ttft_ms", 100.0, "output_tokens", 4, "total_tokens", 12, "output_token_source", "server_usage", "prompt_tokens", 8)
	}
	return r.with(kv...)
}

func windowRec(kv ...any) rec {
	return rec{
		"event_type": "infer.phase_window", "schema_version": 1, "session_id": "s1", "case_id": "c1", "phase": "measured",
		"arrival_mode": "fixed-rate", "started_at_ns": start, "window_ended_at_ns": start + second, "drained_at_ns": start + 2*second,
		"scheduled_arrivals": 10, "scheduled_endpoint_offset_ns": second, "abandoned_requests": rec{"running_at_start": 0, "waited_seconds": 0, "still_running": 0},
	}.with(kv...)
}

func workloadRec(arrival rec, count any) rec {
	return rec{
		"event_type": "infer.workload", "schema_version": 1, "session_id": "s1", "workload_digest": strings.Repeat("ab", 32), "seed": 7,
		"generator":   rec{"name": "inferprobe.synthetic", "version": 1},
		"cases":       []rec{{"case_id": "c1", "input_tokens": 8, "output_tokens": 4, "concurrency": nil, "max_in_flight": 128, "arrival": arrival}},
		"measurement": rec{"request_count": count, "duration_seconds": nil, "max_in_flight": 128, "overflow": "wait", "drain_timeout_seconds": 60, "timeout_seconds": 60},
	}
}

func sloRec(doc string) rec {
	return rec{"event_type": "infer.slo", "schema_version": 1, "session_id": "s1", "source": "flags", "digest": "", "slo": json.RawMessage(doc)}
}

func tenRequests(kv ...any) []rec {
	out := make([]rec, 10)
	for i := range out {
		out[i] = requestRec(i, "ok", kv...)
	}
	return out
}

func analyzeRecs(t *testing.T, opts Options, records ...rec) (*Report, string, string) {
	t.Helper()
	r, err := Analyze(writeArtifact(t, records...), opts)
	if err != nil {
		t.Fatalf("Analyze: %v", err)
	}
	var js, txt bytes.Buffer
	if err := WriteJSON(&js, r); err != nil {
		t.Fatal(err)
	}
	if err := RenderText(&txt, r); err != nil {
		t.Fatal(err)
	}
	return r, js.String(), txt.String()
}

// The report over a scheduled window.
func TestReportVersion2(t *testing.T) {
	records := append([]rec{sessionRec("running")}, tenRequests()...)
	records = append(records, windowRec(), workloadRec(rec{"mode": "fixed-rate", "rate_per_second": 10}, 10), sessionRec("completed"))
	r, js, txt := analyzeRecs(t, Options{}, records...)
	c := r.Cases["c1"]
	if r.AnalysisVersion != 5 || c.Population.Offered != 10 || !c.Population.CohortValid || c.Intervals.Rate.Kind != KindScheduledWindow {
		t.Fatalf("report %+v", r)
	}
	tp := c.Throughput
	if *tp.IntervalKind != KindScheduledWindow || *tp.NumeratorCohort != CohortArrival || !eq(tp.IntervalSeconds, 1) ||
		!eq(tp.RequestsPerSecond, 10) || !eq(tp.OutputTokensPerSecond, 40) || !eq(tp.TotalTokensPerSecond, 120) {
		t.Errorf("throughput %+v", tp)
	}
	if strings.Contains(js, "duration_seconds\": 0") || strings.Contains(js, `"throughput": {`+"\n"+`      "duration_seconds"`) {
		t.Error("version-1 duration_seconds in throughput")
	}
	var tree map[string]any
	if err := json.Unmarshal([]byte(js), &tree); err != nil {
		t.Fatal(err)
	}
	if _, ok := tree["cases"].(map[string]any)["c1"].(map[string]any)["throughput"].(map[string]any)["duration_seconds"]; ok {
		t.Error("throughput.duration_seconds present")
	}
	if tree["analysis_version"] != 5.0 || tree["slo"] != nil {
		t.Errorf("analysis_version %v slo %v", tree["analysis_version"], tree["slo"])
	}
	if !strings.Contains(txt, "rates per scheduled window of 1.00 s (arrival cohort)") {
		t.Errorf("text:\n%s", txt)
	}
	if r.Summary.TotalRequests != 10 || r.Summary.CaseCount != 1 || *r.Summary.FailureRate != 0 || *r.Summary.SessionStatus != "completed" {
		t.Errorf("summary %+v", r.Summary)
	}
	if r.Workload["workload_digest"] != strings.Repeat("ab", 32) || !strings.Contains(txt, "Workload digest: "+strings.Repeat("ab", 32)+" (seed 7)") {
		t.Errorf("workload %v", r.Workload)
	}
	// Without a policy, slo is null and no case has an slo key.
	if _, ok := tree["cases"].(map[string]any)["c1"].(map[string]any)["slo"]; ok || strings.Contains(txt, "SLO") {
		t.Error("slo block without a policy")
	}
	checkSortedKeys(t, js)
	// Chunk gaps are never called token-level latency outside telemetry.vllm.
	for _, banned := range []string{"itl", "inter_token", "inter-token"} {
		if strings.Contains(strings.ToLower(js), banned) {
			t.Errorf("report mentions %q", banned)
		}
	}
	if c.Cache.Requested != "unspecified" || c.Cache.RunKind != nil || c.Memory.ObservationScope != "client_local" {
		t.Errorf("cache %+v memory %+v", c.Cache, c.Memory)
	}
	for _, key := range artifact.ClientMetrics {
		if _, ok := c.Latency.Metrics[key]; !ok {
			t.Errorf("latency block lacks %s", key)
		}
	}
	if len(c.Latency.Metrics) != 5 {
		t.Errorf("latency metrics %d", len(c.Latency.Metrics))
	}
}

// checkSortedKeys walks the JSON and checks every object's keys are in sorted order.
func checkSortedKeys(t *testing.T, js string) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(js))
	type frame struct {
		object bool
		keys   []string
		key    bool
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].key {
			if s, ok := tok.(string); ok {
				stack[n-1].keys = append(stack[n-1].keys, s)
				stack[n-1].key = false
				continue
			}
		}
		switch d, _ := tok.(json.Delim); d {
		case '{':
			stack = append(stack, &frame{object: true, key: true})
			continue
		case '[':
			stack = append(stack, &frame{})
			continue
		case '}', ']':
			top := stack[len(stack)-1]
			if top.object && !sort.StringsAreSorted(top.keys) {
				t.Errorf("keys not sorted: %v", top.keys)
			}
			stack = stack[:len(stack)-1]
		}
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].key = true
		}
	}
	if !strings.HasPrefix(js, "{\n  \"analysis_version\": 5,\n") || !strings.HasSuffix(js, "}\n") {
		t.Errorf("not pretty-printed: %.60q", js)
	}
}

// How the session ended.
func TestReportSessionStatus(t *testing.T) {
	six := make([]rec, 6)
	for i := range six {
		six[i] = requestRec(i, "ok")
	}
	interrupted := append(append([]rec{sessionRec("running")}, six...), workloadRec(rec{"mode": "fixed-rate", "rate_per_second": 10}, 10), sessionRec("interrupted"))
	r, _, txt := analyzeRecs(t, Options{}, interrupted...)
	if *r.Summary.SessionStatus != "interrupted" || !r.Summary.SessionClosed || r.Cases["c1"].Population.CohortValid || !strings.Contains(txt, "Session status: interrupted\n") ||
		!strings.Contains(txt, "phase_window_missing") || !strings.Contains(txt, "no rate interval (phase_window_missing)") {
		t.Errorf("interrupted:\n%s", txt)
	}
	completed := append(append([]rec{sessionRec("running")}, six...), windowRec("scheduled_arrivals", 6), sessionRec("completed"))
	r, _, txt = analyzeRecs(t, Options{}, completed...)
	if *r.Summary.SessionStatus != "completed" || strings.Contains(txt, "Session status") {
		t.Errorf("completed:\n%s", txt)
	}
	// A producer killed before its final line leaves the running record last.
	r, _, txt = analyzeRecs(t, Options{}, append([]rec{sessionRec("running")}, six...)...)
	if *r.Summary.SessionStatus != "running" || r.Summary.SessionClosed ||
		!strings.Contains(txt, "Session status: never closed (no final infer.session record: the producer was killed, or is still running)\n") {
		t.Errorf("killed:\n%s", txt)
	}
}

// A replay without an endpoint has no rates, and says so.
func TestReportReplayWithoutEndpoint(t *testing.T) {
	records := append([]rec{sessionRec("running")}, tenRequests("arrival_mode", "replay")...)
	records = append(records, windowRec("arrival_mode", "replay", "scheduled_endpoint_offset_ns", nil),
		workloadRec(rec{"mode": "replay", "trace": rec{"source": "offset_ms trace", "case_id": nil, "arrivals": 10, "digest": strings.Repeat("cd", 32)}}, 10))
	policy := flags(t, "e2e:1000")
	r, _, txt := analyzeRecs(t, Options{Policy: policy, PolicySource: SourceFlags}, records...)
	c := r.Cases["c1"]
	if c.Throughput.IntervalKind != nil || c.Throughput.RequestsPerSecond != nil || !strings.Contains(txt, "no rate interval (endpoint_undeclared)") {
		t.Errorf("throughput %+v\n%s", c.Throughput, txt)
	}
	if c.SLO.Status != EvaluationEvaluated || c.SLO.Met != 10 || c.SLO.GoodputLowerRPS != nil ||
		!strings.Contains(txt, "SLO cli: attainment 100.0% of 10 offered, goodput - (no rate interval)") {
		t.Errorf("slo %+v\n%s", c.SLO, txt)
	}
}

// A closed-loop artifact judged by e2e:200 over 4 s.
func TestReportClosedLoopSLO(t *testing.T) {
	records := []rec{sessionRec("running")}
	for i, e2e := range []float64{100, 150, 250, 300} {
		records = append(records, requestRec(i, "ok", "e2e_latency_ms", e2e, "arrival_mode", "closed", "intended_at_ns", nil))
	}
	records = append(records, windowRec("arrival_mode", "closed", "scheduled_arrivals", nil, "scheduled_endpoint_offset_ns", nil,
		"drained_at_ns", start+4*second))
	r, js, txt := analyzeRecs(t, Options{Policy: flags(t, "e2e:200"), PolicySource: SourceFlags}, records...)
	e := r.Cases["c1"].SLO
	if e.Offered != 4 || e.Met != 2 || !eq(e.GoodputLowerRPS, 0.5) || e.Interval.Kind != KindMeasuredSpan || e.RealizedOfferedRatePerSecond != nil {
		t.Errorf("evaluation %+v", e)
	}
	if !strings.Contains(txt, "SLO cli: attainment 50.0% of 4 offered, goodput 0.50 req/s\n") || !strings.Contains(txt, "rates per measured span of 4.00 s (all measured)") {
		t.Errorf("text:\n%s", txt)
	}
	if r.SLO == nil || r.SLO.Name != "cli" || r.SLO.Source != "flags" || r.SLO.Digest != flags(t, "e2e:200").Digest() || r.SLO.Policy["format"] != PolicyFormat {
		t.Errorf("slo info %+v", r.SLO)
	}
	// A closed loop without drops or failures has no arrivals line.
	if strings.Contains(txt, "arrivals:") {
		t.Errorf("closed-loop arrivals line:\n%s", txt)
	}
	if !strings.Contains(js, `"slo_source": "flags"`) || !strings.Contains(js, `"format": "stormlog.infer.slo_evaluation"`) {
		t.Error("evaluation record missing from the JSON")
	}
}

// The artifact's own policy, and what happens when it cannot be used.
func TestReportArtifactPolicy(t *testing.T) {
	base := append([]rec{sessionRec("running")}, tenRequests()...)
	base = append(base, windowRec())
	r, _, txt := analyzeRecs(t, Options{}, append(base, sloRec(validPolicy))...)
	if r.SLO == nil || r.SLO.Source != SourceArtifact || r.SLO.Name != "chat_interactive" || r.Cases["c1"].SLO.SLOSource != SourceArtifact {
		t.Fatalf("artifact policy %+v", r.SLO)
	}
	// TTFT 100 ms passes 500; TPOT (500 − 100)/(4 − 1) = 133.3 ms fails 50: jointly none met.
	pc := r.Cases["c1"].SLO.PerCriterion
	if pc["client.ttft"].Pass != 10 || pc["client.tpot"].Fail != 10 ||
		!strings.Contains(txt, "SLO chat_interactive: attainment 0.0% of 10 offered, goodput 0.00 req/s\n") {
		t.Errorf("per criterion %+v\n%s", pc, txt)
	}
	for name, slos := range map[string][]rec{
		"two records": {sloRec(validPolicy), sloRec(validPolicy)},
		"invalid":     {sloRec(`{"format":"stormlog.infer.slo","version":2}`)},
		"client.itl":  {sloRec(`{"format":"stormlog.infer.slo","version":1,"name":"a","criteria":[{"metric":"itl","boundary":"client","max_ms":5}]}`)},
	} {
		a := writeArtifact(t, append(append([]rec{}, base...), slos...)...)
		_, err := Analyze(a, Options{})
		if err == nil || !errors.Is(err, artifact.ErrInvalidArtifact) || !errors.Is(err, ErrSLORecord) {
			t.Errorf("%s: error %v", name, err)
		}
		// Overridden by flags: analysed, with a warning naming what was set aside.
		r, err := Analyze(a, Options{Policy: flags(t, "ttft:200"), PolicySource: SourceFlags})
		if err != nil || r.SLO.Name != "cli" || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "could not be used") {
			t.Errorf("%s overridden: %v %v", name, err, r)
		}
	}
	// A valid recorded policy replaced by flags: the warning names it and its digest prefix.
	recorded := mustPolicy(t, validPolicy)
	r, err := Analyze(writeArtifact(t, append(base, sloRec(validPolicy))...), Options{Policy: flags(t, "ttft:200"), PolicySource: SourceFile})
	if err != nil || r.SLO.Source != SourceFile || len(r.Warnings) != 1 ||
		!strings.Contains(r.Warnings[0], "chat_interactive (digest "+recorded.Digest()[:12]+")") {
		t.Errorf("replacement warning %q (%v)", r.Warnings, err)
	}
}

// An invalid cohort shows in the text, and in the case's SLO evaluation.
func TestReportInvalidCohort(t *testing.T) {
	records := []rec{sessionRec("running")}
	for i := 0; i < 9; i++ {
		records = append(records, requestRec(i, "ok"))
	}
	records = append(records, requestRec(3, "ok", "request_id", "again", "x_request_id", "again"), windowRec())
	r, _, txt := analyzeRecs(t, Options{Policy: flags(t, "e2e:1000")}, records...)
	if !strings.Contains(txt, "cohort invalid: request_index_repeated, records_missing: 1 of 10") {
		t.Errorf("text:\n%s", txt)
	}
	e := r.Cases["c1"].SLO
	if e.CohortValid == nil || *e.CohortValid || !contains(e.CohortIssues, "records_missing: 1 of 10") || e.SLOSource != SourceFlags {
		t.Errorf("evaluation cohort %v %v", e.CohortValid, e.CohortIssues)
	}
}

// Open-loop arrivals line with drops, holds and the E2E-from-intended p95.
func TestReportArrivalsLine(t *testing.T) {
	records := []rec{sessionRec("running"),
		requestRec(0, "ok", "dispatch_lag_ms", 1.0, "in_flight_at_dispatch", 1, "held_for_slot", false),
		requestRec(1, "ok", "dispatch_lag_ms", 101.0, "in_flight_at_dispatch", 1, "held_for_slot", true, "intended_at_ns", start),
		requestRec(2, "dropped", "held_for_slot", true, "started_at_ns", start+second/5, "ended_at_ns", start+second/5, "x_request_id", nil),
		windowRec("scheduled_arrivals", 3),
	}
	_, _, txt := analyzeRecs(t, Options{}, records...)
	want := "  arrivals: fixed-rate, offered 3, sent 2, dropped 1, held for a slot 1, peak in flight 1, dispatch lag p95 96.00 ms, E2E-from-intended p95 "
	if !strings.Contains(txt, want) {
		t.Errorf("text:\n%s\nwant %q", txt, want)
	}
}

// Server evidence: admitted counts, server metrics only with joined spans, quarantined spans
// are unknown.
func TestReportServerEvidence(t *testing.T) {
	records := append([]rec{sessionRec("running")}, tenRequests()...)
	records = append(records, windowRec())
	server := &ServerEvidence{
		Spans:       map[string]map[string]any{},
		Quarantined: map[string]string{"stormlog-run-c1_measured_9": "conflicting_spans"},
	}
	for i := 0; i < 8; i++ {
		server.Spans[fmt.Sprintf("stormlog-run-c1_measured_%d", i)] = map[string]any{"gen_ai.latency.time_to_first_token": 0.05 * float64(i+1)}
	}
	r, _, _ := analyzeRecs(t, Options{Server: server, Policy: flags(t, "server.ttft:200")}, records...)
	c := r.Cases["c1"]
	if *c.Population.ServerAdmitted != 9 || !eq(c.Population.ServerEvidenceCoverage, 0.9) {
		t.Errorf("admitted %d coverage %s", *c.Population.ServerAdmitted, fstr(c.Population.ServerEvidenceCoverage))
	}
	m, ok := c.Latency.Metrics["server.ttft"]
	if !ok || m.SuccessfulMissing != 2 || m.Successful["p50"].N != 8 {
		t.Errorf("server.ttft %+v", m)
	}
	// 0.05…0.40 s: four pass (≤ 200 ms), four fail; two unknown (no span, quarantined).
	if e := c.SLO; e.Met != 4 || e.Unknown != 2 || e.Missed != 4 || !eq(e.AttainmentLower, 0.4) || !eq(e.AttainmentUpper, 0.6) {
		t.Errorf("evaluation %+v", e)
	}
	// Without evidence: no server metrics, admission null.
	r, _, _ = analyzeRecs(t, Options{}, records...)
	if _, ok := r.Cases["c1"].Latency.Metrics["server.ttft"]; ok || r.Cases["c1"].Population.ServerAdmitted != nil {
		t.Error("server figures without server evidence")
	}
}

// The SLO line of the contract, byte for byte.
func TestSLOLine(t *testing.T) {
	e := &Evaluation{SLOName: "cli", Status: EvaluationEvaluated, Offered: 200, Unknown: 5,
		AttainmentLower: pf(0.96), AttainmentUpper: pf(0.985), GoodputLowerRPS: pf(9.6), GoodputUpperRPS: pf(9.85)}
	if got := SLOLine(e); got != "SLO cli: attainment 96.0%-98.5% of 200 offered, goodput 9.60-9.85 req/s, 5 unknown" {
		t.Errorf("SLO line %q", got)
	}
	u := &Evaluation{SLOName: "cli", Status: EvaluationUnmeasurable, Reason: ps("client.ttft: no_client_ttft"), Offered: 3}
	if got := SLOLine(u); got != "SLO cli: unmeasurable (client.ttft: no_client_ttft) over 3 offered" {
		t.Errorf("unmeasurable line %q", got)
	}
}

func TestAnalyzeRejectsIncompleteArtifacts(t *testing.T) {
	if _, err := Analyze(writeArtifact(t, sessionRec("running")), Options{}); !errors.Is(err, artifact.ErrInvalidArtifact) {
		t.Errorf("no requests: %v", err)
	}
	if _, err := Analyze(writeArtifact(t, requestRec(0, "ok")), Options{}); !errors.Is(err, artifact.ErrInvalidArtifact) {
		t.Errorf("no session: %v", err)
	}
	if _, err := Analyze(nil, Options{}); !errors.Is(err, artifact.ErrInvalidArtifact) {
		t.Errorf("nil artifact: %v", err)
	}
	// Every request failed: still a report (exit 0 is the CLI's), with zero goodput.
	records := []rec{sessionRec("running")}
	for i := 0; i < 5; i++ {
		records = append(records, requestRec(i, "error", "e2e_latency_ms", 3.0))
	}
	r, _, txt := analyzeRecs(t, Options{Policy: flags(t, "ttft:200")}, append(records, windowRec("scheduled_arrivals", 5))...)
	if r.Summary.FailedRequests != 5 || !eq(r.Summary.FailureRate, 1) || r.Summary.FailuresByStatus["error"] != 5 ||
		!strings.Contains(txt, "Failed requests: 5 (error 5)") || !strings.Contains(txt, "Failure rate: 100.00%") ||
		!eq(r.Cases["c1"].SLO.GoodputLowerRPS, 0) || r.Cases["c1"].SLO.EvidenceCoverage != nil {
		t.Errorf("all failed:\n%s", txt)
	}
	// The reasons of failures: the most frequent first, null fields kept null.
	records = []rec{sessionRec("running"), requestRec(9, "ok")}
	for i := 0; i < 3; i++ {
		records = append(records, requestRec(i, "error", "http_status", 404, "error_type", "http_error", "error_message", "The model `nope` does not exist."))
	}
	records = append(records, requestRec(3, "timeout", "error_type", "timeout", "error_message", "no answer\nwithin 60s"), requestRec(4, "dropped"))
	for i, port := range []int{49388, 50112} { // one reset reason whatever the local port
		records = append(records, requestRec(5+i, "delivery_unknown", "error_type", "no_response",
			"error_message", fmt.Sprintf("read tcp 127.0.0.1:%d->127.0.0.1:8000: recvmsg: connection reset by peer", port)))
	}
	r, _, txt = analyzeRecs(t, Options{}, records...)
	fr := r.Summary.FailureReasons
	if len(fr) != 4 || fr[1].Count != 2 || *fr[1].ErrorMessage != "read tcp 127.0.0.1:*->127.0.0.1:8000: recvmsg: connection reset by peer" {
		t.Errorf("resets: %+v", fr)
	}
	fr = append(fr[:1], fr[2:]...)
	if len(fr) != 3 || fr[0].Count != 3 || fr[0].Status != "error" || fr[0].HTTPStatus == nil || *fr[0].HTTPStatus != 404 ||
		*fr[0].ErrorMessage != "The model `nope` does not exist." || fr[1].Status != "dropped" || fr[1].HTTPStatus != nil || fr[1].ErrorMessage != nil ||
		fr[2].Status != "timeout" || !strings.Contains(txt, "  3× error, HTTP 404, http_error: The model `nope` does not exist.\n") ||
		!strings.Contains(txt, "  1× timeout, timeout: no answer within 60s\n") {
		t.Errorf("failure reasons %+v:\n%s", fr, txt)
	}
	// Warmup records are not analysed.
	r, _, _ = analyzeRecs(t, Options{}, sessionRec("running"), requestRec(0, "ok"), requestRec(1, "ok", "phase", "warmup"))
	if r.Summary.TotalRequests != 1 {
		t.Errorf("warmup counted: %d", r.Summary.TotalRequests)
	}
}

// The cache block comes from the case's infer.cache_state record; memory peaks come from
// client-local system samples inside the case's measured span.
func TestReportCacheAndMemory(t *testing.T) {
	records := append([]rec{sessionRec("running")}, tenRequests()...)
	sample := func(at int64, used, rss any) rec {
		return rec{"event_type": "infer.system_sample", "schema_version": 1, "session_id": "s1", "timestamp_ns": at,
			"sampler": "psutil", "device_used_bytes": used, "process_rss_bytes": rss, "observation_scope": "client_local"}
	}
	records = append(records, windowRec(),
		rec{"event_type": "infer.cache_state", "schema_version": 1, "session_id": "s1", "case_id": "c1", "requested": "cold",
			"reset": rec{"url": "http://127.0.0.1:8000/reset_prefix_cache", "at_ns": start - second, "answered_at_ns": start - second + 5,
				"status": 200, "error": nil, "success": true, "answer": "acknowledged", "attempts": 1},
			"attempted": true, "acknowledged": true, "verified": "unverified",
			"reason": "the cache reset succeeded, but no engine adapter can confirm it", "run_kind": "cold_start"},
		sample(start+second/2, 1000, 50),
		sample(start+second, nil, 70),
		sample(start+5*second, 9999, 9999), // after the drain: not this case's
	)
	r, _, txt := analyzeRecs(t, Options{}, records...)
	c := r.Cases["c1"]
	if c.Cache.Requested != "cold" || c.Cache.Reset == nil || c.Cache.Reset.Answer != "acknowledged" || *c.Cache.RunKind != "cold_start" {
		t.Errorf("cache %+v", c.Cache)
	}
	if !strings.Contains(txt, "  cache: cold requested, unverified (the cache reset succeeded, but no engine adapter can confirm it); run kind cold_start") {
		t.Errorf("text:\n%s", txt)
	}
	if c.Memory.PeakDeviceUsedBytes == nil || *c.Memory.PeakDeviceUsedBytes != 1000 || *c.Memory.PeakProcessRSSBytes != 70 ||
		c.Memory.ServerCoverage.Status != "not_joined" || c.Memory.ObservationScope != "client_local" {
		t.Errorf("memory %+v", c.Memory)
	}
}

// A request record of a schema_version the analysis does not read (none at all, or a future
// one) is named in a warning, not dropped silently; the other requests are analysed as before.
func TestReportWarnsOfUnreadRequests(t *testing.T) {
	recs := append([]rec{sessionRec("running")}, tenRequests()...)
	recs = append(recs, windowRec(), rec{"event_type": artifact.EventRequest},
		rec{"event_type": artifact.EventRequest, "schema_version": 9}, rec{"event_type": artifact.EventRequest, "schema_version": 9})
	r, _, txt := analyzeRecs(t, Options{}, recs...)
	want := []string{
		"1 infer.request record(s) with no (or a zero) schema_version not read: this analysis reads schema_version 1",
		"2 infer.request record(s) with schema_version 9 not read: this analysis reads schema_version 1",
	}
	if !reflect.DeepEqual(r.Warnings, want) {
		t.Fatalf("warnings %q, want %q", r.Warnings, want)
	}
	if n := r.Cases["c1"].SuccessfulRequests; n != 10 {
		t.Errorf("%d requests analysed, want 10\n%s", n, txt)
	}
	if r0, _, _ := analyzeRecs(t, Options{}, append([]rec{sessionRec("running")}, append(tenRequests(), windowRec())...)...); len(r0.Warnings) != 0 {
		t.Errorf("warnings without unread records: %q", r0.Warnings)
	}
}
