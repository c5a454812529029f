package artifact

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Source values of Span.Source: how the span reached inferprobe. The
// first three are those of the infer.vllm_span v1 format;
// otlp_grpc_receiver is an inferprobe addition (vLLM exports over gRPC by
// default).
const (
	SpanSourceHTTP     = "otlp_http_receiver"
	SpanSourceGRPC     = "otlp_grpc_receiver"
	SpanSourceOTLPFile = "otlp_json_file"
	SpanSourceJSONL    = "jsonl_file"
)

// MaxSpanValueDepth bounds the nesting of array and map attribute values. A
// received span nested deeper is rejected (OTLP partial success); a file
// line is an error.
const MaxSpanValueDepth = 64

// SpanStatus is an OTLP span status: Code is "UNSET", "OK" or "ERROR" (the
// OTLP StatusCode names; an unknown code is its decimal number).
type SpanStatus struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Span is one span as the server exported it, with its attributes under
// their native names: an infer.vllm_span v1 line (MarshalJSON), or, as the
// Writer stores it, a v2 line naming the infer.vllm_span_context that holds
// what the spans of one export share (see KindVLLMSpanV2).
//
// Times are integer nanoseconds. StartUnixNS, EndUnixNS and TimestampNS
// (= StartUnixNS) are on the exporter's wall clock, named by ClockDomain;
// ReceivedAtNS is on inferprobe's own (client) wall clock. Nullable fields
// are nil when unknown, never 0.
//
// Attribute, resource and scope values are JSON-shaped: string, bool,
// int64 (OTLP intValue, exact), float64 (OTLP doubleValue; NaN and ±Inf are
// the strings "NaN", "+Inf", "-Inf"), hex string (bytesValue), []any
// (arrayValue), map[string]any (kvlistValue) or nil (empty value). A record
// decoded from JSON may also hold json.Number for an integer outside the
// int64 range. Records produced by the receiver share, among the spans of
// one export, the Resource and Scope maps, and the Status and Dropped values
// of the common all-default case: treat the maps and pointed-to values as
// read-only (copy before changing).
type Span struct {
	SessionID string
	RunID     string
	// Source is SpanSourceHTTP, SpanSourceGRPC, SpanSourceOTLPFile or SpanSourceJSONL.
	Source string
	// Name is the span name ("llm_request" for vLLM's request spans).
	Name string
	// ClockDomain names the exporter's wall clock: "<host.name>/unix_epoch_ns"
	// when the resource has host.name, else "<peer address>/unix_epoch_ns"
	// (e.g. "127.0.0.1/unix_epoch_ns"), else "unknown-host/unix_epoch_ns".
	// It never carries a boot id, so it is never the client's domain unless
	// the client has none either.
	ClockDomain string
	// ReceivedAtNS is when the export carrying the span was decoded, on the
	// client clock; nil for spans read from a file.
	ReceivedAtNS *int64
	// TimestampNS is the record's time: the span start on the exporter's clock.
	TimestampNS *int64
	// TraceID (32) and SpanID / ParentSpanID (16) are lowercase hex; nil
	// when absent (a root span has no ParentSpanID).
	TraceID      *string
	SpanID       *string
	ParentSpanID *string
	// Kind is the OTLP span kind name: "UNSPECIFIED", "INTERNAL", "SERVER",
	// "CLIENT", "PRODUCER" or "CONSUMER" (vLLM's request span is SERVER).
	Kind        *string
	StartUnixNS *int64
	EndUnixNS   *int64
	Attributes  map[string]any
	// Resource holds the resource attributes (service.name, host.name,
	// vllm.process_id, ...).
	Resource map[string]any
	// Scope holds the instrumentation scope: "name", "version" when set,
	// and "attributes" when the scope has any.
	Scope map[string]any
	// Status is nil when unknown (a file line without one).
	Status *SpanStatus
	// Dropped counts what the exporter dropped: "attributes", "events",
	// "links" (OTLP dropped_*_count).
	Dropped map[string]int64
	// RequestID is the X-Request-Id recovered from gen_ai.request.id, the
	// first of CandidateRequestIDs when the id has a vLLM chat/completions
	// prefix; nil otherwise. It is a best-effort candidate: the join tries
	// every candidate against the recorded x_request_id values.
	RequestID *string

	// shared is the encoding of Resource and Scope shared with the other
	// spans of one export (ShareSpanMaps); nil when not shared.
	shared *sharedMaps
}

// RecordKind returns KindSpan: MarshalLine writes a Span as a
// self-contained infer.vllm_span v1 line (Writer.Write writes v2 lines and
// their contexts instead).
func (Span) RecordKind() Kind { return KindSpan }

// MarshalJSON's output is one compact, valid line already (MarshalLine
// uses it as it is).
func (Span) selfEncoding() {}

// IsRequestSpan reports whether the span is vLLM's per-request span (named
// "llm_request"), the only kind the join attaches to a request.
func (r *Span) IsRequestSpan() bool { return r.Name == RequestSpanName }

// String returns the string attribute key.
func (r *Span) String(key string) (string, bool) {
	s, ok := r.Attributes[key].(string)
	return s, ok
}

// Int returns the integer attribute key: an int64, or a json.Number or
// float64 holding an integer within the int64 range (a double attribute
// that happens to be integral counts too).
func (r *Span) Int(key string) (int64, bool) {
	switch v := r.Attributes[key].(type) {
	case int64:
		return v, true
	case json.Number:
		n, err := strconv.ParseInt(string(v), 10, 64)
		return n, err == nil
	case float64:
		if v == math.Trunc(v) && v >= -(1<<63) && v < 1<<63 {
			return int64(v), true
		}
	}
	return 0, false
}

// Float returns the numeric attribute key as a float64 (an int64 is
// converted; the strings "NaN", "+Inf", "-Inf" read as those values). Use it
// for the gen_ai.latency.* attributes (seconds).
func (r *Span) Float(key string) (float64, bool) { return attrFloat(r.Attributes[key]) }

// attrFloat reads a decoded attribute value as a number: float64, int64, int, json.Number
// (one past float64's range is ±Inf), or the strings "NaN", "+Inf", "-Inf" of a non-finite
// float; anything else (another string, a bool, nil) is not a number.
func attrFloat(v any) (float64, bool) {
	switch v := v.(type) {
	case float64:
		return v, true
	case int64:
		return float64(v), true
	case int:
		return float64(v), true
	case json.Number:
		f, err := strconv.ParseFloat(string(v), 64)
		return f, err == nil || errors.Is(err, strconv.ErrRange)
	case string:
		return parseNonFinite(v)
	}
	return 0, false
}

// DurationNS returns EndUnixNS − StartUnixNS when both are known.
func (r *Span) DurationNS() (int64, bool) {
	if r.StartUnixNS == nil || r.EndUnixNS == nil {
		return 0, false
	}
	return *r.EndUnixNS - *r.StartUnixNS, true
}

// MarshalJSON writes the record as one infer.vllm_span v1 object with
// "event_type" and "schema_version" first, then the fields in the
// contract's order. Integers are written exactly; a float64 always has a
// decimal point or exponent (1.0, never 1), so integer and double
// attributes keep their types through a write/read round trip. Map keys
// are sorted. Nil maps are written as {}.
func (r Span) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 2048) // a vLLM llm_request line is about 1.5 kB
	b = append(b, `{"event_type":"`+EventSpan+`","schema_version":`...)
	b = strconv.AppendInt(b, SpanSchemaVersion, 10)
	b = append(b, `,"session_id":`...)
	b = appendString(b, r.SessionID)
	b = append(b, `,"run_id":`...)
	b = appendString(b, r.RunID)
	b = append(b, `,"source":`...)
	b = appendString(b, r.Source)
	b = append(b, `,"name":`...)
	b = appendString(b, r.Name)
	b = append(b, `,"clock_domain":`...)
	b = appendString(b, r.ClockDomain)
	b = append(b, `,"received_at_ns":`...)
	b = appendIntPtr(b, r.ReceivedAtNS)
	b = append(b, `,"timestamp_ns":`...)
	b = appendIntPtr(b, r.TimestampNS)
	b, err := r.appendContent(b)
	if err != nil {
		return nil, err
	}
	b = append(b, `,"request_id":`...)
	b = appendStringPtr(b, r.RequestID)
	return append(b, '}'), nil
}

// appendIDsAndTimes writes ",\"trace_id\"" … "end_unix_ns": the span's ids, kind and
// times, as the v1 and v2 lines both carry them.
func (r *Span) appendIDsAndTimes(b []byte) []byte {
	b = append(b, `,"trace_id":`...)
	b = appendStringPtr(b, r.TraceID)
	b = append(b, `,"span_id":`...)
	b = appendStringPtr(b, r.SpanID)
	b = append(b, `,"parent_span_id":`...)
	b = appendStringPtr(b, r.ParentSpanID)
	b = append(b, `,"kind":`...)
	b = appendStringPtr(b, r.Kind)
	b = append(b, `,"start_unix_ns":`...)
	b = appendIntPtr(b, r.StartUnixNS)
	b = append(b, `,"end_unix_ns":`...)
	b = appendIntPtr(b, r.EndUnixNS)
	return b
}

// appendContent writes the span's own fields (what the exporter sent), from
// ",\"trace_id\"" to the dropped counts: the part that ContentDigest hashes.
func (r *Span) appendContent(b []byte) ([]byte, error) {
	var err error
	b = r.appendIDsAndTimes(b)
	b = append(b, `,"attributes":`...)
	if b, err = appendMap(b, r.Attributes, 0); err != nil {
		return nil, fmt.Errorf("artifact: span %q attributes: %w", r.Name, err)
	}
	if b, err = r.appendResourceScope(b); err != nil {
		return nil, err
	}
	b = append(b, `,"status":`...)
	b = appendStatus(b, r.Status)
	b = append(b, `,"dropped":`...)
	return appendDropped(b, r.Dropped), nil
}

// appendStatus writes a status object, or null for nil.
func appendStatus(b []byte, st *SpanStatus) []byte {
	if st == nil {
		return append(b, "null"...)
	}
	b = append(b, `{"code":`...)
	b = appendString(b, st.Code)
	b = append(b, `,"message":`...)
	b = appendString(b, st.Message)
	return append(b, '}')
}

// appendDropped writes the dropped counts as an object with sorted keys ({} for nil).
func appendDropped(b []byte, m map[string]int64) []byte {
	b = append(b, '{')
	if a, e, l, ok := otlpDropped(m); ok { // the usual three keys, already in order
		b = append(b, `"attributes":`...)
		b = strconv.AppendInt(b, a, 10)
		b = append(b, `,"events":`...)
		b = strconv.AppendInt(b, e, 10)
		b = append(b, `,"links":`...)
		b = strconv.AppendInt(b, l, 10)
		return append(b, '}')
	}
	for i, k := range sortedKeys(make([]string, 0, len(m)), m) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		b = strconv.AppendInt(b, m[k], 10)
	}
	return append(b, '}')
}

// otlpDropped returns the three OTLP dropped counts when m holds exactly
// "attributes", "events" and "links".
func otlpDropped(m map[string]int64) (attributes, events, links int64, ok bool) {
	if len(m) != 3 {
		return 0, 0, 0, false
	}
	var okA, okE, okL bool
	attributes, okA = m["attributes"]
	events, okE = m["events"]
	links, okL = m["links"]
	return attributes, events, links, okA && okE && okL
}

// ContentDigest returns the SHA-256 (64 lowercase hex digits) of what the
// exporter sent for this span: name, ids, kind, start/end, attributes,
// resource, scope, status and dropped counts, in MarshalJSON's spelling.
// Reception facts (session, run, source, clock domain, received_at_ns) and
// the derived request_id are excluded, so an identical re-delivery — over
// HTTP or gRPC, live or read back from the artifact — has the same digest,
// and the same trace_id+span_id with a different digest is a conflicting
// span. An int64 attribute and a double attribute of the
// same value differ. Returns "" only for a value MarshalJSON also refuses.
func (r *Span) ContentDigest() string {
	b := make([]byte, 0, 1024)
	b = append(b, `{"name":`...)
	b = appendString(b, r.Name)
	b, err := r.appendContent(b)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(append(b, '}'))
	return hex.EncodeToString(sum[:])
}

func appendIntPtr(b []byte, v *int64) []byte {
	if v == nil {
		return append(b, "null"...)
	}
	return strconv.AppendInt(b, *v, 10)
}

func appendStringPtr(b []byte, v *string) []byte {
	if v == nil {
		return append(b, "null"...)
	}
	return appendString(b, *v)
}

// appendString writes s as a JSON string: ", \ and control characters
// escaped, U+2028/U+2029 escaped, invalid UTF-8 replaced by U+FFFD (as
// encoding/json does), no HTML escaping; \b and \f as \u0008 and \u000c.
func appendString(b []byte, s string) []byte { return appendJSONString(b, s, false) }

// appendStdString is appendString with \b and \f as their short escapes: exactly what
// encoding/json writes with HTML escaping off.
func appendStdString(b []byte, s string) []byte { return appendJSONString(b, s, true) }

// appendJSONString writes s between quotes: '"' and '\' escaped with a backslash; \n, \r,
// \t (and \b, \f when short) by their short escapes; the other control characters, U+2028
// and U+2029 as \u00XX / \u2028 / \u2029; each byte of invalid UTF-8 as \ufffd.
func appendJSONString(b []byte, s string, short bool) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case short && c == '\b':
				b = append(b, '\\', 'b')
			case short && c == '\f':
				b = append(b, '\\', 'f')
			default:
				b = appendU(b, rune(c))
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = appendU(b, r)
			start = i + size
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendFloat writes a float64 as encoding/json does (appendStdFloat), but always with a
// decimal point or exponent so it reads back as a double. Non-finite values are the
// strings "NaN", "+Inf", "-Inf".
func appendFloat(b []byte, f float64) []byte {
	if s := nonFiniteJSON(f); s != "" {
		return append(b, s...)
	}
	start := len(b)
	b = appendFiniteFloat(b, f)
	// Two byte scans: IndexAny builds its ASCII set on every call (a quarter of this
	// function's time).
	if d := b[start:]; bytes.IndexByte(d, '.') < 0 && bytes.IndexByte(d, 'e') < 0 {
		b = append(b, '.', '0')
	}
	return b
}

// appendValue writes one JSON-shaped value (see Span).
func appendValue(b []byte, v any, depth int) ([]byte, error) {
	if depth > MaxSpanValueDepth {
		return nil, fmt.Errorf("value nested deeper than %d levels", MaxSpanValueDepth)
	}
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return appendString(b, x), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	case int64:
		return strconv.AppendInt(b, x, 10), nil
	case int:
		return strconv.AppendInt(b, int64(x), 10), nil
	case int32:
		return strconv.AppendInt(b, int64(x), 10), nil
	case uint32:
		return strconv.AppendUint(b, uint64(x), 10), nil
	case uint64:
		return strconv.AppendUint(b, x, 10), nil
	case float64:
		return appendFloat(b, x), nil
	case float32:
		return appendFloat(b, float64(x)), nil
	case json.Number:
		if !isJSONNumber(string(x)) {
			return nil, fmt.Errorf("invalid number %q", string(x))
		}
		return append(b, x...), nil
	case []any:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendValue(b, e, depth+1); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case map[string]any:
		return appendMap(b, x, depth+1)
	default:
		enc, err := json.Marshal(x)
		if err != nil {
			return nil, err
		}
		return append(b, enc...), nil
	}
}

func appendMap(b []byte, m map[string]any, depth int) ([]byte, error) {
	if depth > MaxSpanValueDepth {
		return nil, fmt.Errorf("value nested deeper than %d levels", MaxSpanValueDepth)
	}
	b = append(b, '{')
	switch len(m) {
	case 0:
	case 1:
		for k, v := range m {
			b = appendString(b, k)
			b = append(b, ':')
			var err error
			if b, err = appendValue(b, v, depth); err != nil {
				return nil, err
			}
		}
	default:
		var arr [32]string
		for i, k := range sortedKeys(arr[:0], m) {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			var err error
			if b, err = appendValue(b, m[k], depth); err != nil {
				return nil, err
			}
		}
	}
	return append(b, '}'), nil
}

// isJSONNumber reports whether s is a JSON number literal.
func isJSONNumber(s string) bool {
	n := numberLen(s)
	return n > 0 && n == len(s)
}

// numberLen returns the length of the JSON number literal that s starts
// with (-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?), or 0 when s does not
// start with one.
func numberLen[T string | []byte](s T) int {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i >= len(s):
		return 0
	case s[i] == '0':
		i++
	case s[i] >= '1' && s[i] <= '9':
		i = skipDigits(s, i)
	default:
		return 0
	}
	if i < len(s) && s[i] == '.' {
		d := i + 1
		if i = skipDigits(s, d); i == d {
			return 0
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		d := i + 1
		if d < len(s) && (s[d] == '+' || s[d] == '-') {
			d++
		}
		if i = skipDigits(s, d); i == d {
			return 0
		}
	}
	return i
}

// skipDigits returns the index of the first byte of s from i on that is not
// an ASCII digit.
func skipDigits[T string | []byte](s T, i int) int {
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// sortedKeys appends the keys of m to buf, sorts them in byte order (code
// point order for UTF-8) and returns buf.
func sortedKeys[V any](buf []string, m map[string]V) []string {
	for k := range m {
		buf = append(buf, k)
	}
	slices.Sort(buf)
	return buf
}
