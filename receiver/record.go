package receiver

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
	"strings"
	"unicode/utf8"

	"github.com/inferprobe/inferprobe/artifact"

	"github.com/inferprobe/inferprobe/receiver/spanattr"
)

// Source values of SpanRecord.Source: how the span reached inferprobe. The
// first three are the contract's (stormlog.md §2.5 infer.vllm_span);
// otlp_grpc_receiver is an inferprobe addition (vLLM exports over gRPC by
// default).
const (
	SourceHTTP     = "otlp_http_receiver"
	SourceGRPC     = "otlp_grpc_receiver"
	SourceOTLPFile = "otlp_json_file"
	SourceJSONL    = "jsonl_file"
)

// maxValueDepth bounds the nesting of array and map attribute values. A
// received span nested deeper is rejected (OTLP partial success); a file
// line is an error.
const maxValueDepth = 64

// SpanStatus is an OTLP span status: Code is "UNSET", "OK" or "ERROR" (the
// OTLP StatusCode names; an unknown code is its decimal number).
type SpanStatus struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// SpanRecord is one infer.vllm_span v1 line (stormlog.md §2.5,
// inference_vllm_v1.schema.json "span"): one span as the server exported
// it, with its attributes under their native names.
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
type SpanRecord struct {
	SessionID string
	RunID     string
	// Source is SourceHTTP, SourceGRPC, SourceOTLPFile or SourceJSONL.
	Source string
	// Name is the span name ("llm_request" for vLLM's request spans).
	Name string
	// ClockDomain names the exporter's wall clock: "<host.name>/unix_epoch_ns"
	// when the resource has host.name, else "<peer address>/unix_epoch_ns"
	// (e.g. "127.0.0.1/unix_epoch_ns"), else "unknown-host/unix_epoch_ns".
	// It never carries a boot id, so it is never the client's domain unless
	// the client has none either (stormlog.md §4.4, item 89).
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
}

// RecordKind returns artifact.KindVLLMSpan, so artifact.Writer.Write writes a
// SpanRecord as an infer.vllm_span v1 line.
func (SpanRecord) RecordKind() artifact.Kind { return artifact.KindVLLMSpan }

// IsRequestSpan reports whether the span is vLLM's per-request span (named
// "llm_request"), the only kind the join attaches to a request.
func (r *SpanRecord) IsRequestSpan() bool { return r.Name == spanattr.RequestSpanName }

// String returns the string attribute key.
func (r *SpanRecord) String(key string) (string, bool) {
	s, ok := r.Attributes[key].(string)
	return s, ok
}

// Int returns the integer attribute key: an int64, or a json.Number or
// float64 holding an integer within the int64 range (a double attribute
// that happens to be integral counts too).
func (r *SpanRecord) Int(key string) (int64, bool) {
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
func (r *SpanRecord) Float(key string) (float64, bool) {
	switch v := r.Attributes[key].(type) {
	case float64:
		return v, true
	case int64:
		return float64(v), true
	case json.Number:
		f, err := strconv.ParseFloat(string(v), 64)
		return f, err == nil
	case string:
		switch v {
		case artifact.NaNString:
			return math.NaN(), true
		case artifact.PosInfString:
			return math.Inf(1), true
		case artifact.NegInfString:
			return math.Inf(-1), true
		}
	}
	return 0, false
}

// DurationNS returns EndUnixNS − StartUnixNS when both are known.
func (r *SpanRecord) DurationNS() (int64, bool) {
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
func (r SpanRecord) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 1024)
	b = append(b, `{"event_type":"`+artifact.EventVLLMSpan+`","schema_version":`...)
	b = strconv.AppendInt(b, artifact.VLLMSpanSchemaVersion, 10)
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

// appendContent writes the span's own fields (what the exporter sent), from
// ",\"trace_id\"" to the dropped counts: the part that ContentDigest hashes.
func (r *SpanRecord) appendContent(b []byte) ([]byte, error) {
	var err error
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
	b = append(b, `,"attributes":`...)
	if b, err = appendMap(b, r.Attributes, 0); err != nil {
		return nil, fmt.Errorf("receiver: span %q attributes: %w", r.Name, err)
	}
	b = append(b, `,"resource":`...)
	if b, err = appendMap(b, r.Resource, 0); err != nil {
		return nil, fmt.Errorf("receiver: span %q resource: %w", r.Name, err)
	}
	b = append(b, `,"scope":`...)
	if b, err = appendMap(b, r.Scope, 0); err != nil {
		return nil, fmt.Errorf("receiver: span %q scope: %w", r.Name, err)
	}
	b = append(b, `,"status":`...)
	if r.Status == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"code":`...)
		b = appendString(b, r.Status.Code)
		b = append(b, `,"message":`...)
		b = appendString(b, r.Status.Message)
		b = append(b, '}')
	}
	b = append(b, `,"dropped":{`...)
	keys := make([]string, 0, len(r.Dropped))
	for k := range r.Dropped {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		b = strconv.AppendInt(b, r.Dropped[k], 10)
	}
	return append(b, '}'), nil
}

// ContentDigest returns the SHA-256 (64 lowercase hex digits) of what the
// exporter sent for this span: name, ids, kind, start/end, attributes,
// resource, scope, status and dropped counts, in MarshalJSON's spelling.
// Reception facts (session, run, source, clock domain, received_at_ns) and
// the derived request_id are excluded, so an identical re-delivery — over
// HTTP or gRPC, live or read back from the artifact — has the same digest,
// and the same trace_id+span_id with a different digest is a conflicting
// span (stormlog.md §4.4). An int64 attribute and a double attribute of the
// same value differ. Returns "" only for a value MarshalJSON also refuses.
func (r *SpanRecord) ContentDigest() string {
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
// encoding/json does), no HTML escaping.
func appendString(b []byte, s string) []byte {
	const hexd = "0123456789abcdef"
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
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexd[c>>4], hexd[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexd[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendFloat writes a float64 as encoding/json does (shortest round-trip
// digits, exponent form outside [1e-6, 1e21)), but always with a decimal
// point or exponent so it reads back as a double. Non-finite values are the
// strings "NaN", "+Inf", "-Inf".
func appendFloat(b []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, `"`+artifact.NaNString+`"`...)
	case math.IsInf(f, 1):
		return append(b, `"`+artifact.PosInfString+`"`...)
	case math.IsInf(f, -1):
		return append(b, `"`+artifact.NegInfString+`"`...)
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	start := len(b)
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9, as encoding/json does
		n := len(b) - start
		if n >= 4 && b[len(b)-4] == 'e' && b[len(b)-3] == '-' && b[len(b)-2] == '0' {
			b[len(b)-2] = b[len(b)-1]
			b = b[:len(b)-1]
		}
		return b
	}
	if bytes.IndexByte(b[start:], '.') < 0 {
		b = append(b, '.', '0')
	}
	return b
}

// appendValue writes one JSON-shaped value (see SpanRecord).
func appendValue(b []byte, v any, depth int) ([]byte, error) {
	if depth > maxValueDepth {
		return nil, fmt.Errorf("value nested deeper than %d levels", maxValueDepth)
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
	if depth > maxValueDepth {
		return nil, fmt.Errorf("value nested deeper than %d levels", maxValueDepth)
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
		keys := arr[:0]
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
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
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	if i >= len(s) {
		return false
	}
	if s[i] == '0' {
		i++
	} else if s[i] >= '1' && s[i] <= '9' {
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	} else {
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		d := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		d := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	return i == len(s)
}

// ErrNotSpanRecord is wrapped by DecodeSpanRecord's error for a line that
// is not an infer.vllm_span v1 record (another event_type or version).
var ErrNotSpanRecord = errors.New("not an infer.vllm_span v1 record")

// wireSpan is the JSON shape read by DecodeSpanRecord and the file reader.
type wireSpan struct {
	EventType     *string         `json:"event_type"`
	SchemaVersion json.RawMessage `json:"schema_version"`
	SessionID     string          `json:"session_id"`
	RunID         string          `json:"run_id"`
	Source        string          `json:"source"`
	Name          *string         `json:"name"`
	ClockDomain   string          `json:"clock_domain"`
	ReceivedAtNS  json.RawMessage `json:"received_at_ns"`
	TimestampNS   json.RawMessage `json:"timestamp_ns"`
	TraceID       *string         `json:"trace_id"`
	SpanID        *string         `json:"span_id"`
	ParentSpanID  *string         `json:"parent_span_id"`
	Kind          *string         `json:"kind"`
	StartUnixNS   json.RawMessage `json:"start_unix_ns"`
	EndUnixNS     json.RawMessage `json:"end_unix_ns"`
	Attributes    json.RawMessage `json:"attributes"`
	Resource      json.RawMessage `json:"resource"`
	Scope         json.RawMessage `json:"scope"`
	Status        json.RawMessage `json:"status"`
	Dropped       json.RawMessage `json:"dropped"`
	RequestID     *string         `json:"request_id"`
}

// DecodeSpanRecord decodes one infer.vllm_span v1 line (as MarshalJSON
// writes it; for instance artifact.Raw.JSON from the artifact reader).
// Integers are read exactly: the *_ns fields must be JSON integers (or
// decimal strings) — 1.5e18 is an error, never a rounded value; integer
// attribute values become int64 (json.Number beyond the int64 range),
// numbers with a fraction or exponent float64. The ids must be hex of the
// OTLP lengths (normalised to lowercase); end_unix_ns must not precede
// start_unix_ns; name must be non-empty. A line of another event_type or
// version gives an error wrapping ErrNotSpanRecord. Unknown fields are
// ignored.
func DecodeSpanRecord(line []byte) (SpanRecord, error) {
	var w wireSpan
	if err := strictUnmarshal(line, &w); err != nil {
		return SpanRecord{}, fmt.Errorf("receiver: infer.vllm_span: %w", err)
	}
	if w.EventType == nil || *w.EventType != artifact.EventVLLMSpan || string(w.SchemaVersion) != "1" {
		et := "(none)"
		if w.EventType != nil {
			et = *w.EventType
		}
		return SpanRecord{}, fmt.Errorf("receiver: %w (event_type %q, schema_version %s)", ErrNotSpanRecord, et, truncate(string(w.SchemaVersion), 20))
	}
	rec, err := w.record(false)
	if err != nil {
		return SpanRecord{}, fmt.Errorf("receiver: infer.vllm_span: %w", err)
	}
	return rec, nil
}

// record builds a SpanRecord from a decoded line. derive recomputes
// RequestID from the attributes when the line has none.
func (w *wireSpan) record(derive bool) (SpanRecord, error) {
	if w.Name == nil || *w.Name == "" {
		return SpanRecord{}, errors.New("span without a name")
	}
	rec := SpanRecord{
		SessionID: w.SessionID, RunID: w.RunID, Source: w.Source, Name: *w.Name,
		ClockDomain: w.ClockDomain, Kind: nonEmpty(w.Kind), RequestID: nonEmpty(w.RequestID),
	}
	var err error
	for _, f := range []struct {
		name string
		raw  json.RawMessage
		dst  **int64
	}{
		{"received_at_ns", w.ReceivedAtNS, &rec.ReceivedAtNS},
		{"timestamp_ns", w.TimestampNS, &rec.TimestampNS},
		{"start_unix_ns", w.StartUnixNS, &rec.StartUnixNS},
		{"end_unix_ns", w.EndUnixNS, &rec.EndUnixNS},
	} {
		if *f.dst, err = exactInt(f.raw); err != nil {
			return SpanRecord{}, fmt.Errorf("%s: %w", f.name, err)
		}
	}
	if rec.StartUnixNS != nil && rec.EndUnixNS != nil && *rec.EndUnixNS < *rec.StartUnixNS {
		return SpanRecord{}, fmt.Errorf("end_unix_ns %d precedes start_unix_ns %d", *rec.EndUnixNS, *rec.StartUnixNS)
	}
	for _, f := range []struct {
		name string
		v    *string
		n    int
		dst  **string
	}{
		{"trace_id", w.TraceID, 16, &rec.TraceID},
		{"span_id", w.SpanID, 8, &rec.SpanID},
		{"parent_span_id", w.ParentSpanID, 8, &rec.ParentSpanID},
	} {
		if *f.dst, err = hexID(f.v, f.n); err != nil {
			return SpanRecord{}, fmt.Errorf("%s: %w", f.name, err)
		}
	}
	for _, f := range []struct {
		name string
		raw  json.RawMessage
		dst  *map[string]any
	}{
		{"attributes", w.Attributes, &rec.Attributes},
		{"resource", w.Resource, &rec.Resource},
		{"scope", w.Scope, &rec.Scope},
	} {
		if *f.dst, err = jsonObject(f.raw); err != nil {
			return SpanRecord{}, fmt.Errorf("%s: %w", f.name, err)
		}
	}
	if len(w.Status) > 0 && string(w.Status) != "null" {
		var st struct {
			Code    json.RawMessage `json:"code"`
			Message string          `json:"message"`
		}
		if err := json.Unmarshal(w.Status, &st); err != nil {
			return SpanRecord{}, fmt.Errorf("status: %w", err)
		}
		code, err := statusCodeName(st.Code)
		if err != nil {
			return SpanRecord{}, fmt.Errorf("status code: %w", err)
		}
		rec.Status = &SpanStatus{Code: code, Message: st.Message}
	}
	if len(w.Dropped) > 0 && string(w.Dropped) != "null" {
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(w.Dropped, &raw); err != nil {
			return SpanRecord{}, fmt.Errorf("dropped: %w", err)
		}
		rec.Dropped = make(map[string]int64, len(raw))
		for k, v := range raw {
			n, err := exactInt(v)
			if err != nil || n == nil || *n < 0 {
				return SpanRecord{}, fmt.Errorf("dropped %q: want a non-negative integer, got %s", k, truncate(string(v), 40))
			}
			rec.Dropped[k] = *n
		}
	}
	if rec.TimestampNS == nil && rec.StartUnixNS != nil {
		rec.TimestampNS = ptr(*rec.StartUnixNS)
	}
	if derive && rec.RequestID == nil {
		if id, ok := rec.Attributes[spanattr.AttrRequestID].(string); ok {
			rec.RequestID = RecoverRequestID(id)
		}
	}
	return rec, nil
}

// strictUnmarshal decodes one JSON value into v and refuses trailing data.
func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON value")
	}
	if _, err := dec.Token(); err == nil {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// exactInt reads a JSON integer (or a string of decimal digits, the
// protobuf-JSON spelling of 64-bit integers) exactly; null or absent is nil.
func exactInt(raw json.RawMessage) (*int64, error) {
	s := string(bytes.TrimSpace(raw))
	if s == "" || s == "null" {
		return nil, nil
	}
	if s[0] == '"' {
		var str string
		if err := json.Unmarshal(raw, &str); err != nil {
			return nil, err
		}
		s = str
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("want an integer, got %s", truncate(string(raw), 40))
	}
	return &n, nil
}

// hexID validates an id of n bytes spelled as 2n hex digits; "" and null
// are nil. An all-zero id is kept (it is what the exporter sent).
func hexID(v *string, n int) (*string, error) {
	if v == nil || *v == "" {
		return nil, nil
	}
	s := *v
	if len(s) != 2*n {
		return nil, fmt.Errorf("want %d hex digits, got %d characters %q", 2*n, len(s), truncate(s, 48))
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return nil, fmt.Errorf("not hex: %q", truncate(s, 48))
		}
	}
	s = strings.ToLower(s)
	return &s, nil
}

// jsonObject decodes a JSON object with exact numbers (see normalizeValue);
// null or absent is nil.
func jsonObject(raw json.RawMessage) (map[string]any, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] != '{' {
		return nil, fmt.Errorf("want an object, got %s", truncate(string(raw), 40))
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	for k, v := range m {
		nv, err := normalizeValue(v, 1)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", k, err)
		}
		m[k] = nv
	}
	return m, nil
}

// normalizeValue turns json.Number into int64 (an integer literal within
// range), float64 (a literal with fraction or exponent) or keeps it
// (an integer beyond int64), recursively.
func normalizeValue(v any, depth int) (any, error) {
	if depth > maxValueDepth {
		return nil, fmt.Errorf("value nested deeper than %d levels", maxValueDepth)
	}
	switch x := v.(type) {
	case json.Number:
		s := string(x)
		if !strings.ContainsAny(s, ".eE") {
			if n, err := strconv.ParseInt(s, 10, 64); err == nil {
				return n, nil
			}
			return x, nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("number %s out of range", truncate(s, 40))
		}
		return f, nil
	case []any:
		for i, e := range x {
			ne, err := normalizeValue(e, depth+1)
			if err != nil {
				return nil, err
			}
			x[i] = ne
		}
		return x, nil
	case map[string]any:
		for k, e := range x {
			ne, err := normalizeValue(e, depth+1)
			if err != nil {
				return nil, err
			}
			x[k] = ne
		}
		return x, nil
	}
	return v, nil
}

// statusCodeName reads a status code spelled as a name or an OTLP enum number.
func statusCodeName(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "UNSET", nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", err
		}
		switch strings.ToUpper(strings.TrimPrefix(s, "STATUS_CODE_")) {
		case "UNSET":
			return "UNSET", nil
		case "OK":
			return "OK", nil
		case "ERROR":
			return "ERROR", nil
		}
		if s == "" {
			return "", errors.New("empty status code")
		}
		return s, nil
	}
	n, err := exactInt(raw)
	if err != nil || n == nil {
		return "", fmt.Errorf("want a name or an integer, got %s", truncate(string(raw), 40))
	}
	return statusName(*n), nil
}

func statusName(code int64) string {
	switch code {
	case 0:
		return "UNSET"
	case 1:
		return "OK"
	case 2:
		return "ERROR"
	}
	return strconv.FormatInt(code, 10)
}

func nonEmpty(s *string) *string {
	if s == nil || *s == "" {
		return nil
	}
	return s
}

func ptr[T any](v T) *T { return &v }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
