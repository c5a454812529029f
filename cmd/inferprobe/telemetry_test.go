package main

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/internal/testkit"
	"github.com/inferprobe/inferprobe/sim"
)

func freeAddr(t *testing.T) string { return testkit.FreeAddr(t) }

// reportMap runs `inferprobe analyze --format json` on path and decodes the report.
func reportMap(t *testing.T, path string, extra ...string) map[string]any {
	t.Helper()
	out := filepath.Join(t.TempDir(), "report.json")
	if code := runQuiet(append([]string{"analyze", path, "--format", "json", "--output", out}, extra...)...); code != 0 {
		t.Fatalf("analyze exit %d", code)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func dig(m any, keys ...string) any {
	for _, k := range keys {
		mm, ok := m.(map[string]any)
		if !ok {
			return nil
		}
		m = mm[k]
	}
	return m
}

// TestProfileJoinsSpansAndScrapes profiles the sim exporting spans over gRPC and over
// http/protobuf: every successful request's span joins (coverage 1.0), and the scraped
// request_success delta equals the measured successes.
func TestProfileJoinsSpansAndScrapes(t *testing.T) {
	for _, proto := range []string{sim.ProtocolGRPC, sim.ProtocolHTTPProtobuf} {
		t.Run(proto, func(t *testing.T) {
			httpAddr, grpcAddr := freeAddr(t), freeAddr(t)
			srv := startSim(t, func(c *sim.Config) {
				c.OTLPProtocol = proto
				c.OTLPBatchDelay = 200 * time.Millisecond
				c.OTLPTracesEndpoint = grpcAddr
				if proto == sim.ProtocolHTTPProtobuf {
					c.OTLPTracesEndpoint = "http://" + httpAddr + "/v1/traces"
				}
			})
			out := filepath.Join(t.TempDir(), "t.jsonl")
			code := runQuiet("profile", "--base-url", srv.URL()+"/v1", "--model", sim.DefaultConfig().Model, "--output", out,
				"--concurrency", "3", "--requests", "12", "--warmup-requests", "2", "--input-tokens", "32", "--output-tokens", "8",
				"--vllm-metrics", "--vllm-metrics-interval", "0.2",
				"--vllm-spans-listen="+httpAddr, "--vllm-spans-grpc-listen="+grpcAddr, "--vllm-spans-drain", "1")
			if code != 0 {
				t.Fatalf("profile exit %d", code)
			}
			rep := reportMap(t, out)
			spans := dig(rep, "telemetry", "vllm", "spans")
			if dig(spans, "joined") != 12.0 || dig(spans, "unjoined_by_reason", "warmup_request") != 2.0 {
				t.Fatalf("spans block %v", spans)
			}
			var c any
			for _, v := range rep["cases"].(map[string]any) {
				c = v
			}
			if dig(c, "population", "server_evidence_coverage") != 1.0 {
				t.Fatalf("coverage %v", dig(c, "population", "server_evidence_coverage"))
			}
			if dig(c, "latency", "metrics", "server.queue") == nil {
				t.Fatal("no server.queue latency block")
			}
			if proto == sim.ProtocolGRPC {
				// The real vLLM span sample joins nothing of this run: 12 request spans of
				// another run, 4 start-up spans.
				fixture := filepath.Join("testdata", "q05_spans_sample.jsonl")
				more := reportMap(t, out, "--vllm-spans", fixture)
				u := dig(more, "telemetry", "vllm", "spans", "unjoined_by_reason")
				if dig(u, "request_not_in_run") != 12.0 || dig(u, "not_a_request_span") != 4.0 || dig(more, "telemetry", "vllm", "spans", "joined") != 12.0 {
					t.Fatalf("with the fixture: %v", dig(more, "telemetry", "vllm", "spans"))
				}
			}
			for id, cb := range dig(rep, "telemetry", "vllm", "cases").(map[string]any) {
				delta := dig(cb, "engines", "0", "counters", "request_success", "delta")
				if delta != 12.0 {
					t.Fatalf("case %s request_success delta %v, want 12 (%v)", id, delta, dig(cb, "engines", "0", "counters", "request_success"))
				}
			}
		})
	}
}

func TestProfileScrapesEngineRestartAndEngines(t *testing.T) {
	srv := startSim(t, func(c *sim.Config) { c.Engines = 2; c.Faults.RestartAt = 1500 * time.Millisecond })
	out := filepath.Join(t.TempDir(), "r.jsonl")
	runQuiet("profile", "--base-url", srv.URL()+"/v1", "--model", sim.DefaultConfig().Model, "--output", out,
		"--arrival", "fixed-rate", "--rate", "10", "--duration", "2.5", "--input-tokens", "32", "--output-tokens", "8",
		"--vllm-metrics", "--vllm-metrics-interval", "0.3", "--timeout", "5")
	rep := reportMap(t, out)
	for _, cb := range dig(rep, "telemetry", "vllm", "cases").(map[string]any) {
		reasons, _ := dig(cb, "reasons").([]any)
		found := false
		for _, r := range reasons {
			found = found || r == "engine_restart"
		}
		if !found {
			t.Fatalf("reasons %v, want engine_restart", reasons)
		}
		if engines, _ := dig(cb, "engines").(map[string]any); len(engines) != 2 {
			t.Fatalf("%d engine blocks, want 2", len(engines))
		}
	}
}

// TestSpansReceiverUnavailable: both listeners fail to bind — the run continues, the report
// says nothing about metrics that were never asked for, and server admission is unknown
// (null), not zero.
func TestSpansReceiverUnavailable(t *testing.T) {
	busy1, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy1.Close()
	busy2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy2.Close()
	srv := startSim(t, nil)
	out := filepath.Join(t.TempDir(), "u.jsonl")
	code := runQuiet("profile", "--base-url", srv.URL()+"/v1", "--model", sim.DefaultConfig().Model, "--output", out,
		"--requests", "3", "--input-tokens", "16", "--output-tokens", "4",
		"--vllm-spans-listen="+busy1.Addr().String(), "--vllm-spans-grpc-listen="+busy2.Addr().String(), "--vllm-spans-drain", "0")
	if code != 0 {
		t.Fatalf("exit %d: a bind failure must not stop the run", code)
	}
	rep := reportMap(t, out)
	for id, cb := range dig(rep, "telemetry", "vllm", "cases").(map[string]any) {
		if dig(cb, "state") != "not_collected" || len(dig(cb, "reasons").([]any)) != 0 {
			t.Fatalf("case %s: %v", id, cb)
		}
	}
	for _, c := range rep["cases"].(map[string]any) {
		pop := dig(c, "population").(map[string]any)
		if v, ok := pop["server_admitted"]; !ok || v != nil {
			t.Fatalf("server_admitted %v, want null", v)
		}
	}
	for _, bad := range []string{"--vllm-spans-listen=notaport", "--vllm-spans-listen=127.0.0.1:99999"} {
		if code := runQuiet("profile", "--base-url", srv.URL()+"/v1", "--model", "m", "--output", out+"2", bad); code != exitUsage {
			t.Fatalf("%s: exit %d, want 2", bad, code)
		}
	}
}
