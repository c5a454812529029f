package receiver

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/protobuf/encoding/protowire"
)

// pdataCounts counts the elements of decoded traces through pdata's API,
// independently of the wire scanner: what scanProtoExport must find in the
// body pdata encodes them to.
func pdataCounts(td ptrace.Traces) exportCounts {
	var c exportCounts
	var value func(v pcommon.Value, depth int)
	attrs := func(m pcommon.Map, depth int) {
		m.Range(func(_ string, v pcommon.Value) bool {
			c.Attributes++
			value(v, depth)
			return true
		})
	}
	value = func(v pcommon.Value, depth int) {
		c.Depth = max(c.Depth, depth)
		switch v.Type() {
		case pcommon.ValueTypeSlice:
			s := v.Slice()
			for i := 0; i < s.Len(); i++ {
				c.Values++
				value(s.At(i), depth+1)
			}
		case pcommon.ValueTypeMap:
			attrs(v.Map(), depth+1)
		}
	}
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		rs := td.ResourceSpans().At(i)
		c.ResourceSpans++
		attrs(rs.Resource().Attributes(), 0)
		for j := 0; j < rs.ScopeSpans().Len(); j++ {
			ss := rs.ScopeSpans().At(j)
			c.ScopeSpans++
			attrs(ss.Scope().Attributes(), 0)
			for k := 0; k < ss.Spans().Len(); k++ {
				sp := ss.Spans().At(k)
				c.Spans++
				attrs(sp.Attributes(), 0)
				for e := 0; e < sp.Events().Len(); e++ {
					c.Events++
					attrs(sp.Events().At(e).Attributes(), 0)
				}
				for l := 0; l < sp.Links().Len(); l++ {
					c.Links++
					attrs(sp.Links().At(l).Attributes(), 0)
				}
			}
		}
	}
	return c
}

// richTraces has every element kind: two resources, scope attributes,
// events and links with attributes, and array and kvlist values nested
// three levels deep.
func richTraces() ptrace.Traces {
	td := vllmTraces(0, 3)
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "other")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().Attributes().PutBool("scoped", true)
	sp := ss.Spans().AppendEmpty()
	sp.SetName("x")
	ev := sp.Events().AppendEmpty()
	ev.Attributes().PutInt("n", 1)
	ev.Attributes().PutStr("m", "two")
	sp.Links().AppendEmpty().Attributes().PutDouble("w", 0.5)
	sp.Links().AppendEmpty()
	arr := sp.Attributes().PutEmptySlice("arr")
	arr.AppendEmpty().SetStr("a")
	inner := arr.AppendEmpty().SetEmptyMap()
	inner.PutEmptySlice("deep").AppendEmpty().SetInt(7)
	inner.PutStr("s", "t")
	sp.Attributes().PutEmpty("empty")
	return td
}

var wideOpen = scanLimits{maxElements: 1 << 30, maxDepth: 1 << 20}

func TestScanProtoCountsMatchPdata(t *testing.T) {
	for name, td := range map[string]ptrace.Traces{"vllm 512": vllmTraces(0, 512), "rich": richTraces(), "empty": ptrace.NewTraces()} {
		want := pdataCounts(td)
		got, err := scanProtoExport(protoBody(t, td), wideOpen)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got != want {
			t.Errorf("%s: counts %+v, pdata %+v", name, got, want)
		}
	}
	// The rich export by hand: 2 resources, 2 scopes, 4 spans, 1 event, 2
	// links; attributes 6 (resource) + 12×3 (spans) + 1 (other resource) +
	// 1 (scope) + 2 (event) + 1 (link) + arr, empty, and inside arr's map
	// deep and s = 51; array values a, the map, and 7 = 3; 7 is at depth 3
	// (arr → map → deep → 7).
	got, _ := scanProtoExport(protoBody(t, richTraces()), wideOpen)
	want := exportCounts{ResourceSpans: 2, ScopeSpans: 2, Spans: 4, Events: 1, Links: 2, Attributes: 51, Values: 3, Depth: 3}
	if got != want {
		t.Errorf("rich by hand: %+v, want %+v", got, want)
	}
}

func TestScanProtoAllocatesNothing(t *testing.T) {
	body := protoBody(t, richTraces())
	if n := testing.AllocsPerRun(20, func() { _, _ = scanProtoExport(body, wideOpen) }); n != 0 {
		t.Fatalf("%v allocations per scan", n)
	}
}

func TestScanProtoLimitsAndErrors(t *testing.T) {
	body := protoBody(t, vllmTraces(0, 10)) // 1+1+10 + 6+12×10 = 138 elements
	if _, err := scanProtoExport(body, scanLimits{maxElements: 138, maxDepth: 8}); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
	if _, err := scanProtoExport(body, scanLimits{maxElements: 137, maxDepth: 8}); !errors.Is(err, errOverLimit) {
		t.Fatalf("one over: %v", err)
	}
	for name, b := range map[string][]byte{
		"truncated":  body[:len(body)-3],
		"bad tag":    {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		"end group":  protowire.AppendTag(nil, 7, protowire.EndGroupType),
		"field 0":    {0x02, 0x00},
		"long field": {0x0a, 0x05, 0x00},
	} {
		if _, err := scanProtoExport(b, wideOpen); !errors.Is(err, errMalformed) {
			t.Errorf("%s: %v, want errMalformed", name, err)
		}
	}
	deep := nestedKVListExport(200)
	c, err := scanProtoExport(deep, scanLimits{maxElements: 1 << 20, maxDepth: 128})
	if !errors.Is(err, errOverLimit) || !strings.Contains(err.Error(), "nested deeper than 128") || c.Depth != 129 {
		t.Fatalf("nested 200: %v (depth %d)", err, c.Depth)
	}
}

// nestedKVListExport is an export of one span whose one attribute is a
// kvlist value nested levels deep (the innermost a string), built on the
// wire directly.
func nestedKVListExport(levels int) []byte {
	value := protowire.AppendTag(nil, 1, protowire.BytesType) // AnyValue.string_value
	value = protowire.AppendString(value, "leaf")
	for i := 0; i < levels; i++ {
		kv := protowire.AppendTag(nil, 1, protowire.BytesType)
		kv = protowire.AppendString(kv, "k")
		kv = protowire.AppendTag(kv, 2, protowire.BytesType)
		kv = protowire.AppendBytes(kv, value)
		list := protowire.AppendTag(nil, 1, protowire.BytesType) // KeyValueList.values
		list = protowire.AppendBytes(list, kv)
		value = protowire.AppendTag(nil, 6, protowire.BytesType) // AnyValue.kvlist_value
		value = protowire.AppendBytes(value, list)
	}
	kv := protowire.AppendTag(nil, 1, protowire.BytesType)
	kv = protowire.AppendString(kv, "root")
	kv = protowire.AppendTag(kv, 2, protowire.BytesType)
	kv = protowire.AppendBytes(kv, value)
	return wrapSpan(protowire.AppendBytes(protowire.AppendTag(nil, 9, protowire.BytesType), kv))
}

// wrapSpan wraps span fields into Span → ScopeSpans → ResourceSpans →
// ExportTraceServiceRequest.
func wrapSpan(spanFields []byte) []byte {
	b := spanFields
	for _, field := range []protowire.Number{2, 2, 1} { // ScopeSpans.spans, ResourceSpans.scope_spans, request.resource_spans
		b = protowire.AppendBytes(protowire.AppendTag(nil, field, protowire.BytesType), b)
	}
	return b
}

func TestScanJSON(t *testing.T) {
	body := jsonBody(t, richTraces())
	c, err := scanJSONExport(body, wideOpen)
	if err != nil {
		t.Fatal(err)
	}
	objects, arrays := jsonShapeCounts(t, body)
	if c.Objects != objects || c.Arrays != arrays {
		t.Fatalf("objects %d arrays %d, encoding/json finds %d and %d", c.Objects, c.Arrays, objects, arrays)
	}
	tricky := []byte(`{"a":"{[\"}]\\","b":[{},[]]}`)
	if c, err := scanJSONExport(tricky, wideOpen); err != nil || c.Objects != 2 || c.Arrays != 2 || c.Depth != 3 {
		t.Fatalf("strings with brackets: %+v %v", c, err)
	}
	for _, bad := range []string{`{"a":"x}`, `}{`, `{[`} {
		if _, err := scanJSONExport([]byte(bad), wideOpen); !errors.Is(err, errMalformed) {
			t.Errorf("%s: %v", bad, err)
		}
	}
	deep := []byte(strings.Repeat("[", 600) + strings.Repeat("]", 600))
	if _, err := scanJSONExport(deep, scanLimits{maxElements: 1 << 20, maxDepth: 128}); !errors.Is(err, errOverLimit) {
		t.Fatalf("600 brackets deep: %v", err)
	}
	if _, err := scanJSONExport([]byte(`[{},{},{}]`), scanLimits{maxElements: 3, maxDepth: 8}); !errors.Is(err, errOverLimit) {
		t.Fatalf("4 elements, limit 3: %v", err)
	}
}

// jsonShapeCounts counts the objects and arrays of a JSON text by decoding
// it with encoding/json.
func jsonShapeCounts(t testing.TB, b []byte) (objects, arrays int) {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			objects++
			for _, e := range x {
				walk(e)
			}
		case []any:
			arrays++
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return objects, arrays
}

// FuzzScanProtoExport: the wire pre-scan never panics; on any body pdata
// decodes, it finds no fault and counts at least what pdata
// holds (exactly, for pdata's own encoding of it); its counts never pass
// its limits without an error.
func FuzzScanProtoExport(f *testing.F) {
	f.Add(protoBody(f, richTraces()))
	f.Add(protoBody(f, vllmTraces(0, 2)))
	f.Add(nestedKVListExport(5))
	f.Add([]byte{0x0a, 0x00, 0x0a, 0x00})
	f.Fuzz(func(t *testing.T, body []byte) {
		lim := scanLimits{maxElements: 1 << 16, maxDepth: 16}
		c, err := scanProtoExport(body, lim)
		if err == nil && (c.elements() > lim.maxElements || c.Depth > lim.maxDepth) {
			t.Fatalf("counts %+v past the limits without an error", c)
		}
		if err != nil && !errors.Is(err, errOverLimit) && !errors.Is(err, errMalformed) {
			t.Fatalf("unclassified error %v", err)
		}
		req := newExportRequest()
		if req.UnmarshalProto(body) != nil {
			return
		}
		want := pdataCounts(req.Traces())
		if errors.Is(err, errMalformed) {
			t.Fatalf("pdata decodes it, the scan says %v", err)
		}
		if err != nil {
			return
		}
		if c.ResourceSpans < want.ResourceSpans || c.ScopeSpans < want.ScopeSpans || c.Spans < want.Spans ||
			c.Events < want.Events || c.Links < want.Links || c.Attributes < want.Attributes || c.Values < want.Values {
			t.Fatalf("scan %+v under pdata's %+v", c, want)
		}
		again, err := scanProtoExport(protoBody(t, req.Traces()), wideOpen)
		if err != nil || again != want {
			t.Fatalf("pdata's re-encoding: scan %+v (%v), pdata %+v", again, err, want)
		}
	})
}

// FuzzScanJSONExport: the JSON pre-count never panics, and on valid JSON
// within its limits it counts exactly the objects and arrays encoding/json
// finds.
func FuzzScanJSONExport(f *testing.F) {
	f.Add(jsonBody(f, richTraces()))
	f.Add([]byte(`{"a":"{[\"}]\\","b":[{},[]]}`))
	f.Add([]byte(`[[[]]]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := scanJSONExport(body, scanLimits{maxElements: 1 << 16, maxDepth: 16})
		if !json.Valid(body) {
			return
		}
		if errors.Is(err, errMalformed) {
			t.Fatalf("valid JSON %q: %v", body, err)
		}
		if err != nil {
			return
		}
		objects, arrays := jsonShapeCounts(t, body)
		if c.Objects != objects || c.Arrays != arrays {
			t.Fatalf("%q: objects %d arrays %d, encoding/json %d and %d", body, c.Objects, c.Arrays, objects, arrays)
		}
	})
}
