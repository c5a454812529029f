package artifact

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// Kind identifies a record shape: its "event_type" and "schema_version".
// The reader dispatches on both; a zero SchemaVersion means the line had none.
type Kind struct {
	EventType     string
	SchemaVersion int64
}

// String renders a kind as "infer.request v1".
func (k Kind) String() string {
	if k.EventType == "" {
		return fmt.Sprintf("(no event_type) v%d", k.SchemaVersion)
	}
	return fmt.Sprintf("%s v%d", k.EventType, k.SchemaVersion)
}

// Event types and schema versions of the artifact's records. The Kind* variables
// pair them; the reader decodes the kinds that
// have a Go type here and keeps every other one as *Raw.
const (
	EventSession                 = "infer.session"
	EventArtifact                = "infer.artifact"
	EventWorkload                = "infer.workload"
	EventSLO                     = "infer.slo"
	EventCacheState              = "infer.cache_state"
	EventPhaseWindow             = "infer.phase_window"
	EventRequest                 = "infer.request"
	EventCapabilities            = "infer.capabilities"
	EventClockAlignment          = "infer.clock_alignment"
	EventMetricsScrape           = "infer.vllm_scrape"
	EventSpan                    = "infer.vllm_span"
	EventTelemetrySample         = "infer.telemetry_sample"
	EventSystemSample            = "infer.system_sample"
	EventSummary                 = "infer.summary"
	EventTraceWindow             = "infer.trace_window"
	EventSpanContext             = "infer.vllm_span_context"
	SessionSchemaVersion         = 1
	ArtifactSchemaVersion        = 2
	WorkloadSchemaVersion        = 1
	SLOSchemaVersion             = 1
	CacheStateSchemaVersion      = 1
	PhaseWindowSchemaVersion     = 1
	RequestSchemaVersion         = 1
	CapabilitiesSchemaVersion    = 2
	ClockAlignmentSchemaVersion  = 2
	MetricsScrapeSchemaVersion   = 1
	SpanSchemaVersion            = 1
	VLLMSpanV2SchemaVersion      = 2
	SpanContextSchemaVersion     = 1
	TelemetrySampleSchemaVersion = 1
	SystemSampleSchemaVersion    = 1
)

// Kinds of the records. KindMetricsScrape, KindSpan and KindRequestV2 have
// no Go type yet: the reader keeps them as *Raw.
var (
	KindSession         = Kind{EventSession, SessionSchemaVersion}
	KindArtifact        = Kind{EventArtifact, ArtifactSchemaVersion}
	KindWorkload        = Kind{EventWorkload, WorkloadSchemaVersion}
	KindSLO             = Kind{EventSLO, SLOSchemaVersion}
	KindCacheState      = Kind{EventCacheState, CacheStateSchemaVersion}
	KindPhaseWindow     = Kind{EventPhaseWindow, PhaseWindowSchemaVersion}
	KindRequest         = Kind{EventRequest, RequestSchemaVersion}
	KindCapabilities    = Kind{EventCapabilities, CapabilitiesSchemaVersion}
	KindClockAlignment  = Kind{EventClockAlignment, ClockAlignmentSchemaVersion}
	KindMetricsScrape   = Kind{EventMetricsScrape, MetricsScrapeSchemaVersion}
	KindSpan            = Kind{EventSpan, SpanSchemaVersion}
	KindTelemetrySample = Kind{EventTelemetrySample, TelemetrySampleSchemaVersion}
	KindSystemSample    = Kind{EventSystemSample, SystemSampleSchemaVersion}
	// KindRequestV2 is the correlation-model infer.request: the client request's
	// event_type with schema_version 2 and other fields (context, request_ref,
	// start_ns, end_ns, …). The reader keeps it as *Raw; it is never decoded as
	// a client Request.
	KindRequestV2 = Kind{EventRequest, 2}
)

// The span kinds the Writer writes.
var (
	// KindVLLMSpanV2 is the infer.vllm_span line the Writer writes: "context"
	// (right after "schema_version") names the KindSpanContext line that
	// holds what the spans of one export share, attribute_values lists the
	// attribute values in that context's key order, and default timestamp,
	// status and dropped counts are left out (the format: vllmspan_v2.go).
	// The reader keeps it as *Raw with Raw.Context resolved (SpanContexts);
	// DecodeSpanRaw decodes it.
	KindVLLMSpanV2 = Kind{EventSpan, VLLMSpanV2SchemaVersion}
	// KindSpanContext is what the v2 span lines of one export share:
	// session, run, source, clock domain, resource, scope, attribute keys
	// (SpanContext).
	KindSpanContext = Kind{EventSpanContext, SpanContextSchemaVersion}
)

// Header is the discriminator pair, for record types defined outside this
// package: embed it as the first field so the JSON object starts with
// "event_type" and "schema_version". The record types of this package write
// their own header and do not embed it.
type Header struct {
	EventType     string `json:"event_type"`
	SchemaVersion int64  `json:"schema_version"`
}

// RecordKind returns the header's kind.
func (h Header) RecordKind() Kind { return Kind(h) }

// HeaderOf returns the Header of a kind.
func HeaderOf(k Kind) Header { return Header(k) }

// encodeJSON marshals v without HTML escaping ("<redacted>" stays readable)
// and without the trailing newline.
func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return b[:len(b)-1], nil
}

// withKind marshals body into a buffer from getLine (a struct type without MarshalJSON) and puts
// "event_type" and "schema_version" in front of its fields. The body is
// encoded straight after the header in one buffer and its opening brace
// turned into a comma, so the record is built without a copy.
func withKind(k Kind, body any) ([]byte, error) {
	buf := bytes.NewBuffer(getLine())
	buf.WriteString(`{"event_type":`)
	if safeASCII(k.EventType) {
		buf.WriteByte('"')
		buf.WriteString(k.EventType)
		buf.WriteByte('"')
	} else {
		name, err := encodeJSON(k.EventType)
		if err != nil {
			return nil, err
		}
		buf.Write(name)
	}
	buf.WriteString(`,"schema_version":`)
	buf.WriteString(strconv.FormatInt(k.SchemaVersion, 10))
	at := buf.Len()
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(body); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	b = b[:len(b)-1] // Encode's newline
	if len(b)-at < 2 || b[at] != '{' {
		return nil, fmt.Errorf("artifact: %s body is not a JSON object", k)
	}
	if len(b)-at == 2 { // "{}"
		b[at] = '}'
		return b[:at+1], nil
	}
	b[at] = ','
	return b, nil
}

// safeASCII reports whether s can be written between quotes as it is.
func safeASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// selfEncoding marks the record types of this package: their MarshalJSON
// output is already one compact, valid line, so MarshalLine uses it as it is.
type selfEncoding interface {
	json.Marshaler
	selfEncoding()
}
