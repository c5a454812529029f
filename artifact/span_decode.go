package artifact

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrNotSpan is wrapped by DecodeSpan's error for a line that
// is not an infer.vllm_span v1 record (another event_type or version).
var ErrNotSpan = errors.New("not an infer.vllm_span v1 record")

// wireSpan is the JSON shape read by DecodeSpan and the file reader.
type wireSpan struct {
	EventType       *string         `json:"event_type"`
	SchemaVersion   json.RawMessage `json:"schema_version"`
	SessionID       string          `json:"session_id"`
	RunID           string          `json:"run_id"`
	Source          string          `json:"source"`
	Name            *string         `json:"name"`
	ClockDomain     string          `json:"clock_domain"`
	ReceivedAtNS    json.RawMessage `json:"received_at_ns"`
	TimestampNS     json.RawMessage `json:"timestamp_ns"`
	TraceID         *string         `json:"trace_id"`
	SpanID          *string         `json:"span_id"`
	ParentSpanID    *string         `json:"parent_span_id"`
	Kind            *string         `json:"kind"`
	StartUnixNS     json.RawMessage `json:"start_unix_ns"`
	EndUnixNS       json.RawMessage `json:"end_unix_ns"`
	Attributes      json.RawMessage `json:"attributes"`
	Resource        json.RawMessage `json:"resource"`
	Scope           json.RawMessage `json:"scope"`
	Status          json.RawMessage `json:"status"`
	Dropped         json.RawMessage `json:"dropped"`
	RequestID       *string         `json:"request_id"`
	Context         *string         `json:"context"`          // v2 only
	AttributeValues json.RawMessage `json:"attribute_values"` // v2 only
}

// DecodeSpan decodes one infer.vllm_span v1 line (as MarshalJSON
// writes it; for instance Raw.JSON from the artifact reader).
// Integers are read exactly: the *_ns fields must be JSON integers (or
// decimal strings) — 1.5e18 is an error, never a rounded value; integer
// attribute values become int64 (json.Number beyond the int64 range),
// numbers with a fraction or exponent float64. The ids must be hex of the
// OTLP lengths (normalised to lowercase); end_unix_ns must not precede
// start_unix_ns; name must be non-empty. A line of another event_type or
// version gives an error wrapping ErrNotSpan; a v2 line, which needs its
// file's contexts, is read with DecodeSpanRaw or SpanContexts.DecodeSpan.
// Unknown fields are ignored.
func DecodeSpan(line []byte) (Span, error) {
	var w wireSpan
	if err := strictUnmarshal(line, &w); err != nil {
		return Span{}, fmt.Errorf("artifact: infer.vllm_span: %w", err)
	}
	if w.EventType == nil || *w.EventType != EventSpan || string(w.SchemaVersion) != "1" {
		et := "(none)"
		if w.EventType != nil {
			et = *w.EventType
		}
		return Span{}, fmt.Errorf("artifact: %w (event_type %q, schema_version %s)", ErrNotSpan, et, truncateText(string(w.SchemaVersion), 20))
	}
	rec, err := w.record()
	if err != nil {
		return Span{}, fmt.Errorf("artifact: infer.vllm_span: %w", err)
	}
	return rec, nil
}

// DecodeSpanObject decodes a span object in the infer.vllm_span shape
// without its header (event_type and schema_version are not checked): at
// least "name", with the other fields as available, the stormlog sink
// format. The rules are DecodeSpan's.
func DecodeSpanObject(text []byte) (Span, error) {
	var w wireSpan
	if err := strictUnmarshal(text, &w); err != nil {
		return Span{}, err
	}
	return w.record()
}

// record builds a Span from a decoded line, checking in turn the name,
// the times, the ids, the attribute, resource and scope objects, the status
// and the dropped counts; the first error found is returned.
func (w *wireSpan) record() (Span, error) {
	if w.Name == nil || *w.Name == "" {
		return Span{}, errors.New("span without a name")
	}
	rec := Span{
		SessionID: w.SessionID, RunID: w.RunID, Source: w.Source, Name: *w.Name,
		ClockDomain: w.ClockDomain, Kind: nonEmpty(w.Kind), RequestID: nonEmpty(w.RequestID),
	}
	var err error
	if err = w.times(&rec); err != nil {
		return Span{}, err
	}
	if err = w.ids(&rec); err != nil {
		return Span{}, err
	}
	if err = w.objects(&rec); err != nil {
		return Span{}, err
	}
	if rec.Status, err = spanStatus(w.Status); err != nil {
		return Span{}, err
	}
	if rec.Dropped, err = droppedCounts(w.Dropped); err != nil {
		return Span{}, err
	}
	if rec.TimestampNS == nil && rec.StartUnixNS != nil {
		rec.TimestampNS = Ptr(*rec.StartUnixNS)
	}
	return rec, nil
}

// times reads the *_ns fields exactly (see exactInt) and checks that the end
// does not precede the start.
func (w *wireSpan) times(rec *Span) error {
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
			return fmt.Errorf("%s: %w", f.name, err)
		}
	}
	if rec.StartUnixNS != nil && rec.EndUnixNS != nil && *rec.EndUnixNS < *rec.StartUnixNS {
		return fmt.Errorf("end_unix_ns %d precedes start_unix_ns %d", *rec.EndUnixNS, *rec.StartUnixNS)
	}
	return nil
}

// ids reads the trace id (16 bytes) and the span and parent ids (8 bytes)
// as lowercase hex (see hexID).
func (w *wireSpan) ids(rec *Span) error {
	var err error
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
			return fmt.Errorf("%s: %w", f.name, err)
		}
	}
	return nil
}

// objects reads the attribute, resource and scope objects with exact
// numbers (see jsonObject).
func (w *wireSpan) objects(rec *Span) error {
	var err error
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
			return fmt.Errorf("%s: %w", f.name, err)
		}
	}
	return nil
}

// spanStatus reads a {code, message} status, the code as a name or an OTLP
// enum number (see statusCodeName); null or absent is nil.
func spanStatus(raw json.RawMessage) (*SpanStatus, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var st struct {
		Code    json.RawMessage `json:"code"`
		Message string          `json:"message"`
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, fmt.Errorf("status: %w", err)
	}
	code, err := statusCodeName(st.Code)
	if err != nil {
		return nil, fmt.Errorf("status code: %w", err)
	}
	return &SpanStatus{Code: code, Message: st.Message}, nil
}

// droppedCounts reads the dropped counts, each a non-negative integer;
// null or absent is nil.
func droppedCounts(raw json.RawMessage) (map[string]int64, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var counts map[string]json.RawMessage
	if err := json.Unmarshal(raw, &counts); err != nil {
		return nil, fmt.Errorf("dropped: %w", err)
	}
	dropped := make(map[string]int64, len(counts))
	for k, v := range counts {
		n, err := exactInt(v)
		if err != nil || n == nil || *n < 0 {
			return nil, fmt.Errorf("dropped %q: want a non-negative integer, got %s", k, truncateText(string(v), 40))
		}
		dropped[k] = *n
	}
	return dropped, nil
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
		return nil, fmt.Errorf("want an integer, got %s", truncateText(string(raw), 40))
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
		return nil, fmt.Errorf("want %d hex digits, got %d characters %q", 2*n, len(s), truncateText(s, 48))
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return nil, fmt.Errorf("not hex: %q", truncateText(s, 48))
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
		return nil, fmt.Errorf("want an object, got %s", truncateText(string(raw), 40))
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
	if depth > MaxSpanValueDepth {
		return nil, fmt.Errorf("value nested deeper than %d levels", MaxSpanValueDepth)
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
			return nil, fmt.Errorf("number %s out of range", truncateText(s, 40))
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
		return "", fmt.Errorf("want a name or an integer, got %s", truncateText(string(raw), 40))
	}
	return SpanStatusName(*n), nil
}

// SpanStatusName is the OTLP StatusCode name of code: "UNSET", "OK",
// "ERROR", or the decimal number of an unknown code.
func SpanStatusName(code int64) string {
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

func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
