package sim

import (
	"io"
	"strings"
	"testing"
)

// streamEvents posts a streamed request with stream_options opts and returns its events.
func streamEvents(t *testing.T, s *Server, prompt, maxTokens int, opts map[string]any) []sseEvent {
	t.Helper()
	resp := post(t, s.URL(), chatBody(words(prompt), maxTokens, true, map[string]any{"ignore_eos": true, "stream_options": opts}), nil)
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	evs, err := readSSE(t, resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// TestContinuousUsageStats: with include_usage and continuous_usage_stats every chunk
// carries usage, as vLLM sends it: the role chunk completion_tokens 0, each content chunk
// the tokens streamed so far (cumulative, also in a chunk of several tokens), then the
// final usage chunk with empty choices. Without include_usage, continuous_usage_stats
// adds nothing (vLLM needs both); without stream it is a 400.
func TestContinuousUsageStats(t *testing.T) {
	cfg := fastConfig()
	cfg.TokensPerChunk = 2
	s := startSim(t, cfg)
	evs := streamEvents(t, s, 6, 5, map[string]any{"include_usage": true, "continuous_usage_stats": true})
	// role, content of 2, 2 and 1 tokens, final usage, [DONE]
	wantCompletion := []int{0, 2, 4, 5, 5}
	if len(evs) != 6 || !evs[5].done {
		t.Fatalf("%d events: %v", len(evs), evs)
	}
	for i, want := range wantCompletion {
		u, ok := evs[i].obj["usage"].(map[string]any)
		if !ok {
			t.Fatalf("event %d has no usage: %s", i, evs[i].raw)
		}
		if num(t, u, "prompt_tokens") != 6 || num(t, u, "completion_tokens") != want || num(t, u, "total_tokens") != 6+want {
			t.Fatalf("event %d usage %v, want completion %d", i, u, want)
		}
		choices, _ := evs[i].obj["choices"].([]any)
		if (i == 4) != (len(choices) == 0) {
			t.Fatalf("event %d choices %v", i, choices)
		}
	}
	if r := summarise(t, evs); len(strings.Fields(r.content)) != 5 || r.finish != "length" {
		t.Fatalf("stream %+v", r)
	}

	for _, opts := range []map[string]any{{"continuous_usage_stats": true}, {"include_usage": false, "continuous_usage_stats": true}} {
		evs = streamEvents(t, s, 6, 3, opts)
		for i, ev := range evs {
			if _, ok := ev.obj["usage"]; ok {
				t.Fatalf("%v: event %d carries usage: %s", opts, i, ev.raw)
			}
		}
	}
	evs = streamEvents(t, s, 6, 3, map[string]any{"include_usage": true})
	for i, ev := range evs[:len(evs)-2] {
		if _, ok := ev.obj["usage"]; ok {
			t.Fatalf("include_usage alone: event %d carries usage", i)
		}
	}

	resp := post(t, s.URL(), chatBody("a b", 3, false, map[string]any{"stream_options": map[string]any{"continuous_usage_stats": true}}), nil)
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Fatalf("stream_options without stream: %d", resp.StatusCode)
	}
}
