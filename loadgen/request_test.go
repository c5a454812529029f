package loadgen

import (
	"bytes"
	"encoding/json"
	"testing"
)

// refBuildBody is the straightforward definition buildBody must match byte for byte.
func refBuildBody(cfg *Config, promptText string, outputTokens int) ([]byte, error) {
	body := make(map[string]any, 5+len(cfg.ExtraBody))
	for k, v := range cfg.ExtraBody {
		body[k] = v
	}
	body["model"] = cfg.Model
	body["messages"] = []map[string]string{{"role": "user", "content": promptText}}
	body["stream"] = cfg.Stream
	if cfg.Stream && cfg.StreamUsage {
		body["stream_options"] = map[string]bool{"include_usage": true}
	}
	body[cfg.MaxTokensField] = outputTokens
	return json.Marshal(body)
}

func TestBuildBodyMatchesMarshal(t *testing.T) {
	extras := []string{``, `{"ignore_eos": true}`, `{"temperature": 0.70, "a": [1, "<b>"], "zz": {"k": null}, "Top_P": 1e2}`,
		`{"stream_options": {"x": 1}, "max_tokens": 3, "model": "other", "messages": [], "stream": 0}`, `{"ü<&>": "\u2028é"}`}
	prompts := []string{"", "hello world", `quote " back \ slash`, "<script>&amp;</script>", "tab\tnl\ncr\r\x01\x1f",
		"héllo wörld 日本", "bad \xff\xfe utf8", "line\u2028sep\u2029", "\x7f del"}
	for _, extra := range extras {
		eb, err := ParseExtraBody(extra)
		if err != nil {
			t.Fatal(extra, err)
		}
		for _, field := range []string{"max_tokens", "max_completion_tokens"} {
			for _, mode := range [][2]bool{{true, true}, {true, false}, {false, true}, {false, false}} {
				cfg := &Config{Model: "org/Model-7B <v2>", Stream: mode[0], StreamUsage: mode[1], MaxTokensField: field, ExtraBody: eb}
				for _, p := range prompts {
					got, err := buildBody(cfg, p, 64)
					want, werr := refBuildBody(cfg, p, 64)
					if err != nil || werr != nil || !bytes.Equal(got, want) {
						t.Fatalf("extra %s field %s mode %v prompt %q:\n got %s (%v)\nwant %s (%v)", extra, field, mode, p, got, err, want, werr)
					}
				}
			}
		}
	}
}

func FuzzBuildBody(f *testing.F) {
	f.Add("hello", "m", `{"ignore_eos": true}`, 64)
	f.Add("<\x00é\xff", "", `{"a<": "&"}`, 0)
	f.Fuzz(func(t *testing.T, prompt, model, extra string, n int) {
		eb, err := ParseExtraBody(extra)
		if err != nil {
			return
		}
		cfg := &Config{Model: model, Stream: true, StreamUsage: n%2 == 0, MaxTokensField: "max_tokens", ExtraBody: eb}
		got, err := buildBody(cfg, prompt, n)
		want, werr := refBuildBody(cfg, prompt, n)
		if (err == nil) != (werr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("got %s (%v)\nwant %s (%v)", got, err, want, werr)
		}
	})
}

func TestBuildHeader(t *testing.T) {
	cfg := &Config{APIKey: "sk-1"}
	h := buildHeaderSpan(cfg, "inferprobe-r-c_measured_0_1", "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331")
	want := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Authorization": "Bearer sk-1", "X-Request-Id": "inferprobe-r-c_measured_0_1",
		"Traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	if len(h) != len(want) {
		t.Fatalf("%d headers, want %d: %v", len(h), len(want), h)
	}
	for k, v := range want {
		if got := h.Get(k); got != v || len(h.Values(k)) != 1 {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if h := buildHeader(&Config{}, "x", "t"); h.Get("Authorization") != "" || len(h.Get("Traceparent")) != 2+1+1+1+16+3 {
		t.Errorf("no key: %v", h)
	}
}
