package receiver

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// exportCounts are the elements of one ExportTraceServiceRequest, counted on
// the wire before it is decoded. For an OTLP/JSON body only Objects, Arrays
// and Depth are set (see scanJSONExport).
type exportCounts struct {
	// ResourceSpans, ScopeSpans, Spans, Events and Links count those
	// messages; Attributes counts every KeyValue (resource, scope, span,
	// event and link attributes, and the entries of kvlist values); Values
	// counts the elements of array values.
	ResourceSpans, ScopeSpans, Spans, Events, Links, Attributes, Values int
	// Objects and Arrays count the JSON objects and arrays of a JSON body.
	Objects, Arrays int
	// Depth is the deepest nesting of attribute values (an array or kvlist
	// value holding another is one level deeper; a scalar attribute is 0),
	// or for JSON the deepest nesting of objects and arrays.
	Depth int
}

// elements is the number of decoded elements the counts stand for: what
// the memory a decoded export takes grows with.
func (c *exportCounts) elements() int {
	return c.ResourceSpans + c.ScopeSpans + c.Spans + c.Events + c.Links + c.Attributes + c.Values + c.Objects + c.Arrays
}

// scanLimits bound what a pre-scan accepts: at most maxElements elements
// (see exportCounts.elements) and attribute values nested at most maxDepth
// levels (for JSON, brackets nested at most 4×maxDepth+16 levels: each
// kvlist level is four of them).
type scanLimits struct {
	maxElements int
	maxDepth    int
}

// errMalformed is wrapped by the pre-scan's error for a body that is not a
// well-formed protobuf (or JSON) message; errOverLimit for one over a
// scanLimits limit.
var (
	errMalformed = errors.New("malformed export")
	errOverLimit = errors.New("export over the element limits")
)

// protoScanner walks the protobuf wire format of an
// ExportTraceServiceRequest without decoding or allocating, counting its
// elements and stopping at the first limit passed.
type protoScanner struct {
	c   exportCounts
	lim scanLimits
}

// scanProtoExport counts the elements of a protobuf ExportTraceServiceRequest
// (field numbers of opentelemetry.proto.collector.trace.v1 and
// opentelemetry.proto.trace.v1 / common.v1). Unknown fields are skipped as
// the decoder skips them; malformed tags and
// truncated fields are errors wrapping errMalformed (see nextLen); more than
// lim.maxElements elements or values nested over lim.maxDepth levels an
// error wrapping errOverLimit. It reads every byte at most once and
// allocates nothing (but its error).
func scanProtoExport(b []byte, lim scanLimits) (exportCounts, error) {
	s := protoScanner{lim: lim}
	err := s.request(b)
	return s.c, err
}

// nextLen returns the next length-delimited field of b, skipping the
// other fields: its number, its payload and the rest of b. ok is false at
// the end of b. Tags, varints, lengths and skipped fields are read as the
// decoder (pdata) reads them, so the scan refuses no body it would decode:
// a varint is at most 10 bytes (the high bits of the 10th ignored), a field
// number is the tag's bits above 3 as an int32 and must be positive, and an
// unknown group is skipped as pdata skips it.
func nextLen(b []byte) (num int32, v, rest []byte, ok bool, err error) {
	pos := 0
	for pos < len(b) {
		tag, p, good := varint(b, pos)
		if !good {
			return 0, nil, nil, false, fmt.Errorf("%w: bad field tag at byte %d", errMalformed, pos)
		}
		num = int32(tag >> 3)
		if num <= 0 {
			return 0, nil, nil, false, fmt.Errorf("%w: field tag %#x at byte %d has no valid (positive) field number", errMalformed, tag, pos)
		}
		typ := protowire.Type(tag & 7)
		if typ == protowire.BytesType {
			l, p, good := varint(b, p)
			end := p + int(l)
			if !good || int(l) < 0 || end < p || end > len(b) {
				return 0, nil, nil, false, fmt.Errorf("%w: field %d: length past the end", errMalformed, num)
			}
			return num, b[p:end], b[end:], true, nil
		}
		if pos, good = skipUnknown(b, p, typ); !good {
			return 0, nil, nil, false, fmt.Errorf("%w: field %d (wire type %d) truncated or invalid", errMalformed, num, typ)
		}
	}
	return 0, nil, nil, false, nil
}

// varint reads a varint at b[pos:] as pdata does (at most 10 bytes) and
// returns it and the position after it.
func varint(b []byte, pos int) (uint64, int, bool) {
	var v uint64
	for shift := uint(0); shift < 64; shift += 7 {
		if pos >= len(b) {
			return 0, 0, false
		}
		c := b[pos]
		pos++
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v, pos, true
		}
	}
	return 0, 0, false
}

// skipUnknown skips the value of a non-length-delimited field of wire type
// typ at b[pos:], exactly as pdata's ConsumeUnknown does (a group is
// skipped up to its first non-group field), and returns the position after
// it.
func skipUnknown(b []byte, pos int, typ protowire.Type) (int, bool) {
	depth := 0
	for pos < len(b) {
		switch typ {
		case protowire.VarintType:
			_, p, ok := varint(b, pos)
			return p, ok
		case protowire.Fixed64Type:
			return pos + 8, pos+8 <= len(b)
		case protowire.Fixed32Type:
			return pos + 4, pos+4 <= len(b)
		case protowire.BytesType:
			l, p, ok := varint(b, pos)
			end := p + int(l)
			return end, ok && int(l) >= 0 && end >= p && end <= len(b)
		case protowire.StartGroupType:
			depth++
		case protowire.EndGroupType:
			if depth == 0 {
				return 0, false
			}
			depth--
		default:
			return 0, false
		}
		if depth == 0 {
			return pos, true
		}
		tag, p, ok := varint(b, pos)
		if !ok || int32(tag>>3) <= 0 {
			return 0, false
		}
		pos, typ = p, protowire.Type(tag&7)
	}
	return 0, false
}

// add counts n more elements into *field and fails past maxElements.
func (s *protoScanner) add(field *int) error {
	*field++
	if e := s.c.elements(); e > s.lim.maxElements {
		return fmt.Errorf("%w: more than %d elements (resource spans, scope spans, spans, events, links, attributes, array values)", errOverLimit, s.lim.maxElements)
	}
	return nil
}

// eachField calls f with the field number and bytes of each length-delimited field of the
// message b, in order (other wire types are skipped), and stops at f's first error or a
// malformed field.
func eachField(b []byte, f func(num int32, v []byte) error) error {
	for {
		num, v, rest, ok, err := nextLen(b)
		if err != nil || !ok {
			return err
		}
		b = rest
		if err := f(num, v); err != nil {
			return err
		}
	}
}

// request walks ExportTraceServiceRequest: resource_spans = 1.
func (s *protoScanner) request(b []byte) error {
	return eachField(b, func(num int32, v []byte) error {
		if num != 1 {
			return nil
		}
		if err := s.add(&s.c.ResourceSpans); err != nil {
			return err
		}
		return s.resourceSpans(v)
	})
}

// resourceSpans walks ResourceSpans: resource = 1 (Resource: attributes =
// 1), scope_spans = 2.
func (s *protoScanner) resourceSpans(b []byte) error {
	return eachField(b, func(num int32, v []byte) error {
		switch num {
		case 1:
			return s.attributesOf(v, 1)
		case 2:
			return s.counted(&s.c.ScopeSpans, func() error { return s.scopeSpans(v) })
		}
		return nil
	})
}

// scopeSpans walks ScopeSpans: scope = 1 (InstrumentationScope: attributes
// = 3), spans = 2.
func (s *protoScanner) scopeSpans(b []byte) error {
	return eachField(b, func(num int32, v []byte) error {
		switch num {
		case 1:
			return s.attributesOf(v, 3)
		case 2:
			return s.counted(&s.c.Spans, func() error { return s.span(v) })
		}
		return nil
	})
}

// span walks Span: attributes = 9, events = 11 (Event: attributes = 3),
// links = 13 (Link: attributes = 4).
func (s *protoScanner) span(b []byte) error {
	return eachField(b, func(num int32, v []byte) error {
		switch num {
		case 9:
			return s.keyValue(v, 0)
		case 11:
			return s.counted(&s.c.Events, func() error { return s.attributesOf(v, 3) })
		case 13:
			return s.counted(&s.c.Links, func() error { return s.attributesOf(v, 4) })
		}
		return nil
	})
}

// counted counts one element into *field (add), then walks it.
func (s *protoScanner) counted(field *int, walk func() error) error {
	if err := s.add(field); err != nil {
		return err
	}
	return walk()
}

// attributesOf walks a message whose repeated KeyValue attributes have
// field number field, ignoring its other fields.
func (s *protoScanner) attributesOf(b []byte, field int32) error {
	return eachField(b, func(num int32, v []byte) error {
		if num != field {
			return nil
		}
		return s.keyValue(v, 0)
	})
}

// keyValue counts one KeyValue (key = 1, value = 2) whose value is nested
// depth levels deep.
func (s *protoScanner) keyValue(b []byte, depth int) error {
	if err := s.add(&s.c.Attributes); err != nil {
		return err
	}
	if depth > s.c.Depth {
		s.c.Depth = depth
	}
	return eachField(b, func(num int32, v []byte) error {
		if num != 2 {
			return nil
		}
		return s.anyValue(v, depth)
	})
}

// anyValue walks an AnyValue nested depth levels deep: array_value = 5
// (ArrayValue: values = 1) and kvlist_value = 6 (KeyValueList: values = 1)
// hold values one level deeper.
func (s *protoScanner) anyValue(b []byte, depth int) error {
	if depth > s.c.Depth {
		s.c.Depth = depth
	}
	if depth > s.lim.maxDepth {
		return fmt.Errorf("%w: attribute values nested deeper than %d levels", errOverLimit, s.lim.maxDepth)
	}
	return eachField(b, func(num int32, v []byte) error {
		switch num {
		case 5:
			return s.arrayValue(v, depth+1)
		case 6:
			return s.kvlist(v, depth+1)
		}
		return nil
	})
}

// arrayValue walks an ArrayValue whose values (field 1) are depth levels deep.
func (s *protoScanner) arrayValue(b []byte, depth int) error {
	return eachField(b, func(num int32, v []byte) error {
		if num != 1 {
			return nil
		}
		return s.counted(&s.c.Values, func() error { return s.anyValue(v, depth) })
	})
}

// kvlist walks a KeyValueList whose entries (field 1) hold values depth
// levels deep.
func (s *protoScanner) kvlist(b []byte, depth int) error {
	return eachField(b, func(num int32, v []byte) error {
		if num != 1 {
			return nil
		}
		return s.keyValue(v, depth)
	})
}

// scanJSONExport pre-counts an OTLP/JSON body without decoding it: every
// object and array outside strings is one element (an OTLP/JSON element is
// at least one object), and brackets may nest at most 4×lim.maxDepth+16
// levels. It checks neither the JSON grammar nor the OTLP shape (the decoder
// does) but stops at the first limit passed, with an error wrapping
// errOverLimit; an unbalanced bracket or an unterminated string is an error
// wrapping errMalformed. It allocates nothing (but its error).
func scanJSONExport(b []byte, lim scanLimits) (exportCounts, error) {
	var c exportCounts
	maxDepth := 4*lim.maxDepth + 16
	depth := 0
	inString := false
	for i := 0; i < len(b); i++ {
		ch := b[i]
		if inString {
			switch ch {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch ch {
		case '"':
			inString = true
		case '{', '[':
			if ch == '{' {
				c.Objects++
			} else {
				c.Arrays++
			}
			depth++
			if depth > c.Depth {
				c.Depth = depth
			}
			if depth > maxDepth {
				return c, fmt.Errorf("%w: JSON nested deeper than %d levels", errOverLimit, maxDepth)
			}
			if c.Objects+c.Arrays > lim.maxElements {
				return c, fmt.Errorf("%w: more than %d JSON objects and arrays", errOverLimit, lim.maxElements)
			}
		case '}', ']':
			depth--
			if depth < 0 {
				return c, fmt.Errorf("%w: unbalanced %q at byte %d", errMalformed, ch, i)
			}
		}
	}
	if inString || depth != 0 {
		return c, fmt.Errorf("%w: unterminated JSON", errMalformed)
	}
	return c, nil
}
