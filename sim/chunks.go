package sim

import "strconv"

// chunkPrefix is the constant head of every chunk of one stream, up to "choices":[.
func chunkPrefix(id string, created int64, model string) []byte {
	ids, _ := jsonString("chatcmpl-" + id)
	ms, _ := jsonString(model)
	b := make([]byte, 0, 128+len(ids)+len(ms))
	b = append(b, `data: {"id":`...)
	b = append(b, ids...)
	b = append(b, `,"object":"chat.completion.chunk","created":`...)
	b = strconv.AppendInt(b, created, 10)
	b = append(b, `,"model":`...)
	b = append(b, ms...)
	b = append(b, `,"choices":[`...)
	return b
}

const (
	roleChoice  = `{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}` + "\n\n"
	doneEvent   = "data: [DONE]\n\n"
	contentHead = `{"index":0,"delta":{"content":"`
	contentTail = `"},"logprobs":null,"finish_reason":null}]}` + "\n\n"
)

// appendContentChunk appends one content event with tokens [from, to); a non-empty finish
// closes the choice with finish_reason, carrying the last tokens as vLLM does.
func appendContentChunk(b, prefix []byte, wordSeed uint64, from, to int, finish string) []byte {
	b = append(b, prefix...)
	b = append(b, contentHead...)
	b = appendTokens(b, wordSeed, from, to)
	if finish == "" {
		return append(b, contentTail...)
	}
	b = append(b, `"},"logprobs":null,"finish_reason":"`...)
	b = append(b, finish...)
	return append(b, `","stop_reason":null}]}`+"\n\n"...)
}

// withUsage moves the closing "}\n\n" of the chunk event b after a usage object with
// prompt and completion tokens: the continuous usage of vLLM's
// stream_options.continuous_usage_stats.
func withUsage(b []byte, prompt, completion int) []byte {
	b = append(b[:len(b)-3], ',')
	b = appendUsage(b, prompt, completion)
	return append(b, "}\n\n"...)
}

func appendUsage(b []byte, prompt, completion int) []byte {
	b = append(b, `"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt+completion), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(completion), 10)
	return append(b, '}')
}
