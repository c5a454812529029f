package receiver

import (
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/inferprobe/inferprobe/artifact"
)

// skipScanner walks a protobuf ExportTraceServiceRequest to prove, without
// decoding it, that the decoder (pdata) would decode it and that the
// receiver's conversion would accept every span: the proof the receiver
// needs to accept an export whose spans the sink does not want (see
// SpanFilter) on this walk alone. It is stricter than both — any field it
// does not know, any wire type other than the schema's, any id of a length
// the decoder refuses, a group, or a span conversion would reject (empty
// name, trace or span id missing or all zero, a time beyond int64, end
// before start) fails the proof, and the export then takes the full path
// (pre-scan, decode, convert), which answers it as it always did. It counts
// the elements as scanProtoExport does, so that the full path's limits are
// applied alike: a proof whose counts pass scanLimits fails too.
type skipScanner struct {
	c   exportCounts
	lim scanLimits
}

// skipScanProto returns the spans of a protobuf export body and true when
// the proof holds (see skipScanner), else false. It allocates nothing.
func skipScanProto(b []byte, lim scanLimits) (spans int, ok bool) {
	s := skipScanner{lim: lim}
	if !s.message(b, s.request) {
		return 0, false
	}
	return s.c.Spans, true
}

// fieldFunc handles one field of a message: its number, wire type, the
// payload of a length-delimited field (v) or the value of a varint or
// fixed one (x); false fails the proof.
type fieldFunc func(num protowire.Number, typ protowire.Type, v []byte, x uint64) bool

// message calls f on each field of b; false at the first field f refuses
// or that does not parse.
func (s *skipScanner) message(b []byte, f fieldFunc) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.Fixed64Type:
			x, n = protowire.ConsumeFixed64(b)
		case protowire.Fixed32Type:
			var x32 uint32
			x32, n = protowire.ConsumeFixed32(b)
			x = uint64(x32)
		default:
			return false
		}
		if n < 0 || !f(num, typ, v, x) {
			return false
		}
		b = b[n:]
	}
	return true
}

// count counts one element into *field; false past maxElements.
func (s *skipScanner) count(field *int) bool {
	*field++
	return s.c.elements() <= s.lim.maxElements
}

// request: resource_spans = 1.
func (s *skipScanner) request(num protowire.Number, typ protowire.Type, v []byte, _ uint64) bool {
	return num == 1 && typ == protowire.BytesType && s.count(&s.c.ResourceSpans) && s.message(v, s.resourceSpans)
}

// resourceSpans: resource = 1, scope_spans = 2, schema_url = 3.
func (s *skipScanner) resourceSpans(num protowire.Number, typ protowire.Type, v []byte, _ uint64) bool {
	if typ != protowire.BytesType {
		return false
	}
	switch num {
	case 1:
		return s.message(v, s.resource)
	case 2:
		return s.count(&s.c.ScopeSpans) && s.message(v, s.scopeSpans)
	}
	return num == 3
}

// resource: attributes = 1, dropped_attributes_count = 2.
func (s *skipScanner) resource(num protowire.Number, typ protowire.Type, v []byte, _ uint64) bool {
	switch num {
	case 1:
		return typ == protowire.BytesType && s.keyValue(v, 0)
	case 2:
		return typ == protowire.VarintType
	}
	return false
}

// scopeSpans: scope = 1, spans = 2, schema_url = 3.
func (s *skipScanner) scopeSpans(num protowire.Number, typ protowire.Type, v []byte, _ uint64) bool {
	if typ != protowire.BytesType {
		return false
	}
	switch num {
	case 1:
		return s.message(v, s.scope)
	case 2:
		return s.count(&s.c.Spans) && s.span(v)
	}
	return num == 3
}

// scope (InstrumentationScope): name = 1, version = 2, attributes = 3,
// dropped_attributes_count = 4.
func (s *skipScanner) scope(num protowire.Number, typ protowire.Type, v []byte, _ uint64) bool {
	switch num {
	case 1, 2:
		return typ == protowire.BytesType
	case 3:
		return typ == protowire.BytesType && s.keyValue(v, 0)
	case 4:
		return typ == protowire.VarintType
	}
	return false
}

// spanFacts are what conversion checks of a span, the last occurrence of
// each field winning as in the decoder.
type spanFacts struct {
	traceID, spanID []byte
	name            bool // non-empty
	start, end      uint64
}

// span walks one Span and checks its facts as conversion (strict) does.
func (s *skipScanner) span(b []byte) bool {
	var f spanFacts
	ok := s.message(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) bool {
		return s.spanField(&f, num, typ, v, x)
	})
	return ok && f.name && nonZero(f.traceID, 16) && nonZero(f.spanID, 8) &&
		f.start <= 1<<63-1 && f.end <= 1<<63-1 && (f.start == 0 || f.end == 0 || f.end >= f.start)
}

// spanField: trace_id = 1, span_id = 2, trace_state = 3, parent_span_id =
// 4, name = 5, kind = 6, start = 7, end = 8, attributes = 9, dropped
// counts = 10, 12, 14, events = 11, links = 13, status = 15, flags = 16.
func (s *skipScanner) spanField(f *spanFacts, num protowire.Number, typ protowire.Type, v []byte, x uint64) bool {
	switch num {
	case 1:
		f.traceID = v
		return typ == protowire.BytesType && idLength(v, 16)
	case 2:
		f.spanID = v
		return typ == protowire.BytesType && idLength(v, 8)
	case 3:
		return typ == protowire.BytesType
	case 4:
		return typ == protowire.BytesType && idLength(v, 8)
	case 5:
		f.name = len(v) > 0
		return typ == protowire.BytesType
	case 6, 10, 12, 14:
		return typ == protowire.VarintType
	case 7:
		f.start = x
		return typ == protowire.Fixed64Type
	case 8:
		f.end = x
		return typ == protowire.Fixed64Type
	case 9:
		return typ == protowire.BytesType && s.keyValue(v, 0)
	case 11:
		return typ == protowire.BytesType && s.count(&s.c.Events) && s.message(v, s.event)
	case 13:
		return typ == protowire.BytesType && s.count(&s.c.Links) && s.message(v, s.link)
	case 15:
		return typ == protowire.BytesType && s.message(v, statusField)
	case 16:
		return typ == protowire.Fixed32Type
	}
	return false
}

// event: time_unix_nano = 1, name = 2, attributes = 3,
// dropped_attributes_count = 4.
func (s *skipScanner) event(num protowire.Number, typ protowire.Type, v []byte, _ uint64) bool {
	switch num {
	case 1:
		return typ == protowire.Fixed64Type
	case 2:
		return typ == protowire.BytesType
	case 3:
		return typ == protowire.BytesType && s.keyValue(v, 0)
	case 4:
		return typ == protowire.VarintType
	}
	return false
}

// link: trace_id = 1, span_id = 2, trace_state = 3, attributes = 4,
// dropped_attributes_count = 5, flags = 6.
func (s *skipScanner) link(num protowire.Number, typ protowire.Type, v []byte, _ uint64) bool {
	switch num {
	case 1:
		return typ == protowire.BytesType && idLength(v, 16)
	case 2:
		return typ == protowire.BytesType && idLength(v, 8)
	case 3:
		return typ == protowire.BytesType
	case 4:
		return typ == protowire.BytesType && s.keyValue(v, 0)
	case 5:
		return typ == protowire.VarintType
	case 6:
		return typ == protowire.Fixed32Type
	}
	return false
}

// statusField: Status message = 2, code = 3.
func statusField(num protowire.Number, typ protowire.Type, _ []byte, _ uint64) bool {
	return (num == 2 && typ == protowire.BytesType) || (num == 3 && typ == protowire.VarintType)
}

// keyValue walks a KeyValue (key = 1, value = 2) whose value is nested
// depth levels deep.
func (s *skipScanner) keyValue(b []byte, depth int) bool {
	if !s.count(&s.c.Attributes) {
		return false
	}
	return s.message(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) bool {
		if typ != protowire.BytesType {
			return false
		}
		switch num {
		case 1:
			return true
		case 2:
			return s.anyValue(v, depth)
		}
		return false
	})
}

// maxSkipDepth is the deepest value nesting the proof accepts: well inside
// both the pre-scan's limit and conversion's (artifact.MaxSpanValueDepth).
const maxSkipDepth = artifact.MaxSpanValueDepth / 2

// anyValue walks an AnyValue nested depth levels deep: string = 1, bool =
// 2, int = 3, double = 4, array = 5, kvlist = 6, bytes = 7.
func (s *skipScanner) anyValue(b []byte, depth int) bool {
	if depth > s.lim.maxDepth || depth > maxSkipDepth {
		return false
	}
	return s.message(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) bool {
		switch num {
		case 1, 7:
			return typ == protowire.BytesType
		case 2, 3:
			return typ == protowire.VarintType
		case 4:
			return typ == protowire.Fixed64Type
		case 5:
			return typ == protowire.BytesType && s.message(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) bool {
				return num == 1 && typ == protowire.BytesType && s.count(&s.c.Values) && s.anyValue(v, depth+1)
			})
		case 6:
			return typ == protowire.BytesType && s.message(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) bool {
				return num == 1 && typ == protowire.BytesType && s.keyValue(v, depth+1)
			})
		}
		return false
	})
}

// idLength reports whether an id field's payload has a length the decoder
// takes: 0 (no id) or size bytes.
func idLength(v []byte, size int) bool { return len(v) == 0 || len(v) == size }

// nonZero reports whether id is size bytes, not all zero.
func nonZero(id []byte, size int) bool {
	if len(id) != size {
		return false
	}
	for _, c := range id {
		if c != 0 {
			return true
		}
	}
	return false
}
