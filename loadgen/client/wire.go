package client

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// raw keeps a JSON value's bytes without decoding them. It aliases the decoder's input
// (encoding/json passes sub-slices of it), which stays untouched while the chunk is handled,
// so decoding a chunk allocates nothing for the fields read through raw.
type raw []byte

func (r *raw) UnmarshalJSON(b []byte) error { *r = b; return nil }

// isText reports whether r is a JSON string with at least one character (so null, "",
// and non-string values are not text).
func (r raw) isText() bool { return len(r) > 2 && r[0] == '"' }

// hasElements reports whether r is a JSON array with at least one element (so null, [] and
// non-array values have none).
func (r raw) hasElements() bool {
	if len(r) < 2 || r[0] != '[' {
		return false
	}
	rest := bytes.TrimLeft(r[1:], " \t\r\n")
	return len(rest) > 0 && rest[0] != ']'
}

// isSet reports whether r is present and not null.
func (r raw) isSet() bool { return len(r) > 0 && !bytes.Equal(r, nullJSON) }

var nullJSON = []byte("null")

// wireMessage is the part of an OpenAI chat "delta" (streaming) or "message" (non-streaming)
// that the client reads. reasoning_content is the DeepSeek/vLLM (< 0.10) reasoning field,
// reasoning the newer vLLM/OpenRouter one; tool_calls the OpenAI tool calls (an array; only
// whether it has an element is read).
type wireMessage struct {
	Content          raw `json:"content"`
	ReasoningContent raw `json:"reasoning_content"`
	Reasoning        raw `json:"reasoning"`
	ToolCalls        raw `json:"tool_calls"`
}

type wireChoice struct {
	Delta        wireMessage `json:"delta"`
	Message      wireMessage `json:"message"`
	Text         raw         `json:"text"` // legacy completions API
	FinishReason raw         `json:"finish_reason"`
}

// wireUsage decodes "usage" into a reused value: set says whether a non-null object was there.
type wireUsage struct {
	set bool
	u   Usage
}

func (w *wireUsage) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, nullJSON) {
		return nil
	}
	w.set = true
	return json.Unmarshal(b, &w.u)
}

// wireChunk is one chat.completion.chunk (or a whole chat.completion) reduced to the fields
// the client needs. Error and Object detect an error object ({"error":…}, or the pre-2025
// vLLM {"object":"error",…}); parseServerError reads it.
type wireChunk struct {
	Choices []wireChoice `json:"choices"`
	Usage   wireUsage    `json:"usage"`
	Error   raw          `json:"error"`
	Object  raw          `json:"object"`
}

func (w *wireChunk) reset() {
	clear(w.Choices[:cap(w.Choices)])
	w.Choices = w.Choices[:0]
	w.Usage = wireUsage{}
	w.Error, w.Object = nil, nil
}

var objectError = []byte(`"error"`)

// isError reports whether the chunk is an error object: exactly when parseServerError(data,
// false) reports one for the same data (FuzzParseServerError checks it).
func (w *wireChunk) isError() bool {
	return w.Error.isSet() || bytes.Equal(w.Object, objectError)
}

// jsonString decodes a JSON string literal (which the decoder already validated).
func jsonString(r raw) string {
	return string(appendJSONString(nil, r))
}

// appendJSONString appends the decoded value of the JSON string literal r to dst, exactly as
// encoding/json decodes it (checked by FuzzAppendJSONString). Literals without escapes whose
// bytes are valid UTF-8, the common case, are copied without decoding; others go through
// encoding/json. A value that is not a valid string literal appends nothing.
func appendJSONString(dst []byte, r raw) []byte {
	if len(r) < 2 || r[0] != '"' || r[len(r)-1] != '"' {
		return dst
	}
	body := r[1 : len(r)-1]
	if bytes.IndexByte(body, '\\') < 0 && bytes.IndexByte(body, '"') < 0 && utf8.Valid(body) && !hasControl(body) {
		return append(dst, body...)
	}
	var s string
	if json.Unmarshal(r, &s) != nil {
		return dst
	}
	return append(dst, s...)
}

func hasControl(b []byte) bool {
	for _, c := range b {
		if c < 0x20 {
			return true
		}
	}
	return false
}

// finishReason returns the finish_reason string, interning the common values so that the
// usual chunks allocate nothing.
func finishReason(r raw) string {
	switch string(r) {
	case `"stop"`:
		return "stop"
	case `"length"`:
		return "length"
	case `"tool_calls"`:
		return "tool_calls"
	case `"abort"`:
		return "abort"
	case `"error"`:
		return "error"
	case `"content_filter"`:
		return "content_filter"
	}
	if r.isText() {
		return jsonString(r)
	}
	return ""
}
