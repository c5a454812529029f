package receiver

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/join"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// convertOptions says how decoded OTLP spans become records.
type convertOptions struct {
	sessionID, runID, source string
	// receivedAtNS is stamped on every record when set.
	receivedAtNS *int64
	// peer names the clock domain of a resource without host.name
	// ("127.0.0.1"); "" means unknown-host.
	peer string
	// strict rejects spans OTLP calls invalid (all-zero or missing
	// trace/span id, empty name, end before start); otherwise they are kept
	// with null ids.
	strict bool
}

// conversion is the result of convertTraces.
type conversion struct {
	records  []artifact.Span
	rejected int
	// reason describes the first rejected span.
	reason string
}

// unknownHost names the clock domain of spans with no host.name and no peer.
const unknownHost = "unknown-host"

// clockDomainOf returns "<name>/unix_epoch_ns" for the exporter's clock: the
// resource's host.name, else the peer address, else unknown-host ("/" in a
// name becomes "_").
func clockDomainOf(resource pcommon.Map, peer string) string {
	name := ""
	if v, ok := resource.Get("host.name"); ok && v.Type() == pcommon.ValueTypeStr {
		name = v.Str()
	}
	if name == "" {
		name = peer
	}
	return clockDomainName(name)
}

func clockDomainName(name string) string {
	if name == "" {
		name = unknownHost
	}
	return strings.ReplaceAll(validUTF8(name), "/", "_") + "/unix_epoch_ns"
}

// convertTraces turns every span of td into a record; spans that fail
// validation are counted in rejected (strict mode) or kept (lenient).
func convertTraces(td ptrace.Traces, o convertOptions) conversion {
	n := td.SpanCount()
	res := conversion{records: make([]artifact.Span, 0, n)}
	// One backing array for the *int64 fields of every record: 3 per span
	// (start, end; timestamp points at start's copy; received is shared
	// per record below).
	ints := make([]int64, 0, 4*n)
	intPtr := func(v int64) *int64 {
		ints = append(ints, v)
		return &ints[len(ints)-1]
	}
	shared := batchShared{
		unset:   &artifact.SpanStatus{Code: "UNSET"},
		dropped: map[string]int64{"attributes": 0, "events": 0, "links": 0},
	}
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		resAttrs := rs.Resource().Attributes()
		resource, err := mapValue(resAttrs, 1)
		domain := clockDomainOf(resAttrs, o.peer)
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			scope, serr := scopeValue(ss.Scope())
			spans := ss.Spans()
			for k := 0; k < spans.Len(); k++ {
				sp := spans.At(k)
				if err != nil || serr != nil {
					if err == nil {
						err = serr
					}
					res.reject(fmt.Sprintf("span %q: resource or scope: %v", truncate(sp.Name(), 64), err))
					continue
				}
				rec, reason := convertSpan(sp, o, intPtr, &shared)
				if reason != "" {
					res.reject(reason)
					continue
				}
				rec.Resource = resource
				rec.Scope = scope
				rec.ClockDomain = domain
				res.records = append(res.records, rec)
			}
		}
	}
	artifact.ShareSpanMaps(res.records)
	return res
}

func (c *conversion) reject(reason string) {
	if c.rejected == 0 {
		c.reason = reason
	}
	c.rejected++
}

// batchShared holds values shared, read-only, by the records of one export.
type batchShared struct {
	unset   *artifact.SpanStatus // the default status
	dropped map[string]int64     // all-zero dropped counts
}

// convertSpan builds one record, or returns why the span is rejected.
func convertSpan(sp ptrace.Span, o convertOptions, intPtr func(int64) *int64, sh *batchShared) (artifact.Span, string) {
	name := validUTF8(sp.Name())
	tid, sid, pid := sp.TraceID(), sp.SpanID(), sp.ParentSpanID()
	start, end := int64(sp.StartTimestamp()), int64(sp.EndTimestamp())
	if o.strict {
		switch {
		case name == "":
			return artifact.Span{}, "span without a name"
		case tid.IsEmpty():
			return artifact.Span{}, fmt.Sprintf("span %q: trace_id missing or all zero", truncate(name, 64))
		case sid.IsEmpty():
			return artifact.Span{}, fmt.Sprintf("span %q: span_id missing or all zero", truncate(name, 64))
		}
	} else if name == "" {
		return artifact.Span{}, "span without a name"
	}
	// OTLP times are fixed64 nanoseconds; above int64 they cannot be a
	// wall-clock time (year 2262+).
	if start < 0 || end < 0 {
		return artifact.Span{}, fmt.Sprintf("span %q: timestamp beyond the int64 range", truncate(name, 64))
	}
	if start != 0 && end != 0 && end < start {
		return artifact.Span{}, fmt.Sprintf("span %q: end %d precedes start %d", truncate(name, 64), end, start)
	}
	attrs, err := mapValue(sp.Attributes(), 1)
	if err != nil {
		return artifact.Span{}, fmt.Sprintf("span %q: attributes: %v", truncate(name, 64), err)
	}
	rec := artifact.Span{
		SessionID:  o.sessionID,
		RunID:      o.runID,
		Source:     o.source,
		Name:       name,
		Kind:       kindName(sp.Kind()),
		Attributes: attrs,
	}
	rec.TraceID, rec.SpanID, rec.ParentSpanID = idStrings(tid, sid, pid)
	if st := sp.Status(); st.Code() == ptrace.StatusCodeUnset && st.Message() == "" {
		rec.Status = sh.unset
	} else {
		rec.Status = &artifact.SpanStatus{Code: artifact.SpanStatusName(int64(st.Code())), Message: validUTF8(st.Message())}
	}
	da, de, dl := sp.DroppedAttributesCount(), sp.DroppedEventsCount(), sp.DroppedLinksCount()
	if da == 0 && de == 0 && dl == 0 {
		rec.Dropped = sh.dropped
	} else {
		rec.Dropped = map[string]int64{"attributes": int64(da), "events": int64(de), "links": int64(dl)}
	}
	if o.receivedAtNS != nil {
		rec.ReceivedAtNS = intPtr(*o.receivedAtNS)
	}
	if start != 0 {
		rec.StartUnixNS = intPtr(start)
		rec.TimestampNS = rec.StartUnixNS
	}
	if end != 0 {
		rec.EndUnixNS = intPtr(end)
	}
	if id, ok := attrs[artifact.AttrRequestID].(string); ok {
		rec.RequestID = join.RecoverRequestID(id)
	}
	return rec, ""
}

// attrKey returns vLLM's attribute keys as the package's constants (one copy shared by every
// record instead of the decoder's per-span copy, and no UTF-8 check; from wire bytes, no
// copy either); other keys are checked with validUTF8.
func attrKey[K ~string | ~[]byte](k K) string {
	switch string(k) {
	case artifact.AttrRequestID:
		return artifact.AttrRequestID
	case artifact.AttrPromptTokens:
		return artifact.AttrPromptTokens
	case artifact.AttrCompletionTokens:
		return artifact.AttrCompletionTokens
	case artifact.AttrTimeToFirstToken:
		return artifact.AttrTimeToFirstToken
	case artifact.AttrE2E:
		return artifact.AttrE2E
	case artifact.AttrTimeInQueue:
		return artifact.AttrTimeInQueue
	case artifact.AttrTimeInModelPrefill:
		return artifact.AttrTimeInModelPrefill
	case artifact.AttrTimeInModelDecode:
		return artifact.AttrTimeInModelDecode
	case artifact.AttrTimeInModelInference:
		return artifact.AttrTimeInModelInference
	case artifact.AttrTopP:
		return artifact.AttrTopP
	case artifact.AttrMaxTokens:
		return artifact.AttrMaxTokens
	case artifact.AttrTemperature:
		return artifact.AttrTemperature
	case artifact.AttrN:
		return artifact.AttrN
	}
	return validUTF8(string(k))
}

// validUTF8 replaces invalid UTF-8 with U+FFFD, as a JSON round trip
// would, so a record reads back equal to itself.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// idStrings spells the non-zero ids as lowercase hex (an all-zero id is
// nil), with one allocation for the three.
func idStrings(tid pcommon.TraceID, sid, pid pcommon.SpanID) (t, s, p *string) {
	var buf [64]byte
	hex.Encode(buf[0:32], tid[:])
	hex.Encode(buf[32:48], sid[:])
	hex.Encode(buf[48:64], pid[:])
	all := string(buf[:])
	ids := new([3]string)
	if !tid.IsEmpty() {
		ids[0] = all[0:32]
		t = &ids[0]
	}
	if !sid.IsEmpty() {
		ids[1] = all[32:48]
		s = &ids[1]
	}
	if !pid.IsEmpty() {
		ids[2] = all[48:64]
		p = &ids[2]
	}
	return t, s, p
}

var kindNames = [...]string{"UNSPECIFIED", "INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER"}

// kindName returns the OTLP SpanKind name (without the SPAN_KIND_ prefix),
// or the decimal number of an unknown kind.
func kindName(k ptrace.SpanKind) *string {
	if k >= 0 && int(k) < len(kindNames) {
		return &kindNames[k]
	}
	s := strconv.FormatInt(int64(k), 10)
	return &s
}

// scopeValue returns the scope's name and version (when set) and its
// attributes (when any).
func scopeValue(s pcommon.InstrumentationScope) (map[string]any, error) {
	m := make(map[string]any, 2)
	if s.Name() != "" {
		m["name"] = validUTF8(s.Name())
	}
	if s.Version() != "" {
		m["version"] = validUTF8(s.Version())
	}
	if s.Attributes().Len() > 0 {
		a, err := mapValue(s.Attributes(), 1)
		if err != nil {
			return nil, err
		}
		m["attributes"] = a
	}
	return m, nil
}

// mapValue converts OTLP attributes to a JSON-shaped map (see artifact.Span).
// A repeated key keeps its last value.
func mapValue(m pcommon.Map, depth int) (map[string]any, error) {
	if depth > artifact.MaxSpanValueDepth {
		return nil, fmt.Errorf("value nested deeper than %d levels", artifact.MaxSpanValueDepth)
	}
	out := make(map[string]any, m.Len())
	var err error
	m.Range(func(k string, v pcommon.Value) bool {
		var x any
		x, err = anyValue(v, depth)
		if err != nil {
			return false
		}
		out[attrKey(k)] = x
		return true
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func anyValue(v pcommon.Value, depth int) (any, error) {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return validUTF8(v.Str()), nil
	case pcommon.ValueTypeInt:
		return v.Int(), nil
	case pcommon.ValueTypeDouble:
		return doubleValue(v.Double()), nil
	case pcommon.ValueTypeBool:
		return v.Bool(), nil
	case pcommon.ValueTypeBytes:
		return hex.EncodeToString(v.Bytes().AsRaw()), nil
	case pcommon.ValueTypeMap:
		return mapValue(v.Map(), depth+1)
	case pcommon.ValueTypeSlice:
		if depth+1 > artifact.MaxSpanValueDepth {
			return nil, fmt.Errorf("value nested deeper than %d levels", artifact.MaxSpanValueDepth)
		}
		s := v.Slice()
		out := make([]any, s.Len())
		for i := range out {
			x, err := anyValue(s.At(i), depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = x
		}
		return out, nil
	}
	return nil, nil // ValueTypeEmpty
}

// newExportRequest returns an empty OTLP export request to decode into.
func newExportRequest() ptraceotlp.ExportRequest { return ptraceotlp.NewExportRequest() }
