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
// the decoder skips them; groups (wire types 3 and 4, unused by OTLP) and
// truncated fields are errors wrapping errMalformed; more than
// lim.maxElements elements or values nested over lim.maxDepth levels an
// error wrapping errOverLimit. It reads every byte at most once and
// allocates nothing (but its error).
func scanProtoExport(b []byte, lim scanLimits) (exportCounts, error) {
	s := protoScanner{lim: lim}
	err := s.request(b)
	return s.c, err
}

// nextLen returns the next length-delimited field of b, skipping scalar
// fields: its number, its payload and the rest of b. ok is false at the end
// of b.
func nextLen(b []byte) (num protowire.Number, v, rest []byte, ok bool, err error) {
	for len(b) > 0 {
		n, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return 0, nil, nil, false, fmt.Errorf("%w: bad field tag: %v", errMalformed, protowire.ParseError(l))
		}
		b = b[l:]
		switch typ {
		case protowire.BytesType:
			v, l := protowire.ConsumeBytes(b)
			if l < 0 {
				return 0, nil, nil, false, fmt.Errorf("%w: field %d: %v", errMalformed, n, protowire.ParseError(l))
			}
			return n, v, b[l:], true, nil
		case protowire.VarintType, protowire.Fixed32Type, protowire.Fixed64Type:
			l := protowire.ConsumeFieldValue(n, typ, b)
			if l < 0 {
				return 0, nil, nil, false, fmt.Errorf("%w: field %d: %v", errMalformed, n, protowire.ParseError(l))
			}
			b = b[l:]
		default:
			return 0, nil, nil, false, fmt.Errorf("%w: field %d has wire type %d (groups are not OTLP)", errMalformed, n, typ)
		}
	}
	return 0, nil, nil, false, nil
}

// add counts n more elements into *field and fails past maxElements.
func (s *protoScanner) add(field *int) error {
	*field++
	if e := s.c.elements(); e > s.lim.maxElements {
		return fmt.Errorf("%w: more than %d elements (resource spans, scope spans, spans, events, links, attributes, array values)", errOverLimit, s.lim.maxElements)
	}
	return nil
}

// request walks ExportTraceServiceRequest: resource_spans = 1.
func (s *protoScanner) request(b []byte) error {
	for {
		num, v, rest, ok, err := nextLen(b)
		if err != nil || !ok {
			return err
		}
		b = rest
		if num == 1 {
			if err := s.add(&s.c.ResourceSpans); err != nil {
				return err
			}
			if err := s.resourceSpans(v); err != nil {
				return err
			}
		}
	}
}

// resourceSpans walks ResourceSpans: resource = 1 (Resource: attributes =
// 1), scope_spans = 2.
func (s *protoScanner) resourceSpans(b []byte) error {
	for {
		num, v, rest, ok, err := nextLen(b)
		if err != nil || !ok {
			return err
		}
		b = rest
		switch num {
		case 1:
			err = s.attributesOf(v, 1)
		case 2:
			if err = s.add(&s.c.ScopeSpans); err == nil {
				err = s.scopeSpans(v)
			}
		}
		if err != nil {
			return err
		}
	}
}

// scopeSpans walks ScopeSpans: scope = 1 (InstrumentationScope: attributes
// = 3), spans = 2.
func (s *protoScanner) scopeSpans(b []byte) error {
	for {
		num, v, rest, ok, err := nextLen(b)
		if err != nil || !ok {
			return err
		}
		b = rest
		switch num {
		case 1:
			err = s.attributesOf(v, 3)
		case 2:
			if err = s.add(&s.c.Spans); err == nil {
				err = s.span(v)
			}
		}
		if err != nil {
			return err
		}
	}
}

// span walks Span: attributes = 9, events = 11 (Event: attributes = 3),
// links = 13 (Link: attributes = 4).
func (s *protoScanner) span(b []byte) error {
	for {
		num, v, rest, ok, err := nextLen(b)
		if err != nil || !ok {
			return err
		}
		b = rest
		switch num {
		case 9:
			err = s.keyValue(v, 0)
		case 11:
			if err = s.add(&s.c.Events); err == nil {
				err = s.attributesOf(v, 3)
			}
		case 13:
			if err = s.add(&s.c.Links); err == nil {
				err = s.attributesOf(v, 4)
			}
		}
		if err != nil {
			return err
		}
	}
}

// attributesOf walks a message whose repeated KeyValue attributes have
// field number field, ignoring its other fields.
func (s *protoScanner) attributesOf(b []byte, field protowire.Number) error {
	for {
		num, v, rest, ok, err := nextLen(b)
		if err != nil || !ok {
			return err
		}
		b = rest
		if num == field {
			if err := s.keyValue(v, 0); err != nil {
				return err
			}
		}
	}
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
	for {
		num, v, rest, ok, err := nextLen(b)
		if err != nil || !ok {
			return err
		}
		b = rest
		if num == 2 {
			if err := s.anyValue(v, depth); err != nil {
				return err
			}
		}
	}
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
	for {
		num, v, rest, ok, err := nextLen(b)
		if err != nil || !ok {
			return err
		}
		b = rest
		switch num {
		case 5:
			err = s.arrayValue(v, depth+1)
		case 6:
			err = s.kvlist(v, depth+1)
		}
		if err != nil {
			return err
		}
	}
}

// arrayValue walks an ArrayValue whose values (field 1) are depth levels deep.
func (s *protoScanner) arrayValue(b []byte, depth int) error {
	for {
		num, v, rest, ok, err := nextLen(b)
		if err != nil || !ok {
			return err
		}
		b = rest
		if num == 1 {
			if err := s.add(&s.c.Values); err != nil {
				return err
			}
			if err := s.anyValue(v, depth); err != nil {
				return err
			}
		}
	}
}

// kvlist walks a KeyValueList whose entries (field 1) hold values depth
// levels deep.
func (s *protoScanner) kvlist(b []byte, depth int) error {
	for {
		num, v, rest, ok, err := nextLen(b)
		if err != nil || !ok {
			return err
		}
		b = rest
		if num == 1 {
			if err := s.keyValue(v, depth); err != nil {
				return err
			}
		}
	}
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
