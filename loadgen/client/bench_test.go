package client

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/inferprobe/inferprobe/internal/ssefixture"
)

// vllmStream renders a vLLM-shaped chat stream: a role chunk, n one-token content chunks,
// a finish chunk, the usage chunk and [DONE]; one event per element.
func vllmStream(n int) []string {
	return ssefixture.VLLMStream("chatcmpl-inferprobe-run-1-c8_in512_out64_measured_0_0", "Qwen/Qwen2.5-7B-Instruct", 512, n)
}

// replayReader returns one event per Read, like a socket with one flush per token.
type replayReader struct {
	events [][]byte
	i      int
}

func (r *replayReader) Read(p []byte) (int, error) {
	if r.i >= len(r.events) {
		return 0, io.EOF
	}
	n := copy(p, r.events[r.i])
	r.i++
	return n, nil
}

// BenchmarkStreamOverhead measures the client's own cost per streamed chunk: timing the
// read, SSE parsing, JSON decoding of the needed fields, TTFT/chunk bookkeeping and text
// accumulation, for a 64-token vLLM-shaped stream read one event per read (no network).
func BenchmarkStreamOverhead(b *testing.B) {
	const tokens = 64
	var events [][]byte
	for _, e := range vllmStream(tokens) {
		events = append(events, []byte(e))
	}
	c := New(Options{})
	rd := &replayReader{events: events}
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	b.ReportAllocs()
	for b.Loop() {
		rd.i = 0
		r := readMem(c, rd)
		if r.Outcome != OK || len(r.TokenChunks) != tokens {
			b.Fatal(r.Outcome, r.ErrorMessage)
		}
	}
	runtime.ReadMemStats(&ms1)
	chunks := float64(b.N) * float64(len(events))
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/chunks, "ns/chunk")
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/chunks, "allocs/chunk")
	b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/chunks, "B/chunk")
}

// BenchmarkDoLoopback is a whole streamed call (64 tokens, one flush per event) against an
// in-process server on 127.0.0.1 over a kept-alive connection: client and server costs
// together, per request.
func BenchmarkDoLoopback(b *testing.B) {
	events := vllmStream(64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range events {
			_, _ = io.WriteString(w, e)
			w.(http.Flusher).Flush()
		}
	}))
	defer srv.Close()
	c := New(Options{MaxConnsPerHost: 1})
	cl := call(srv.URL, true)
	cl.Body = []byte(`{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("x ", 512) + `"}],"stream":true}`)
	b.ReportAllocs()
	for b.Loop() {
		r := c.Do(context.Background(), cl)
		if r.Outcome != OK || len(r.TokenChunks) != 64 || !r.ConnReused && r.GotConn.IsZero() {
			b.Fatal(r.Outcome, r.ErrorMessage)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(events)), "ns/chunk")
}
