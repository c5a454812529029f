package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/sim"
)

func shortTraceSettle(t *testing.T) {
	old := traceSettle
	traceSettle = 50 * time.Millisecond
	t.Cleanup(func() { traceSettle = old })
}

// TestProfileTraceWindows: profile --trace opens one window per case around the measured
// phase; each infer.trace_window lists the sim's new worker trace.
func TestProfileTraceWindows(t *testing.T) {
	shortTraceSettle(t)
	dir := t.TempDir()
	srv := startSim(t, func(c *sim.Config) { c.ProfilerDir = dir })
	out := filepath.Join(t.TempDir(), "a.jsonl")
	code := runQuiet("profile", "--base-url", srv.URL()+"/v1", "--model", sim.DefaultConfig().Model, "--output", out,
		"--concurrency", "1,2", "--requests", "3", "--input-tokens", "16", "--output-tokens", "4", "--warmup-requests", "1",
		"--trace", "vllm-torch", "--trace-dir", dir, "--trace-max-seconds", "60")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var ws []map[string]any
	for _, l := range readLines(t, out) {
		if l["event_type"] == "infer.trace_window" {
			ws = append(ws, l)
		}
	}
	if len(ws) != 2 {
		t.Fatalf("%d trace windows", len(ws))
	}
	for i, w := range ws {
		files, _ := w["trace_files"].([]any)
		if w["case_id"] != []string{"c1_in16_out4", "c2_in16_out4"}[i] || w["phase"] != "measured" || w["start_outcome"] != "acknowledged" ||
			w["stop_reason"] != "phase_end" || w["control_url"] != srv.URL()+"/start_profile" || w["start_status"] != float64(200) ||
			w["stop_status"] != float64(200) || w["profiler_may_be_running"] != false || len(files) != 1 {
			t.Fatalf("window %d: %v", i, w)
		}
		f := files[0].(map[string]any)
		if p, _ := f["path"].(string); !strings.HasPrefix(filepath.Base(p), "rank0.") || f["rank"] != float64(0) || f["bytes"].(float64) <= 0 {
			t.Fatalf("trace file %v", f)
		}
	}
}

// TestProfileTraceUnknownStart: the sim's --fault-profile-start 500 makes each start
// unknown; the window is stopped at once and the run goes on.
func TestProfileTraceUnknownStart(t *testing.T) {
	shortTraceSettle(t)
	dir := t.TempDir()
	srv := startSim(t, func(c *sim.Config) { c.ProfilerDir, c.Faults.ProfileStart = dir, sim.ProfileStart500 })
	out := filepath.Join(t.TempDir(), "a.jsonl")
	code := runQuiet("profile", "--base-url", srv.URL()+"/v1", "--model", sim.DefaultConfig().Model, "--output", out,
		"--requests", "2", "--input-tokens", "16", "--output-tokens", "4", "--trace", "vllm-torch", "--trace-dir", dir)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	n := 0
	for _, l := range readLines(t, out) {
		if l["event_type"] == "infer.trace_window" {
			n++
			if l["start_outcome"] != "unknown" || l["stop_reason"] != "start_unknown" || l["start_status"] != float64(500) || l["start_error"] != "HTTP 500" {
				t.Fatalf("window %v", l)
			}
		}
	}
	if n != 1 {
		t.Fatalf("%d windows", n)
	}
}

// TestProfileTraceRejectedWithoutProfiler: a server without profiler routes (404) rejects
// the start; nothing is stopped.
func TestProfileTraceRejectedWithoutProfiler(t *testing.T) {
	srv := startSim(t, nil)
	out := filepath.Join(t.TempDir(), "a.jsonl")
	if code := runQuiet("profile", "--base-url", srv.URL()+"/v1", "--model", sim.DefaultConfig().Model, "--output", out,
		"--requests", "2", "--input-tokens", "16", "--output-tokens", "4", "--trace", "vllm-torch"); code != 0 {
		t.Fatalf("exit %d", code)
	}
	n := 0
	for _, l := range readLines(t, out) {
		if l["event_type"] != "infer.trace_window" {
			continue
		}
		n++
		if l["start_outcome"] != "rejected" || l["stop_reason"] != "start_rejected" || l["start_status"] != float64(404) || l["stop_status"] != nil || l["stop_requested_at_ns"] != nil {
			t.Fatalf("window %v", l)
		}
	}
	if n != 1 {
		t.Fatalf("%d windows", n)
	}
}

func TestProfileTraceUsageErrors(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "a.jsonl")
	file := filepath.Join(dir, "f")
	_ = os.WriteFile(file, nil, 0o644)
	base := []string{"profile", "--base-url", "http://127.0.0.1:1/v1", "--model", "m", "--output", out}
	for _, extra := range [][]string{
		{"--trace-dir", dir},
		{"--trace-max-seconds", "5"},
		{"--trace-phase", "warmup"},
		{"--trace-control-url", "http://h:1"},
		{"--trace", "nsys"},
		{"--trace", "vllm-torch", "--trace-phase", "cooldown"},
		{"--trace", "vllm-torch", "--trace-phase", "warmup"}, // no warmup requests
		{"--trace", "vllm-torch", "--trace-max-seconds", "0"},
		{"--trace", "vllm-torch", "--trace-max-seconds", "NaN"},
		{"--trace", "vllm-torch", "--trace-dir", file},
		{"--trace", "vllm-torch", "--trace-dir", filepath.Join(dir, "missing")},
		{"--trace", "vllm-torch", "--trace-control-url", "h:1"},
	} {
		if code := runQuiet(append(append([]string{}, base...), extra...)...); code != exitUsage {
			t.Errorf("%v: exit %d, want 2", extra, code)
		}
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("%v wrote the artifact", extra)
		}
	}
}
