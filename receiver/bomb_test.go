package receiver

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptrace"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/internal/testkit"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
)

// The element bombs of the receiver's threat model, each answered 413 /
// 429 over HTTP and ResourceExhausted over gRPC with the default limits,
// the memory limiter's charge never over MemoryLimitBytes, and the
// receiver still accepting a real export afterwards.

var gzipHdr = map[string]string{"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"}

// emptyResourceSpans is an ExportTraceServiceRequest of n empty
// ResourceSpans: 2 bytes each on the wire (tag 0x0a, length 0).
func emptyResourceSpans(n int) []byte {
	return bytes.Repeat([]byte{0x0a, 0x00}, n)
}

// rawExportCall sends body as one gRPC Export message (gzip-compressed when
// gz), as it is, and returns the call's error.
func rawExportCall(t testing.TB, r *Receiver, body []byte, gz bool) error {
	t.Helper()
	cc, err := grpc.NewClient(r.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	opts := []grpc.CallOption{grpc.ForceCodecV2(rawCodec{})}
	if gz {
		opts = append(opts, grpc.UseCompressor("gzip"))
	}
	var out rawExport
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // inflating 16 MiB four at once under -race is slow
	defer cancel()
	return cc.Invoke(ctx, "/opentelemetry.proto.collector.trace.v1.TraceService/Export", rawResponse(body), &out, opts...)
}

// heapWatch samples the heap in use every 2 ms until stopped and returns
// the highest sample in MiB (reported, never asserted: the bound asserted
// is the limiter's).
func heapWatch() (stop func() float64) {
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
			select {
			case <-done:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	return func() float64 {
		close(done)
		wg.Wait()
		return float64(peak.Load()) / (1 << 20)
	}
}

// checkBounded asserts the limiter's peak stayed within its limit and is
// released now, and that a real export is still accepted over HTTP.
func checkBounded(t *testing.T, r *Receiver, heapMiB float64) {
	t.Helper()
	s := r.Stats()
	t.Logf("limiter peak %.1f MiB of %.0f MiB; heap in use peak %.1f MiB (test client included)",
		float64(s.DecodeBytesPeak)/(1<<20), float64(r.opts.MemoryLimitBytes)/(1<<20), heapMiB)
	if s.DecodeBytesPeak > r.opts.MemoryLimitBytes {
		t.Errorf("limiter peak %d over the %d-byte limit", s.DecodeBytesPeak, r.opts.MemoryLimitBytes)
	}
	// The buffers let go of stay charged until the collection they start has run.
	for deadline := time.Now().Add(20 * time.Second); s.DecodeBytes != 0 && time.Now().Before(deadline); s = r.Stats() {
		time.Sleep(10 * time.Millisecond)
	}
	if s.DecodeBytes != 0 {
		t.Errorf("limiter still holds %d bytes", s.DecodeBytes)
	}
	resp, out := post(t, tracesURL(r), protoBody(t, vllmTraces(9, 4)), protoHdr)
	if resp.StatusCode != 200 {
		t.Errorf("a real export after the bomb: %d %q", resp.StatusCode, out)
	}
}

func wantHTTP(t *testing.T, r *Receiver, body []byte, hdr map[string]string, code int, msg string) {
	t.Helper()
	resp, out := post(t, tracesURL(r), body, hdr)
	if resp.StatusCode != code {
		t.Fatalf("status %d %q, want %d", resp.StatusCode, out, code)
	}
	if st := decodeStatus(t, resp, out); !strings.Contains(st.Message, msg) {
		t.Fatalf("message %q, want %q", st.Message, msg)
	}
}

// wantGRPCExhausted asserts a ResourceExhausted answer containing msg,
// with RetryInfo exactly when retry.
func wantGRPCExhausted(t *testing.T, err error, msg string, retry bool) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), msg) {
		t.Fatalf("gRPC answer %v, want ResourceExhausted containing %q", err, msg)
	}
	hasRetry := false
	for _, d := range st.Details() {
		if _, ok := d.(*errdetails.RetryInfo); ok {
			hasRetry = true
		}
	}
	if hasRetry != retry {
		t.Fatalf("gRPC answer %v: RetryInfo %v, want %v", err, hasRetry, retry)
	}
}

// A 19 kB gzip body inflating to 19 MiB of empty ResourceSpans: over the
// 16 MiB decompressed limit, refused after inflating 16 MiB + 1 byte.
func TestBombGzipEmptyResourceSpans(t *testing.T) {
	r := startReceiver(t, Options{})
	bomb := gzipped(t, emptyResourceSpans(19<<19))
	t.Logf("bomb: %d bytes on the wire, %d inflated", len(bomb), 19<<20)
	stop := heapWatch()
	wantHTTP(t, r, bomb, gzipHdr, 413, "after decompression")
	wantGRPCExhausted(t, rawExportCall(t, r, emptyResourceSpans(19<<19), true), "larger than max", false)
	checkBounded(t, r, stop())
}

// Four such bombs at once on each transport: every one refused, the charge
// bounded, the receiver still serving.
func TestBombFourAtOnce(t *testing.T) {
	r := startReceiver(t, Options{ReadTimeout: 3 * time.Minute}) // under -race the four inflations take tens of seconds
	plain := emptyResourceSpans(19 << 19)
	bomb := gzipped(t, plain)
	stop := heapWatch()
	var wg sync.WaitGroup
	codesSeen := make(chan string, 8)
	for i := 0; i < 4; i++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			resp, _ := post(t, tracesURL(r), bomb, gzipHdr)
			codesSeen <- "http " + strconv.Itoa(resp.StatusCode)
		}()
		go func() {
			defer wg.Done()
			codesSeen <- "grpc " + status.Code(rawExportCall(t, r, plain, true)).String()
		}()
	}
	wg.Wait()
	close(codesSeen)
	for c := range codesSeen {
		if c != "http 413" && c != "http 429" && c != "grpc ResourceExhausted" {
			t.Errorf("answer %s", c)
		}
	}
	checkBounded(t, r, stop())
}

// A gzip body just under the decompressed limit, all empty ResourceSpans
// (8 million elements): read, pre-scanned and refused for good without
// being decoded.
func TestBombJustUnderLimit(t *testing.T) {
	r := startReceiver(t, Options{})
	plain := emptyResourceSpans((DefaultMaxBodyBytes - 2) / 2)
	stop := heapWatch()
	wantHTTP(t, r, gzipped(t, plain), gzipHdr, 413, "more than 1048576 elements")
	wantGRPCExhausted(t, rawExportCall(t, r, plain, true), "more than 1048576 elements", false)
	wantGRPCExhausted(t, rawExportCall(t, r, plain, false), "more than 1048576 elements", false)
	checkBounded(t, r, stop())
	if s := r.Stats(); s.TooComplex != 3 {
		t.Errorf("TooComplex %d, want 3", s.TooComplex)
	}
}

// A plain 21 MiB body of empty ResourceSpans: refused by its
// Content-Length before it is read (HTTP), by gRPC's message limit.
func TestBombPlain21MiB(t *testing.T) {
	r := startReceiver(t, Options{})
	plain := emptyResourceSpans(21 << 19)
	stop := heapWatch()
	wantHTTP(t, r, plain, protoHdr, 413, "over the 16777216-byte limit")
	wantGRPCExhausted(t, rawExportCall(t, r, plain, false), "larger than max", false)
	checkBounded(t, r, stop())
}

// nestedArrayExport is one span whose attribute is an array value nested
// levels deep.
func nestedArrayExport(levels int) []byte {
	value := protowire.AppendTag(nil, 3, protowire.VarintType) // AnyValue.int_value
	value = protowire.AppendVarint(value, 7)
	for i := 0; i < levels; i++ {
		arr := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), value) // ArrayValue.values
		value = protowire.AppendBytes(protowire.AppendTag(nil, 5, protowire.BytesType), arr)  // AnyValue.array_value
	}
	kv := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "root")
	kv = protowire.AppendBytes(protowire.AppendTag(kv, 2, protowire.BytesType), value)
	return wrapSpan(protowire.AppendBytes(protowire.AppendTag(nil, 9, protowire.BytesType), kv))
}

// Attribute values nested 5,000 levels (kvlist and array) in protobuf,
// and 100,000 brackets deep in JSON,: refused whole before decoding.
func TestBombNestedValues(t *testing.T) {
	r := startReceiver(t, Options{})
	stop := heapWatch()
	for name, body := range map[string][]byte{"kvlist": nestedKVListExport(5000), "array": nestedArrayExport(5000)} {
		t.Run(name, func(t *testing.T) {
			wantHTTP(t, r, body, protoHdr, 413, "nested deeper than 32 levels")
			wantGRPCExhausted(t, rawExportCall(t, r, body, false), "nested deeper than 32 levels", false)
		})
	}
	deepJSON := []byte(`{"resourceSpans":[` + strings.Repeat(`{"a":[`, 50000) + strings.Repeat(`]}`, 50000) + `]}`)
	wantHTTP(t, r, deepJSON, jsonHdr, 413, "JSON nested deeper than 144 levels")
	// At the limit: decoded and accepted; one level more: refused.
	if resp, out := post(t, tracesURL(r), nestedKVListExport(32), protoHdr); resp.StatusCode != 200 {
		t.Fatalf("nested 32: %d %q", resp.StatusCode, out)
	}
	wantHTTP(t, r, nestedKVListExport(33), protoHdr, 413, "nested deeper than 32 levels")
	checkBounded(t, r, stop())
}

// One span with 2 million attributes (10 MB on the wire): over the
// element limit by the pre-scan, over HTTP (protobuf and JSON) and gRPC.
func TestBombHugeAttributeCount(t *testing.T) {
	r := startReceiver(t, Options{})
	kv := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "a")
	attr := protowire.AppendBytes(protowire.AppendTag(nil, 9, protowire.BytesType), kv)
	body := wrapSpan(bytes.Repeat(attr, 2_000_000))
	jsonAttrs := strings.Repeat(`{"key":"a"},`, 1_100_000)
	jsonBomb := []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"x","attributes":[` + jsonAttrs + `{"key":"b"}]}]}]}]}`)
	stop := heapWatch()
	wantHTTP(t, r, body, protoHdr, 413, "more than 1048576 elements")
	wantHTTP(t, r, gzipped(t, body), gzipHdr, 413, "more than 1048576 elements")
	wantHTTP(t, r, jsonBomb, jsonHdr, 413, "more than 1048576 JSON objects")
	wantGRPCExhausted(t, rawExportCall(t, r, body, false), "more than 1048576 elements", false)
	checkBounded(t, r, stop())
}

// The 12,000-span export a Collector's batch processor sent (the old span
// limit answered it 413, which a Collector drops for good) is accepted
// over both transports, every span delivered once with its join fields.
func TestLargeCollectorBatchAccepted(t *testing.T) {
	col := newCollector()
	r := startReceiver(t, Options{SessionID: "sess-1", RunID: "run-1", Sink: col})
	td := vllmTraces(0, 12000)
	resp, out := post(t, tracesURL(r), protoBody(t, td), protoHdr)
	if resp.StatusCode != 200 {
		t.Fatalf("HTTP 12,000 spans: %d %q", resp.StatusCode, out)
	}
	cc, err := grpc.NewClient(r.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	if _, err := ptraceotlp.NewGRPCClient(cc).Export(context.Background(), ptraceotlp.NewExportRequestFromTraces(vllmTraces(1, 12000))); err != nil {
		t.Fatalf("gRPC 12,000 spans: %v", err)
	}
	got := col.wait(t, 24000, 30*time.Second)
	seen := make(map[string]bool, len(got))
	for _, s := range got {
		if s.TraceID == nil || s.SpanID == nil || s.RequestID == nil || s.StartUnixNS == nil || s.EndUnixNS == nil {
			t.Fatalf("span without its join fields: %+v", s)
		}
		key := *s.TraceID + "/" + *s.SpanID
		if seen[key] {
			t.Fatalf("span %s twice", key)
		}
		seen[key] = true
	}
	want := "chatcmpl-" + vllmSpec(0, 11999).xRequestID
	if v, _ := got[11999].String("gen_ai.request.id"); v != want {
		t.Fatalf("span 11999 request id %q, want %q", v, want)
	}
}

// While other exports hold the memory limiter, an export is refused
// retryably before it is decoded: 429 with Retry-After, ResourceExhausted
// with RetryInfo; accepted once the memory is released.
func TestMemoryLimiterBusy(t *testing.T) {
	r := startReceiver(t, Options{RetryAfter: 2 * time.Second})
	held := r.opts.MemoryLimitBytes - 100_000 // a 4-span export costs about 2×2.4 kB + 4×(140×13) + 4×1 kB ≈ 17 kB plus its 64 KiB buffer
	if !r.mem.tryAcquire(held) {
		t.Fatal("cannot hold the limiter")
	}
	body := protoBody(t, vllmTraces(0, 40))
	resp, out := post(t, tracesURL(r), body, protoHdr)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "2" {
		t.Fatalf("status %d Retry-After %q %q", resp.StatusCode, resp.Header.Get("Retry-After"), out)
	}
	if st := decodeStatus(t, resp, out); !strings.Contains(st.Message, "decode memory is in use") {
		t.Fatalf("message %q", st.Message)
	}
	wantGRPCExhausted(t, rawExportCall(t, r, body, false), "decode memory is in use", true)
	r.mem.release(held)
	if resp, out := post(t, tracesURL(r), body, protoHdr); resp.StatusCode != 200 {
		t.Fatalf("after release: %d %q", resp.StatusCode, out)
	}
	if err := rawExportCall(t, r, protoBody(t, vllmTraces(1, 40)), false); err != nil {
		t.Fatalf("gRPC after release: %v", err)
	}
	if s := r.Stats(); s.MemoryBusy != 2 || s.SpansGRPC != 40 || s.SpansHTTPProtobuf != 40 {
		t.Fatalf("stats %+v", s)
	}
}

// An export refused retryably before its body is read (here: every export
// slot busy) keeps its connection when the body is small (at most
// maxDrainBytes: drained, the retry reuses the connection); a larger one,
// while maxLargeDrains large bodies are being drained already (a flood), is
// answered 429 with Retry-After and Connection: close without being read,
// and the next export opens a new connection.
func TestRetryableRefusalLeavesLargeBodiesUnread(t *testing.T) {
	r := startReceiver(t, Options{AdmissionWait: -1}) // refused at once, not after waiting for room
	for i := 0; i < cap(r.slots); i++ {
		r.slots <- struct{}{}
	}
	for i := 0; i < cap(r.drains); i++ {
		r.drains <- struct{}{}
	}
	small := protoBody(t, vllmTraces(0, 40))  // about 24 kB
	large := protoBody(t, vllmTraces(0, 600)) // about 360 kB
	if len(small) > maxDrainBytes || len(large) <= maxDrainBytes {
		t.Fatalf("bodies of %d and %d bytes do not straddle %d", len(small), len(large), maxDrainBytes)
	}
	reused, closed := postRefused(t, r, small, small, large, small)
	for i := 0; i < cap(r.slots); i++ {
		<-r.slots
	}
	if want := []bool{false, true, true, false}; !slices.Equal(reused, want) {
		t.Fatalf("connection reused: %v, want %v", reused, want)
	}
	if want := []bool{false, false, true, false}; !slices.Equal(closed, want) {
		t.Fatalf("answer closed the connection: %v, want %v", closed, want)
	}
	if s := r.Stats(); s.ClosedUnread != 1 || s.Busy != 4 {
		t.Fatalf("stats: closed_unread %d busy %d, want 1 and 4", s.ClosedUnread, s.Busy)
	}
}

// A large export refused retryably while no other large body is being
// drained (one exporter refused now and then, not a flood) is drained: the
// answer keeps the connection and the retry reuses it.
func TestRetryableRefusalDrainsALargeBodyOutsideAFlood(t *testing.T) {
	r := startReceiver(t, Options{AdmissionWait: -1}) // refused at once, not after waiting for room
	for i := 0; i < cap(r.slots); i++ {
		r.slots <- struct{}{}
	}
	large := protoBody(t, vllmTraces(0, 600)) // about 360 kB
	if len(large) <= maxDrainBytes || len(large) > maxLargeDrainBytes {
		t.Fatalf("a body of %d bytes is not between %d and %d", len(large), maxDrainBytes, maxLargeDrainBytes)
	}
	reused, closed := postRefused(t, r, large, large, large)
	for i := 0; i < cap(r.slots); i++ {
		<-r.slots
	}
	if want := []bool{false, true, true}; !slices.Equal(reused, want) {
		t.Fatalf("connection reused: %v, want %v", reused, want)
	}
	if want := []bool{false, false, false}; !slices.Equal(closed, want) {
		t.Fatalf("answer closed the connection: %v, want %v", closed, want)
	}
	if s := r.Stats(); s.ClosedUnread != 0 || len(r.drains) != 0 {
		t.Fatalf("closed_unread %d, drains held %d; want 0 and 0", s.ClosedUnread, len(r.drains))
	}
}

// A gRPC stream the tap lets through holds its export slot from the tap
// until its export is answered, and frees it after.
func TestGRPCTapHoldsTheSlot(t *testing.T) {
	r := startReceiver(t, Options{MaxConcurrentExports: 1})
	ctx, err := r.tap(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.slots) != 1 {
		t.Fatalf("slots taken after the tap: %d, want 1", len(r.slots))
	}
	if _, err := r.tap(context.Background(), nil); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("second stream: %v, want ResourceExhausted", err)
	}
	if _, err := (&grpcService{r: r}).export(ctx, protoBody(t, vllmTraces(0, 3))); err != nil {
		t.Fatal(err)
	}
	if len(r.slots) != 0 {
		t.Fatalf("slots taken after the export: %d, want 0", len(r.slots))
	}
	// a stream that ends before its handler runs frees its slot too
	sctx, cancel := context.WithCancel(context.Background())
	if _, err := r.tap(sctx, nil); err != nil {
		t.Fatal(err)
	}
	cancel()
	testkit.WaitFor(t, "the ended stream's slot", 10*time.Second, func() bool { return len(r.slots) == 0 })
	if err := rawExportCall(t, r, protoBody(t, vllmTraces(1, 3)), false); err != nil {
		t.Fatalf("gRPC export after: %v", err)
	}
	if s := r.Stats(); s.SpansGRPC != 6 || s.Busy != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// With every export slot taken, a gRPC export is refused when its stream
// opens, before its message is read: even a message over MaxRecvMsgSize
// gets the retryable busy answer, not gRPC's size error.
func TestGRPCRefusedBeforeRead(t *testing.T) {
	r := startReceiver(t, Options{MaxBodyBytes: 1 << 20})
	for i := 0; i < cap(r.slots); i++ {
		r.slots <- struct{}{}
	}
	err := rawExportCall(t, r, emptyResourceSpans(1<<20), false) // 2 MiB, over the 1 MiB limit
	for i := 0; i < cap(r.slots); i++ {
		<-r.slots
	}
	wantGRPCExhausted(t, err, "exports are already being decoded", true)
	if s := r.Stats(); s.Busy != 1 || s.GRPCRequests != 1 {
		t.Fatalf("stats %+v", s)
	}
	if err := rawExportCall(t, r, protoBody(t, vllmTraces(0, 3)), false); err != nil {
		t.Fatalf("after the slots are free: %v", err)
	}
}

// A gRPC export whose message could not fit the queue (3 bytes per wire
// byte, as for an HTTP body of known length) is refused before it is
// decoded: an undecodable message gets the retryable Unavailable, not
// InvalidArgument.
func TestGRPCQueueFullRefusesBeforeDecoding(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	r := startReceiver(t, Options{QueueBytes: 1 << 20, Sink: artifact.SinkFunc(func(artifact.Record) error { <-release; return nil })})
	if resp, _ := post(t, tracesURL(r), protoBody(t, vllmTraces(0, 10)), protoHdr); resp.StatusCode != 200 {
		t.Fatal(resp.StatusCode)
	}
	garbage := bytes.Repeat([]byte{0xff}, 400<<10) // 3 × 400 KiB is over the 1 MiB queue
	err := rawExportCall(t, r, garbage, false)
	if st := status.Convert(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "span queue full") {
		t.Fatalf("got %v, want Unavailable: span queue full", err)
	}
	if s := r.Stats(); s.QueueFull != 1 || s.BadRequests != 0 {
		t.Fatalf("stats: queue_full %d bad_requests %d, want 1 and 0", s.QueueFull, s.BadRequests)
	}
}

// postRefused posts each body in turn on one client to r, whose export
// slots the caller holds, and asserts each is refused 429 with Retry-After
// 1; it returns per post whether the connection was reused and whether the
// answer closed it.
func postRefused(t *testing.T, r *Receiver, bodies ...[]byte) (reused, closed []bool) {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{}}
	for _, body := range bodies {
		trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) { reused = append(reused, info.Reused) }}
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), http.MethodPost, tracesURL(r), bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/x-protobuf")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "1" {
			t.Fatalf("status %d Retry-After %q, want 429 and 1", resp.StatusCode, resp.Header.Get("Retry-After"))
		}
		closed = append(closed, resp.Close)
	}
	return reused, closed
}

// Many gzip bombs at once over HTTP: the buffers each let go of while
// inflating stay charged until collected, so the heap stays near the
// limiter's bound instead of the collector's pacing of it (40 bombs of 19 kB
// at once took a process to 734 MB before).
func TestBombsManyAtOnceHTTP(t *testing.T) {
	const limit = 48 << 20
	r := startReceiver(t, Options{MaxBodyBytes: 8 << 20, MemoryLimitBytes: limit, ReadTimeout: 3 * time.Minute})
	bomb := gzipped(t, emptyResourceSpans(10<<19)) // 10 MiB inflated
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	before := m.HeapInuse
	stop := heapWatch()
	var wg sync.WaitGroup
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, out := post(t, tracesURL(r), bomb, gzipHdr)
			if resp.StatusCode != 413 && resp.StatusCode != 429 {
				t.Errorf("answer %d %q", resp.StatusCode, out)
			}
		}()
	}
	t0 := time.Now()
	wg.Wait()
	t.Logf("answered in %v", time.Since(t0))
	peak := stop()
	grew := peak - float64(before)/(1<<20)
	t.Logf("heap in use grew by %.1f MiB (limit %d MiB)", grew, limit>>20)
	if grew > 2*limit>>20 {
		t.Errorf("heap in use grew by %.1f MiB for a %d MiB limit", grew, limit>>20)
	}
	checkBounded(t, r, peak)
}
