package loadgen

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/loadgen/client"
	"github.com/inferprobe/inferprobe/loadgen/prompt"
)

// answerServer answers every chat request with status 200, the content type and the body.
func answerServer(t *testing.T, ctype, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", ctype)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1/chat/completions"
}

// runAnswers runs 2 measured requests (closed loop, 1 worker) against endpoint and returns
// their records and the measured-phase tallies.
func runAnswers(t *testing.T, endpoint string, stream bool) ([]*artifact.Request, *CaseStats) {
	t.Helper()
	cfg := &Config{Endpoint: endpoint, Model: "m", RunID: "run-1", Timeout: 5 * time.Second, Stream: stream, StreamUsage: stream,
		Concurrency: []int{1}, InputTokens: []int{16}, OutputTokens: []int{4}, Requests: 2}
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	tok, err := prompt.TiktokenCounter("cl100k_base")
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	c := client.New(client.Options{Timeout: cfg.Timeout})
	defer c.CloseIdle()
	r := NewRunner(cfg, c, tok, sink, "session-1", Hooks{})
	if err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	reqs := sink.requests(PhaseMeasured)
	if len(reqs) != 2 || len(r.Stats()) != 1 {
		t.Fatalf("%d records, %d case stats", len(reqs), len(r.Stats()))
	}
	return reqs, r.Stats()[0]
}

// TestServerErrorTypeAndCodeRecorded: an error object inside a 200 stream, and an
// SGLang-style error body of a 400, keep the server's type and code in their own fields
// (the code as sent, a number's literal), besides the message and the HTTP status.
func TestServerErrorTypeAndCodeRecorded(t *testing.T) {
	stream := `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n" +
		`data: {"error":{"message":"engine failure","type":"InternalServerError","code":500}}` + "\n\n" + "data: [DONE]\n\n"
	reqs, _ := runAnswers(t, answerServer(t, "text/event-stream", stream), true)
	for _, r := range reqs {
		if r.Status != artifact.RequestError || *r.ErrorType != client.ErrTypeStreamError || *r.ErrorMessage != "error object in the stream: engine failure" ||
			*r.HTTPStatus != 200 || r.ServerErrorType == nil || *r.ServerErrorType != "InternalServerError" || r.ServerErrorCode == nil || *r.ServerErrorCode != "500" {
			t.Fatalf("status %s %v %v http %v server %v %v", r.Status, r.ErrorType, r.ErrorMessage, r.HTTPStatus, r.ServerErrorType, r.ServerErrorCode)
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"object":"error","message":"context too long","type":"BadRequestError","param":null,"code":"context_length_exceeded"}`)
	}))
	t.Cleanup(srv.Close)
	reqs, _ = runAnswers(t, srv.URL+"/v1/chat/completions", false)
	for _, r := range reqs {
		if *r.ErrorType != client.ErrTypeHTTPStatus || *r.ErrorMessage != "context too long" || *r.HTTPStatus != 400 ||
			r.ServerErrorType == nil || *r.ServerErrorType != "BadRequestError" || r.ServerErrorCode == nil || *r.ServerErrorCode != "context_length_exceeded" {
			t.Fatalf("%v %v http %v server %v %v", r.ErrorType, r.ErrorMessage, r.HTTPStatus, r.ServerErrorType, r.ServerErrorCode)
		}
	}
	// Without an error from the server, both are null.
	reqs, _ = runAnswers(t, answerServer(t, "application/json", emptyBody), false)
	if reqs[0].ServerErrorType != nil || reqs[0].ServerErrorCode != nil {
		t.Fatalf("server error %v %v", reqs[0].ServerErrorType, reqs[0].ServerErrorCode)
	}
}

const (
	emptyStream = `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n" +
		`data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
		`data: {"choices":[],"usage":{"prompt_tokens":16,"completion_tokens":0,"total_tokens":16}}` + "\n\n" +
		"data: [DONE]\n\n"
	emptyBody = `{"choices":[{"index":0,"message":{"role":"assistant","content":null},"finish_reason":"stop"}]}`
)

// TestNoContentAnswerIsAFailure: a 200 stream whose only chunks are the role and an empty
// delta with finish_reason, and a JSON answer with null content, are recorded as errors of
// type no_content (not ok), with no TTFT, their elapsed time, and the server's usage; the
// run's tallies count them as errors.
func TestNoContentAnswerIsAFailure(t *testing.T) {
	for _, tc := range []struct {
		name, ctype, body string
		stream            bool
	}{
		{"stream", "text/event-stream", emptyStream, true},
		{"json", "application/json", emptyBody, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reqs, st := runAnswers(t, answerServer(t, tc.ctype, tc.body), tc.stream)
			for _, r := range reqs {
				if r.Status != artifact.RequestError || r.ErrorType == nil || *r.ErrorType != client.ErrTypeNoContent {
					t.Fatalf("status %s error_type %v (%v)", r.Status, r.ErrorType, r.ErrorMessage)
				}
				if r.ErrorMessage == nil || *r.ErrorMessage != "the answer completed without content, reasoning or tool calls (finish_reason stop)" {
					t.Fatalf("error_message %v", r.ErrorMessage)
				}
				if r.TTFTMS != nil || r.E2ELatencyMS == nil || r.FinishReason == nil || *r.FinishReason != "stop" || *r.HTTPStatus != 200 {
					t.Fatalf("ttft %v e2e %v finish %v http %v", r.TTFTMS, r.E2ELatencyMS, r.FinishReason, r.HTTPStatus)
				}
				if (r.FirstChunkLatencyMS != nil) != tc.stream {
					t.Fatalf("first chunk %v", r.FirstChunkLatencyMS)
				}
				if tc.stream && (r.OutputTokens == nil || *r.OutputTokens != 0 || r.OutputTokenSource != SourceServerUsage) {
					t.Fatalf("output tokens %v (%s)", r.OutputTokens, r.OutputTokenSource)
				}
			}
			if st.ByStatus[client.Error] != 2 || st.ByStatus[client.OK] != 0 {
				t.Fatalf("tallies %v", st.ByStatus)
			}
		})
	}
}
