package receiver

import (
	"encoding/binary"
	"encoding/hex"
	"math"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/join"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// convertProto turns a protobuf ExportTraceServiceRequest straight into the records
// convertTraces would make of its pdata decoding (strict mode), with no pdata in between:
// about half the CPU and a third of the allocations of decoding then converting. It reports
// false — and the caller decodes with pdata and converts, which answers the export as before
// — for any body it cannot vouch for, by the skip scanner's rules (a field it does not know,
// a wire type other than the schema's, an id of a length the decoder refuses, a group, a
// span strict conversion rejects, values nested deeper than maxSkipDepth) and two more
// that proto's merge rules would make differ: a singular message field (resource, scope,
// status, a KeyValue's value) given twice, and an AnyValue with more than one value field.
// spans is the export's span count (the pre-scan's), to size the records.
func convertProto(b []byte, o convertOptions, spans int) (conversion, bool) {
	if !o.strict {
		return conversion{}, false
	}
	c := wireConverter{o: o, sh: batchShared{
		unset:   &artifact.SpanStatus{Code: "UNSET"},
		dropped: map[string]int64{"attributes": 0, "events": 0, "links": 0},
	}}
	c.walk.lim = scanLimits{maxElements: math.MaxInt, maxDepth: maxSkipDepth}
	c.res.records = make([]artifact.Span, 0, spans)
	c.ints = make([]int64, 0, 3*spans)
	for it := fieldsOf(b); it.more(); {
		f, ok := it.next()
		if !ok || f.num != 1 || f.typ != protowire.BytesType || !c.resourceSpans(f.v) {
			return conversion{}, false
		}
	}
	artifact.ShareSpanMaps(c.res.records)
	return c.res, true
}

// wireConverter holds one export's conversion.
type wireConverter struct {
	o    convertOptions
	res  conversion
	ints []int64 // the backing array of the records' *int64 fields
	sh   batchShared
	walk skipScanner // validates events and links, which records do not keep
	// lastAttrs is the previous span's attribute count: the next one's map size (the spans
	// of an export are alike).
	lastAttrs int
}

func (c *wireConverter) intPtr(v int64) *int64 {
	c.ints = append(c.ints, v)
	return &c.ints[len(c.ints)-1]
}

// wireField is one field of a message: its number, wire type and bytes — the payload of a
// length-delimited field, the encoded value of a varint or fixed one (u64 decodes it). It
// fits in 32 bytes with three fields, so the compiler keeps it in registers: with a fourth
// field it lived on the stack, and copying it out of next (wide loads of narrow stores) was
// a sixth of the conversion's time.
type wireField struct {
	num protowire.Number
	typ protowire.Type
	v   []byte
}

// u64 is the value of a varint, fixed64 or fixed32 field (next checked its encoding); 0 for
// a length-delimited one.
func (f wireField) u64() uint64 {
	switch f.typ {
	case protowire.VarintType:
		if len(f.v) == 1 {
			return uint64(f.v[0])
		}
		x, _ := protowire.ConsumeVarint(f.v)
		return x
	case protowire.Fixed64Type:
		if len(f.v) == 8 {
			return binary.LittleEndian.Uint64(f.v)
		}
	case protowire.Fixed32Type:
		if len(f.v) == 4 {
			return uint64(binary.LittleEndian.Uint32(f.v))
		}
	}
	return 0
}

// wireFields walks the fields of one message: b is the message and i the offset of the
// next field. It advances by an offset, not by reslicing, so that a step stores no pointer
// (a pointer store costs a write barrier whenever a collection is marking).
type wireFields struct {
	b []byte
	i int
}

func fieldsOf(b []byte) wireFields { return wireFields{b: b} }

// more reports whether a field is left.
func (it *wireFields) more() bool { return it.i < len(it.b) }

// next consumes the next field; false when it does not parse or is a group (the walk then
// stops: more is false). A one-byte tag with a one-byte length or varint, or a fixed64, is
// read inline.
func (it *wireFields) next() (wireField, bool) {
	p := it.b[it.i:]
	if len(p) >= 2 && p[0] < 0x80 && p[0] >= 8 {
		f := wireField{num: protowire.Number(p[0] >> 3), typ: protowire.Type(p[0] & 7)}
		switch f.typ {
		case protowire.BytesType:
			if n := int(p[1]); n < 0x80 && len(p) >= 2+n {
				f.v = p[2 : 2+n : 2+n]
				it.i += 2 + n
				return f, true
			}
		case protowire.VarintType:
			if p[1] < 0x80 {
				f.v = p[1:2:2]
				it.i += 2
				return f, true
			}
		case protowire.Fixed64Type:
			if len(p) >= 9 {
				f.v = p[1:9:9]
				it.i += 9
				return f, true
			}
		}
	}
	return it.nextSlow(p)
}

// nextSlow is next for any encoding protowire reads; p is the rest of the message.
func (it *wireFields) nextSlow(p []byte) (wireField, bool) {
	num, typ, n := protowire.ConsumeTag(p)
	if n < 0 {
		it.i = len(it.b)
		return wireField{}, false
	}
	used := n
	p = p[n:]
	f := wireField{num: num, typ: typ}
	switch typ {
	case protowire.BytesType:
		f.v, n = protowire.ConsumeBytes(p)
	case protowire.VarintType:
		_, n = protowire.ConsumeVarint(p)
	case protowire.Fixed64Type:
		_, n = protowire.ConsumeFixed64(p)
	case protowire.Fixed32Type:
		_, n = protowire.ConsumeFixed32(p)
	default:
		n = -1
	}
	if n < 0 {
		it.i = len(it.b)
		return wireField{}, false
	}
	if typ != protowire.BytesType {
		f.v = p[:n:n]
	}
	it.i += used + n
	return f, true
}

// singularFirst checks a ResourceSpans or ScopeSpans message — its singular message = 1
// (resource or scope), its repeated messages = 2, schema_url = 3, all length-delimited — and
// returns field 1's payload (nil when absent); false for any other field or a second field 1.
func singularFirst(b []byte) ([]byte, bool) {
	var first []byte
	seen := false
	for it := fieldsOf(b); it.more(); {
		f, ok := it.next()
		if !ok || f.typ != protowire.BytesType {
			return nil, false
		}
		switch f.num {
		case 1:
			if seen {
				return nil, false
			}
			seen, first = true, f.v
		case 2, 3:
		default:
			return nil, false
		}
	}
	return first, true
}

// resourceSpans: resource = 1, scope_spans = 2, schema_url = 3 (all length-delimited).
func (c *wireConverter) resourceSpans(b []byte) bool {
	resource, ok := singularFirst(b)
	if !ok {
		return false
	}
	// resource: attributes = 1, dropped_attributes_count = 2.
	n := 0
	for it := fieldsOf(resource); it.more(); {
		f, ok := it.next()
		switch {
		case !ok:
			return false
		case f.num == 1 && f.typ == protowire.BytesType:
			n++
		case f.num != 2 || f.typ != protowire.VarintType:
			return false
		}
	}
	attrs, host, ok := c.kvMap(resource, 1, n, 1, true)
	if !ok {
		return false
	}
	name, _ := host.(string)
	if name == "" {
		name = c.o.peer
	}
	domain := clockDomainName(name)
	for it := fieldsOf(b); it.more(); {
		f, _ := it.next()
		if f.num == 2 && !c.scopeSpans(f.v, attrs, domain) {
			return false
		}
	}
	return true
}

// scopeSpans: scope = 1, spans = 2, schema_url = 3 (all length-delimited).
func (c *wireConverter) scopeSpans(b []byte, resource map[string]any, domain string) bool {
	scope, ok := singularFirst(b)
	if !ok {
		return false
	}
	sc, ok := c.scope(scope)
	if !ok {
		return false
	}
	for it := fieldsOf(b); it.more(); {
		f, _ := it.next()
		if f.num != 2 {
			continue
		}
		rec, ok := c.span(f.v)
		if !ok {
			return false
		}
		rec.Resource, rec.Scope, rec.ClockDomain = resource, sc, domain
		c.res.records = append(c.res.records, rec)
	}
	return true
}

// scope is scopeValue of an InstrumentationScope: name = 1, version = 2, attributes = 3,
// dropped_attributes_count = 4.
func (c *wireConverter) scope(b []byte) (map[string]any, bool) {
	var name, version []byte
	n := 0
	for it := fieldsOf(b); it.more(); {
		f, ok := it.next()
		switch {
		case !ok:
			return nil, false
		case f.num == 1 && f.typ == protowire.BytesType:
			name = f.v
		case f.num == 2 && f.typ == protowire.BytesType:
			version = f.v
		case f.num == 3 && f.typ == protowire.BytesType:
			n++
		case f.num != 4 || f.typ != protowire.VarintType:
			return nil, false
		}
	}
	m := make(map[string]any, 2)
	if len(name) > 0 {
		m["name"] = validUTF8(string(name))
	}
	if len(version) > 0 {
		m["version"] = validUTF8(string(version))
	}
	if n > 0 {
		a, _, ok := c.kvMap(b, 3, n, 1, false)
		if !ok {
			return nil, false
		}
		m["attributes"] = a
	}
	return m, true
}

// wireSpan is what a span's fields say, the last occurrence of each winning as in the
// decoder.
type wireSpan struct {
	traceID, spanID, parentID, name, status []byte
	hasStatus                               bool
	kind, start, end                        uint64
	dropped                                 [3]uint64 // attributes, events, links
	attrs                                   map[string]any
}

// span converts one Span: trace_id = 1, span_id = 2, trace_state = 3, parent_span_id = 4,
// name = 5, kind = 6, start = 7, end = 8, attributes = 9, dropped counts = 10, 12, 14,
// events = 11, links = 13, status = 15, flags = 16.
func (c *wireConverter) span(b []byte) (artifact.Span, bool) {
	s := wireSpan{attrs: make(map[string]any, c.lastAttrs)}
	for it := fieldsOf(b); it.more(); {
		f, ok := it.next()
		if !ok || !c.spanField(&s, f) {
			return artifact.Span{}, false
		}
	}
	if len(s.name) == 0 || !nonZero(s.traceID, 16) || !nonZero(s.spanID, 8) ||
		s.start > math.MaxInt64 || s.end > math.MaxInt64 || (s.start != 0 && s.end != 0 && s.end < s.start) {
		return artifact.Span{}, false // rejected: the decoding path says why
	}
	attrs := s.attrs
	c.lastAttrs = len(attrs)
	ok := true
	rec := artifact.Span{
		SessionID:  c.o.sessionID,
		RunID:      c.o.runID,
		Source:     c.o.source,
		Name:       validUTF8(string(s.name)),
		Kind:       kindName(ptrace.SpanKind(int32(s.kind))),
		Attributes: attrs,
	}
	var tid pcommon.TraceID
	var sid, pid pcommon.SpanID
	copy(tid[:], s.traceID)
	copy(sid[:], s.spanID)
	copy(pid[:], s.parentID)
	rec.TraceID, rec.SpanID, rec.ParentSpanID = idStrings(tid, sid, pid)
	if rec.Status, ok = c.status(s.status); !ok {
		return artifact.Span{}, false
	}
	if d := s.dropped; d == [3]uint64{} {
		rec.Dropped = c.sh.dropped
	} else {
		rec.Dropped = map[string]int64{"attributes": int64(uint32(d[0])), "events": int64(uint32(d[1])), "links": int64(uint32(d[2]))}
	}
	if c.o.receivedAtNS != nil {
		rec.ReceivedAtNS = c.intPtr(*c.o.receivedAtNS)
	}
	if s.start != 0 {
		rec.StartUnixNS = c.intPtr(int64(s.start))
		rec.TimestampNS = rec.StartUnixNS
	}
	if s.end != 0 {
		rec.EndUnixNS = c.intPtr(int64(s.end))
	}
	if id, ok := attrs[artifact.AttrRequestID].(string); ok {
		rec.RequestID = join.RecoverRequestID(id)
	}
	return rec, true
}

// spanField records one field of a span; false when the schema does not allow it.
func (c *wireConverter) spanField(s *wireSpan, f wireField) bool {
	bytes, varint := f.typ == protowire.BytesType, f.typ == protowire.VarintType
	switch f.num {
	case 1:
		s.traceID = f.v
		return bytes && idLength(f.v, 16)
	case 2:
		s.spanID = f.v
		return bytes && idLength(f.v, 8)
	case 3:
		return bytes
	case 4:
		s.parentID = f.v
		return bytes && idLength(f.v, 8)
	case 5:
		s.name = f.v
		return bytes
	case 6:
		s.kind = f.u64()
		return varint
	case 7, 8:
		if f.num == 7 {
			s.start = f.u64()
		} else {
			s.end = f.u64()
		}
		return f.typ == protowire.Fixed64Type
	case 9:
		k, v, ok := c.keyValue(f.v, 1)
		s.attrs[k] = v
		return bytes && ok
	case 10, 12, 14:
		s.dropped[(f.num-10)/2] = f.u64()
		return varint
	case 11:
		return bytes && c.walk.message(f.v, c.walk.event)
	case 13:
		return bytes && c.walk.message(f.v, c.walk.link)
	case 15:
		if s.hasStatus {
			return false
		}
		s.hasStatus, s.status = true, f.v
		return bytes
	case 16:
		return f.typ == protowire.Fixed32Type
	}
	return false
}

// status converts a Status (message = 2, code = 3); an UNSET one with no message is the
// export's shared value.
func (c *wireConverter) status(b []byte) (*artifact.SpanStatus, bool) {
	var msg []byte
	var code uint64
	for it := fieldsOf(b); it.more(); {
		f, ok := it.next()
		switch {
		case !ok:
			return nil, false
		case f.num == 2 && f.typ == protowire.BytesType:
			msg = f.v
		case f.num == 3 && f.typ == protowire.VarintType:
			code = f.u64()
		default:
			return nil, false
		}
	}
	k := ptrace.StatusCode(int32(code))
	if k == ptrace.StatusCodeUnset && len(msg) == 0 {
		return c.sh.unset, true
	}
	return &artifact.SpanStatus{Code: artifact.SpanStatusName(int64(k)), Message: validUTF8(string(msg))}, true
}

// kvMap is mapValue of the n KeyValues in field num of message b (whose fields the caller
// has checked), nested depth levels deep: a repeated key keeps its last value. With host it
// also returns the value of the first "host.name" key, as pcommon.Map.Get finds it.
func (c *wireConverter) kvMap(b []byte, num protowire.Number, n, depth int, host bool) (map[string]any, any, bool) {
	m := make(map[string]any, n)
	var first any
	found := false
	for it := fieldsOf(b); it.more(); {
		f, _ := it.next()
		if f.num != num {
			continue
		}
		k, v, ok := c.keyValue(f.v, depth)
		if !ok {
			return nil, nil, false
		}
		if host && !found && k == "host.name" {
			first, found = v, true
		}
		m[k] = v
	}
	return m, first, true
}

// keyValue converts a KeyValue (key = 1, value = 2); no value is a nil (empty) value.
func (c *wireConverter) keyValue(b []byte, depth int) (string, any, bool) {
	var key, val []byte
	hasVal := false
	for it := fieldsOf(b); it.more(); {
		f, ok := it.next()
		if !ok || f.typ != protowire.BytesType {
			return "", nil, false
		}
		switch f.num {
		case 1:
			key = f.v
		case 2:
			if hasVal {
				return "", nil, false
			}
			hasVal, val = true, f.v
		default:
			return "", nil, false
		}
	}
	v, ok := c.anyValue(val, depth)
	return attrKey(key), v, ok
}

// anyValue converts an AnyValue nested depth levels deep (as convert.go's anyValue): string
// = 1, bool = 2, int = 3, double = 4, array = 5, kvlist = 6, bytes = 7; none is nil.
func (c *wireConverter) anyValue(b []byte, depth int) (any, bool) {
	if len(b) == 0 {
		return nil, true
	}
	if depth > maxSkipDepth {
		return nil, false
	}
	it := fieldsOf(b)
	f, ok := it.next()
	if !ok || it.more() {
		return nil, false // more than one value field
	}
	bytes := f.typ == protowire.BytesType
	switch {
	case f.num == 1 && bytes:
		return validUTF8(string(f.v)), true
	case f.num == 2 && f.typ == protowire.VarintType:
		return f.u64() != 0, true
	case f.num == 3 && f.typ == protowire.VarintType:
		return int64(f.u64()), true
	case f.num == 4 && f.typ == protowire.Fixed64Type:
		return doubleValue(math.Float64frombits(f.u64())), true
	case f.num == 5 && bytes:
		return c.array(f.v, depth)
	case f.num == 6 && bytes:
		n := 0
		for it := fieldsOf(f.v); it.more(); {
			e, ok := it.next()
			if !ok || e.num != 1 || e.typ != protowire.BytesType {
				return nil, false
			}
			n++
		}
		m, _, ok := c.kvMap(f.v, 1, n, depth+1, false)
		return m, ok
	case f.num == 7 && bytes:
		return hex.EncodeToString(f.v), true
	}
	return nil, false
}

// array converts an ArrayValue (values = 1) nested depth levels deep.
func (c *wireConverter) array(b []byte, depth int) (any, bool) {
	n := 0
	for it := fieldsOf(b); it.more(); {
		e, ok := it.next()
		if !ok || e.num != 1 || e.typ != protowire.BytesType {
			return nil, false
		}
		n++
	}
	out := make([]any, 0, n)
	for it := fieldsOf(b); it.more(); {
		e, _ := it.next()
		v, ok := c.anyValue(e.v, depth+1)
		if !ok {
			return nil, false
		}
		out = append(out, v)
	}
	return out, true
}

// doubleValue is a double attribute as a record holds it: NaN and the infinities as the
// strings "NaN", "+Inf" and "-Inf".
func doubleValue(f float64) any {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	}
	return f
}
