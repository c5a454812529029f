package artifact

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// The infer.vllm_span v2 line (KindVLLMSpanV2), as the Writer writes it:
//
//	{"event_type":"infer.vllm_span","schema_version":2,"context":ID,"name":…,
//	 "received_at_ns":…,["timestamp_ns":…,]"trace_id":…,"span_id":…,"parent_span_id":…,
//	 "kind":…,"start_unix_ns":…,"end_unix_ns":…,"attribute_values":[…],
//	 ["status":…,]["dropped":…,]"request_id":…}
//
// Session, run, source, clock domain, resource, scope and the attribute keys
// come from the context ID names; attribute_values holds the attribute values
// in the context's attribute_keys order. Left out, with the value a reader
// gives back:
//   - timestamp_ns when it equals start_unix_ns or is unknown (start_unix_ns,
//     as v1's reader fills a null one);
//   - status when it is UNSET with an empty message ({"code":"UNSET","message":""};
//     "status":null is an unknown status);
//   - dropped when it is {"attributes":0,"events":0,"links":0} (those three zeros).
//
// The rest reads as in v1 (DecodeSpan's rules).

// spanV2Prefix starts every v2 line the Writer writes.
const spanV2Prefix = `{"event_type":"` + EventSpan + `","schema_version":2,"context":`

// appendV2 writes r as a v2 line naming context id, whose attribute_keys
// are keys (r's attribute names, sorted).
func (r *Span) appendV2(b []byte, id string, keys []string) ([]byte, error) {
	b = append(b, spanV2Prefix...)
	b = appendString(b, id)
	b = append(b, `,"name":`...)
	b = appendString(b, r.Name)
	b = append(b, `,"received_at_ns":`...)
	b = appendIntPtr(b, r.ReceivedAtNS)
	if t, s := r.TimestampNS, r.StartUnixNS; t != nil && (s == nil || *t != *s) {
		b = append(b, `,"timestamp_ns":`...)
		b = strconv.AppendInt(b, *t, 10)
	}
	b = r.appendIDsAndTimes(b)
	b = append(b, `,"attribute_values":[`...)
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = appendValue(b, r.Attributes[k], 0); err != nil {
			return nil, fmt.Errorf("artifact: span %q attributes: %q: %w", r.Name, k, err)
		}
	}
	b = append(b, ']')
	if st := r.Status; st == nil || st.Code != "UNSET" || st.Message != "" {
		b = append(b, `,"status":`...)
		b = appendStatus(b, st)
	}
	if a, e, l, ok := otlpDropped(r.Dropped); !ok || a != 0 || e != 0 || l != 0 {
		b = append(b, `,"dropped":`...)
		b = appendDropped(b, r.Dropped)
	}
	b = append(b, `,"request_id":`...)
	b = appendStringPtr(b, r.RequestID)
	return append(b, '}'), nil
}

// decodeSpanV2 decodes an infer.vllm_span v2 line with DecodeSpan's
// rules, completed from c (see KindVLLMSpanV2). Its "context" must be c's
// id; attribute_values must have one value per attribute key; a line that
// carries session_id, run_id, source, clock_domain, attributes, resource or
// scope of its own is an error (they belong to the context).
func decodeSpanV2(line []byte, c *SpanContext) (Span, error) {
	var w wireSpan
	if err := strictUnmarshal(line, &w); err != nil {
		return Span{}, fmt.Errorf("artifact: infer.vllm_span: %w", err)
	}
	if w.EventType == nil || *w.EventType != EventSpan || string(w.SchemaVersion) != "2" {
		return Span{}, fmt.Errorf("artifact: %w (want infer.vllm_span v2)", ErrNotSpan)
	}
	switch {
	case w.Context == nil || *w.Context != c.ID:
		return Span{}, fmt.Errorf("artifact: infer.vllm_span v2: context does not match %q", truncateText(c.ID, 40))
	case w.Attributes != nil || w.Resource != nil || w.Scope != nil || w.SessionID != "" || w.RunID != "" || w.Source != "" || w.ClockDomain != "":
		return Span{}, errors.New("artifact: infer.vllm_span v2: session, run, source, clock domain, attributes, resource and scope belong in its context")
	}
	rec, err := w.record()
	if err != nil {
		return Span{}, fmt.Errorf("artifact: infer.vllm_span: %w", err)
	}
	if rec.Attributes, err = attributeValues(w.AttributeValues, c.AttributeKeys); err != nil {
		return Span{}, fmt.Errorf("artifact: infer.vllm_span: attribute_values: %w", err)
	}
	if w.Status == nil {
		rec.Status = &SpanStatus{Code: "UNSET"}
	}
	if w.Dropped == nil {
		rec.Dropped = map[string]int64{"attributes": 0, "events": 0, "links": 0}
	}
	rec.SessionID, rec.RunID, rec.Source, rec.ClockDomain = c.SessionID, c.RunID, c.Source, c.ClockDomain
	rec.Resource, rec.Scope = c.Resource, c.Scope
	return rec, nil
}

// attributeValues pairs the JSON array raw with keys into an attribute map
// (exact numbers, as jsonObject reads them); absent or null is no values.
func attributeValues(raw json.RawMessage, keys []string) (map[string]any, error) {
	var vals []any
	if len(raw) > 0 && string(raw) != "null" {
		if raw[0] != '[' {
			return nil, fmt.Errorf("want an array, got %s", truncateText(string(raw), 40))
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&vals); err != nil {
			return nil, err
		}
	}
	if len(vals) != len(keys) {
		return nil, fmt.Errorf("%d values for the context's %d attribute keys", len(vals), len(keys))
	}
	m := make(map[string]any, len(keys))
	for i, k := range keys {
		v, err := normalizeValue(vals[i], 1)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", k, err)
		}
		m[k] = v
	}
	return m, nil
}
