package sim

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestStreamWireFormat(t *testing.T) {
	s := startSim(t, fastConfig())
	prompt := "one two  three\tfour\nfive"
	resp := post(t, s.URL(), chatBody(prompt, 7, true, nil), map[string]string{"X-Request-Id": "req-42"})
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream; charset=utf-8" {
		t.Errorf("content type %q", ct)
	}
	if h := resp.Header.Get("X-Request-Id"); h != "" {
		t.Errorf("X-Request-Id echoed without --enable-request-id-headers: %q", h)
	}
	evs, err := readSSE(t, resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	// role, 7 content events (the last with finish_reason), usage, [DONE]
	if len(evs) != 10 {
		t.Fatalf("got %d events, want 10: %v", len(evs), evs)
	}
	for i, ev := range evs[:9] {
		o := ev.obj
		if o["id"] != "chatcmpl-req-42" || o["object"] != "chat.completion.chunk" || o["model"] != "inferprobe-sim" {
			t.Errorf("event %d header fields: %v", i, ev.raw)
		}
		if _, ok := o["created"].(float64); !ok {
			t.Errorf("event %d without created", i)
		}
	}
	first := evs[0].obj["choices"].([]any)[0].(map[string]any)
	if d := first["delta"].(map[string]any); d["role"] != "assistant" || d["content"] != "" || first["finish_reason"] != nil {
		t.Errorf("first event %s", evs[0].raw)
	}
	for i := 1; i <= 7; i++ {
		ch := evs[i].obj["choices"].([]any)[0].(map[string]any)
		c := ch["delta"].(map[string]any)["content"].(string)
		if len(strings.Fields(c)) != 1 || !strings.HasPrefix(c, " ") {
			t.Errorf("event %d content %q is not one word", i, c)
		}
		if i < 7 && ch["finish_reason"] != nil {
			t.Errorf("event %d finishes early", i)
		}
	}
	last := evs[7].obj["choices"].([]any)[0].(map[string]any)
	if last["finish_reason"] != "length" {
		t.Errorf("finishing event %s", evs[7].raw)
	}
	if _, ok := last["stop_reason"]; !ok {
		t.Errorf("finishing event lacks stop_reason: %s", evs[7].raw)
	}
	u := evs[8].obj
	if ch := u["choices"].([]any); len(ch) != 0 {
		t.Errorf("usage event has choices: %s", evs[8].raw)
	}
	usage := u["usage"].(map[string]any)
	if num(t, usage, "prompt_tokens") != CountPromptTokens(prompt) || CountPromptTokens(prompt) != 5 {
		t.Errorf("prompt_tokens %v, want 5", usage)
	}
	if num(t, usage, "completion_tokens") != 7 || num(t, usage, "total_tokens") != 12 {
		t.Errorf("usage %v", usage)
	}
	if !evs[9].done {
		t.Errorf("last event %q", evs[9].raw)
	}
	sum := summarise(t, evs)
	if len(strings.Fields(sum.content)) != 7 {
		t.Errorf("content %q has %d words", sum.content, len(strings.Fields(sum.content)))
	}
}

func TestStreamWithoutUsageAndTokensPerChunk(t *testing.T) {
	cfg := fastConfig()
	cfg.TokensPerChunk = 3
	s := startSim(t, cfg)
	body := chatBody("hello world", 0, true, map[string]any{"max_completion_tokens": 10, "max_tokens": 99, "stream_options": nil})
	resp := post(t, s.URL(), body, nil)
	defer resp.Body.Close()
	evs, err := readSSE(t, resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	r := summarise(t, evs)
	// max_completion_tokens wins: 10 tokens in events of 3,3,3,1; no usage event.
	if r.contentEvent != 4 || r.usage != nil || !r.done || r.finish != "length" {
		t.Fatalf("events %d usage %v done %v finish %q", r.contentEvent, r.usage, r.done, r.finish)
	}
	if n := len(strings.Fields(r.content)); n != 10 {
		t.Fatalf("%d words, want 10", n)
	}
	var sizes []int
	for _, ev := range evs[1 : len(evs)-1] {
		c := ev.obj["choices"].([]any)[0].(map[string]any)["delta"].(map[string]any)["content"].(string)
		sizes = append(sizes, len(strings.Fields(c)))
	}
	if len(sizes) != 4 || sizes[0] != 3 || sizes[1] != 3 || sizes[2] != 3 || sizes[3] != 1 {
		t.Fatalf("chunk sizes %v", sizes)
	}
}

func TestNonStreaming(t *testing.T) {
	s := startSim(t, fastConfig())
	body := []byte(`{"model":"inferprobe-sim","messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"alpha beta"},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":" gamma "}]}],"max_tokens":4,"request_id":"body-id"}`)
	resp := post(t, s.URL(), body, nil)
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var out struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Model   string `json:"model"`
		Created int64  `json:"created"`
		Choices []struct {
			Index   int `json:"index"`
			Message struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			Prompt     int `json:"prompt_tokens"`
			Completion int `json:"completion_tokens"`
			Total      int `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if out.ID != "chatcmpl-body-id" || out.Object != "chat.completion" || out.Model != "inferprobe-sim" || out.Created == 0 {
		t.Errorf("header fields %+v", out)
	}
	if len(out.Choices) != 1 || out.Choices[0].Message.Role != "assistant" || out.Choices[0].FinishReason != "length" {
		t.Fatalf("choices %+v", out.Choices)
	}
	if out.Usage.Prompt != 5 || out.Usage.Completion != 4 || out.Usage.Total != 9 {
		t.Errorf("usage %+v (prompt words: be brief alpha beta gamma)", out.Usage)
	}
	if n := len(strings.Fields(out.Choices[0].Message.Content)); n != 4 {
		t.Errorf("content %q", out.Choices[0].Message.Content)
	}
}

func TestEarlyStopAndIgnoreEOS(t *testing.T) {
	cfg := fastConfig()
	cfg.StopProbability = 1
	s := startSim(t, cfg)
	for _, ignore := range []bool{false, true} {
		resp := post(t, s.URL(), chatBody("x y z", 20, true, map[string]any{"ignore_eos": ignore}), nil)
		evs, err := readSSE(t, resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		r := summarise(t, evs)
		n := num(t, r.usage, "completion_tokens")
		if len(strings.Fields(r.content)) != n {
			t.Fatalf("words %d != completion_tokens %d", len(strings.Fields(r.content)), n)
		}
		if ignore && (r.finish != "length" || n != 20) {
			t.Errorf("ignore_eos: finish %q tokens %d", r.finish, n)
		}
		if !ignore && (r.finish != "stop" || n < 1 || n >= 20) {
			t.Errorf("early stop: finish %q tokens %d", r.finish, n)
		}
	}
}

func TestErrorResponses(t *testing.T) {
	cfg := fastConfig()
	cfg.MaxModelLen = 64
	cfg.MaxBodyBytes = 4096
	s := startSim(t, cfg)
	cases := []struct {
		name   string
		body   string
		status int
		typ    string
	}{
		{"unknown model", `{"model":"gpt-x","messages":[{"role":"user","content":"hi"}]}`, 404, "NotFoundError"},
		{"unknown model, streamed", `{"model":"gpt-x","stream":true,"messages":[{"role":"user","content":"hi"}]}`, 404, "NotFoundError"},
		{"malformed", `{"model":`, 400, "BadRequestError"},
		{"not an object", `[1,2]`, 400, "BadRequestError"},
		{"no messages", `{"model":"inferprobe-sim","messages":[]}`, 400, "BadRequestError"},
		{"bad content", `{"messages":[{"role":"user","content":5}]}`, 400, "BadRequestError"},
		{"max_tokens 0", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":0}`, 400, "BadRequestError"},
		{"stream options without stream", `{"messages":[{"role":"user","content":"hi"}],"stream_options":{"include_usage":true}}`, 400, "BadRequestError"},
		{"too long", `{"messages":[{"role":"user","content":"` + words(70) + `"}]}`, 400, "BadRequestError"},
		{"over context", `{"messages":[{"role":"user","content":"a b c"}],"max_tokens":62}`, 400, "BadRequestError"},
		{"n>1", `{"messages":[{"role":"user","content":"hi"}],"n":2}`, 400, "BadRequestError"},
		{"too large", `{"messages":[{"role":"user","content":"` + strings.Repeat("a ", 3000) + `"}]}`, 413, "BadRequestError"},
	}
	for _, c := range cases {
		resp := post(t, s.URL(), []byte(c.body), nil)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s: status %d type %q body %s", c.name, resp.StatusCode, resp.Header.Get("Content-Type"), b)
			continue
		}
		var e struct {
			Error struct {
				Message string  `json:"message"`
				Type    string  `json:"type"`
				Param   *string `json:"param"`
				Code    int     `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(b, &e); err != nil {
			t.Errorf("%s: body %s: %v", c.name, b, err)
			continue
		}
		if e.Error.Type != c.typ || e.Error.Code != c.status || e.Error.Message == "" {
			t.Errorf("%s: error %+v", c.name, e.Error)
		}
	}
	// Routing errors use FastAPI's bodies.
	resp, err := testClient.Get(s.URL() + "/v1/chat/completions")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 405 || string(b) != `{"detail":"Method Not Allowed"}` {
		t.Errorf("GET chat: %d %s", resp.StatusCode, b)
	}
	resp, err = testClient.Get(s.URL() + "/nope")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 || string(b) != `{"detail":"Not Found"}` {
		t.Errorf("GET /nope: %d %s", resp.StatusCode, b)
	}
}

func TestRequestIDs(t *testing.T) {
	cfg := fastConfig()
	cfg.EnableRequestIDHeaders = true
	s := startSim(t, cfg)
	resp := post(t, s.URL(), chatBody("a", 2, false, nil), map[string]string{"X-Request-Id": "abc-1"})
	var out struct{ ID string }
	_ = json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if resp.Header.Get("X-Request-Id") != "abc-1" || out.ID != "chatcmpl-abc-1" {
		t.Errorf("echo %q id %q", resp.Header.Get("X-Request-Id"), out.ID)
	}
	// Without the header: a generated 16-hex id in the body, an unrelated echo.
	resp = post(t, s.URL(), chatBody("a", 2, false, nil), nil)
	_ = json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	id := strings.TrimPrefix(out.ID, "chatcmpl-")
	if len(id) != 16 || strings.Trim(id, "0123456789abcdef") != "" {
		t.Errorf("generated id %q", out.ID)
	}
	echo := resp.Header.Get("X-Request-Id")
	if len(echo) != 32 || echo == id {
		t.Errorf("echoed id %q (engine id %q)", echo, id)
	}
	// Every route echoes.
	hr, err := testClient.Get(s.URL() + "/health")
	if err != nil {
		t.Fatal(err)
	}
	hr.Body.Close()
	if hr.StatusCode != 200 || hr.Header.Get("X-Request-Id") == "" {
		t.Errorf("/health %d echo %q", hr.StatusCode, hr.Header.Get("X-Request-Id"))
	}
}

func TestOtherRoutes(t *testing.T) {
	cfg := fastConfig()
	cfg.DecodeStepBase = 5 * e6
	s := startSim(t, cfg)
	get := func(path string) (int, string) {
		resp, err := testClient.Get(s.URL() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	postPath := func(path string) (int, string) {
		resp, err := testClient.Post(s.URL()+path, "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if c, b := get("/health"); c != 200 || b != "" {
		t.Errorf("/health %d %q", c, b)
	}
	c, b := get("/v1/models")
	var models struct {
		Object string `json:"object"`
		Data   []struct {
			ID          string `json:"id"`
			Object      string `json:"object"`
			OwnedBy     string `json:"owned_by"`
			MaxModelLen int    `json:"max_model_len"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(b), &models); err != nil || c != 200 {
		t.Fatalf("/v1/models %d %s %v", c, b, err)
	}
	if models.Object != "list" || len(models.Data) != 1 || models.Data[0].ID != "inferprobe-sim" ||
		models.Data[0].Object != "model" || models.Data[0].OwnedBy != "vllm" || models.Data[0].MaxModelLen != 4096 {
		t.Errorf("/v1/models %+v", models)
	}
	for _, p := range []string{"/start_profile", "/stop_profile"} {
		if c, _ := postPath(p); c != 404 { // no --profiler-dir
			t.Errorf("%s: %d", p, c)
		}
	}
	if c, b := postPath("/reset_prefix_cache"); c != 200 || b != `{"success":true}` {
		t.Errorf("idle reset: %d %q", c, b)
	}
	// While a request holds blocks the reset is refused.
	resp := post(t, s.URL(), chatBody("hold the blocks please", 200, true, nil), nil)
	defer resp.Body.Close()
	buf := make([]byte, 1)
	if _, err := resp.Body.Read(buf); err != nil { // the stream has started: blocks are held
		t.Fatal(err)
	}
	if c, b := postPath("/reset_prefix_cache"); c != 200 || b != `{"success":false}` {
		t.Errorf("busy reset: %d %q", c, b)
	}
}

func TestResetAnswerEmpty(t *testing.T) {
	cfg := fastConfig()
	cfg.ResetAnswer = "empty"
	s := startSim(t, cfg)
	resp, err := testClient.Post(s.URL()+"/reset_prefix_cache", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(b) != 0 {
		t.Errorf("%d %q", resp.StatusCode, b)
	}
}

const e6 = 1000000 // 1 ms in time.Duration units
