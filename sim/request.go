package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
)

// apiError is an OpenAI-style error as vLLM ≥ 0.10.1 sends it, nested under "error" (older
// vLLM sent the same fields flat, beside "object": "error"): the whole body of a
// non-streamed error with HTTP status = code, or the payload of an in-stream error event.
type apiError struct {
	status int
	typ    string
	msg    string
	param  string // "" → null
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.status, e.typ, e.msg) }

// body renders {"error":{"message":…,"type":…,"param":…,"code":…}}.
func (e *apiError) body() []byte {
	var b bytes.Buffer
	b.WriteString(`{"error":{"message":`)
	writeJSONString(&b, e.msg)
	b.WriteString(`,"type":`)
	writeJSONString(&b, e.typ)
	b.WriteString(`,"param":`)
	if e.param == "" {
		b.WriteString("null")
	} else {
		writeJSONString(&b, e.param)
	}
	b.WriteString(`,"code":`)
	b.WriteString(strconv.Itoa(e.status))
	b.WriteString("}}")
	return b.Bytes()
}

func writeJSONString(b *bytes.Buffer, s string) {
	q, _ := json.Marshal(s) // a string always marshals
	b.Write(q)
}

func badRequest(format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, typ: "BadRequestError", msg: fmt.Sprintf(format, args...)}
}

// wireRequest is the subset of the Chat Completions request body the simulator reads; other
// fields are accepted and ignored, as vLLM ignores unknown fields.
type wireRequest struct {
	Model               *string        `json:"model"`
	Messages            []wireMessage  `json:"messages"`
	Stream              *bool          `json:"stream"`
	StreamOptions       *streamOptions `json:"stream_options"`
	MaxTokens           *int64         `json:"max_tokens"`
	MaxCompletionTokens *int64         `json:"max_completion_tokens"`
	IgnoreEOS           *bool          `json:"ignore_eos"`
	Temperature         *float64       `json:"temperature"`
	TopP                *float64       `json:"top_p"`
	N                   *int64         `json:"n"`
	RequestID           *string        `json:"request_id"`
}

type streamOptions struct {
	IncludeUsage *bool `json:"include_usage"`
}

type wireMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type wirePart struct {
	Type string  `json:"type"`
	Text *string `json:"text"`
}

// chatRequest is a validated request.
type chatRequest struct {
	model        string
	stream       bool
	includeUsage bool
	maxTokens    int // effective max_tokens
	ignoreEOS    bool
	temperature  float64
	topP         float64
	promptTokens int
	hashes       []uint64 // chained hashes of full prompt blocks (prefix caching only)
	bodyID       string   // the vLLM "request_id" body extension
}

// decodeChatRequest parses and validates a POST /v1/chat/completions body against cfg. Errors
// are 400 BadRequestError for malformed or invalid bodies (vLLM answers validation errors
// with 400) and 404 NotFoundError for an unknown model.
func decodeChatRequest(body []byte, cfg *Config) (*chatRequest, *apiError) {
	var w wireRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&w); err != nil {
		return nil, badRequest("invalid JSON body: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, badRequest("invalid JSON body: data after the top-level object")
	}
	if len(w.Messages) == 0 {
		return nil, &apiError{status: 400, typ: "BadRequestError", msg: "messages: at least one message is required", param: "messages"}
	}
	r := &chatRequest{model: cfg.Model, temperature: 1, topP: 1}
	if w.Stream != nil {
		r.stream = *w.Stream
	}
	if w.StreamOptions != nil && w.StreamOptions.IncludeUsage != nil {
		if !r.stream {
			return nil, badRequest("Stream options can only be defined when `stream=True`.")
		}
		r.includeUsage = *w.StreamOptions.IncludeUsage
	}
	if w.IgnoreEOS != nil {
		r.ignoreEOS = *w.IgnoreEOS
	}
	if w.N != nil && *w.N != 1 {
		return nil, &apiError{status: 400, typ: "BadRequestError", msg: fmt.Sprintf("n must be 1 in the simulator, got %d", *w.N), param: "n"}
	}
	if w.Temperature != nil {
		if t := *w.Temperature; !(t >= 0) || t > 100 {
			return nil, &apiError{status: 400, typ: "BadRequestError", msg: fmt.Sprintf("temperature must be non-negative, got %v.", t), param: "temperature"}
		}
		r.temperature = *w.Temperature
	}
	if w.TopP != nil {
		if p := *w.TopP; !(p > 0 && p <= 1) {
			return nil, &apiError{status: 400, typ: "BadRequestError", msg: fmt.Sprintf("top_p must be in (0, 1], got %v.", p), param: "top_p"}
		}
		r.topP = *w.TopP
	}
	if w.RequestID != nil {
		r.bodyID = *w.RequestID
	}
	// max_completion_tokens wins over the deprecated max_tokens, as in vLLM.
	var requested int64
	switch {
	case w.MaxCompletionTokens != nil:
		requested = *w.MaxCompletionTokens
		if requested < 1 {
			return nil, &apiError{status: 400, typ: "BadRequestError", msg: fmt.Sprintf("max_completion_tokens must be at least 1, got %d.", requested), param: "max_completion_tokens"}
		}
	case w.MaxTokens != nil:
		requested = *w.MaxTokens
		if requested < 1 {
			return nil, &apiError{status: 400, typ: "BadRequestError", msg: fmt.Sprintf("max_tokens must be at least 1, got %d.", requested), param: "max_tokens"}
		}
	}
	scan := newPromptScanner(cfg.BlockSize, cfg.EnablePrefixCaching)
	for i, m := range w.Messages {
		scan.marker(m.Role)
		if err := scanContent(&scan, m.Content); err != nil {
			return nil, &apiError{status: 400, typ: "BadRequestError", msg: fmt.Sprintf("messages[%d].content: %v", i, err), param: "messages"}
		}
	}
	if w.Model != nil && *w.Model != cfg.Model {
		return nil, &apiError{status: http.StatusNotFound, typ: "NotFoundError", msg: fmt.Sprintf("The model `%s` does not exist.", *w.Model), param: "model"}
	}
	r.promptTokens = scan.words
	r.hashes = scan.hashes
	if r.promptTokens == 0 {
		return nil, &apiError{status: 400, typ: "BadRequestError", msg: "the prompt is empty: the simulator counts prompt tokens as whitespace-separated words of the message contents and needs at least one", param: "messages"}
	}
	if r.promptTokens >= cfg.MaxModelLen {
		return nil, badRequest("This model's maximum context length is %d tokens. However, your request has %d input tokens. Please reduce the length of the input messages.", cfg.MaxModelLen, r.promptTokens)
	}
	room := int64(cfg.MaxModelLen - r.promptTokens)
	if requested == 0 {
		requested = room
		if cfg.DefaultMaxTokens > 0 && int64(cfg.DefaultMaxTokens) < room {
			requested = int64(cfg.DefaultMaxTokens)
		}
	} else if requested > room {
		return nil, badRequest("This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.",
			cfg.MaxModelLen, int64(r.promptTokens)+requested, r.promptTokens, requested)
	}
	if requested > math.MaxInt32 {
		requested = math.MaxInt32
	}
	r.maxTokens = int(requested)
	return r, nil
}

// scanContent feeds a message content (absent/null, a string, or an array of parts) to the
// scanner; only {"type":"text"} parts carry words.
func scanContent(scan *promptScanner, raw json.RawMessage) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return err
		}
		scan.add(s)
		return nil
	case '[':
		var parts []wirePart
		if err := json.Unmarshal(raw, &parts); err != nil {
			return fmt.Errorf("content parts: %v", err)
		}
		for j, p := range parts {
			if p.Type == "text" {
				if p.Text == nil {
					return fmt.Errorf("part %d: type text without text", j)
				}
				scan.add(*p.Text)
			}
		}
		return nil
	}
	return errors.New("must be a string, an array of content parts, or null")
}
