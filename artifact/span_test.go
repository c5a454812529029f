package artifact

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func sampleRecord() Span {
	return Span{
		SessionID:    "sess-1",
		RunID:        "run-1",
		Source:       SpanSourceHTTP,
		Name:         RequestSpanName,
		ClockDomain:  "127.0.0.1/unix_epoch_ns",
		ReceivedAtNS: Ptr(baseNS + 5_000_000_001),
		TimestampNS:  Ptr(baseNS),
		TraceID:      Ptr("0af7651916cd43dd8448eb211c80319c"),
		SpanID:       Ptr("b7ad6b7169203331"),
		ParentSpanID: Ptr("00f067aa0ba902b7"),
		Kind:         Ptr("SERVER"),
		StartUnixNS:  Ptr(baseNS),
		EndUnixNS:    Ptr(baseNS + 489_659_671),
		Attributes: map[string]any{
			AttrRequestID:        "chatcmpl-inferprobe-run-1-c1_measured_0_0",
			AttrPromptTokens:     int64(512),
			AttrTopP:             1.0,
			AttrE2E:              0.48922157287597656,
			AttrTimeInQueue:      3.4356489777565e-05,
			"big":                int64(math.MaxInt64),
			"small":              int64(math.MinInt64),
			"tiny":               1e-7,
			"huge":               1e21,
			"nan":                "NaN",
			"flag":               true,
			"nothing":            nil,
			"list":               []any{int64(1), 2.5, "x", []any{}},
			"kv":                 map[string]any{"a": int64(1), "b": map[string]any{"c": "d"}},
			"text\n\"quoted\"\t": "line\u2028sep <html> \x01",
		},
		Resource:  map[string]any{"service.name": "vllm-server", "vllm.process_id": int64(4242)},
		Scope:     map[string]any{"name": "vllm.llm_engine"},
		Status:    &SpanStatus{Code: "UNSET", Message: ""},
		Dropped:   map[string]int64{"attributes": 0, "events": 0, "links": 2},
		RequestID: Ptr("inferprobe-run-1-c1_measured_0_0"),
	}
}

func TestSpanRecordMarshalRoundTrip(t *testing.T) {
	rec := sampleRecord()
	line, err := MarshalLine(rec)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(line, []byte(`{"event_type":"infer.vllm_span","schema_version":1,"session_id":"sess-1"`)) {
		t.Fatalf("line starts %s", line[:80])
	}
	for _, want := range []string{
		`"start_unix_ns":1790960617392174336`, `"end_unix_ns":1790960617881834007`,
		`"big":9223372036854775807`, `"small":-9223372036854775808`,
		`"gen_ai.request.top_p":1.0`, `"tiny":1e-7`, `"huge":1e+21`, `"nan":"NaN"`,
		`"gen_ai.usage.prompt_tokens":512,`, `"status":{"code":"UNSET","message":""}`,
		`"dropped":{"attributes":0,"events":0,"links":2}`, `"request_id":"inferprobe-run-1-c1_measured_0_0"}`,
		`<html>`, `\u2028`, `\u0001`,
	} {
		if !bytes.Contains(line, []byte(want)) {
			t.Errorf("line lacks %s:\n%s", want, line)
		}
	}
	var generic map[string]any
	if err := json.Unmarshal(line, &generic); err != nil {
		t.Fatalf("not valid JSON: %v", err)
	}
	got, err := DecodeSpan(line)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, rec) {
		t.Fatalf("round trip differs:\n got %#v\nwant %#v", got, rec)
	}
	if got.ContentDigest() != rec.ContentDigest() || len(rec.ContentDigest()) != 64 {
		t.Fatalf("digest changed: %s vs %s", got.ContentDigest(), rec.ContentDigest())
	}
}

func TestSpanRecordThroughArtifactWriterAndReader(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.jsonl")
	w, err := NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	rec := sampleRecord()
	second := sampleRecord()
	second.ParentSpanID, second.RequestID, second.Status, second.ReceivedAtNS = nil, nil, nil, nil
	for _, r := range []Record{rec, &second} {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	a, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got []Span
	for _, o := range a.Others {
		if o.Kind != KindVLLMSpanV2 || o.Context == nil {
			t.Fatalf("kind %v, context %v", o.Kind, o.Context)
		}
		r, err := DecodeSpanRaw(o)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	if len(got) != 2 || !reflect.DeepEqual(got[0], rec) || !reflect.DeepEqual(got[1], second) {
		t.Fatalf("read back %d records: %#v", len(got), got)
	}
}

func TestContentDigest(t *testing.T) {
	a := sampleRecord()
	d := a.ContentDigest()
	b := sampleRecord()
	// Reception facts do not change the digest.
	b.SessionID, b.RunID, b.Source, b.ClockDomain = "other", "run-2", SpanSourceGRPC, "h/unix_epoch_ns"
	b.ReceivedAtNS, b.RequestID = Ptr(int64(7)), nil
	if b.ContentDigest() != d {
		t.Fatal("reception facts changed the digest")
	}
	for name, mutate := range map[string]func(r *Span){
		"attribute value": func(r *Span) { r.Attributes[AttrPromptTokens] = int64(513) },
		"int vs double":   func(r *Span) { r.Attributes[AttrPromptTokens] = 512.0 },
		"end":             func(r *Span) { r.EndUnixNS = Ptr(*r.EndUnixNS + 1) },
		"resource":        func(r *Span) { r.Resource["host.name"] = "gpu-1" },
		"status":          func(r *Span) { r.Status = &SpanStatus{Code: "ERROR"} },
		"parent":          func(r *Span) { r.ParentSpanID = nil },
		"name":            func(r *Span) { r.Name = "other" },
	} {
		c := sampleRecord()
		mutate(&c)
		if c.ContentDigest() == d {
			t.Errorf("%s: digest unchanged", name)
		}
	}
}

func TestDecodeVLLMSpanErrors(t *testing.T) {
	good, err := sampleRecord().MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct{ from, to, want string }{
		"float start":      {`"start_unix_ns":1790960617392174336`, `"start_unix_ns":1.790960617392174336e18`, "start_unix_ns: want an integer"},
		"fraction end":     {`"end_unix_ns":1790960617881834007`, `"end_unix_ns":1790960617881834007.5`, "end_unix_ns: want an integer"},
		"end before start": {`"end_unix_ns":1790960617881834007`, `"end_unix_ns":1790960617392174335`, "precedes start_unix_ns"},
		"base64 trace id":  {`"0af7651916cd43dd8448eb211c80319c"`, `"CvdlGRbNQ92ESOshHIAxnA=="`, "trace_id: want 32 hex digits"},
		"non-hex span id":  {`"b7ad6b7169203331"`, `"b7ad6b716920333z"`, "span_id: not hex"},
		"no name":          {`"name":"llm_request"`, `"name":""`, "span without a name"},
		"other kind":       {`"event_type":"infer.vllm_span"`, `"event_type":"infer.request"`, "not an infer.vllm_span v1 record"},
		"other version":    {`"schema_version":1`, `"schema_version":2`, "not an infer.vllm_span v1 record"},
		"attrs array":      {`"attributes":{`, `"attributes":[],"x":{`, "attributes: want an object"},
		"negative dropped": {`"links":2`, `"links":-2`, `dropped "links"`},
		"trailing":         {`"request_id":"inferprobe-run-1-c1_measured_0_0"}`, `"request_id":"x"} {}`, "trailing data"},
	} {
		line := strings.Replace(string(good), c.from, c.to, 1)
		if line == string(good) {
			t.Fatalf("%s: replacement %q not found", name, c.from)
		}
		_, err := DecodeSpan([]byte(line))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", name, err, c.want)
		}
		if name == "other kind" && !errors.Is(err, ErrNotSpan) {
			t.Errorf("other kind: %v does not wrap ErrNotSpan", err)
		}
	}
}

func TestDecodeVLLMSpanExactIntegers(t *testing.T) {
	line := `{"event_type":"infer.vllm_span","schema_version":1,"name":"llm_request","start_unix_ns":"9223372036854775807",` +
		`"end_unix_ns":9223372036854775807,"attributes":{"i":9223372036854775807,"u":18446744073709551615,"d":2.0,"e":1e3}}`
	r, err := DecodeSpan([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if *r.StartUnixNS != math.MaxInt64 || *r.EndUnixNS != math.MaxInt64 || *r.TimestampNS != math.MaxInt64 {
		t.Fatalf("times %d %d", *r.StartUnixNS, *r.EndUnixNS)
	}
	if r.Attributes["i"] != int64(math.MaxInt64) || r.Attributes["u"] != json.Number("18446744073709551615") ||
		r.Attributes["d"] != 2.0 || r.Attributes["e"] != 1000.0 {
		t.Fatalf("attributes %#v", r.Attributes)
	}
	if n, ok := r.Int("i"); !ok || n != math.MaxInt64 {
		t.Fatalf("Int(i) = %d %v", n, ok)
	}
	if _, ok := r.Int("u"); ok {
		t.Fatal("Int(u) beyond int64 reported ok")
	}
	if f, ok := r.Float("d"); !ok || f != 2 {
		t.Fatalf("Float(d) = %v %v", f, ok)
	}
	out, err := r.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"i":9223372036854775807`, `"u":18446744073709551615`, `"d":2.0`, `"e":1000.0`} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("%s lacks %s", out, want)
		}
	}
}

func TestAppendFloatRoundTrips(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	vals := []float64{0, -0.0, 1, -1, 0.1, 1e-6, 9.99e-7, 1e20, 1e21, 123456789.125, math.MaxFloat64, math.SmallestNonzeroFloat64, 5e-324}
	for i := 0; i < 20000; i++ {
		vals = append(vals, math.Float64frombits(rng.Uint64()))
	}
	for _, f := range vals {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		s := string(appendFloat(nil, f))
		if !strings.ContainsAny(s, ".eE") {
			t.Fatalf("%v spelled %q without a decimal point or exponent", f, s)
		}
		back, err := strconv.ParseFloat(s, 64)
		if err != nil || back != f {
			t.Fatalf("%v spelled %q reads back as %v (%v)", f, s, back, err)
		}
		if !json.Valid([]byte(s)) {
			t.Fatalf("%q is not JSON", s)
		}
		std, _ := json.Marshal(f) // encoding/json's spelling, with ".0" where it has no point
		if want := string(std); (strings.ContainsAny(want, ".e") && s != want) || (!strings.ContainsAny(want, ".e") && s != want+".0") {
			t.Fatalf("%v spelled %q, encoding/json %q", f, s, std)
		}
	}
	for f, want := range map[float64]string{math.NaN(): `"NaN"`, math.Inf(1): `"+Inf"`, math.Inf(-1): `"-Inf"`} {
		if got := string(appendFloat(nil, f)); got != want {
			t.Errorf("%v spelled %s", f, got)
		}
	}
}

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", "q\"b\\s", "\x00\x1f\x7f", "é漢字🎉", "bad \xff utf8", "\u2028\u2029", "<>&"} {
		got := appendString(nil, s)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("%q → %s: %v", s, got, err)
		}
		want := strings.ToValidUTF8(s, "\uFFFD")
		if back != want {
			t.Errorf("%q → %s → %q", s, got, back)
		}
	}
}

func TestAccessors(t *testing.T) {
	r := sampleRecord()
	if !r.IsRequestSpan() {
		t.Fatal("llm_request not a request span")
	}
	if s, ok := r.String(AttrRequestID); !ok || s != "chatcmpl-inferprobe-run-1-c1_measured_0_0" {
		t.Fatalf("String = %q %v", s, ok)
	}
	if n, ok := r.Int(AttrPromptTokens); !ok || n != 512 {
		t.Fatalf("Int = %d %v", n, ok)
	}
	if f, ok := r.Float(AttrPromptTokens); !ok || f != 512 {
		t.Fatalf("Float(int) = %v %v", f, ok)
	}
	if f, ok := r.Float("nan"); !ok || !math.IsNaN(f) {
		t.Fatalf("Float(NaN) = %v %v", f, ok)
	}
	if _, ok := r.Float("flag"); ok {
		t.Fatal("Float(bool) ok")
	}
	if d, ok := r.DurationNS(); !ok || d != 489_659_671 {
		t.Fatalf("duration %d", d)
	}
}

// baseNS is a fixed span start (2026-10-03, beyond float64's exact range).
const baseNS int64 = 1790960617392174336
