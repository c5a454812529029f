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
	IncludeUsage         *bool `json:"include_usage"`
	ContinuousUsageStats *bool `json:"continuous_usage_stats"`
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
	// continuousUsage: stream_options.continuous_usage_stats with include_usage; every
	// chunk then carries usage so far.
	continuousUsage bool
	maxTokens       int // effective max_tokens
	ignoreEOS       bool
	temperature     float64
	topP            float64
	promptTokens    int
	hashes          []uint64 // chained hashes of full prompt blocks (prefix caching only)
	bodyID          string   // the vLLM "request_id" body extension
}

// badParam is a 400 BadRequestError about one request field (param).
func badParam(param, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, typ: "BadRequestError", msg: fmt.Sprintf(format, args...), param: param}
}

// decodeChatRequest parses and validates a POST /v1/chat/completions body against cfg. Errors
// are 400 BadRequestError for malformed or invalid bodies (vLLM answers validation errors
// with 400) and 404 NotFoundError for an unknown model. The checks run in a fixed order (the
// JSON, the messages, the options, the token limits, the contents, the model, then the
// context length) and the first that fails is the answer.
func decodeChatRequest(body []byte, cfg *Config) (*chatRequest, *apiError) {
	w, aerr := parseWireRequest(body)
	if aerr != nil {
		return nil, aerr
	}
	if len(w.Messages) == 0 {
		return nil, badParam("messages", "messages: at least one message is required")
	}
	r := &chatRequest{model: cfg.Model, temperature: 1, topP: 1}
	if aerr := r.applyOptions(w); aerr != nil {
		return nil, aerr
	}
	requested, aerr := requestedMaxTokens(w)
	if aerr != nil {
		return nil, aerr
	}
	scan := newPromptScanner(cfg.BlockSize, cfg.EnablePrefixCaching)
	for i, m := range w.Messages {
		scan.marker(m.Role)
		if err := scanContent(&scan, m.Content); err != nil {
			return nil, badParam("messages", "messages[%d].content: %v", i, err)
		}
	}
	if w.Model != nil && *w.Model != cfg.Model {
		return nil, &apiError{status: http.StatusNotFound, typ: "NotFoundError", msg: fmt.Sprintf("The model `%s` does not exist.", *w.Model), param: "model"}
	}
	r.promptTokens = scan.words
	r.hashes = scan.hashes
	if r.promptTokens == 0 {
		return nil, badParam("messages", "the prompt is empty: the simulator counts prompt tokens as whitespace-separated words of the message contents and needs at least one")
	}
	if r.maxTokens, aerr = effectiveMaxTokens(cfg, r.promptTokens, requested); aerr != nil {
		return nil, aerr
	}
	return r, nil
}

// parseWireRequest decodes a body that must be exactly one JSON object (only white space
// after it).
func parseWireRequest(body []byte) (*wireRequest, *apiError) {
	var w wireRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&w); err != nil {
		return nil, badRequest("invalid JSON body: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, badRequest("invalid JSON body: data after the top-level object")
	}
	return &w, nil
}

// applyOptions copies the stream and sampling options of w into r (continuous usage only
// with include_usage, as vLLM), rejecting stream_options without stream=true, n other than 1, a temperature outside [0, 100] and
// a top_p outside (0, 1]; absent options keep r's defaults.
func (r *chatRequest) applyOptions(w *wireRequest) *apiError {
	if w.Stream != nil {
		r.stream = *w.Stream
	}
	if o := w.StreamOptions; o != nil && (o.IncludeUsage != nil || o.ContinuousUsageStats != nil) {
		if !r.stream {
			return badRequest("Stream options can only be defined when `stream=True`.")
		}
		r.includeUsage = o.IncludeUsage != nil && *o.IncludeUsage
		// as vLLM: continuous usage only together with include_usage
		r.continuousUsage = r.includeUsage && o.ContinuousUsageStats != nil && *o.ContinuousUsageStats
	}
	if w.IgnoreEOS != nil {
		r.ignoreEOS = *w.IgnoreEOS
	}
	if w.N != nil && *w.N != 1 {
		return badParam("n", "n must be 1 in the simulator, got %d", *w.N)
	}
	if w.Temperature != nil {
		if t := *w.Temperature; !(t >= 0) || t > 100 {
			return badParam("temperature", "temperature must be non-negative, got %v.", t)
		}
		r.temperature = *w.Temperature
	}
	if w.TopP != nil {
		if p := *w.TopP; !(p > 0 && p <= 1) {
			return badParam("top_p", "top_p must be in (0, 1], got %v.", p)
		}
		r.topP = *w.TopP
	}
	if w.RequestID != nil {
		r.bodyID = *w.RequestID
	}
	return nil
}

// requestedMaxTokens is the completion limit the request asks for, 0 when it sets none:
// max_completion_tokens wins over the deprecated max_tokens, as in vLLM, and must be ≥ 1.
func requestedMaxTokens(w *wireRequest) (int64, *apiError) {
	switch {
	case w.MaxCompletionTokens != nil:
		if n := *w.MaxCompletionTokens; n < 1 {
			return 0, badParam("max_completion_tokens", "max_completion_tokens must be at least 1, got %d.", n)
		}
		return *w.MaxCompletionTokens, nil
	case w.MaxTokens != nil:
		if n := *w.MaxTokens; n < 1 {
			return 0, badParam("max_tokens", "max_tokens must be at least 1, got %d.", n)
		}
		return *w.MaxTokens, nil
	}
	return 0, nil
}

// effectiveMaxTokens is the max_tokens in effect for a prompt of promptTokens: the prompt
// must leave room in MaxModelLen; none requested (0) takes the room left, capped by
// DefaultMaxTokens when set (vLLM's rule is the room alone); more than the room is a 400,
// with vLLM's message. The result is capped at MaxInt32.
func effectiveMaxTokens(cfg *Config, promptTokens int, requested int64) (int, *apiError) {
	if promptTokens >= cfg.MaxModelLen {
		return 0, badRequest("This model's maximum context length is %d tokens. However, your request has %d input tokens. Please reduce the length of the input messages.", cfg.MaxModelLen, promptTokens)
	}
	room := int64(cfg.MaxModelLen - promptTokens)
	if requested == 0 {
		requested = room
		if cfg.DefaultMaxTokens > 0 && int64(cfg.DefaultMaxTokens) < room {
			requested = int64(cfg.DefaultMaxTokens)
		}
	} else if requested > room {
		return 0, badRequest("This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.",
			cfg.MaxModelLen, int64(promptTokens)+requested, promptTokens, requested)
	}
	if requested > math.MaxInt32 {
		requested = math.MaxInt32
	}
	return int(requested), nil
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
