package client

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

// The outcome of each answer shape: 2xx JSON bodies, 2xx streams, non-2xx bodies.

func TestNonStreamingBodies(t *testing.T) {
	const noContentMsg = "the answer completed without content, reasoning or tool calls (finish_reason stop)"
	for _, tc := range []struct {
		name, body string
		outcome    Outcome
		typ, msg   string
		text       string
		serverErr  [2]string // type, code
	}{
		{"error object in 200", `{"error":{"message":"bad things","type":"InternalServerError","code":500}}`, Error, ErrTypeResponseError, "error object in the answer: bad things", "", [2]string{"InternalServerError", "500"}},
		{"SGLang error object in 200", `{"object":"error","message":"bad input","type":"BadRequestError","param":null,"code":400}`, Error, ErrTypeResponseError, "error object in the answer: bad input", "", [2]string{"BadRequestError", "400"}},
		{"no choices", `{"id":"x","choices":[]}`, Error, ErrTypeInvalidResponse, "the JSON answer has no choices", "", [2]string{}},
		{"empty content", `{"choices":[{"message":{"role":"assistant","content":""},"finish_reason":"stop"}]}`, Error, ErrTypeNoContent, noContentMsg, "", [2]string{}},
		{"null content", `{"choices":[{"message":{"role":"assistant","content":null},"finish_reason":"stop"}]}`, Error, ErrTypeNoContent, noContentMsg, "", [2]string{}},
		{"empty tool_calls is no content", `{"choices":[{"message":{"role":"assistant","content":"","tool_calls":[ ]},"finish_reason":"stop"}]}`, Error, ErrTypeNoContent, noContentMsg, "", [2]string{}},
		{"tool calls only", `{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`, OK, "", "", "", [2]string{}},
		{"reasoning only", `{"choices":[{"message":{"content":null,"reasoning_content":"hmm"},"finish_reason":"length"}]}`, OK, "", "", "hmm", [2]string{}},
		{"invalid JSON", `{"choices":[`, Error, ErrTypeInvalidJSON, "", "", [2]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, tc.body)
			})
			r := New(Options{}).Do(context.Background(), call(srv.URL, false))
			if r.Outcome != tc.outcome || r.ErrorType != tc.typ || r.HTTPStatus != 200 || r.Text != tc.text {
				t.Fatalf("%+v", shapeOf(r))
			}
			if got := [2]string{r.ServerErrorType, r.ServerErrorCode}; got != tc.serverErr {
				t.Fatalf("server error %q, want %q", got, tc.serverErr)
			}
			if tc.msg != "" && r.ErrorMessage != tc.msg {
				t.Fatalf("message %q", r.ErrorMessage)
			}
		})
	}
}

func TestStreamCases(t *testing.T) {
	for _, tc := range []struct {
		name        string
		frames      []string
		outcome     Outcome
		typ         string
		msgContains string
		finish      string
		text        string
		tokenChunks int
		chunks      int
		done        bool
		comments    int
		usage       *Usage
		answerAt    int // index in TokenChunks of FirstAnswer; -1 none
		serverType  string
		serverCode  string
	}{
		{name: "role chunk then content", frames: []string{chunk(roleChunk, ""), chunk(content("Hi"), ""), chunk(content(" there"), ""), chunk(`{}`, "stop"), doneFrame},
			outcome: OK, finish: "stop", text: "Hi there", tokenChunks: 2, chunks: 4, done: true, answerAt: 0},
		{name: "usage chunk with empty choices", frames: []string{chunk(content("a"), ""), chunk(`{"content":""}`, "length"), usageFrame, doneFrame},
			outcome: OK, finish: "length", text: "a", tokenChunks: 1, chunks: 3, done: true, usage: &Usage{5, 2, 7}, answerAt: 0},
		{name: "no content at all", frames: []string{chunk(roleChunk, ""), chunk(`{"content":""}`, "stop"), doneFrame},
			outcome: Error, typ: ErrTypeNoContent, msgContains: "the answer completed without content, reasoning or tool calls (finish_reason stop)",
			finish: "stop", chunks: 2, done: true, answerAt: -1},
		{name: "role chunk then an empty delta with finish_reason", frames: []string{chunk(roleChunk, ""), chunk(`{}`, "stop"), doneFrame},
			outcome: Error, typ: ErrTypeNoContent, msgContains: "without content, reasoning or tool calls", finish: "stop", chunks: 2, done: true, answerAt: -1},
		{name: "no content, finish_reason without DONE", frames: []string{chunk(roleChunk, ""), chunk(`{}`, "length")},
			outcome: Error, typ: ErrTypeNoContent, msgContains: "(finish_reason length)", finish: "length", chunks: 2, answerAt: -1},
		{name: "only DONE", frames: []string{doneFrame}, outcome: Error, typ: ErrTypeNoContent, msgContains: "without content, reasoning or tool calls", done: true, answerAt: -1},
		{name: "reasoning_content first", frames: []string{chunk(roleChunk, ""), chunk(`{"reasoning_content":"Let me"}`, ""), chunk(`{"reasoning_content":" think"}`, ""), chunk(content("42"), ""), chunk(`{}`, "stop"), doneFrame},
			outcome: OK, finish: "stop", text: "Let me think42", tokenChunks: 3, chunks: 5, done: true, answerAt: 2},
		{name: "reasoning field", frames: []string{chunk(`{"reasoning":"r"}`, ""), chunk(content("c"), "stop"), doneFrame},
			outcome: OK, finish: "stop", text: "rc", tokenChunks: 2, chunks: 2, done: true, answerAt: 1},
		{name: "both reasoning fields counted once", frames: []string{chunk(`{"reasoning":"r","reasoning_content":"r"}`, ""), chunk(content("c"), "stop"), doneFrame},
			outcome: OK, finish: "stop", text: "rc", tokenChunks: 2, chunks: 2, done: true, answerAt: 1},
		{name: "reasoning only", frames: []string{chunk(`{"reasoning_content":"r"}`, "length"), doneFrame},
			outcome: OK, finish: "length", text: "r", tokenChunks: 1, chunks: 1, done: true, answerAt: -1},
		{name: "escapes and unicode in content", frames: []string{chunk(content(`line\nnext \"q\" \u00e9\ud83d\ude00 é`), "stop"), doneFrame},
			outcome: OK, finish: "stop", text: "line\nnext \"q\" é😀 é", tokenChunks: 1, chunks: 1, done: true, answerAt: 0},
		{name: "keep-alive comments", frames: []string{": ping\n\n", chunk(content("a"), ""), ":\n", chunk(`{}`, "stop"), doneFrame},
			outcome: OK, finish: "stop", text: "a", tokenChunks: 1, chunks: 2, done: true, comments: 2, answerAt: 0},
		{name: "CRLF and no space after colon", frames: []string{strings.ReplaceAll(strings.Replace(chunk(content("a"), ""), "data: ", "data:", 1), "\n", "\r\n"), "data:[DONE]\r\n\r\n"},
			outcome: OK, text: "a", tokenChunks: 1, chunks: 1, done: true, answerAt: 0},
		{name: "event and id fields", frames: []string{"event: message\nid: 1\n" + chunk(content("a"), "stop"), "id: 2\n" + doneFrame},
			outcome: OK, finish: "stop", text: "a", tokenChunks: 1, chunks: 1, done: true, answerAt: 0},
		{name: "multi-line data event", frames: []string{"data: {\"choices\":[{\"index\":0,\ndata: \"delta\":{\"content\":\"a\"},\"finish_reason\":\"stop\"}]}\n\n", doneFrame},
			outcome: OK, finish: "stop", text: "a", tokenChunks: 1, chunks: 1, done: true, answerAt: 0},
		{name: "empty data event ignored", frames: []string{"data:\n\n", chunk(content("a"), "stop"), doneFrame},
			outcome: OK, finish: "stop", text: "a", tokenChunks: 1, chunks: 1, done: true, answerAt: 0},
		{name: "finish_reason without DONE is complete", frames: []string{chunk(content("a"), ""), chunk(`{}`, "stop")},
			outcome: OK, finish: "stop", text: "a", tokenChunks: 1, chunks: 2, answerAt: 0},
		{name: "DONE without finish_reason is complete", frames: []string{chunk(content("a"), ""), doneFrame},
			outcome: OK, text: "a", tokenChunks: 1, chunks: 1, done: true, answerAt: 0},
		{name: "truncated", frames: []string{chunk(roleChunk, ""), chunk(content("a"), "")},
			outcome: Error, typ: ErrTypeTruncated, msgContains: "without finish_reason and without [DONE]", text: "a", tokenChunks: 1, chunks: 2, answerAt: 0},
		{name: "truncated inside an event", frames: []string{chunk(content("a"), ""), `data: {"choices":[{"delta":{"content":"b"`},
			outcome: Error, typ: ErrTypeTruncated, msgContains: "unterminated event", text: "a", tokenChunks: 1, chunks: 1, answerAt: 0},
		{name: "empty 200 body", frames: nil, outcome: Error, typ: ErrTypeTruncated, answerAt: -1},
		{name: "error object in stream", frames: []string{chunk(content("a"), ""), `data: {"error":{"message":"engine died","type":"InternalServerError","param":null,"code":500}}` + "\n\n", doneFrame},
			outcome: Error, typ: ErrTypeStreamError, msgContains: "error object in the stream: engine died", text: "a", tokenChunks: 1, chunks: 2, answerAt: 0,
			serverType: "InternalServerError", serverCode: "500"},
		{name: "old vLLM error object", frames: []string{`data: {"object":"error","message":"old style","type":"BadRequestError","code":400}` + "\n\n", doneFrame},
			outcome: Error, typ: ErrTypeStreamError, msgContains: "old style", chunks: 1, answerAt: -1, serverType: "BadRequestError", serverCode: "400"},
		{name: "llama.cpp error object", frames: []string{`data: {"error":{"code":500,"message":"failed to decode","type":"server_error"}}` + "\n\n"},
			outcome: Error, typ: ErrTypeStreamError, msgContains: "failed to decode", chunks: 1, answerAt: -1, serverType: "server_error", serverCode: "500"},
		{name: "string code", frames: []string{`data: {"error":{"message":"too long","type":"invalid_request_error","code":"context_length_exceeded"}}` + "\n\n"},
			outcome: Error, typ: ErrTypeStreamError, msgContains: "too long", chunks: 1, answerAt: -1, serverType: "invalid_request_error", serverCode: "context_length_exceeded"},
		{name: "error string in stream", frames: []string{`data: {"error":"plain"}` + "\n\n"},
			outcome: Error, typ: ErrTypeStreamError, msgContains: "plain", chunks: 1, answerAt: -1},
		{name: "error event", frames: []string{"event: error\ndata: {\"message\":\"overloaded\",\"type\":\"overloaded_error\"}\n\n"},
			outcome: Error, typ: ErrTypeStreamError, msgContains: "error event in the stream: overloaded", answerAt: -1, serverType: "overloaded_error"},
		{name: "invalid JSON", frames: []string{chunk(content("a"), ""), "data: {\"choices\":[}\n\n", doneFrame},
			outcome: Error, typ: ErrTypeInvalidJSON, text: "a", tokenChunks: 1, chunks: 2, answerAt: 0},
		{name: "events after DONE ignored", frames: []string{chunk(content("a"), "stop"), doneFrame, chunk(content("late"), "")},
			outcome: OK, finish: "stop", text: "a", tokenChunks: 1, chunks: 1, done: true, answerAt: 0},
		{name: "several choices", frames: []string{`data: {"choices":[{"index":0,"delta":{"content":"a"}},{"index":1,"delta":{"content":"b"},"finish_reason":"length"}]}` + "\n\n", doneFrame},
			outcome: OK, finish: "length", text: "ab", tokenChunks: 1, chunks: 1, done: true, answerAt: 0},
		{name: "legacy completions text", frames: []string{`data: {"choices":[{"index":0,"text":"t","finish_reason":"stop"}]}` + "\n\n", doneFrame},
			outcome: OK, finish: "stop", text: "t", tokenChunks: 1, chunks: 1, done: true, answerAt: 0},
		{name: "tool calls are content", frames: []string{chunk(roleChunk, ""),
			chunk(`{"content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}}]}`, ""),
			chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}`, "tool_calls"), doneFrame},
			outcome: OK, finish: "tool_calls", tokenChunks: 2, chunks: 3, done: true, answerAt: 0},
		{name: "an empty tool_calls array is not content", frames: []string{chunk(`{"role":"assistant","content":"","tool_calls":[]}`, ""), chunk(`{}`, "stop"), doneFrame},
			outcome: Error, typ: ErrTypeNoContent, finish: "stop", chunks: 2, done: true, answerAt: -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, sseFrames(tc.frames...))
			r := New(Options{}).Do(context.Background(), call(srv.URL, true))
			if r.Outcome != tc.outcome || r.ErrorType != tc.typ || r.HTTPStatus != 200 {
				t.Fatalf("outcome %q/%q %q status %d", r.Outcome, r.ErrorType, r.ErrorMessage, r.HTTPStatus)
			}
			if !strings.Contains(r.ErrorMessage, tc.msgContains) {
				t.Fatalf("message %q lacks %q", r.ErrorMessage, tc.msgContains)
			}
			if r.ServerErrorType != tc.serverType || r.ServerErrorCode != tc.serverCode {
				t.Fatalf("server error type %q code %q, want %q %q", r.ServerErrorType, r.ServerErrorCode, tc.serverType, tc.serverCode)
			}
			if r.FinishReason != tc.finish || r.Text != tc.text || r.SawDone != tc.done {
				t.Fatalf("finish %q text %q done %v", r.FinishReason, r.Text, r.SawDone)
			}
			if len(r.TokenChunks) != tc.tokenChunks || r.ChunkCount != tc.chunks || r.CommentCount != tc.comments {
				t.Fatalf("token chunks %d chunks %d comments %d", len(r.TokenChunks), r.ChunkCount, r.CommentCount)
			}
			if (r.Usage == nil) != (tc.usage == nil) || (r.Usage != nil && *r.Usage != *tc.usage) {
				t.Fatalf("usage %+v", r.Usage)
			}
			if tc.tokenChunks == 0 && !r.FirstToken.IsZero() {
				t.Fatal("FirstToken without a token chunk")
			}
			if tc.answerAt < 0 && !r.FirstAnswer.IsZero() {
				t.Fatal("FirstAnswer without content")
			}
			if tc.answerAt >= 0 && !r.FirstAnswer.Equal(r.TokenChunks[tc.answerAt]) {
				t.Fatalf("FirstAnswer is not token chunk %d", tc.answerAt)
			}
			if (r.ChunkCount > 0) == r.FirstChunk.IsZero() {
				t.Fatal("FirstChunk does not match ChunkCount")
			}
			if r.End.IsZero() || r.End.Before(r.Start) {
				t.Fatal("End not set")
			}
			checkOrder(t, r)
		})
	}
}

func TestHTTPErrors(t *testing.T) {
	unknownModel := fixture(t, "ollama-error-unknown-model.body.json")
	for _, tc := range []struct {
		name    string
		status  int
		ctype   string
		body    string
		outcome Outcome
		typ     string
		msg     string
		server  [2]string // the server's error type and code
	}{
		{"ollama unknown model 404", 404, "application/json", string(unknownModel), Error, ErrTypeHTTPStatus, "model 'no-such-model' not found", [2]string{"api_error", ""}},
		{"vLLM 404", 404, "application/json", `{"error":{"message":"The model ` + "`x`" + ` does not exist.","type":"NotFoundError","param":"model","code":404}}`,
			Error, ErrTypeHTTPStatus, "The model `x` does not exist.", [2]string{"NotFoundError", "404"}},
		{"SGLang 400", 400, "application/json", `{"object":"error","message":"context too long","type":"BadRequestError","param":null,"code":400}`,
			Error, ErrTypeHTTPStatus, "context too long", [2]string{"BadRequestError", "400"}},
		{"llama.cpp 503", 503, "application/json", `{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}`,
			Rejected, ErrTypeRejected, "Loading model", [2]string{"unavailable_error", "503"}},
		{"OpenAI 401 string code", 401, "application/json", `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`,
			Error, ErrTypeHTTPStatus, "Incorrect API key provided", [2]string{"invalid_request_error", "invalid_api_key"}},
		{"TGI 422", 422, "application/json", `{"error":"Input validation error: max_new_tokens must be > 0","error_type":"validation"}`,
			Error, ErrTypeHTTPStatus, "Input validation error: max_new_tokens must be > 0", [2]string{"validation", ""}},
		{"429 message", 429, "application/json", `{"message":"slow down"}`, Rejected, ErrTypeRejected, "slow down", [2]string{}},
		{"503 error string", 503, "application/json", `{"error": "The model is currently scaling. Please try again later."}`, Rejected, ErrTypeRejected, "The model is currently scaling. Please try again later.", [2]string{}},
		{"500 text", 500, "text/plain", "boom\n", Error, ErrTypeHTTPStatus, "boom", [2]string{}},
		{"401 error string", 401, "application/json", `{"error": "Unauthorized"}`, Error, ErrTypeHTTPStatus, "Unauthorized", [2]string{}},
		{"404 FastAPI detail", 404, "application/json", `{"detail":"Not Found"}`, Error, ErrTypeHTTPStatus, "Not Found", [2]string{}},
		{"422 detail list", 422, "application/json", `{"detail":[{"loc":["body"],"msg":"field required"}]}`, Error, ErrTypeHTTPStatus, `[{"loc":["body"],"msg":"field required"}]`, [2]string{}},
		{"400 empty body", 400, "", "", Error, ErrTypeHTTPStatus, "HTTP 400 with an empty body", [2]string{}},
		{"SSE error body", 500, "text/event-stream", "data: {\"error\":{\"message\":\"x\"}}\n\n", Error, ErrTypeHTTPStatus, "data: {\"error\":{\"message\":\"x\"}}", [2]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				if tc.ctype != "" {
					w.Header().Set("Content-Type", tc.ctype)
				}
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.body)
			})
			r := New(Options{}).Do(context.Background(), call(srv.URL, true))
			if r.Outcome != tc.outcome || r.ErrorType != tc.typ || r.HTTPStatus != tc.status || r.ErrorMessage != tc.msg {
				t.Fatalf("got %q %q %d %q", r.Outcome, r.ErrorType, r.HTTPStatus, r.ErrorMessage)
			}
			if got := [2]string{r.ServerErrorType, r.ServerErrorCode}; got != tc.server {
				t.Fatalf("server error %q, want %q", got, tc.server)
			}
			if !r.FirstChunk.IsZero() || r.FirstByte.IsZero() || r.End.Before(r.FirstByte) {
				t.Fatal("times")
			}
		})
	}
}

func TestErrorMessageBoundedAndRedacted(t *testing.T) {
	const key = "sk-test-0123456789abcdef"
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(401)
		// Echo the key, then a lot of text with multi-byte characters at the cut.
		_, _ = io.WriteString(w, "invalid key "+r.Header.Get("Authorization")+" "+strings.Repeat("é", 1<<20))
	})
	cl := call(srv.URL, true)
	cl.Header.Set("Authorization", "Bearer "+key)
	r := New(Options{}).Do(context.Background(), cl)
	if r.Outcome != Error || r.HTTPStatus != 401 {
		t.Fatal(r.Outcome, r.HTTPStatus)
	}
	if strings.Contains(r.ErrorMessage, key) || !strings.Contains(r.ErrorMessage, "[REDACTED]") {
		t.Fatalf("key not redacted: %.80q", r.ErrorMessage)
	}
	if len(r.ErrorMessage) > MaxErrorMessageBytes+len("…") || !strings.HasSuffix(r.ErrorMessage, "é…") {
		t.Fatalf("message of %d bytes, suffix %q", len(r.ErrorMessage), r.ErrorMessage[len(r.ErrorMessage)-8:])
	}
	// The server's error type and code are redacted too.
	echo := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(400)
		a := r.Header.Get("Authorization")
		_, _ = io.WriteString(w, `{"error":{"message":"m","type":"bad `+a+`","code":"`+a+`"}}`)
	})
	cl = call(echo.URL, true)
	cl.Header.Set("Authorization", "Bearer "+key)
	r = New(Options{}).Do(context.Background(), cl)
	if r.ServerErrorType != "bad Bearer [REDACTED]" || r.ServerErrorCode != "Bearer [REDACTED]" {
		t.Fatalf("type %q code %q", r.ServerErrorType, r.ServerErrorCode)
	}
}
