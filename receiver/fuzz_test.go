package receiver

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
)

// roundTrip checks that a record survives MarshalJSON → artifact.DecodeSpan
// with the same content digest.
func roundTrip(t *testing.T, rec artifact.Span) {
	t.Helper()
	line, err := rec.MarshalJSON()
	if err != nil {
		t.Fatalf("marshal %+v: %v", rec, err)
	}
	back, err := artifact.DecodeSpan(line)
	if err != nil {
		t.Fatalf("decode %s: %v", line, err)
	}
	if back.ContentDigest() != rec.ContentDigest() {
		t.Fatalf("digest changed through %s", line)
	}
}

// FuzzHTTPJSONExport posts arbitrary bodies as OTLP JSON: the answer is
// 200 (with a decodable response), 400 or 413, never a panic, and every
// accepted span survives the artifact round trip.
func FuzzHTTPJSONExport(f *testing.F) {
	f.Add(jsonBody(f, vllmTraces(0, 2)))
	f.Add([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"b7ad6b7169203331","name":"x","startTimeUnixNano":"18446744073709551615","attributes":[{"key":"i","value":{"intValue":"9223372036854775807"}},{"key":"d","value":{"doubleValue":"-Infinity"}}]}]}]}]}`))
	f.Add([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"CvdlGRbNQ92ESOshHIAxnA==","name":"x"}]}]}]}`))
	f.Add([]byte(`{"resource_spans":[{"scope_spans":[{"spans":[{"trace_id":"0af7651916cd43dd8448eb211c80319c","span_id":"b7ad6b7169203331","name":"x","kind":"SPAN_KIND_SERVER","status":{"code":"STATUS_CODE_ERROR"}}]}]}]}`))
	f.Add([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"b7ad6b7169203331","name":"x","attributes":[{"key":"a","value":{"arrayValue":{"values":[{"kvlistValue":{"values":[{"key":"b","value":{"bytesValue":"AQI="}}]}}]}}}]}]}]}]}`))
	f.Add([]byte(`[]`))
	var got []artifact.Span
	r := New(Options{SessionID: "s", RunID: "r", MaxBodyBytes: 1 << 20})
	f.Cleanup(func() { r.Close() })
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, TracesPath, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		r.ServeHTTP(rec, req)
		switch rec.Code {
		case 200:
			er := decodeResponse(t, rec.Result(), rec.Body.Bytes())
			_ = er
		case 400, 413:
		default:
			t.Fatalf("status %d for %q", rec.Code, body)
		}
		// The conversion itself, without the queue, for the round trip.
		got = got[:0]
		ereq := newExportRequest()
		if err := decodeJSONExport(ereq, body); err != nil {
			return
		}
		conv := convertTraces(ereq.Traces(), convertOptions{source: artifact.SpanSourceHTTP, strict: true})
		got = append(got, conv.records...)
		for _, s := range got {
			roundTrip(t, s)
		}
	})
}

// FuzzHTTPProtobufExport posts arbitrary bytes as OTLP protobuf.
func FuzzHTTPProtobufExport(f *testing.F) {
	f.Add(protoBody(f, vllmTraces(0, 2)))
	f.Add([]byte{0x0a, 0x0a, 0x12, 0x08, 0x12, 0x06, 0x0a, 0x03, 1, 2, 3})
	f.Add([]byte{})
	r := New(Options{MaxBodyBytes: 1 << 20})
	f.Cleanup(func() { r.Close() })
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, TracesPath, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/x-protobuf")
		r.ServeHTTP(rec, req)
		if rec.Code != 200 && rec.Code != 400 && rec.Code != 413 && rec.Code != 503 {
			t.Fatalf("status %d", rec.Code)
		}
		ereq := newExportRequest()
		if ereq.UnmarshalProto(body) != nil {
			return
		}
		for _, s := range convertTraces(ereq.Traces(), convertOptions{source: artifact.SpanSourceHTTP, strict: true}).records {
			roundTrip(t, s)
		}
	})
}

// FuzzReadSpans reads arbitrary spans-file content: an error or spans that
// survive the artifact round trip, never a panic.
func FuzzReadSpans(f *testing.F) {
	fixture, err := os.ReadFile("testdata/q05_spans_sample.jsonl")
	if err != nil {
		f.Fatal(err)
	}
	// Two lines of the real sample: a request span and a start-up span
	// (large seeds slow the fuzzing engine down).
	lines := bytes.Split(fixture, []byte("\n"))
	f.Add(append(append(append([]byte(nil), lines[0]...), '\n'), lines[12]...))
	f.Add(jsonBody(f, vllmTraces(0, 2)))
	line, _ := artifact.Span{SessionID: "sess-1", RunID: "run-1", Source: artifact.SpanSourceHTTP, Name: artifact.RequestSpanName,
		ClockDomain: "127.0.0.1/unix_epoch_ns", StartUnixNS: artifact.Ptr(baseNS), EndUnixNS: artifact.Ptr(baseNS + 489_659_671),
		Attributes: map[string]any{artifact.AttrRequestID: "chatcmpl-inferprobe-run-1-c1_measured_0_0", artifact.AttrE2E: 0.489}}.MarshalJSON()
	f.Add(line)
	f.Add([]byte("{\n  \"resourceSpans\": []\n}\n"))
	f.Add([]byte(`{"name":"x","start_unix_ns":"5","end_unix_ns":6,"status":{"code":2},"dropped":{"links":1},"attributes":{"a":[1,2.5,{"b":null}]}}`))
	f.Add([]byte(`{"event_type":"infer.session","schema_version":1}` + "\n" + `{"name":"y"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		spans, err := ReadSpans(bytes.NewReader(data))
		if err != nil {
			if !strings.Contains(err.Error(), "invalid spans file") {
				t.Fatalf("error %v does not say the file is invalid", err)
			}
			return
		}
		for _, s := range spans {
			if s.Name == "" {
				t.Fatal("span without a name accepted")
			}
			roundTrip(t, s)
		}
	})
}
