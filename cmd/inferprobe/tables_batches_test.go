package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/sim"
	"github.com/inferprobe/inferprobe/tables"
)

// csvRows reads a CSV the tables package wrote (no quoted fields in these files) as maps
// from the header's names.
func csvRows(t *testing.T, path string) []map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	head := strings.Split(lines[0], ",")
	var out []map[string]string
	for _, l := range lines[1:] {
		cells := strings.Split(l, ",")
		if len(cells) != len(head) {
			t.Fatalf("%s: row %q has %d cells, header %d", path, l, len(cells), len(head))
		}
		m := map[string]string{}
		for i, h := range head {
			m[h] = cells[i]
		}
		out = append(out, m)
	}
	return out
}

// TestProfileTablesBatchesMatchGroundTruth: profile --trace vllm-torch --tables against the
// sim (two engines, two cases, spans over gRPC, /metrics scraped) writes
// worker_batch_metrics.csv with one row per ground-truth step of each rank (the sim's
// .steps.jsonl beside each trace), in start order: requests and tokens exactly, the
// execution time the ground truth's gpu_busy_ns at %.4f, the wall time its host interval;
// the KV column is filled from the scrapes; every per-batch file exists; every request
// that joined its span has request_unaccounted_time ≥ 0; and `inferprobe tables` of the
// artifact writes the same worker_batch_metrics.csv.
func TestProfileTablesBatchesMatchGroundTruth(t *testing.T) {
	shortTraceSettle(t)
	dir, grpcAddr := t.TempDir(), freeAddr(t)
	srv := startSim(t, func(c *sim.Config) {
		c.ProfilerDir, c.Engines = dir, 2
		c.OTLPProtocol, c.OTLPBatchDelay, c.OTLPTracesEndpoint = sim.ProtocolGRPC, 100*time.Millisecond, grpcAddr
	})
	out, tdir := filepath.Join(t.TempDir(), "a.jsonl"), filepath.Join(t.TempDir(), "tables")
	code, stdout, stderr := runCLI(t, "profile", "--base-url", srv.URL()+"/v1", "--model", sim.DefaultConfig().Model, "--output", out,
		"--concurrency", "2,4", "--requests", "8", "--input-tokens", "64", "--output-tokens", "6",
		"--vllm-metrics", "--vllm-metrics-interval", "0.1", "--vllm-spans-grpc-listen="+grpcAddr, "--vllm-spans-drain", "1",
		"--trace", "vllm-torch", "--trace-dir", dir, "--tables", tdir)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	truth := map[string][]sim.StepTruth{} // rank → its steps over every window, by start
	files, _ := filepath.Glob(filepath.Join(dir, "*.steps.jsonl"))
	for _, f := range files {
		for _, s := range groundTruth(t, f) {
			r := strconv.Itoa(s.Rank)
			truth[r] = append(truth[r], s)
		}
	}
	if len(files) != 4 || len(truth) != 2 {
		t.Fatalf("%d ground-truth files, ranks %d", len(files), len(truth))
	}
	rows := csvRows(t, filepath.Join(tdir, tables.WorkerBatchMetricsFile))
	got := map[string][]map[string]string{}
	for _, r := range rows {
		got[r["worker_id"]] = append(got[r["worker_id"]], r)
	}
	for rank, steps := range truth {
		sort.SliceStable(steps, func(i, j int) bool { return steps[i].StartNs < steps[j].StartNs })
		if len(got[rank]) != len(steps) {
			t.Fatalf("rank %s: %d rows, %d ground-truth steps", rank, len(got[rank]), len(steps))
		}
		for i, w := range steps {
			g := got[rank][i]
			want := map[string]string{
				"batch_id":             strconv.Itoa(i),
				"batch_prompt_len":     strconv.Itoa(w.ContextTokens),
				"batch_gen_len":        strconv.Itoa(w.GenerationTokens),
				"batch_num_tokens":     strconv.Itoa(w.ContextTokens + w.GenerationTokens),
				"batch_size":           strconv.Itoa(w.ContextRequests + w.GenerationRequests),
				"batch_execution_time": strconv.FormatFloat(float64(w.GPUBusyNs)/1e9, 'f', 4, 64),
				"batch_wall_time":      strconv.FormatFloat(float64(w.EndNs-w.StartNs)/1e9, 'f', 4, 64),
			}
			for k, v := range want {
				if g[k] != v {
					t.Fatalf("rank %s step %d: %s = %q, ground truth %q (%+v)", rank, i, k, g[k], v, w)
				}
			}
			if g["kv_page_utilization_ratio"] == "" || g["batch_phase"] == "unknown" {
				t.Errorf("rank %s step %d: kv %q phase %q", rank, i, g["kv_page_utilization_ratio"], g["batch_phase"])
			}
		}
	}
	for _, f := range []string{tables.WorkerTimelineFile, tables.WorkerStateTimeFile, tables.WorkerUtilizationFile,
		tables.WorkerIdleSummaryFile, tables.WorkerPhaseTotalsFile, "worker_plots/worker_batch_execution_time.csv",
		"worker_plots/worker_batch_execution_time.png", "worker_timeline.png"} {
		if _, err := os.Stat(filepath.Join(tdir, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	joined := 0
	for _, r := range csvRows(t, filepath.Join(tdir, tables.RequestMetricsFile)) {
		if r["request_scheduling_delay"] == "" {
			continue
		}
		joined++
		if v, err := strconv.ParseFloat(r["request_unaccounted_time"], 64); err != nil || v < 0 {
			t.Errorf("%s: request_unaccounted_time %q", r["Request Id"], r["request_unaccounted_time"])
		}
	}
	var m tables.Manifest
	if b, err := os.ReadFile(filepath.Join(tdir, tables.ManifestFile)); err != nil || json.Unmarshal(b, &m) != nil {
		t.Fatalf("manifest: %v", err)
	}
	if joined != 16 || m.SpanJoin.Joined != 16 || !m.Batches.Written || m.Batches.Steps != len(rows) {
		t.Errorf("%d requests joined (manifest %d), want 16; batches %+v", joined, m.SpanJoin.Joined, m.Batches)
	}
	off := filepath.Join(t.TempDir(), "offline")
	if code, _, stderr := runCLI(t, "tables", out, "--output", off); code != 0 {
		t.Fatalf("tables exit %d: %s", code, stderr)
	}
	a, _ := os.ReadFile(filepath.Join(tdir, tables.WorkerBatchMetricsFile))
	b, _ := os.ReadFile(filepath.Join(off, tables.WorkerBatchMetricsFile))
	if string(a) != string(b) {
		t.Errorf("offline worker_batch_metrics.csv differs from the run's:\n%s\n---\n%s", b, a)
	}
}
