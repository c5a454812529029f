package receiver

import (
	"bytes"
	"context"
	"io"
	"math"
	"net/http"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// benchIngest posts b.N exports of 512 vLLM-like spans over loopback HTTP
// to a listening receiver, one after the other on one keep-alive
// connection, and waits until the sink has seen every span. Run with -cpu 1
// for the one-core figure (client, server and consumer share the core).
func benchIngest(b *testing.B, body []byte, hdr map[string]string, consume func(artifact.Span)) {
	var seen atomic.Int64
	r := New(Options{SessionID: "sess-1", RunID: "run-1", Sink: artifact.SinkFunc(func(rec artifact.Record) error {
		s := *rec.(*artifact.Span)
		if consume != nil {
			consume(s)
		}
		seen.Add(1)
		return nil
	})})
	if err := r.Listen(context.Background(), "127.0.0.1:0", ""); err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}}
	url := tracesURL(r)
	const spans = 512
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			// a full queue: let the consumer catch up and resend
			time.Sleep(time.Millisecond)
			i--
			continue
		}
	}
	for seen.Load() < int64(b.N*spans) {
		time.Sleep(100 * time.Microsecond)
	}
	b.StopTimer()
	reportRates(b, b.N*spans, cpuTime()-cpu0)
}

// reportRates reports spans/s (wall clock) and the process CPU time per
// span with the one-core rate it implies. On a shared machine the CPU
// figure is the steadier one: it counts only this process's work (client,
// receiver and consumer together at -cpu 1).
func reportRates(b *testing.B, spans int, cpu time.Duration) {
	b.ReportMetric(float64(spans)/b.Elapsed().Seconds(), "spans/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(spans), "cpu-ns/span")
	b.ReportMetric(float64(spans)/cpu.Seconds(), "spans/cpu-s")
}

// cpuTime is the process's user + system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkIngestHTTPProtobuf512 is the receiver's ingest rate: OTLP/HTTP
// protobuf exports of 512 vLLM-like spans (vLLM's batch size), decoded,
// converted and handed to a no-op consumer.
func BenchmarkIngestHTTPProtobuf512(b *testing.B) {
	benchIngest(b, protoBody(b, vllmTraces(0, 512)), protoHdr, nil)
}

// BenchmarkIngestHTTPProtobuf512Gzip is the same with gzip bodies.
func BenchmarkIngestHTTPProtobuf512Gzip(b *testing.B) {
	benchIngest(b, gzipped(b, protoBody(b, vllmTraces(0, 512))),
		map[string]string{"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"}, nil)
}

// BenchmarkIngestHTTPJSON512 is the same with OTLP JSON bodies.
func BenchmarkIngestHTTPJSON512(b *testing.B) {
	benchIngest(b, jsonBody(b, vllmTraces(0, 512)), jsonHdr, nil)
}

// BenchmarkIngestHTTPProtobuf512Artifact adds what `profile` does with each
// span: encoding its infer.vllm_span line (artifact.MarshalLine).
func BenchmarkIngestHTTPProtobuf512Artifact(b *testing.B) {
	benchIngest(b, protoBody(b, vllmTraces(0, 512)), protoHdr, func(s artifact.Span) {
		if _, err := artifact.MarshalLine(s); err != nil {
			b.Error(err)
		}
	})
}

// BenchmarkDecodeConvert512 is the decode and conversion alone (no HTTP).
func BenchmarkDecodeConvert512(b *testing.B) {
	body := protoBody(b, vllmTraces(0, 512))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		req := newExportRequest()
		if err := req.UnmarshalProto(body); err != nil {
			b.Fatal(err)
		}
		if c := convertTraces(req.Traces(), convertOptions{source: artifact.SpanSourceHTTP, strict: true}); len(c.records) != 512 {
			b.Fatal(len(c.records))
		}
	}
	reportRates(b, b.N*512, cpuTime()-cpu0)
}

// BenchmarkConvertProto512 is the direct conversion from wire bytes (what the receiver does
// with a protobuf export), against BenchmarkDecodeConvert512's pdata decoding then conversion.
func BenchmarkConvertProto512(b *testing.B) {
	body := protoBody(b, vllmTraces(0, 512))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		if c, ok := convertProto(body, convertOptions{source: artifact.SpanSourceHTTP, strict: true}, 512); !ok || len(c.records) != 512 {
			b.Fatal(ok, len(c.records))
		}
	}
	reportRates(b, b.N*512, cpuTime()-cpu0)
}

// BenchmarkScanProto512 is the pre-scan every protobuf export gets before it is decoded
// (element counts against the limits): 512 vLLM spans.
func BenchmarkScanProto512(b *testing.B) {
	body := protoBody(b, vllmTraces(0, 512))
	lim := scanLimits{maxElements: math.MaxInt, maxDepth: maxSkipDepth}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		if c, err := scanProtoExport(body, lim); err != nil || c.Spans != 512 {
			b.Fatal(err, c.Spans)
		}
	}
	reportRates(b, b.N*512, cpuTime()-cpu0)
}

// BenchmarkMarshalSpanRecord is the cost of one infer.vllm_span line.
func BenchmarkMarshalSpanRecord(b *testing.B) {
	req := newExportRequest()
	if err := req.UnmarshalProto(protoBody(b, vllmTraces(0, 1))); err != nil {
		b.Fatal(err)
	}
	rec := convertTraces(req.Traces(), convertOptions{source: artifact.SpanSourceHTTP, strict: true}).records[0]
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := artifact.MarshalLine(rec); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIngestHTTPProtobuf512File is the real path of `profile`: OTLP/HTTP
// protobuf exports of 512 vLLM-like spans, each span written by an
// artifact.Writer as its infer.vllm_span line into a file. Reports the
// artifact bytes per span too.
func BenchmarkIngestHTTPProtobuf512File(b *testing.B) {
	path := b.TempDir() + "/spans.jsonl"
	w, err := artifact.NewWriter(path)
	if err != nil {
		b.Fatal(err)
	}
	benchIngest(b, protoBody(b, vllmTraces(0, 512)), protoHdr, func(s artifact.Span) {
		if err := w.Write(&s); err != nil {
			b.Error(err)
		}
	})
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	if st, err := os.Stat(path); err == nil {
		b.ReportMetric(float64(st.Size())/float64(b.N*512), "artifact-B/span")
	}
}

// BenchmarkIngestGRPC512File is the real path over OTLP/gRPC: exports of
// 512 vLLM-like spans from one client, each span written by an
// artifact.Writer into a file.
func BenchmarkIngestGRPC512File(b *testing.B) {
	path := b.TempDir() + "/spans.jsonl"
	w, err := artifact.NewWriter(path)
	if err != nil {
		b.Fatal(err)
	}
	var seen atomic.Int64
	r := New(Options{SessionID: "sess-1", RunID: "run-1", Sink: artifact.SinkFunc(func(rec artifact.Record) error {
		seen.Add(1)
		return w.Write(rec)
	})})
	if err := r.Listen(context.Background(), "", "127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	cc, err := grpc.NewClient(r.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Close()
	client := ptraceotlp.NewGRPCClient(cc)
	req := ptraceotlp.NewExportRequestFromTraces(vllmTraces(0, 512))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		if _, err := client.Export(context.Background(), req); err != nil {
			// a full queue: let the consumer catch up and resend
			time.Sleep(time.Millisecond)
			i--
		}
	}
	for seen.Load() < int64(b.N*512) {
		time.Sleep(100 * time.Microsecond)
	}
	b.StopTimer()
	reportRates(b, b.N*512, cpuTime()-cpu0)
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkWriteSpanRecord is the artifact writer's cost of one received span: Writer.Write
// of a converted vLLM span (its line encoded, queued and buffered into a file). Reports the
// artifact bytes per span too.
func BenchmarkWriteSpanRecord(b *testing.B) {
	req := newExportRequest()
	if err := req.UnmarshalProto(protoBody(b, vllmTraces(0, 1))); err != nil {
		b.Fatal(err)
	}
	rec := convertTraces(req.Traces(), convertOptions{source: artifact.SpanSourceHTTP, strict: true}).records[0]
	path := b.TempDir() + "/spans.jsonl"
	w, err := artifact.NewWriter(path)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := w.Write(&rec); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if st, err := os.Stat(path); err == nil {
		b.ReportMetric(float64(st.Size())/float64(b.N), "artifact-B/span")
	}
}
