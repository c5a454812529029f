package loadgen

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
)

// buildBody returns the Chat Completions request body: model, one user message, stream,
// stream_options.include_usage (streaming with StreamUsage), the output cap under
// MaxTokensField, then ExtraBody's fields (Validate already refused overrides; a fixed
// field wins over an ExtraBody one of the same name).
//
// The bytes are exactly json.Marshal's of that object as a map[string]any (keys sorted,
// HTML characters escaped; TestBuildBodyMatchesMarshal checks it), written without
// reflection except for the ExtraBody values.
func buildBody(cfg *Config, promptText string, outputTokens int) ([]byte, error) {
	usage := cfg.Stream && cfg.StreamUsage
	fixed := [...]string{"model", "messages", "stream", cfg.MaxTokensField, "stream_options"}
	nFixed := len(fixed)
	if !usage {
		nFixed-- // no stream_options
	}
	keys := make([]string, 0, nFixed+len(cfg.ExtraBody))
	keys = append(keys, fixed[:nFixed]...)
	for k := range cfg.ExtraBody {
		if !slices.Contains(fixed[:nFixed], k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	out := make([]byte, 0, 160+len(promptText)+len(cfg.Model))
	out = append(out, '{')
	for i, k := range keys {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(appendJSONString(out, k), ':')
		switch {
		case k == cfg.MaxTokensField:
			out = strconv.AppendInt(out, int64(outputTokens), 10)
		case k == "model":
			out = appendJSONString(out, cfg.Model)
		case k == "messages":
			out = append(out, `[{"content":`...)
			out = append(appendJSONString(out, promptText), `,"role":"user"}]`...)
		case k == "stream":
			out = strconv.AppendBool(out, cfg.Stream)
		case k == "stream_options" && usage:
			out = append(out, `{"include_usage":true}`...)
		default:
			v, err := json.Marshal(cfg.ExtraBody[k])
			if err != nil {
				return nil, err
			}
			out = append(out, v...)
		}
	}
	return append(out, '}'), nil
}

// appendJSONString appends s as encoding/json encodes a string (HTML characters escaped):
// printable ASCII other than " \ < > & is copied as is, anything else goes through
// json.Marshal.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s) // a string always encodes
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// buildHeader returns the request headers: JSON content type, the bearer key when set,
// X-Request-Id, and a W3C traceparent whose trace id is recorded on the request, so that the
// server's spans can be joined by trace as well as by request id.
func buildHeader(cfg *Config, xRequestID, traceID string) http.Header {
	return buildHeaderSpan(cfg, xRequestID, traceID, newSpanID())
}

// buildHeaderSpan is buildHeader with the traceparent's parent span id given (16 hex digits).
func buildHeaderSpan(cfg *Config, xRequestID, traceID, spanID string) http.Header {
	// Keys are already canonical: set directly (what Header.Set does after canonicalizing).
	h := make(http.Header, 5)
	h["Content-Type"] = []string{"application/json"}
	h["Accept"] = []string{"application/json, text/event-stream"}
	if cfg.APIKey != "" {
		h["Authorization"] = []string{"Bearer " + cfg.APIKey}
	}
	h["X-Request-Id"] = []string{xRequestID}
	h["Traceparent"] = []string{"00-" + traceID + "-" + spanID + "-01"}
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
