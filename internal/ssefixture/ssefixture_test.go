package ssefixture

import (
	"strings"
	"testing"
)

func TestVLLMStream(t *testing.T) {
	ev := VLLMStream("chatcmpl-1", "m", 64, 2)
	if len(ev) != 6 || ev[5] != Done {
		t.Fatalf("%d events, last %q", len(ev), ev[len(ev)-1])
	}
	if !strings.Contains(ev[0], `"delta":{"role":"assistant","content":""}`) || !strings.Contains(ev[2], `{"content":" tok1"}`) ||
		!strings.Contains(ev[3], `"finish_reason":"length"`) ||
		!strings.Contains(ev[4], `"usage":{"prompt_tokens":64,"total_tokens":66,"completion_tokens":2}`) {
		t.Fatalf("events %q", ev)
	}
	for _, e := range ev {
		if !strings.HasPrefix(e, "data: ") || !strings.HasSuffix(e, "\n\n") || strings.Count(e, "\n") != 2 {
			t.Fatalf("not one SSE event: %q", e)
		}
	}
}

// A negative token count is an answer with no content chunk, not a panic.
func TestVLLMStreamNegativeCount(t *testing.T) {
	if ev := VLLMStream("id", "m", 3, -5); len(ev) != 4 || ev[3] != Done {
		t.Fatalf("%d events, last %q", len(ev), ev[len(ev)-1])
	}
}
