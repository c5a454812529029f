package receiver

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/grpc/codes"
)

var (
	protoHdr = map[string]string{"Content-Type": "application/x-protobuf"}
	jsonHdr  = map[string]string{"Content-Type": "application/json"}
)

// checkVLLMRecord asserts that rec is span i of batch as vllmSpec built it.
func checkVLLMRecord(t *testing.T, rec artifact.Span, batch, i int, source string) {
	t.Helper()
	s := vllmSpec(batch, i)
	if rec.Name != artifact.RequestSpanName || rec.Source != source || rec.SessionID != "sess-1" || rec.RunID != "run-1" {
		t.Fatalf("header fields %q %q %q %q", rec.Name, rec.Source, rec.SessionID, rec.RunID)
	}
	if *rec.StartUnixNS != s.startNS || *rec.EndUnixNS != s.endNS || *rec.TimestampNS != s.startNS {
		t.Fatalf("times %d..%d, want %d..%d", *rec.StartUnixNS, *rec.EndUnixNS, s.startNS, s.endNS)
	}
	if *rec.TraceID != fmt.Sprintf("%x", s.traceID) || *rec.SpanID != fmt.Sprintf("%x", s.spanID) || *rec.ParentSpanID != fmt.Sprintf("%x", s.parentID) {
		t.Fatalf("ids %s %s %s", *rec.TraceID, *rec.SpanID, *rec.ParentSpanID)
	}
	if *rec.Kind != "SERVER" || rec.Status == nil || rec.Status.Code != "UNSET" {
		t.Fatalf("kind %s status %+v", *rec.Kind, rec.Status)
	}
	if rec.Attributes[artifact.AttrPromptTokens] != int64(512) || rec.Attributes[artifact.AttrTopP] != 1.0 || rec.Attributes[artifact.AttrE2E] != s.e2e ||
		rec.Attributes[artifact.AttrRequestID] != "chatcmpl-"+s.xRequestID || len(rec.Attributes) != 12 {
		t.Fatalf("attributes %#v", rec.Attributes)
	}
	if rec.RequestID == nil || *rec.RequestID != s.xRequestID {
		t.Fatalf("request id %v, want %s", rec.RequestID, s.xRequestID)
	}
	if rec.Resource["service.name"] != "vllm-server" || rec.Resource["vllm.process_id"] != int64(4242) || rec.Scope["name"] != "vllm.llm_engine" {
		t.Fatalf("resource %#v scope %#v", rec.Resource, rec.Scope)
	}
	if rec.ClockDomain != "127.0.0.1/unix_epoch_ns" {
		t.Fatalf("clock domain %q", rec.ClockDomain)
	}
	if rec.Dropped["attributes"] != 0 || rec.Dropped["events"] != 0 || rec.Dropped["links"] != 0 || len(rec.Dropped) != 3 {
		t.Fatalf("dropped %#v", rec.Dropped)
	}
}

func TestHTTPProtobufJSONAndGzip(t *testing.T) {
	col := newCollector()
	fixed := time.Unix(0, baseNS+60_000_000_000)
	r := startReceiver(t, Options{SessionID: "sess-1", RunID: "run-1", Sink: col, Now: func() time.Time { return fixed }})
	url := tracesURL(r)
	cases := []struct {
		name string
		body []byte
		hdr  map[string]string
	}{
		{"protobuf", protoBody(t, vllmTraces(0, 5)), protoHdr},
		{"protobuf gzip", gzipped(t, protoBody(t, vllmTraces(1, 5))), map[string]string{"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"}},
		{"json charset", jsonBody(t, vllmTraces(2, 5)), map[string]string{"Content-Type": "application/json; charset=utf-8"}},
		{"json gzip", gzipped(t, jsonBody(t, vllmTraces(3, 5))), map[string]string{"Content-Type": "Application/JSON", "Content-Encoding": "gzip"}},
		{"protobuf alias", protoBody(t, vllmTraces(4, 5)), map[string]string{"Content-Type": "application/protobuf"}},
	}
	for batch, c := range cases {
		resp, body := post(t, url, c.body, c.hdr)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d %q", c.name, resp.StatusCode, body)
		}
		wantCT := "application/x-protobuf"
		if strings.Contains(strings.ToLower(c.hdr["Content-Type"]), "json") {
			wantCT = "application/json"
		}
		if resp.Header.Get("Content-Type") != wantCT {
			t.Fatalf("%s: answered in %s", c.name, resp.Header.Get("Content-Type"))
		}
		er := decodeResponse(t, resp, body)
		if er.PartialSuccess().RejectedSpans() != 0 {
			t.Fatalf("%s: rejected %d", c.name, er.PartialSuccess().RejectedSpans())
		}
		spans := col.wait(t, 5*(batch+1), 5*time.Second)
		for i := 0; i < 5; i++ {
			rec := spans[5*batch+i]
			checkVLLMRecord(t, rec, batch, i, artifact.SpanSourceHTTP)
			if *rec.ReceivedAtNS != fixed.UnixNano() {
				t.Fatalf("received_at %d", *rec.ReceivedAtNS)
			}
		}
	}
	st := r.Stats()
	if st.HTTPRequests != 5 || st.SpansHTTPProtobuf != 15 || st.SpansHTTPJSON != 10 || st.ExportsAccepted != 5 {
		t.Fatalf("stats %+v", st)
	}
}

func TestHTTPJSONExactIntegersAndHexIDs(t *testing.T) {
	col := newCollector()
	r := startReceiver(t, Options{SessionID: "sess-1", RunID: "run-1", Sink: col})
	// 64-bit integers as strings and as numbers, the max int64 included.
	body := `{"resourceSpans":[{"resource":{"attributes":[{"key":"host.name","value":{"stringValue":"gpu-01"}}]},
	  "scopeSpans":[{"scope":{"name":"vllm.llm_engine","version":"0.30.0"},"spans":[
	   {"traceId":"0AF7651916CD43DD8448EB211C80319C","spanId":"b7ad6b7169203331","name":"llm_request","kind":2,
	    "startTimeUnixNano":"1790960617392174336","endTimeUnixNano":9223372036854775807,
	    "attributes":[{"key":"s","value":{"intValue":"9223372036854775807"}},{"key":"n","value":{"intValue":-9223372036854775808}},
	                  {"key":"d","value":{"doubleValue":0.1}},{"key":"nan","value":{"doubleValue":"NaN"}},
	                  {"key":"b","value":{"bytesValue":"AQID"}},{"key":"arr","value":{"arrayValue":{"values":[{"intValue":"1"},{"boolValue":true}]}}},
	                  {"key":"kv","value":{"kvlistValue":{"values":[{"key":"x","value":{"stringValue":"y"}}]}}},
	                  {"key":"empty","value":{}}],
	    "droppedAttributesCount":3,"status":{"code":2,"message":"boom"}}]}]}]}`
	resp, out := post(t, tracesURL(r), []byte(body), jsonHdr)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d %s", resp.StatusCode, out)
	}
	rec := col.wait(t, 1, 5*time.Second)[0]
	if *rec.StartUnixNS != baseNS || *rec.EndUnixNS != math.MaxInt64 {
		t.Fatalf("times %d %d", *rec.StartUnixNS, *rec.EndUnixNS)
	}
	a := rec.Attributes
	if a["s"] != int64(math.MaxInt64) || a["n"] != int64(math.MinInt64) || a["d"] != 0.1 || a["nan"] != "NaN" || a["b"] != "010203" || a["empty"] != nil {
		t.Fatalf("attributes %#v", a)
	}
	if arr := a["arr"].([]any); len(arr) != 2 || arr[0] != int64(1) || arr[1] != true {
		t.Fatalf("array %#v", a["arr"])
	}
	if kv := a["kv"].(map[string]any); kv["x"] != "y" {
		t.Fatalf("kvlist %#v", a["kv"])
	}
	if *rec.TraceID != "0af7651916cd43dd8448eb211c80319c" || rec.ParentSpanID != nil || rec.RequestID != nil {
		t.Fatalf("ids %v %v %v", *rec.TraceID, rec.ParentSpanID, rec.RequestID)
	}
	if rec.ClockDomain != "gpu-01/unix_epoch_ns" || rec.Scope["version"] != "0.30.0" || *rec.Kind != "SERVER" {
		t.Fatalf("domain %q scope %#v kind %s", rec.ClockDomain, rec.Scope, *rec.Kind)
	}
	if rec.Status.Code != "ERROR" || rec.Status.Message != "boom" || rec.Dropped["attributes"] != 3 {
		t.Fatalf("status %+v dropped %#v", rec.Status, rec.Dropped)
	}
	line, err := rec.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(line, []byte(`"end_unix_ns":9223372036854775807`)) || !bytes.Contains(line, []byte(`"s":9223372036854775807`)) {
		t.Fatalf("line %s", line)
	}
}

func TestHTTPPartialSuccess(t *testing.T) {
	col := newCollector()
	r := startReceiver(t, Options{SessionID: "sess-1", RunID: "run-1", Sink: col})
	td := vllmTraces(0, 4)
	spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	spans.At(1).SetSpanID(pcommon.SpanID{})   // invalid: all-zero span id
	spans.At(2).SetTraceID(pcommon.TraceID{}) // invalid: all-zero trace id
	for _, format := range []string{"protobuf", "json"} {
		var resp *http.Response
		var out []byte
		if format == "json" {
			resp, out = post(t, tracesURL(r), jsonBody(t, td), jsonHdr)
		} else {
			resp, out = post(t, tracesURL(r), protoBody(t, td), protoHdr)
		}
		if resp.StatusCode != 200 {
			t.Fatalf("%s: status %d", format, resp.StatusCode)
		}
		ps := decodeResponse(t, resp, out).PartialSuccess()
		if ps.RejectedSpans() != 2 || !strings.Contains(ps.ErrorMessage(), "2 spans rejected; first: span \"llm_request\": span_id missing or all zero") {
			t.Fatalf("%s: partial success %d %q", format, ps.RejectedSpans(), ps.ErrorMessage())
		}
	}
	got := col.wait(t, 4, 5*time.Second)
	for _, rec := range got {
		if *rec.SpanID == fmt.Sprintf("%x", vllmSpec(0, 1).spanID) || *rec.TraceID == fmt.Sprintf("%x", vllmSpec(0, 2).traceID) {
			t.Fatalf("invalid span delivered: %+v", rec)
		}
	}
	if st := r.Stats(); st.SpansRejected != 4 || st.PartialSuccesses != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestHTTPBadInput(t *testing.T) {
	col := newCollector()
	r := startReceiver(t, Options{SessionID: "sess-1", RunID: "run-1", Sink: col, MaxBodyBytes: 1 << 20})
	url := tracesURL(r)
	good := protoBody(t, vllmTraces(0, 3))
	goodJSON := jsonBody(t, vllmTraces(0, 1))
	// A JSON export whose trace id is base64 (the protobuf-JSON default),
	// which OTLP forbids.
	base64JSON := strings.Replace(string(goodJSON), fmt.Sprintf("%x", vllmSpec(0, 0).traceID), "AAAAAAAAAAEAAAAAAAAAAQ==", 1)
	base64Span := strings.Replace(string(goodJSON), fmt.Sprintf("%x", vllmSpec(0, 0).spanID), "AAAAAAAAAAE=", 1)
	zeros := bytes.Repeat([]byte{0}, 2<<20)
	for _, c := range []struct {
		name   string
		body   []byte
		hdr    map[string]string
		status int
		code   codes.Code
		msg    string
	}{
		{"no content type", good, nil, 415, codes.InvalidArgument, "unsupported Content-Type"},
		{"text/plain", good, map[string]string{"Content-Type": "text/plain"}, 415, codes.InvalidArgument, "unsupported Content-Type \"text/plain\""},
		{"grpc content type on HTTP/1", good, map[string]string{"Content-Type": "application/grpc"}, 415, codes.InvalidArgument, "unsupported Content-Type"},
		{"br encoding", good, map[string]string{"Content-Type": "application/x-protobuf", "Content-Encoding": "br"}, 415, codes.InvalidArgument, "unsupported Content-Encoding \"br\""},
		{"truncated protobuf", good[:len(good)-7], protoHdr, 400, codes.InvalidArgument, "undecodable OTLP protobuf export"},
		{"garbage protobuf", []byte{0xff, 0xff, 0xff, 0xff, 0x0f}, protoHdr, 400, codes.InvalidArgument, "undecodable OTLP protobuf export"},
		{"invalid json", []byte(`{"resourceSpans":[{]}`), jsonHdr, 400, codes.InvalidArgument, "invalid JSON"},
		{"json array", []byte(`[]`), jsonHdr, 400, codes.InvalidArgument, "not a JSON object"},
		{"json trailing garbage", append(append([]byte(nil), goodJSON...), []byte(" xyz")...), jsonHdr, 400, codes.InvalidArgument, "invalid JSON"},
		{"empty json", nil, jsonHdr, 400, codes.InvalidArgument, "not a JSON object"},
		{"base64 trace id", []byte(base64JSON), jsonHdr, 400, codes.InvalidArgument, "undecodable OTLP JSON export"},
		{"base64 span id", []byte(base64Span), jsonHdr, 400, codes.InvalidArgument, "undecodable OTLP JSON export"},
		{"fractional intValue", []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"b7ad6b7169203331","name":"x","attributes":[{"key":"i","value":{"intValue":1.5}}]}]}]}]}`), jsonHdr, 400, codes.InvalidArgument, "undecodable"},
		{"int64 overflow string", []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"b7ad6b7169203331","name":"x","attributes":[{"key":"i","value":{"intValue":"9223372036854775808"}}]}]}]}]}`), jsonHdr, 400, codes.InvalidArgument, "undecodable"},
		{"not gzip", good, map[string]string{"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"}, 400, codes.InvalidArgument, "invalid gzip body"},
		{"truncated gzip", gzipped(t, good)[:40], map[string]string{"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"}, 400, codes.InvalidArgument, "invalid gzip body"},
		{"oversized", zeros, protoHdr, 413, codes.ResourceExhausted, "over the 1048576-byte limit"},
		{"gzip over limit after inflation", gzipped(t, zeros), map[string]string{"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"}, 413, codes.ResourceExhausted, "after decompression"},
	} {
		resp, out := post(t, url, c.body, c.hdr)
		if resp.StatusCode != c.status {
			t.Errorf("%s: status %d, want %d (%q)", c.name, resp.StatusCode, c.status, out)
			continue
		}
		st := decodeStatus(t, resp, out)
		if codes.Code(st.Code) != c.code || !strings.Contains(st.Message, c.msg) {
			t.Errorf("%s: status %v %q, want %v containing %q", c.name, codes.Code(st.Code), st.Message, c.code, c.msg)
		}
	}
	// Wrong method and path.
	for _, c := range []struct {
		method, path string
		status       int
	}{{http.MethodGet, TracesPath, 405}, {http.MethodPut, TracesPath, 405}, {http.MethodPost, "/v1/metrics", 404}, {http.MethodPost, "/", 404}} {
		req, _ := http.NewRequest(c.method, "http://"+r.HTTPAddr()+c.path, bytes.NewReader(good))
		req.Header.Set("Content-Type", "application/x-protobuf")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("%s %s: status %d, want %d", c.method, c.path, resp.StatusCode, c.status)
		}
		if c.status == 405 && resp.Header.Get("Allow") != "POST" {
			t.Errorf("405 without Allow: POST")
		}
	}
	// A chunked body (no Content-Length) over the limit.
	pr, pw := io.Pipe()
	go func() {
		for i := 0; i < 3; i++ {
			if _, err := pw.Write(bytes.Repeat([]byte{1}, 512<<10)); err != nil {
				return
			}
		}
		pw.Close()
	}()
	req, _ := http.NewRequest(http.MethodPost, url, pr)
	req.Header.Set("Content-Type", "application/x-protobuf")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 413 {
		t.Fatalf("chunked oversize: status %d", resp.StatusCode)
	}
	st := r.Stats()
	if st.UnsupportedMedia != 4 || st.BadRequests != 12 || st.TooLarge != 3 || st.MethodNotAllowed != 2 || st.NotFound != 2 {
		t.Fatalf("stats %+v", st)
	}
	if len(col.all()) != 0 {
		t.Fatalf("%d spans delivered from bad input", len(col.all()))
	}
	// The receiver still works.
	if resp, _ := post(t, url, good, protoHdr); resp.StatusCode != 200 {
		t.Fatalf("after bad input: %d", resp.StatusCode)
	}
	col.wait(t, 3, 5*time.Second)
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// A gzip bomb (1 GiB of zeros in about 1 MiB: 1024 gzip members of 1 MiB
// of zeros each) is refused after inflating at most the limit + 1 byte,
// without reading the whole compressed body.
func TestGzipBombRefusedEarly(t *testing.T) {
	member := gzipped(t, make([]byte, 1<<20))
	bomb := bytes.NewBuffer(bytes.Repeat(member, 1024))
	if bomb.Len() > 2<<20 {
		t.Fatalf("bomb is %d bytes", bomb.Len())
	}
	const max = 4 << 20 // the default is 16 MiB; a smaller limit keeps the test fast
	cr := &countingReader{r: bytes.NewReader(bomb.Bytes())}
	rec := httptest.NewRecorder()
	collected := make(chan struct{})
	lim := memLimiter{limit: 4 * max, collect: func() { <-collected }}
	res := reservation{l: &lim}
	buf, err := readBody(rec, io.NopCloser(cr), true, max, wireLimit(max, true), 0, &res, nil)
	if err != errTooLarge {
		t.Fatalf("err %v, want errTooLarge", err)
	}
	if len(buf) > max+1 || cap(buf) > max+1 {
		t.Fatalf("inflated %d bytes (buffer %d), limit %d", len(buf), cap(buf), max)
	}
	// Live: the last buffer (4 MiB + 1); garbage: the ones it outgrew of 1 MiB or more (1, 2
	// and 4 MiB; the smaller ones were released).
	if res.charged != int64(cap(buf)) || lim.garbage.Load() != 7<<20 || lim.inUse() != res.charged+lim.garbage.Load() {
		t.Fatalf("charged %d, garbage %d (limiter %d) for a %d-byte buffer", res.charged, lim.garbage.Load(), lim.inUse(), cap(buf))
	}
	// Garbage of a quarter of the limit has started a collection; once it is done the
	// limiter holds nothing.
	if !lim.collecting.Load() {
		t.Fatal("no collection started for 4 MiB of garbage under a 16 MiB limit")
	}
	res.release()
	if lim.inUse() != lim.garbage.Load() {
		t.Fatalf("after release: limiter %d, garbage %d", lim.inUse(), lim.garbage.Load())
	}
	close(collected)
	for deadline := time.Now().Add(10 * time.Second); lim.inUse() != 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if lim.inUse() != 0 || lim.garbage.Load() != 0 {
		t.Fatalf("after the collection: limiter %d, garbage %d", lim.inUse(), lim.garbage.Load())
	}
	if cr.n >= int64(bomb.Len()) {
		t.Fatalf("read the whole %d-byte bomb", bomb.Len())
	}
	// Over HTTP: 413.
	r := startReceiver(t, Options{MaxBodyBytes: max})
	resp, out := post(t, tracesURL(r), bomb.Bytes(), map[string]string{"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"})
	if resp.StatusCode != 413 {
		t.Fatalf("status %d %q", resp.StatusCode, out)
	}
}

// A slow consumer fills the queue: exports are refused with 503 and
// Retry-After, memory stays bounded, and nothing accepted is lost.
func TestHTTPQueueFull(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var got []artifact.Span
	r := startReceiver(t, Options{SessionID: "sess-1", RunID: "run-1", QueueSpans: 25, RetryAfter: 1500 * time.Millisecond,
		Sink: artifact.SinkFunc(func(rec artifact.Record) error {
			s := *rec.(*artifact.Span)
			<-release
			mu.Lock()
			got = append(got, s)
			mu.Unlock()
			return nil
		})})
	accepted, refused := 0, 0
	for b := 0; b < 10; b++ {
		resp, out := post(t, tracesURL(r), protoBody(t, vllmTraces(b, 10)), protoHdr)
		switch resp.StatusCode {
		case 200:
			accepted++
		case 503:
			refused++
			if ra := resp.Header.Get("Retry-After"); ra != "2" {
				t.Fatalf("Retry-After %q, want 2 (1.5 s rounded up)", ra)
			}
			if st := decodeStatus(t, resp, out); codes.Code(st.Code) != codes.Unavailable || !strings.Contains(st.Message, "span queue full") {
				t.Fatalf("status %v %q", codes.Code(st.Code), st.Message)
			}
		default:
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	// 10 spans are being consumed (blocked) and 10 queued; a third batch
	// would pass 25.
	if accepted != 2 || refused != 8 {
		t.Fatalf("accepted %d refused %d", accepted, refused)
	}
	if st := r.Stats(); st.QueueFull != 8 || st.QueuedSpans != 20 {
		t.Fatalf("stats %+v", st)
	}
	close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 20 {
		t.Fatalf("delivered %d, want 20", len(got))
	}
}

// With every decode slot taken, an export is refused with 429 (at once,
// with AdmissionWait negative; admission_test.go has the waits).
func TestHTTPBusy(t *testing.T) {
	r := startReceiver(t, Options{MaxConcurrentExports: 1, RetryAfter: time.Second, AdmissionWait: -1})
	pr, pw := io.Pipe()
	done := make(chan int)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, tracesURL(r), pr)
		req.Header.Set("Content-Type", "application/x-protobuf")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- -1
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	body := protoBody(t, vllmTraces(0, 2))
	if _, err := pw.Write(body[:10]); err != nil { // the slot is held while the body trickles in
		t.Fatal(err)
	}
	// The slow export must hold the slot before the second one arrives.
	for deadline := time.Now().Add(5 * time.Second); len(r.slots) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the slow export never took its slot")
		}
	}
	resp, out := post(t, tracesURL(r), body, protoHdr)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("status %d Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if st := decodeStatus(t, resp, out); codes.Code(st.Code) != codes.ResourceExhausted {
		t.Fatalf("code %v", codes.Code(st.Code))
	}
	pw.Write(body[10:])
	pw.Close()
	if code := <-done; code != 200 {
		t.Fatalf("slow export: %d", code)
	}
	if st := r.Stats(); st.Busy != 1 || st.ExportsAccepted != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// Shutdown delivers every queued span, then refuses new exports.
func TestShutdownDrainsThenRefuses(t *testing.T) {
	col := newCollector()
	slow := artifact.SinkFunc(func(rec artifact.Record) error { time.Sleep(2 * time.Millisecond); return col.Write(rec) })
	r := New(Options{Sink: slow})
	srv := httptest.NewServer(r)
	defer srv.Close()
	for b := 0; b < 5; b++ {
		if resp, _ := post(t, srv.URL+TracesPath, protoBody(t, vllmTraces(b, 20)), protoHdr); resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(col.all()); n != 100 {
		t.Fatalf("delivered %d of 100 before Shutdown returned", n)
	}
	resp, _ := post(t, srv.URL+TracesPath, protoBody(t, vllmTraces(9, 1)), protoHdr)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("after stop: %d", resp.StatusCode)
	}
	if st := r.Stats(); st.AfterStop != 1 || st.SpansDelivered != 100 || st.SpansDropped != 0 {
		t.Fatalf("stats %+v", st)
	}
	if err := r.Shutdown(ctx); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
}

// A Shutdown deadline drops what is still queued and says so.
func TestShutdownDeadlineDrops(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	first := make(chan struct{}, 1)
	r := New(Options{Sink: artifact.SinkFunc(func(artifact.Record) error {
		select {
		case first <- struct{}{}:
			<-block
		default:
		}
		return nil
	})})
	h := httptest.NewServer(r)
	defer h.Close()
	if resp, _ := post(t, h.URL+TracesPath, protoBody(t, vllmTraces(0, 50)), protoHdr); resp.StatusCode != 200 {
		t.Fatal(resp.StatusCode)
	}
	<-first
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- r.Shutdown(ctx) }()
	time.Sleep(150 * time.Millisecond)
	block <- struct{}{} // let the consumer finish the span it is in
	err := <-errc
	if err == nil || !strings.Contains(err.Error(), "deadline exceeded") {
		t.Fatalf("err %v", err)
	}
	if st := r.Stats(); st.SpansDelivered != 1 || st.SpansDropped != 49 {
		t.Fatalf("stats %+v", st)
	}
}

func TestListenBindErrors(t *testing.T) {
	a := startReceiver(t, Options{})
	b := New(Options{})
	defer b.Close()
	err := b.Listen(context.Background(), a.HTTPAddr(), "127.0.0.1:0")
	var be *BindError
	if err == nil || !errorsAs(err, &be) || be.Protocol != "http" || be.Addr != a.HTTPAddr() {
		t.Fatalf("err %v", err)
	}
	if b.HTTPAddr() != "" || b.GRPCAddr() == "" {
		t.Fatalf("addrs %q %q", b.HTTPAddr(), b.GRPCAddr())
	}
	if err := b.Listen(context.Background(), "127.0.0.1:0", ""); err == nil {
		t.Fatal("second Listen accepted")
	}
	caps := b.Capabilities(contextFor())
	if !caps.Available || len(caps.Enabled) != 1 || caps.Enabled[0] != CapGRPC {
		t.Fatalf("capabilities %+v", caps)
	}
	bind := caps.Metadata["bind_errors"].([]any)
	if len(bind) != 1 || bind[0].(map[string]any)["protocol"] != "http" {
		t.Fatalf("bind errors %#v", bind)
	}
	// Both fail: unavailable.
	c := New(Options{})
	defer c.Close()
	err = c.Listen(context.Background(), a.HTTPAddr(), a.GRPCAddr())
	if err == nil || !strings.Contains(err.Error(), "OTLP/http") || !strings.Contains(err.Error(), "OTLP/grpc") {
		t.Fatalf("err %v", err)
	}
	caps = c.Capabilities(contextFor())
	if caps.Available || len(caps.Enabled) != 0 || caps.Metadata["counters"].(map[string]any)["bind_errors"] != int64(2) {
		t.Fatalf("capabilities %+v", caps)
	}
}

// pdata decodes a protobuf span with a trace id of the wrong length as an error.
func TestProtobufWrongIDLength(t *testing.T) {
	r := New(Options{})
	defer r.Close()
	h := httptest.NewServer(r)
	defer h.Close()
	td := ptrace.NewTraces()
	sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetName("x")
	body := protoBody(t, td)
	// Hand-made: ExportTraceServiceRequest{resource_spans{scope_spans{spans{trace_id: 3 bytes}}}}.
	span := []byte{0x0a, 0x03, 1, 2, 3, 0x2a, 0x01, 'x'}
	scope := append([]byte{0x12, byte(len(span))}, span...)
	rs := append([]byte{0x12, byte(len(scope))}, scope...)
	bad := append([]byte{0x0a, byte(len(rs))}, rs...)
	for name, c := range map[string]struct {
		body   []byte
		status int
	}{"good": {body, 200}, "3-byte trace id": {bad, 400}} {
		resp, out := post(t, h.URL+TracesPath, c.body, protoHdr)
		if resp.StatusCode != c.status {
			t.Errorf("%s: status %d %q", name, resp.StatusCode, out)
		}
	}
}

// A body that stops arriving is cut off by the read timeout: 408.
func TestHTTPSlowBodyTimesOut(t *testing.T) {
	r := startReceiver(t, Options{ReadTimeout: 300 * time.Millisecond})
	conn, err := net.Dial("tcp", r.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nContent-Length: 1000\r\n\r\n0123456789", TracesPath)
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if st := r.Stats(); st.Timeouts != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// Near the queue's limit an export is refused before its body is read or
// decoded: even an undecodable body gets 503, not 400.
func TestHTTPQueueFullRefusesBeforeDecoding(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	r := startReceiver(t, Options{QueueSpans: 10, QueueBytes: 1 << 20, Sink: artifact.SinkFunc(func(artifact.Record) error { <-release; return nil })})
	if resp, _ := post(t, tracesURL(r), protoBody(t, vllmTraces(0, 10)), protoHdr); resp.StatusCode != 200 {
		t.Fatal(resp.StatusCode)
	}
	resp, out := post(t, tracesURL(r), []byte("not protobuf"), protoHdr)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("status %d %q", resp.StatusCode, out)
	}
	if st := r.Stats(); st.QueueFull != 1 || st.BadRequests != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// A vLLM-sized body (300 kB, read into a fresh buffer that grows 64 → 512 KiB) leaves no
// garbage charged and starts no collection: only buffers of minRetired or more are kept.
func TestSmallBodyLeavesNoGarbage(t *testing.T) {
	body := bytes.Repeat([]byte{0x0a, 0x00}, 150_000)
	collected := 0
	lim := memLimiter{limit: 64 << 20, collect: func() { collected++ }}
	res := reservation{l: &lim}
	buf, err := readBody(httptest.NewRecorder(), io.NopCloser(bytes.NewReader(body)), false, 16<<20, 16<<20, 0, &res, nil)
	if err != nil || len(buf) != len(body) {
		t.Fatalf("read %d bytes, %v", len(buf), err)
	}
	if lim.garbage.Load() != 0 || lim.collecting.Load() || res.charged != int64(cap(buf)) || lim.inUse() != res.charged {
		t.Fatalf("garbage %d, collecting %v, charged %d (limiter %d) for a %d-byte buffer",
			lim.garbage.Load(), lim.collecting.Load(), res.charged, lim.inUse(), cap(buf))
	}
	res.release()
	if lim.inUse() != 0 || lim.collecting.Load() {
		t.Fatalf("after release: limiter %d, collecting %v", lim.inUse(), lim.collecting.Load())
	}
}
