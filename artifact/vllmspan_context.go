package artifact

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
)

// VLLMSpanContext is one infer.vllm_span_context v1 line: the resource and
// instrumentation scope that infer.vllm_span v2 lines of the same artifact
// file name by ID instead of repeating them. The Writer writes one before the
// first span line that names it, once per file; readers resolve each v2 span
// line against the contexts read earlier in the same file (SpanContexts).
//
// ID is ContextIDOf the encoded resource and scope (16 lowercase hex digits),
// so the same content always has the same id and two lines with one id and
// different content are an error. Resource and Scope are VLLMSpan.Resource and
// VLLMSpan.Scope (Scope: "name", "version" when set, "attributes" when any);
// treat them as read-only: the spans resolved against a context share them.
type VLLMSpanContext struct {
	ID       string
	Resource map[string]any
	Scope    map[string]any

	shared *sharedMaps // the encoding of Resource and Scope; nil until encoded
}

// RecordKind returns KindVLLMSpanContext.
func (VLLMSpanContext) RecordKind() Kind { return KindVLLMSpanContext }

func (VLLMSpanContext) selfEncoding() {}

// maxContextIDBytes bounds a context id read from a file.
const maxContextIDBytes = 128

// ErrUnknownSpanContext is wrapped by the error for an infer.vllm_span v2
// line naming a context that no earlier infer.vllm_span_context line of the
// file defines.
var ErrUnknownSpanContext = errors.New("infer.vllm_span v2 names an unknown infer.vllm_span_context")

// MarshalJSON writes `{"event_type":"infer.vllm_span_context","schema_version":1,
// "context_id":ID,"resource":{…},"scope":{…}}` with VLLMSpan's value rules
// (sorted keys, exact integers, doubles with a decimal point or exponent).
func (c VLLMSpanContext) MarshalJSON() ([]byte, error) {
	s := c.shared
	if s == nil || !sameMap(s.resource, c.Resource) || !sameMap(s.scope, c.Scope) {
		if s = encodeShared(c.Resource, c.Scope); s == nil {
			return nil, fmt.Errorf("artifact: span context %q: resource or scope does not encode", c.ID)
		}
	}
	return contextLine(c.ID, s.enc), nil
}

// contextLine is the infer.vllm_span_context line of id with enc, the
// `,"resource":…,"scope":…` encoding, without its newline.
func contextLine(id string, enc []byte) []byte {
	b := make([]byte, 0, len(enc)+128)
	b = append(b, `{"event_type":"`+EventVLLMSpanContext+`","schema_version":`...)
	b = strconv.AppendInt(b, VLLMSpanContextSchemaVersion, 10)
	b = append(b, `,"context_id":`...)
	b = appendString(b, id)
	b = append(b, enc...)
	return append(b, '}')
}

// ContextIDOf returns the context id of an encoded resource and scope (the
// first 16 hex digits of its SHA-256).
func ContextIDOf(enc []byte) string {
	sum := sha256.Sum256(enc)
	return hex.EncodeToString(sum[:8])
}

// wireContext is the JSON shape of an infer.vllm_span_context line.
type wireContext struct {
	EventType     *string         `json:"event_type"`
	SchemaVersion json.RawMessage `json:"schema_version"`
	ContextID     *string         `json:"context_id"`
	Resource      json.RawMessage `json:"resource"`
	Scope         json.RawMessage `json:"scope"`
}

// DecodeVLLMSpanContext decodes one infer.vllm_span_context v1 line. The
// context_id must be a non-empty string of at most 128 bytes; resource and
// scope are objects (or null) read with DecodeVLLMSpan's exact-number rules.
// Unknown fields are ignored. Errors name the field.
func DecodeVLLMSpanContext(line []byte) (*VLLMSpanContext, error) {
	var w wireContext
	if err := strictUnmarshal(line, &w); err != nil {
		return nil, fmt.Errorf("artifact: %s: %w", EventVLLMSpanContext, err)
	}
	if w.EventType == nil || *w.EventType != EventVLLMSpanContext || string(w.SchemaVersion) != "1" {
		return nil, fmt.Errorf("artifact: not an %s v1 record", EventVLLMSpanContext)
	}
	if w.ContextID == nil || *w.ContextID == "" || len(*w.ContextID) > maxContextIDBytes {
		return nil, fmt.Errorf("artifact: %s: context_id must be a non-empty string of at most %d bytes", EventVLLMSpanContext, maxContextIDBytes)
	}
	c := &VLLMSpanContext{ID: *w.ContextID}
	var err error
	if c.Resource, err = jsonObject(w.Resource); err != nil {
		return nil, fmt.Errorf("artifact: %s %q: resource: %w", EventVLLMSpanContext, c.ID, err)
	}
	if c.Scope, err = jsonObject(w.Scope); err != nil {
		return nil, fmt.Errorf("artifact: %s %q: scope: %w", EventVLLMSpanContext, c.ID, err)
	}
	c.shared = encodeShared(c.Resource, c.Scope)
	return c, nil
}

// SpanContexts resolves the infer.vllm_span v2 lines of one artifact file
// against its infer.vllm_span_context lines, in file order: Add each
// context as it is read, Resolve each span after. The zero value is ready.
// It is not safe for concurrent use.
type SpanContexts struct {
	byID map[string]*VLLMSpanContext
}

// Add registers c. A second context with c's id is accepted when its
// resource and scope are equal to the first's (the first is kept) — an
// appended or concatenated file repeats contexts — and is an error otherwise.
func (s *SpanContexts) Add(c *VLLMSpanContext) error {
	if old, ok := s.byID[c.ID]; ok {
		if !reflect.DeepEqual(old.Resource, c.Resource) || !reflect.DeepEqual(old.Scope, c.Scope) {
			return fmt.Errorf("%s %q is defined twice with different content", EventVLLMSpanContext, c.ID)
		}
		return nil
	}
	if s.byID == nil {
		s.byID = map[string]*VLLMSpanContext{}
	}
	s.byID[c.ID] = c
	return nil
}

// Lookup returns the context registered under id.
func (s *SpanContexts) Lookup(id string) (*VLLMSpanContext, bool) {
	c, ok := s.byID[id]
	return c, ok
}

// Resolve sets r.Context for an infer.vllm_span v2 record from the context
// its line names; other records are left as they are. The error (wrapping
// ErrUnknownSpanContext for an unknown id) is for a line without a readable
// context id or naming a context not added yet.
func (s *SpanContexts) Resolve(r *Raw) error {
	if r.Kind != KindVLLMSpanV2 {
		return nil
	}
	id, err := spanContextID(r.JSON)
	if err != nil {
		return err
	}
	c, ok := s.byID[id]
	if !ok {
		return fmt.Errorf("%w %q (no earlier line of the file defines it)", ErrUnknownSpanContext, truncateText(id, 40))
	}
	r.Context = c
	return nil
}

var fastContextPrefix = []byte(`{"event_type":"` + EventVLLMSpan + `","schema_version":2,"context":"`)

// spanContextID reads the "context" string of a v2 span line: straight
// from the prefix the Writer writes, else by decoding the line.
func spanContextID(line []byte) (string, error) {
	if rest, ok := bytes.CutPrefix(line, fastContextPrefix); ok {
		if end := bytes.IndexByte(rest, '"'); end > 0 && bytes.IndexByte(rest[:end], '\\') < 0 && end <= maxContextIDBytes {
			return string(rest[:end]), nil
		}
	}
	var w struct {
		Context *string `json:"context"`
	}
	if err := json.Unmarshal(line, &w); err != nil || w.Context == nil || *w.Context == "" {
		return "", errors.New("infer.vllm_span v2 without a context string")
	}
	return *w.Context, nil
}

// DecodeVLLMSpanRaw decodes an infer.vllm_span record kept as *Raw: a v1 line
// as DecodeVLLMSpan does, a v2 line with the resource and scope of r.Context
// (the same maps for every span of that context: read-only). A v2 record
// without a resolved Context gives an error wrapping ErrUnknownSpanContext;
// another kind one wrapping ErrNotVLLMSpan.
func DecodeVLLMSpanRaw(r Raw) (VLLMSpan, error) {
	switch r.Kind {
	case KindVLLMSpan:
		return DecodeVLLMSpan(r.JSON)
	case KindVLLMSpanV2:
		if r.Context == nil {
			return VLLMSpan{}, fmt.Errorf("artifact: %w (context not resolved)", ErrUnknownSpanContext)
		}
		return decodeSpanV2(r.JSON, r.Context)
	}
	return VLLMSpan{}, fmt.Errorf("artifact: %w (%s)", ErrNotVLLMSpan, r.Kind)
}

// DecodeSpan decodes one infer.vllm_span line of the file whose contexts s
// holds: v1 as DecodeVLLMSpan, v2 against the context it names (an unknown
// one is an error wrapping ErrUnknownSpanContext).
func (s *SpanContexts) DecodeSpan(line []byte) (VLLMSpan, error) {
	if k, lerr := parseKind(line); lerr == nil && k == KindVLLMSpanV2 {
		r := Raw{Kind: k, JSON: line}
		if err := s.Resolve(&r); err != nil {
			return VLLMSpan{}, fmt.Errorf("artifact: %w", err)
		}
		return decodeSpanV2(line, r.Context)
	}
	return DecodeVLLMSpan(line)
}

// decodeSpanV2 decodes an infer.vllm_span v2 line with DecodeVLLMSpan's
// rules; its "context" must be c's id, and it must carry no resource or scope
// of its own.
func decodeSpanV2(line []byte, c *VLLMSpanContext) (VLLMSpan, error) {
	var w wireSpan
	if err := strictUnmarshal(line, &w); err != nil {
		return VLLMSpan{}, fmt.Errorf("artifact: infer.vllm_span: %w", err)
	}
	if w.EventType == nil || *w.EventType != EventVLLMSpan || string(w.SchemaVersion) != "2" {
		return VLLMSpan{}, fmt.Errorf("artifact: %w (want infer.vllm_span v2)", ErrNotVLLMSpan)
	}
	switch {
	case w.Context == nil || *w.Context != c.ID:
		return VLLMSpan{}, fmt.Errorf("artifact: infer.vllm_span v2: context does not match %q", c.ID)
	case w.Resource != nil || w.Scope != nil:
		return VLLMSpan{}, errors.New("artifact: infer.vllm_span v2: resource and scope belong in its context")
	}
	rec, err := w.record()
	if err != nil {
		return VLLMSpan{}, fmt.Errorf("artifact: infer.vllm_span: %w", err)
	}
	rec.Resource, rec.Scope = c.Resource, c.Scope
	return rec, nil
}
