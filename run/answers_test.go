package run

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/exporter"
	"github.com/inferprobe/inferprobe/loadgen"
)

// Streamed answers of a 200 response, in the shapes servers send.
const (
	contentAnswer = `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n" +
		`data: {"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}` + "\n\n" +
		`data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
		`data: {"choices":[],"usage":{"prompt_tokens":16,"completion_tokens":1,"total_tokens":17}}` + "\n\n" +
		"data: [DONE]\n\n"
	noContentAnswer = `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n" +
		`data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
		"data: [DONE]\n\n"
	streamErrorAnswer = `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n" +
		`data: {"error":{"message":"engine failure","type":"InternalServerError","code":500}}` + "\n\n" +
		"data: [DONE]\n\n"
)

// answersServer answers the i-th chat request with answers[i % len(answers)], status 200.
func answersServer(t *testing.T, answers ...string) string {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, answers[int(n.Add(1)-1)%len(answers)])
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1/chat/completions"
}

// runAnswers runs requests measured requests (closed loop, 1 worker, streaming) against
// endpoint, the live exporter among the sinks, and returns the result and the exporter.
func runAnswers(t *testing.T, endpoint string, requests int) (*Result, *exporter.Exporter) {
	t.Helper()
	cfg := &loadgen.Config{Endpoint: endpoint, Model: "m", RunID: "run-answers", Timeout: 5 * time.Second, Stream: true, StreamUsage: true,
		Concurrency: []int{1}, InputTokens: []int{16}, OutputTokens: []int{4}, Requests: requests}
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	exp := exporter.New(exporter.Options{})
	res := New(Spec{Workload: cfg, Tokenizer: tokenizer(t), Output: filepath.Join(t.TempDir(), "a.jsonl"),
		Sinks: []artifact.Sink{exp.StartRun(exporter.Labels{Target: "t", Model: "m", Probe: "p"})}}).Execute(context.Background())
	if res.Err != nil || res.Report == nil {
		t.Fatalf("result %+v", res)
	}
	return res, exp
}

// liveCounts are the exporter's inferprobe_requests_total by status and the sample count of
// inferprobe_e2e_seconds.
func liveCounts(t *testing.T, exp *exporter.Exporter) (byStatus map[string]float64, e2e uint64) {
	t.Helper()
	fams, err := exp.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	byStatus = map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			switch f.GetName() {
			case "inferprobe_requests_total":
				for _, l := range m.GetLabel() {
					if l.GetName() == exporter.LabelStatus {
						byStatus[l.GetValue()] += m.GetCounter().GetValue()
					}
				}
			case "inferprobe_e2e_seconds":
				e2e += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return byStatus, e2e
}

// TestAnswerFailuresInReportAndLiveSeries: 200 streams that carry only a role chunk and an
// empty delta with finish_reason (no_content), and 200 streams that carry an error object
// (stream_error, with the server's type and code), are failures in the report's summary,
// its failure reasons (JSON and text) and its latency population, and in the live series:
// inferprobe_requests_total counts them as errors and the e2e histogram holds only the
// successful requests.
func TestAnswerFailuresInReportAndLiveSeries(t *testing.T) {
	res, exp := runAnswers(t, answersServer(t, contentAnswer, noContentAnswer, streamErrorAnswer), 6)
	s := res.Report.Summary
	if s.TotalRequests != 6 || s.SuccessfulRequests != 2 || s.FailedRequests != 4 || s.FailuresByStatus[artifact.RequestError] != 4 {
		t.Fatalf("summary %+v", s)
	}
	const noContent = "the answer completed without content, reasoning or tool calls (finish_reason stop)"
	const streamErr = "error object in the stream: engine failure"
	if len(s.FailureReasons) != 2 {
		t.Fatalf("failure reasons %+v", s.FailureReasons)
	}
	for i, want := range []struct{ typ, msg, srvType, srvCode string }{{"no_content", noContent, "", ""}, {"stream_error", streamErr, "InternalServerError", "500"}} {
		fr := s.FailureReasons[i]
		if fr.Count != 2 || fr.Status != artifact.RequestError || fr.ErrorType == nil || *fr.ErrorType != want.typ ||
			fr.ErrorMessage == nil || *fr.ErrorMessage != want.msg || fr.HTTPStatus == nil || *fr.HTTPStatus != 200 ||
			str(fr.ServerErrorType) != want.srvType || str(fr.ServerErrorCode) != want.srvCode {
			t.Fatalf("failure reason %d %+v", i, fr)
		}
	}
	var text bytes.Buffer
	if err := analyze.RenderText(&text, res.Report); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"  2× error, HTTP 200, no_content: " + noContent + "\n",
		"  2× error, HTTP 200, stream_error (InternalServerError, code 500): " + streamErr + "\n"} {
		if !strings.Contains(text.String(), want) {
			t.Fatalf("text report lacks %q:\n%s", want, text.String())
		}
	}
	byStatus, e2e := liveCounts(t, exp)
	if byStatus[artifact.RequestOK] != 2 || byStatus[artifact.RequestError] != 4 || e2e != 2 {
		t.Fatalf("live requests %v, e2e samples %d; the report has 2 successful, 4 failed", byStatus, e2e)
	}
	if !res.Succeeded() || res.Stats[0].ByStatus["error"] != 4 {
		t.Fatalf("stats %+v", res.Stats[0].ByStatus)
	}
}

// str is *p, "" for nil.
func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
