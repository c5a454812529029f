package loadgen

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
)

// buildBody returns the Chat Completions request body: model, one user message, stream,
// stream_options.include_usage (streaming with StreamUsage), the output cap under
// MaxTokensField, then ExtraBody's fields (Validate already refused overrides).
func buildBody(cfg *Config, promptText string, outputTokens int) ([]byte, error) {
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

// buildHeader returns the request headers: JSON content type, the bearer key when set,
// X-Request-Id, and a W3C traceparent whose trace id is recorded on the request, so that the
// server's spans can be joined by trace as well as by request id.
func buildHeader(cfg *Config, xRequestID, traceID string) http.Header {
	h := make(http.Header, 5)
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	if cfg.APIKey != "" {
		h.Set("Authorization", "Bearer "+cfg.APIKey)
	}
	h.Set("X-Request-Id", xRequestID)
	h.Set("Traceparent", "00-"+traceID+"-"+newSpanID()+"-01")
	return h
}

// newTraceID returns 16 random bytes as 32 lowercase hex digits (never all zero).
func newTraceID() string {
	var b [16]byte
	for {
		_, _ = rand.Read(b[:])
		if b != [16]byte{} {
			return hex.EncodeToString(b[:])
		}
	}
}

// newSpanID returns 8 random bytes as 16 lowercase hex digits (never all zero).
func newSpanID() string {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:])
		if b != [8]byte{} {
			return hex.EncodeToString(b[:])
		}
	}
}
