// Package ssefixture renders a vLLM-shaped Chat Completions stream, for benchmarks and the
// bench/ssestub server: the bytes a vLLM OpenAI server writes for one streamed answer.
package ssefixture

import "fmt"

// Done is the stream's terminating event.
const Done = "data: [DONE]\n\n"

// VLLMStream returns one streamed answer's SSE events, one string per event ("data: …\n\n"):
// a role chunk, n one-token content chunks (" tok0", " tok1", …), a finish chunk
// (finish_reason "length"), the usage chunk (empty choices; promptTokens, n completion
// tokens) and [DONE] — n+4 events (a negative n counts as 0). id and model fill every
// chunk's "id" and "model".
func VLLMStream(id, model string, promptTokens, n int) []string {
	n = max(n, 0)
	head := `data: {"id":"` + id + `","object":"chat.completion.chunk","created":1795967353,"model":"` + model + `","choices":[{"index":0,"delta":`
	ev := func(delta, finish string) string {
		return head + delta + `,"logprobs":null,"finish_reason":` + finish + "}]}\n\n"
	}
	out := make([]string, 0, n+4)
	out = append(out, ev(`{"role":"assistant","content":""}`, "null"))
	for i := range n {
		out = append(out, ev(fmt.Sprintf(`{"content":" tok%d"}`, i), "null"))
	}
	out = append(out, ev(`{"content":""}`, `"length"`),
		fmt.Sprintf(`data: {"id":"%s","object":"chat.completion.chunk","created":1795967353,"model":"%s","choices":[],"usage":{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d}}`+"\n\n",
			id, model, promptTokens, promptTokens+n, n),
		Done)
	return out
}
