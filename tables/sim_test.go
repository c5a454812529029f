package tables_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/internal/testkit"
	"github.com/inferprobe/inferprobe/loadgen"
	"github.com/inferprobe/inferprobe/loadgen/prompt"
	"github.com/inferprobe/inferprobe/run"
	"github.com/inferprobe/inferprobe/sim"
	"github.com/inferprobe/inferprobe/tables"
)

// TestTablesSimRunUnaccounted: a run against the simulated engine, which exports its
// llm_request spans over gRPC to the run's receiver, with the Sink among the run's sinks:
// every measured request joins its span and has its span columns, and its unaccounted time (client e2e minus the
// span's queue, prefill and decode) is not negative.
func TestTablesSimRunUnaccounted(t *testing.T) {
	grpcAddr := testkit.FreeAddr(t)
	srv := testkit.StartSim(t, func(c *sim.Config) {
		c.Seed = 7
		c.OTLPProtocol = sim.ProtocolGRPC
		c.OTLPBatchDelay = 100 * time.Millisecond
		c.OTLPTracesEndpoint = grpcAddr
	})
	cfg := &loadgen.Config{
		Endpoint: srv.URL() + "/v1/chat/completions", Model: sim.DefaultConfig().Model, RunID: "tables-sim",
		Timeout: 10 * time.Second, Stream: true, StreamUsage: true,
		Concurrency: []int{3}, InputTokens: []int{32}, OutputTokens: []int{8}, Requests: 12, WarmupRequests: 2,
	}
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	tok, err := prompt.TiktokenCounter("cl100k_base")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "tables")
	res := run.New(run.Spec{Workload: cfg, Tokenizer: tok, Output: filepath.Join(t.TempDir(), "a.jsonl"),
		Receiver: &run.Receiver{GRPCListen: grpcAddr}, SpansDrain: 2 * time.Second,
		Sinks: []artifact.Sink{tables.New(dir)}}).Execute(context.Background())
	if res.Err != nil {
		t.Fatalf("run: %v", res.Err)
	}
	b, err := os.ReadFile(filepath.Join(dir, tables.RequestMetricsFile))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	head := strings.Split(lines[0], ",")
	col := map[string]int{}
	for i, h := range head {
		col[h] = i
	}
	ua, ok := col["request_unaccounted_time"]
	if !ok {
		t.Fatalf("no request_unaccounted_time column: %q", lines[0])
	}
	if len(lines)-1 != 12 {
		t.Errorf("%d rows, want 12 (measured requests only)", len(lines)-1)
	}
	joined := 0
	for _, l := range lines[1:] {
		cells := strings.Split(l, ",")
		if cells[col["request_scheduling_delay"]] == "" {
			continue
		}
		joined++
		v, err := strconv.ParseFloat(cells[ua], 64)
		if err != nil || v < 0 {
			t.Errorf("%s: unaccounted %q (%v), want ≥ 0", cells[0], cells[ua], err)
		}
		for _, name := range []string{"request_prefill_time", "request_decode_time", "request_execution_time", "request_num_gen_tokens"} {
			if cells[col[name]] == "" {
				t.Errorf("%s: joined request without %s", cells[0], name)
			}
		}
	}
	var m tables.Manifest
	mb, err := os.ReadFile(filepath.Join(dir, tables.ManifestFile))
	if err != nil || json.Unmarshal(mb, &m) != nil {
		t.Fatalf("manifest: %v", err)
	}
	if joined != 12 || m.SpanJoin.Joined != joined {
		t.Errorf("%d rows with span columns, manifest joined %d; want every measured request (12)", joined, m.SpanJoin.Joined)
	}
}
