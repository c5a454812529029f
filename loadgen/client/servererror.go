package client

import (
	"bytes"
	"encoding/json"
	"strings"
)

// MaxServerErrorFieldBytes bounds Result.ServerErrorType and Result.ServerErrorCode (cut at
// a UTF-8 boundary, "…" added).
const MaxServerErrorFieldBytes = 128

// serverError is an error a server sent, as parseServerError reads it. Type and Code are ""
// when the server sent none (absent, null or ""); a JSON string is kept as sent, a number as
// its literal (500 → "500", never coerced), any other value as its compact JSON text.
type serverError struct {
	Message    string // the server's message; "" when it sent none
	Type, Code string
}

// errorShape holds the members of a JSON body that parseServerError reads, with
// encoding/json's rules (keys matched case-insensitively, the last of duplicates wins) — the
// rules by which wireChunk, decoded the same way, detects an error object in a chunk.
type errorShape struct {
	Error     raw `json:"error"`
	Object    raw `json:"object"`
	Message   raw `json:"message"`
	Type      raw `json:"type"`
	ErrorType raw `json:"error_type"`
	Code      raw `json:"code"`
	Detail    raw `json:"detail"`
}

// parseServerError is the one reader of the error bodies servers send: in a 2xx stream's
// data event, a 2xx JSON body, an "event: error" payload, or the body of a non-2xx answer.
// It recognises, in this order:
//
//   - {"error":{"message":…,"type":…,"code":…,"param":…}}: OpenAI, vLLM ≥ 0.10.1, SGLang,
//     llama.cpp ({"error":{"code":500,"message":…,"type":"server_error"}}); an "error"
//     object without a message string gives its JSON text as the message;
//   - {"error":"…"} (Ollama, TGI, proxies), with the type from a sibling "error_type" (TGI)
//     or "type", the code from a sibling "code"; any other non-null "error" value gives its
//     JSON text as the message;
//   - {"object":"error","message":…,"type":…,"code":…}: vLLM < 0.10.1 and SGLang's
//     ErrorResponse.
//
// An error object of these shapes without a message gets "error object without a message".
//
// A body that is none of these is an error only when known (the body of a non-2xx answer,
// an "event: error" payload), and then gives {"message":"…","type":…,"code":…}, FastAPI's
// {"detail":…} (a string, else its JSON text), or else the text itself as the message. ok
// reports whether b holds an error; it is always true when known. It never panics and keeps
// nothing of b.
func parseServerError(b []byte, known bool) (e serverError, ok bool) {
	b = bytes.TrimSpace(b)
	var o errorShape
	if len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &o) != nil {
		if !known {
			return serverError{}, false
		}
		return serverError{Message: string(b)}, true
	}
	switch {
	case o.Error.isSet():
		e = errorMember(&o)
		if e.Message == "" {
			e.Message = noMessage
		}
		return e, true
	case bytes.Equal(o.Object, objectError):
		msg := noMessage
		if o.Message.isText() {
			msg = jsonString(o.Message)
		}
		return serverError{Message: msg, Type: fieldText(o.Type), Code: fieldText(o.Code)}, true
	case !known:
		return serverError{}, false
	case o.Message.isText():
		return serverError{Message: jsonString(o.Message), Type: fieldText(o.Type), Code: fieldText(o.Code)}, true
	case o.Detail.isSet():
		return serverError{Message: messageOf(o.Detail)}, true
	}
	return serverError{Message: string(b)}, true
}

// noMessage is the message of an error object that carries none.
const noMessage = "error object without a message"

// errorMember reads a non-null "error" member: an object's message, type and code; a
// string with the type and code beside it; any other value as its JSON text.
func errorMember(o *errorShape) serverError {
	switch o.Error[0] {
	case '{':
		var in struct {
			Message raw `json:"message"`
			Type    raw `json:"type"`
			Code    raw `json:"code"`
		}
		if json.Unmarshal(o.Error, &in) == nil {
			msg := string(o.Error)
			if in.Message.isText() {
				msg = jsonString(in.Message)
			}
			return serverError{Message: msg, Type: fieldText(in.Type), Code: fieldText(in.Code)}
		}
	case '"':
		typ := fieldText(o.ErrorType)
		if typ == "" {
			typ = fieldText(o.Type)
		}
		return serverError{Message: jsonString(o.Error), Type: typ, Code: fieldText(o.Code)}
	}
	return serverError{Message: string(o.Error)}
}

// messageOf extracts a message from the value of an "error" or "detail" member: a string,
// an object's "message" string, or else the value's JSON text.
func messageOf(v raw) string {
	switch {
	case len(v) > 0 && v[0] == '"':
		return jsonString(v)
	case len(v) > 0 && v[0] == '{':
		var o struct {
			Message raw `json:"message"`
		}
		if json.Unmarshal(v, &o) == nil && o.Message.isText() {
			return jsonString(o.Message)
		}
	}
	return string(v)
}

// fieldText renders a type or code value: "" for an absent or null one, a string's value, a
// number's literal, any other value's compact JSON text; valid UTF-8, at most
// MaxServerErrorFieldBytes (plus "…" when cut).
func fieldText(v raw) string {
	if !v.isSet() {
		return ""
	}
	var s string
	if v[0] == '"' {
		s = jsonString(v)
	} else {
		var buf bytes.Buffer
		if json.Compact(&buf, v) != nil {
			return "" // not reached: v was decoded as JSON
		}
		s = strings.ToValidUTF8(buf.String(), "\uFFFD")
	}
	return bound(s, MaxServerErrorFieldBytes)
}

// failServer records a failure whose detail is an error the server sent: its message after
// prefix, and its type and code.
func (r *Result) failServer(o Outcome, typ, prefix string, e serverError) {
	r.fail(o, typ, prefix+e.Message)
	r.ServerErrorType, r.ServerErrorCode = e.Type, e.Code
}
