package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/sim"
)

// TestProfileTraceImportMatchesGroundTruth: profile --trace vllm-torch --trace-dir against
// the sim (two engines, two cases) imports every worker trace at the end of the run; the
// infer.iteration records of each trace equal the sim's ground truth beside it step for
// step (interval, requests, tokens exactly; GPU busy within 1 µs), and analyze prints each
// case's gpu line over the imported steps.
func TestProfileTraceImportMatchesGroundTruth(t *testing.T) {
	shortTraceSettle(t)
	dir := t.TempDir()
	srv := startSim(t, func(c *sim.Config) { c.ProfilerDir, c.Engines = dir, 2 })
	out := filepath.Join(t.TempDir(), "a.jsonl")
	code, stdout, stderr := runCLI(t, "profile", "--base-url", srv.URL()+"/v1", "--model", sim.DefaultConfig().Model, "--output", out,
		"--concurrency", "2,4", "--requests", "8", "--input-tokens", "64", "--output-tokens", "6",
		"--trace", "vllm-torch", "--trace-dir", dir, "--trace-device-uuid", "0=GPU-aaa", "--trace-device-uuid", "1=GPU-bbb")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	steps := map[string][]artifact.Iteration{} // trace file → its iterations, times exact
	files := 0
	for _, l := range rawLines(t, out) {
		var head struct {
			EventType  string            `json:"event_type"`
			TraceFiles []json.RawMessage `json:"trace_files"`
		}
		if err := json.Unmarshal(l, &head); err != nil {
			t.Fatal(err)
		}
		switch head.EventType {
		case "infer.iteration":
			var it artifact.Iteration
			if err := json.Unmarshal(l, &it); err != nil {
				t.Fatal(err)
			}
			if it.Context.Rank == nil || *it.Context.Rank < 0 || *it.Context.Rank > 1 {
				t.Fatalf("iteration context rank %v", it.Context.Rank)
			}
			if want := []string{"GPU-aaa", "GPU-bbb"}[*it.Context.Rank]; it.Context.DeviceUUID == nil || *it.Context.DeviceUUID != want {
				t.Fatalf("rank %d: device_uuid %v, want %s", *it.Context.Rank, it.Context.DeviceUUID, want)
			}
			steps[it.TraceFile] = append(steps[it.TraceFile], it)
		case "infer.trace_window":
			files += len(head.TraceFiles)
		}
	}
	if files != 4 || len(steps) != 4 {
		t.Fatalf("%d trace files in the windows, %d imported", files, len(steps))
	}
	total := 0
	for file, got := range steps {
		truth := groundTruth(t, strings.TrimSuffix(file, ".pt.trace.json.gz")+".steps.jsonl")
		sort.Slice(got, func(i, j int) bool { return got[i].StartNS < got[j].StartNS })
		if len(got) != len(truth) || len(got) == 0 {
			t.Fatalf("%s: %d steps imported, %d in the ground truth", file, len(got), len(truth))
		}
		for i, g := range got {
			w := truth[i]
			deref := func(p *int64) int64 {
				if p == nil {
					return -1
				}
				return *p
			}
			for k, v := range map[string][2]int64{"start_ns": {g.StartNS, w.StartNs}, "end_ns": {g.EndNS, w.EndNs},
				"context_requests": {deref(g.ContextRequests), int64(w.ContextRequests)}, "context_tokens": {deref(g.ContextTokens), int64(w.ContextTokens)},
				"generation_requests": {deref(g.GenRequests), int64(w.GenerationRequests)}, "generation_tokens": {deref(g.GenTokens), int64(w.GenerationTokens)}} {
				if v[0] != v[1] {
					t.Fatalf("%s step %d: %s = %d, ground truth %d", file, i, k, v[0], v[1])
				}
			}
			if d := g.GPUBusyNS - w.GPUBusyNs; d > 1000 || d < -1000 {
				t.Fatalf("%s step %d: gpu_busy_ns %d, ground truth %d", file, i, g.GPUBusyNS, w.GPUBusyNs)
			}
		}
		total += len(got)
	}
	code, stdout, _ = runCLI(t, "analyze", out)
	if code != 0 || strings.Count(stdout, "  gpu: ") != 2 || !strings.Contains(stdout, "steps on rank 0,1 over") {
		t.Fatalf("analyze exit %d (%d steps imported):\n%s", code, total, stdout)
	}
}

// groundTruth reads the sim's .steps.jsonl, sorted by start. It decodes into
// sim.StepTruth so that Unix-nanosecond times stay exact (a float64 near 1.8e18 is only
// good to 256 ns, enough to move a 4-decimal rounding of a step's wall time).
func groundTruth(t *testing.T, path string) []sim.StepTruth {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []sim.StepTruth
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var s sim.StepTruth
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].StartNs < out[j].StartNs })
	return out
}

func TestTraceImportFlags(t *testing.T) {
	base := []string{"profile", "--base-url", "http://127.0.0.1:1/v1", "--model", "m", "--output", filepath.Join(t.TempDir(), "a.jsonl")}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--trace-max-bytes", "10"}, "--trace-max-bytes needs --trace"},
		{[]string{"--trace-device-uuid", "0=GPU-1"}, "--trace-device-uuid needs --trace"},
		{[]string{"--trace", "vllm-torch", "--trace-max-bytes", "0"}, "--trace-max-bytes must be at least 1"},
		{[]string{"--trace", "vllm-torch", "--trace-detail", "op"}, "--trace-detail must be launch or kernel"},
		{[]string{"--trace", "vllm-torch", "--trace-device-uuid", "GPU-1"}, "want RANK=UUID"},
		{[]string{"--trace", "vllm-torch", "--trace-device-uuid", "x=GPU-1"}, "the rank must be an integer"},
		{[]string{"--trace", "vllm-torch", "--trace-device-uuid", "0=GPU 1"}, "without spaces"},
		{[]string{"--trace", "vllm-torch", "--trace-device-uuid", "0=a", "--trace-device-uuid", "0=b"}, "rank 0 given twice"},
	} {
		code, _, stderr := runCLI(t, append(append([]string{}, base...), c.args...)...)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q", c.args, code, stderr)
		}
	}
}

// TestProfileTraceAfterRunning: with --trace-after-running 3 each window opens once the
// sim runs three requests (four workers keep it there), and records the trigger; with a
// threshold the closed loop never reaches it, the window is not_triggered and no file
// is written.
func TestProfileTraceAfterRunning(t *testing.T) {
	shortTraceSettle(t)
	for _, c := range []struct {
		threshold, outcome, reason string
		files                      int
	}{{"3", "acknowledged", "phase_end", 1}, {"50", "not_triggered", "not_triggered", 0}} {
		dir := t.TempDir()
		srv := startSim(t, func(s *sim.Config) { s.ProfilerDir = dir })
		out := filepath.Join(t.TempDir(), "a.jsonl")
		code, stdout, stderr := runCLI(t, "profile", "--base-url", srv.URL()+"/v1", "--model", sim.DefaultConfig().Model, "--output", out,
			"--concurrency", "4", "--requests", "40", "--input-tokens", "16", "--output-tokens", "24",
			"--trace", "vllm-torch", "--trace-dir", dir, "--trace-after-running", c.threshold)
		if code != 0 {
			t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
		}
		var ws []map[string]any
		for _, l := range readLines(t, out) {
			if l["event_type"] == "infer.trace_window" {
				ws = append(ws, l)
			}
		}
		if len(ws) != 1 {
			t.Fatalf("threshold %s: %d windows", c.threshold, len(ws))
		}
		w := ws[0]
		if w["trigger"] != "num_requests_running" || w["trigger_threshold"] != mustFloat(c.threshold) || w["start_outcome"] != c.outcome ||
			w["stop_reason"] != c.reason || len(w["trace_files"].([]any)) != c.files {
			t.Fatalf("threshold %s: window %v", c.threshold, w)
		}
		if c.files > 0 && (w["trigger_value"].(float64) < 3 || w["triggered_at_ns"].(float64) < w["requested_at_ns"].(float64)) {
			t.Fatalf("trigger %v at %v", w["trigger_value"], w["triggered_at_ns"])
		}
	}
}

func mustFloat(s string) float64 {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		panic(err)
	}
	return v
}

// TestImportTraceAfterProfile: a run that only listed its traces (--trace-no-import), then
// import-trace on its artifact: the steps are on the client's clock (the profiler's control
// URL is loopback) and analyze prints the gpu line; a second import is skipped.
func TestImportTraceAfterProfile(t *testing.T) {
	shortTraceSettle(t)
	dir := t.TempDir()
	srv := startSim(t, func(c *sim.Config) { c.ProfilerDir = dir })
	out := filepath.Join(t.TempDir(), "a.jsonl")
	if code, stdout, stderr := runCLI(t, "profile", "--base-url", srv.URL()+"/v1", "--model", sim.DefaultConfig().Model, "--output", out,
		"--concurrency", "2", "--requests", "6", "--input-tokens", "32", "--output-tokens", "4",
		"--trace", "vllm-torch", "--trace-dir", dir, "--trace-no-import"); code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	var files []string
	for _, l := range readLines(t, out) {
		if l["event_type"] == "infer.iteration" {
			t.Fatal("--trace-no-import imported")
		}
		if l["event_type"] == "infer.trace_window" {
			for _, f := range l["trace_files"].([]any) {
				files = append(files, f.(map[string]any)["path"].(string))
			}
		}
	}
	if len(files) != 1 {
		t.Fatalf("files %v", files)
	}
	if code, stdout, stderr := runCLI(t, append([]string{"import-trace", out}, files...)...); code != 0 {
		t.Fatalf("import exit %d\n%s\n%s", code, stdout, stderr)
	}
	code, stdout, _ := runCLI(t, "analyze", out)
	if code != 0 || !strings.Contains(stdout, "  gpu: ") || !strings.Contains(stdout, "steps on rank 0 over") {
		t.Fatalf("analyze exit %d:\n%s", code, stdout)
	}
	if code, stdout, _ := runCLI(t, append([]string{"import-trace", out}, files...)...); code != 0 || !strings.Contains(stdout, "already imported") {
		t.Fatalf("re-import exit %d:\n%s", code, stdout)
	}
}
