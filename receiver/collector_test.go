package receiver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/internal/testkit"
)

// collectorEnv names the OpenTelemetry Collector binary the interop test runs (bench/collector.sh
// builds one: bench/results/otelcol/otelcol); the test is skipped without it.
const collectorEnv = "INFERPROBE_COLLECTOR"

// Interop with a real OpenTelemetry Collector in front: its otlp receiver → batch processor
// (send_batch_size 12000) → the otlp (gRPC) or otlphttp exporter (otlp_grpc, otlp_http in
// v0.165.0) pointed at this receiver,
// gzip on and off. 30,720 spans with unique ids are posted to the Collector in exports of
// 1,024; every one must reach this receiver's artifact file exactly once, in exports of more
// than 10,000 spans among them (a 413 for those once dropped whole batches). Skipped unless
// INFERPROBE_COLLECTOR names the Collector's binary.
func TestCollectorInterop(t *testing.T) {
	bin := os.Getenv(collectorEnv)
	if bin == "" {
		t.Skipf("%s is not set (bash bench/collector.sh builds a Collector)", collectorEnv)
	}
	for _, exporter := range []string{"otlp_grpc", "otlp_http"} {
		for _, compression := range []string{"gzip", "none"} {
			t.Run(exporter+"/"+compression, func(t *testing.T) { collectorInterop(t, bin, exporter, compression) })
		}
	}
}

// interopBatches and interopBatchSpans are the exports posted to the Collector: 30 × 1,024 spans.
const (
	interopBatches    = 30
	interopBatchSpans = 1024
)

func collectorInterop(t *testing.T, bin, exporter, compression string) {
	dir := t.TempDir()
	path := filepath.Join(dir, "spans.jsonl")
	w, err := artifact.NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	var exports atomic.Int64 // Now is read once per accepted export: each gets its own ReceivedAtNS
	r := startReceiver(t, Options{SessionID: "sess-1", RunID: "run-1", Sink: w,
		Now: func() time.Time { return time.Unix(0, exports.Add(1)) }})
	target := "http://" + r.HTTPAddr()
	if exporter == "otlp_grpc" {
		target = r.GRPCAddr()
	}
	inHTTP := testkit.FreeAddr(t)
	stop := startOtelcol(t, bin, dir, otelcolConfig(testkit.FreeAddr(t), inHTTP, exporter, target, compression))
	url := "http://" + inHTTP + TracesPath
	testkit.WaitFor(t, "the Collector's OTLP/HTTP receiver", 30*time.Second, func() bool {
		resp, err := postQuiet(url, protoBody(t, vllmTraces(0, 0)))
		return err == nil && resp == 200
	})
	bodies := make([][]byte, interopBatches)
	for b := range bodies {
		bodies[b] = protoBody(t, vllmTraces(b, interopBatchSpans))
	}
	var posters sync.WaitGroup
	errs := make([]error, interopBatches)
	for p := 0; p < 4; p++ { // 4 posters, so that 12,000 spans gather within the batch timeout
		posters.Add(1)
		go func() {
			defer posters.Done()
			for b := p; b < interopBatches; b += 4 {
				if code, err := postQuiet(url, bodies[b]); err != nil || code != 200 {
					errs[b] = fmt.Errorf("posting export %d to the Collector: %d %v", b, code, err)
				}
			}
		}()
	}
	posters.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	want := interopBatches * interopBatchSpans
	testkit.WaitFor(t, fmt.Sprintf("%d spans delivered", want), 2*time.Minute, func() bool { return r.Stats().SpansDelivered >= int64(want) })
	stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	spans, err := ReadSpanFile(path)
	if err != nil {
		t.Fatal(err)
	}
	checkInterop(t, spans, want, r.Stats())
}

// checkInterop asserts that spans holds every span posted exactly once and that some export
// carried more than 10,000 of them.
func checkInterop(t *testing.T, spans []artifact.Span, want int, st Stats) {
	t.Helper()
	seen := make(map[string]int, want)
	perExport := map[int64]int{}
	for i := range spans {
		sp := &spans[i]
		if sp.SpanID == nil || sp.ReceivedAtNS == nil {
			t.Fatalf("span %d has no span id or received_at_ns", i)
		}
		seen[*sp.SpanID]++
		perExport[*sp.ReceivedAtNS]++
	}
	for b := 0; b < interopBatches; b++ {
		for i := 0; i < interopBatchSpans; i++ {
			id := fmt.Sprintf("%016x", uint64(b)<<32|uint64(i)+1)
			if seen[id] != 1 {
				t.Fatalf("span %s (export %d, span %d) arrived %d times, want once", id, b, i, seen[id])
			}
		}
	}
	largest := 0
	for _, n := range perExport {
		largest = max(largest, n)
	}
	t.Logf("%d spans in %d exports, the largest %d spans; receiver: %d HTTP and %d gRPC requests, %d refused busy, %d queue full",
		len(spans), len(perExport), largest, st.HTTPRequests, st.GRPCRequests, st.Busy, st.QueueFull)
	if len(spans) != want || len(seen) != want {
		t.Fatalf("%d spans with %d distinct ids in the artifact, want %d", len(spans), len(seen), want)
	}
	if largest <= 10_000 {
		t.Fatalf("the largest export carried %d spans, want one over 10,000 (send_batch_size 12000)", largest)
	}
}

// otelcolConfig is a Collector configuration: the otlp receiver on grpcIn and httpIn, the
// batch processor (12,000 spans, 2 s), and one exporter (otlp_grpc, the otlp exporter: to
// target host:port; otlp_http, the otlphttp exporter: to target http://host:port) with the given compression; the Collector's own
// metrics off.
func otelcolConfig(grpcIn, httpIn, exporter, target, compression string) string {
	endpoint := fmt.Sprintf("endpoint: %s\n    tls:\n      insecure: true", target)
	if exporter == "otlp_http" {
		endpoint = "endpoint: " + target
	}
	return fmt.Sprintf(`receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
      http:
        endpoint: %s
processors:
  batch:
    send_batch_size: 12000
    timeout: 2s
exporters:
  %s:
    %s
    compression: %s
    timeout: 60s
service:
  telemetry:
    logs:
      level: warn
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [%s]
`, grpcIn, httpIn, exporter, endpoint, compression, exporter)
}

// startOtelcol runs the Collector at bin with config (written into dir); stop ends it with
// SIGTERM (the batch processor flushes) and waits, also at the test's end.
func startOtelcol(t *testing.T, bin, dir, config string) (stop func()) {
	t.Helper()
	conf := filepath.Join(dir, "otelcol.yaml")
	if err := os.WriteFile(conf, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", conf)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var stopped atomic.Bool
	stop = func() {
		if stopped.CompareAndSwap(false, true) {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
		}
	}
	t.Cleanup(stop)
	return stop
}

// postQuiet posts an OTLP/HTTP protobuf body and returns the status (an error, not a test
// failure, when nothing answers).
func postQuiet(url string, body []byte) (int, error) {
	resp, err := http.Post(url, "application/x-protobuf", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}
