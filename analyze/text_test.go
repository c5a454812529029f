package analyze

import (
	"fmt"
	"strings"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
)

// Beyond the five most common failure reasons, the report says how many more there are and
// how many failed requests they hold.
func TestReportFailureReasonsOmitted(t *testing.T) {
	records := []rec{sessionRec("running"), windowRec()}
	// Reasons with 3, 3, 2, 2, 2, 1, 1 requests: two reasons and two requests are left over.
	counts := []int{3, 3, 2, 2, 2, 1, 1}
	i := 0
	for reason, n := range counts {
		for range n {
			records = append(records, requestRec(i, "error", "error_type", "http_error", "http_status", 500+reason,
				"error_message", fmt.Sprintf("HTTP %d", 500+reason)))
			i++
		}
	}
	r, js, txt := analyzeRecs(t, Options{}, append(records, sessionRec("completed"))...)
	s := r.Summary
	if len(s.FailureReasons) != MaxFailureReasons || s.FailureReasonsOmitted != 2 || s.FailedRequestsOmitted != 2 || s.FailedRequests != 14 {
		t.Fatalf("summary %+v", s)
	}
	if !strings.Contains(txt, "  2× error, HTTP 504, http_error: HTTP 504\n  … and 2 more reasons (2 requests)\nFailure rate:") {
		t.Errorf("text:\n%s", txt)
	}
	if !strings.Contains(js, `"failure_reasons_omitted": 2`) || !strings.Contains(js, `"failed_requests_omitted": 2`) {
		t.Errorf("JSON lacks the omitted counts")
	}
	// Five reasons or fewer: no "more" line.
	_, _, txt = analyzeRecs(t, Options{}, records[:2+3+3+2]...)
	if strings.Contains(txt, "more reason") {
		t.Errorf("text with 3 reasons:\n%s", txt)
	}
}

// A percentile over fewer successful values than the rule's n_min is marked in the text; a
// sufficient one is not.
func TestReportInsufficientMarker(t *testing.T) {
	_, _, txt := analyzeRecs(t, Options{}, append([]rec{sessionRec("running"), windowRec("scheduled_arrivals", 30)}, manyRequests(30)...)...)
	if !strings.Contains(txt, "- c1: p50 E2E=500.00 ms, p95 E2E=500.00 ms [insufficient n=30<230], p50 TTFT=100.00 ms, ") {
		t.Errorf("text:\n%s", txt)
	}
}

func manyRequests(n int) []rec {
	out := make([]rec, n)
	for i := range out {
		out[i] = requestRec(i, "ok")
	}
	return out
}

// Cases are reported in the order the workload gave them, not sorted as text.
func TestReportCaseOrder(t *testing.T) {
	var records []rec
	wl := workloadRec(rec{"mode": "fixed-rate", "rate_per_second": 10}, 1)
	var cases []rec
	for _, id := range []string{"poisson10", "poisson5", "closed2"} {
		cases = append(cases, rec{"case_id": id, "input_tokens": 8, "output_tokens": 4, "concurrency": nil, "max_in_flight": 128,
			"arrival": rec{"mode": "fixed-rate", "rate_per_second": 10}})
	}
	wl["cases"] = cases
	records = append(records, sessionRec("running"), wl)
	// poisson5 and poisson10 as the workload names them, and a case it does not name.
	for i, id := range []string{"zeta", "poisson5", "poisson10"} {
		records = append(records, requestRec(i, "ok", "case_id", id, "request_id", id+"_0"))
	}
	r, js, txt := analyzeRecs(t, Options{}, records...)
	if got := strings.Join(r.CaseOrder, " "); got != "poisson10 poisson5 zeta" {
		t.Fatalf("case order %q", got)
	}
	p10, p5, z := strings.Index(txt, "- poisson10:"), strings.Index(txt, "- poisson5:"), strings.Index(txt, "- zeta:")
	if p10 < 0 || !(p10 < p5 && p5 < z) {
		t.Errorf("text order:\n%s", txt)
	}
	if !strings.Contains(js, "\"case_order\": [\n    \"poisson10\",\n    \"poisson5\",\n    \"zeta\"\n  ]") {
		t.Errorf("JSON case_order:\n%s", js)
	}
}

// The memory line shows the client-local peaks and, once server telemetry is joined, the
// server's maxima.
func TestReportMemoryLine(t *testing.T) {
	_, _, txt := analyzeRecs(t, Options{}, serverRecords()...)
	if !strings.Contains(txt, "\n  memory: client-local peak RSS 4.14 KiB\n") {
		t.Errorf("client-local:\n%s", txt)
	}
	samples := serverRSS("run-1")
	for i := range samples {
		samples[i].ValueBytes = artifact.Ptr(int64(2_590_000_000) + int64(i))
	}
	st := &ServerTelemetry{Samples: samples, DirectServer: true}
	_, _, txt = analyzeRecs(t, Options{ServerTelemetry: st}, serverRecords()...)
	if !strings.Contains(txt, "\n  memory: client-local peak RSS 4.14 KiB; server max process RSS 2.41 GiB (21 samples)\n") {
		t.Errorf("joined:\n%s", txt)
	}
}

func TestBytesText(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.00 KiB", 1536: "1.50 KiB", 10 << 20: "10.0 MiB",
		200 << 30: "200 GiB", -2048: "-2.00 KiB", 1 << 62: "4.00 EiB"} {
		if got := bytesText(n); got != want {
			t.Errorf("bytesText(%d) = %q, want %q", n, got, want)
		}
	}
}

// A server's error text cannot drive the terminal: control and format characters are
// escaped, words joined by single spaces.
func TestOneLineEscapesControls(t *testing.T) {
	for in, want := range map[string]string{
		"engine failure":                  "engine failure",
		"evil \x1b[2J\x1b[31mFAKE OK\x00": `evil \x1b[2J\x1b[31mFAKE OK\x00`,
		"t\x1b]0;title\x07":               `t\x1b]0;title\a`,
		"a\r\nb\tc":                       "a b c",
		"rtl \u202eevil\u200b":            `rtl \u202eevil\u200b`,
		"del\x7f c1\u0085x":               `del\x7f c1 x`,
		"naïve 日本語":                       "naïve 日本語",
	} {
		if got := oneLine(in); got != want {
			t.Errorf("oneLine(%q) = %q, want %q", in, got, want)
		}
	}
}

// The engine part of the vLLM summary line names engines only when some scrape was read.
func TestVLLMSummaryEngines(t *testing.T) {
	for _, c := range []struct {
		sum  VLLMEngineSummary
		want string
	}{
		{VLLMEngineSummary{Scrapes: ScrapeCounts{OK: 0, Failed: 2}}, "vLLM telemetry: 0 scrapes ok, 2 failed; no series read; "},
		{VLLMEngineSummary{Scrapes: ScrapeCounts{OK: 3}}, "vLLM telemetry: 3 scrapes ok, 0 failed; no engine label on the vllm: series; "},
		{VLLMEngineSummary{Scrapes: ScrapeCounts{OK: 3}, Engines: []string{"0", "1"}}, `vLLM telemetry: 3 scrapes ok, 0 failed; 2 engines (engine="0", "1"); `},
	} {
		var b strings.Builder
		sum := c.sum
		if err := RenderVLLMSummary(&b, &VLLMBlock{Status: VLLMCollected, Engine: &sum}, nil); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(b.String(), c.want) {
			t.Errorf("got %q, want the prefix %q", b.String(), c.want)
		}
	}
}
