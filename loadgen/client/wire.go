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
// the client needs. Error/Object/Message catch error objects: {"error":{…}} (vLLM, OpenAI)
// and the pre-2025 vLLM {"object":"error","message":…}.
type wireChunk struct {
	Choices []wireChoice `json:"choices"`
	Usage   wireUsage    `json:"usage"`
	Error   raw          `json:"error"`
	Object  raw          `json:"object"`
	Message raw          `json:"message"`
}

func (w *wireChunk) reset() {
	clear(w.Choices[:cap(w.Choices)])
	w.Choices = w.Choices[:0]
	w.Usage = wireUsage{}
	w.Error, w.Object, w.Message = nil, nil, nil
}

var objectError = []byte(`"error"`)

// errorText returns the message of an error object if the chunk is one, and whether it is.
func (w *wireChunk) errorText() (string, bool) {
	if w.Error.isSet() {
		return messageOf(w.Error), true
	}
	if bytes.Equal(w.Object, objectError) {
		if w.Message.isText() {
			return jsonString(w.Message), true
		}
		return "error object without a message", true
	}
	return "", false
}

// messageOf extracts a message from the value of an "error" member: a string, an object
// with "message" (OpenAI/vLLM {"message","type","param","code"}), or else the raw JSON.
func messageOf(v raw) string {
	switch {
	case len(v) > 0 && v[0] == '"':
		return jsonString(v)
	case len(v) > 0 && v[0] == '{':
		var o struct {
			Message raw `json:"message"`
			Type    raw `json:"type"`
		}
		if json.Unmarshal(v, &o) == nil && o.Message.isText() {
			return jsonString(o.Message)
		}
	}
	return string(v)
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
