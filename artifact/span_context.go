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

// SpanContext is one infer.vllm_span_context v1 line: what the spans of
// one export have in common, which infer.vllm_span v2 lines of the same
// artifact file name by ID instead of repeating it — the reception facts
// (SessionID, RunID, Source, ClockDomain: Span's), the resource and
// scope, and the sorted attribute keys whose values a v2 line lists in that
// order. The Writer writes one before the first span line that names it,
// once per file; readers resolve each v2 span line against the contexts read
// earlier in the same file (SpanContexts).
//
// ID is ContextIDOf the line's body (16 lowercase hex digits), so the same
// content always has the same id, and two lines with one id and different
// content are an error. Resource, Scope and AttributeKeys are shared by the
// spans resolved against the context: treat them as read-only.
type SpanContext struct {
	ID          string
	SessionID   string
	RunID       string
	Source      string
	ClockDomain string
	Resource    map[string]any
	Scope       map[string]any
	// AttributeKeys are the attribute names, distinct, in the order of a v2
	// line's attribute_values (the Writer sorts them).
	AttributeKeys []string
}

// RecordKind returns KindSpanContext.
func (SpanContext) RecordKind() Kind { return KindSpanContext }

func (SpanContext) selfEncoding() {}

// maxContextIDBytes bounds a context id read from a file.
const maxContextIDBytes = 128

// ErrUnknownSpanContext is wrapped by the error for an infer.vllm_span v2
// line naming a context that no earlier infer.vllm_span_context line of the
// file defines.
var ErrUnknownSpanContext = errors.New("infer.vllm_span v2 names an unknown infer.vllm_span_context")

// MarshalJSON writes `{"event_type":"infer.vllm_span_context","schema_version":1,
// "context_id":ID,"session_id":…,"run_id":…,"source":…,"clock_domain":…,
// "resource":{…},"scope":{…},"attribute_keys":[…]}` with Span's value
// rules (sorted map keys, exact integers, doubles with a decimal point or
// exponent).
func (c SpanContext) MarshalJSON() ([]byte, error) {
	enc := encodeShared(c.Resource, c.Scope)
	if enc == nil {
		return nil, fmt.Errorf("artifact: span context %q: resource or scope does not encode", c.ID)
	}
	body := contextBody(nil, c.SessionID, c.RunID, c.Source, c.ClockDomain, enc.enc, c.AttributeKeys)
	return contextLine(c.ID, body), nil
}

// contextBody appends the fields of a context line after its id:
// `,"session_id":…,"clock_domain":…` + enc (`,"resource":…,"scope":…`) +
// `,"attribute_keys":[…]`. It is also the Writer's key for the context.
func contextBody(b []byte, session, run, source, clock string, enc []byte, keys []string) []byte {
	b = append(b, `,"session_id":`...)
	b = appendString(b, session)
	b = append(b, `,"run_id":`...)
	b = appendString(b, run)
	b = append(b, `,"source":`...)
	b = appendString(b, source)
	b = append(b, `,"clock_domain":`...)
	b = appendString(b, clock)
	b = append(b, enc...)
	b = append(b, `,"attribute_keys":[`...)
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
	}
	return append(b, ']')
}

// contextLine is the infer.vllm_span_context line of id with body
// (contextBody), without its newline.
func contextLine(id string, body []byte) []byte {
	b := make([]byte, 0, len(body)+96)
	b = append(b, `{"event_type":"`+EventSpanContext+`","schema_version":`...)
	b = strconv.AppendInt(b, SpanContextSchemaVersion, 10)
	b = append(b, `,"context_id":`...)
	b = appendString(b, id)
	b = append(b, body...)
	return append(b, '}')
}

// ContextIDOf returns the context id of a context line's body (the first 16
// hex digits of its SHA-256).
func ContextIDOf(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:8])
}

// wireContext is the JSON shape of an infer.vllm_span_context line.
type wireContext struct {
	EventType     *string         `json:"event_type"`
	SchemaVersion json.RawMessage `json:"schema_version"`
	ContextID     *string         `json:"context_id"`
	SessionID     string          `json:"session_id"`
	RunID         string          `json:"run_id"`
	Source        string          `json:"source"`
	ClockDomain   string          `json:"clock_domain"`
	Resource      json.RawMessage `json:"resource"`
	Scope         json.RawMessage `json:"scope"`
	AttributeKeys []string        `json:"attribute_keys"`
}

// DecodeSpanContext decodes one infer.vllm_span_context v1 line. The
// context_id must be a non-empty string of at most 128 bytes; resource and
// scope are objects (or null) read with DecodeSpan's exact-number rules;
// attribute_keys an array of sorted, distinct strings (absent or null: none). The line must
// be as the Writer wrote it, its context_id the ContextIDOf what follows it (checkContextID):
// an edited or reformatted context line is an error.
// Unknown fields are ignored. Errors name the field.
func DecodeSpanContext(line []byte) (*SpanContext, error) {
	var w wireContext
	if err := strictUnmarshal(line, &w); err != nil {
		return nil, fmt.Errorf("artifact: %s: %w", EventSpanContext, err)
	}
	if w.EventType == nil || *w.EventType != EventSpanContext || string(w.SchemaVersion) != "1" {
		return nil, fmt.Errorf("artifact: not an %s v1 record", EventSpanContext)
	}
	if w.ContextID == nil || *w.ContextID == "" || len(*w.ContextID) > maxContextIDBytes {
		return nil, fmt.Errorf("artifact: %s: context_id must be a non-empty string of at most %d bytes", EventSpanContext, maxContextIDBytes)
	}
	c := &SpanContext{ID: *w.ContextID, SessionID: w.SessionID, RunID: w.RunID, Source: w.Source,
		ClockDomain: w.ClockDomain, AttributeKeys: w.AttributeKeys}
	var err error
	if c.Resource, err = jsonObject(w.Resource); err != nil {
		return nil, fmt.Errorf("artifact: %s %q: resource: %w", EventSpanContext, c.ID, err)
	}
	if c.Scope, err = jsonObject(w.Scope); err != nil {
		return nil, fmt.Errorf("artifact: %s %q: scope: %w", EventSpanContext, c.ID, err)
	}
	for i, k := range c.AttributeKeys {
		if i > 0 && k <= c.AttributeKeys[i-1] {
			return nil, fmt.Errorf("artifact: %s %q: attribute_keys are not sorted and distinct at %q", EventSpanContext, c.ID, truncateText(k, 40))
		}
	}
	if err := checkContextID(line, c.ID); err != nil {
		return nil, err
	}
	return c, nil
}

// checkContextID checks that line is a context line as the Writer writes it (contextLine:
// the fixed prefix, the context_id, the body, "}") and that its id is ContextIDOf the body,
// so that a line changed after it was written (an edited attribute key would silently move
// every span's values to other attributes) is an error rather than wrong numbers.
func checkContextID(line []byte, id string) error {
	line = bytes.TrimRight(line, " \t\r\n")
	prefix := appendString([]byte(`{"event_type":"`+EventSpanContext+`","schema_version":1,"context_id":`), id)
	if !bytes.HasPrefix(line, prefix) || len(line) == len(prefix) || line[len(line)-1] != '}' {
		return fmt.Errorf("artifact: %s %q: not in the form inferprobe writes (event_type, schema_version, context_id first, compact): a context line is checked against its id and cannot be rewritten", EventSpanContext, id)
	}
	if body := line[len(prefix) : len(line)-1]; ContextIDOf(body) != id {
		return fmt.Errorf("artifact: %s %q: context_id does not match the line's content (the first 16 hex digits of the SHA-256 of what follows it): the line was changed after it was written", EventSpanContext, id)
	}
	return nil
}

// SpanContexts resolves the infer.vllm_span v2 lines of one artifact file
// against its infer.vllm_span_context lines, in file order: Add each
// context as it is read, Resolve each span after. The zero value is ready.
// It is not safe for concurrent use.
type SpanContexts struct {
	byID map[string]*SpanContext
}

// Add registers c. A second context with c's id is accepted when its
// content equals the first's (the first is kept) — an appended or
// concatenated file repeats contexts — and is an error otherwise.
func (s *SpanContexts) Add(c *SpanContext) error {
	if old, ok := s.byID[c.ID]; ok {
		if !reflect.DeepEqual(old, c) {
			return fmt.Errorf("%s %q is defined twice with different content", EventSpanContext, c.ID)
		}
		return nil
	}
	if s.byID == nil {
		s.byID = map[string]*SpanContext{}
	}
	s.byID[c.ID] = c
	return nil
}

// Lookup returns the context registered under id.
func (s *SpanContexts) Lookup(id string) (*SpanContext, bool) {
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

var fastContextPrefix = []byte(`{"event_type":"` + EventSpan + `","schema_version":2,"context":"`)

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

// DecodeSpanRaw decodes an infer.vllm_span record kept as *Raw: a v1 line
// as DecodeSpan does, a v2 line completed from r.Context (see
// KindVLLMSpanV2; the Resource and Scope maps are the context's, shared by
// its spans: read-only). A v2 record
// without a resolved Context gives an error wrapping ErrUnknownSpanContext;
// another kind one wrapping ErrNotSpan.
func DecodeSpanRaw(r Raw) (Span, error) {
	switch r.Kind {
	case KindSpan:
		return DecodeSpan(r.JSON)
	case KindVLLMSpanV2:
		if r.Context == nil {
			return Span{}, fmt.Errorf("artifact: %w (context not resolved)", ErrUnknownSpanContext)
		}
		return decodeSpanV2(r.JSON, r.Context)
	}
	return Span{}, fmt.Errorf("artifact: %w (%s)", ErrNotSpan, r.Kind)
}

// DecodeSpan decodes one infer.vllm_span line of the file whose contexts s
// holds: v1 as DecodeSpan, v2 against the context it names (an unknown
// one is an error wrapping ErrUnknownSpanContext).
func (s *SpanContexts) DecodeSpan(line []byte) (Span, error) {
	if k, lerr := parseKind(line); lerr == nil && k == KindVLLMSpanV2 {
		r := Raw{Kind: k, JSON: line}
		if err := s.Resolve(&r); err != nil {
			return Span{}, fmt.Errorf("artifact: %w", err)
		}
		return decodeSpanV2(line, r.Context)
	}
	return DecodeSpan(line)
}
