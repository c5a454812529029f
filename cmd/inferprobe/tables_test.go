package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/internal/synth"
	"github.com/inferprobe/inferprobe/sim"
	"github.com/inferprobe/inferprobe/tables"
)

// synthArtifact writes internal/synth's deterministic run (spans included) to a file.
func synthArtifact(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "synth.jsonl")
	w, err := artifact.NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := (synth.Run{Requests: 40, Cases: 2, Seed: 1, Spans: true}).Write(w); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestTablesVerbWritesDirectory(t *testing.T) {
	path := synthArtifact(t)
	out := filepath.Join(t.TempDir(), "tables")
	code, stdout, stderr := runCLI(t, "tables", path, "--output", out)
	if code != 0 || !strings.Contains(stdout, "Tables saved to: "+out) {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	b, err := os.ReadFile(filepath.Join(out, tables.RequestMetricsFile))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	head := "Request Id,request_e2e_time,request_e2e_time_normalized,request_scheduling_delay,request_execution_time," +
		"request_execution_time_normalized,request_prefill_time,request_decode_time,request_decode_time_normalized," +
		"request_unaccounted_time,request_inter_arrival_delay,request_num_prompt_tokens,request_num_gen_tokens"
	if lines[0] != head {
		t.Fatalf("header %q", lines[0])
	}
	// 40 measured requests, each with an intended arrival or a completion: every one a row
	// but a case's first arrival when it did not complete; rows sorted by Request Id.
	if len(lines) < 39 || len(lines) > 41 {
		t.Errorf("%d rows, want one per measured request (40)", len(lines)-1)
	}
	for i := 2; i < len(lines); i++ {
		a, _, _ := strings.Cut(lines[i-1], ",")
		b, _, _ := strings.Cut(lines[i], ",")
		if a >= b {
			t.Fatalf("rows %d and %d out of order: %q, %q", i-1, i, a, b)
		}
	}
	for _, f := range []string{tables.ManifestFile, "request_plots/request_e2e_time.csv", "request_plots/request_unaccounted_time.csv",
		"request_plots/request_e2e_time.png", "request_plots/request_arrival_time_series.csv", tables.IndexFile, tables.TimelineFile} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	if page, _ := os.ReadFile(filepath.Join(out, tables.IndexFile)); !strings.Contains(string(page), "<pre>") ||
		strings.Contains(string(page), "could not be computed") {
		t.Error("index.html lacks the analyze summary")
	}
	// The same artifact gives the same bytes; a non-empty --output needs --overwrite.
	if code, _, stderr := runCLI(t, "tables", path, "--output", out); code != exitUsage || !strings.Contains(stderr, "not empty") {
		t.Errorf("non-empty --output: exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr := runCLI(t, "tables", path, "--output", out, "--overwrite"); code != 0 {
		t.Fatalf("--overwrite: exit %d, stderr %q", code, stderr)
	}
	if again, _ := os.ReadFile(filepath.Join(out, tables.RequestMetricsFile)); string(again) != string(b) {
		t.Error("rewriting the same artifact changed request_metrics.csv")
	}
}

func TestTablesVerbExitCodes(t *testing.T) {
	dir := t.TempDir()
	good := synthArtifact(t)
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	noRequests := filepath.Join(dir, "norequests.jsonl")
	if err := os.WriteFile(noRequests, []byte(`{"event_type":"infer.session","schema_version":1,"session_id":"s"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		code int
		err  string
	}{
		{"missing artifact", []string{filepath.Join(dir, "nope.jsonl"), "--output", filepath.Join(dir, "o1")}, exitBadInput, "no such file"},
		{"not an artifact", []string{file, "--output", filepath.Join(dir, "o2")}, exitBadInput, ""},
		{"no requests", []string{noRequests, "--output", filepath.Join(dir, "o3")}, exitBadInput, "no infer.request"},
		{"second artifact missing", []string{good, filepath.Join(dir, "nope.jsonl"), "--output", filepath.Join(dir, "o4")}, exitBadInput, "nope.jsonl"},
		{"no output", []string{good}, exitUsage, "--output"},
		{"output is a file", []string{good, "--output", file}, exitUsage, "not a directory"},
		{"non-empty output", []string{good, "--output", dir}, exitUsage, "not empty"},
		{"no artifact", []string{"--output", filepath.Join(dir, "o5")}, exitUsage, ""},
		{"empty output", []string{good, "--output", empty}, 0, ""},
	}
	for _, c := range cases {
		code, _, stderr := runCLI(t, append([]string{"tables"}, c.args...)...)
		if code != c.code || !strings.Contains(stderr, c.err) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d mentioning %q", c.name, code, stderr, c.code, c.err)
		}
	}
	for _, o := range []string{"o1", "o2", "o3", "o4", "o5"} {
		if _, err := os.Stat(filepath.Join(dir, o)); !os.IsNotExist(err) {
			t.Errorf("a refused run created %s", o)
		}
	}
}

// TestTablesProfileFlag: profile --tables writes the run's tables beside its artifact; a
// non-empty --tables directory is refused before anything is sent or written.
func TestTablesProfileFlag(t *testing.T) {
	srv := startSim(t, nil)
	dir := t.TempDir()
	out, tdir := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "tables")
	args := func(output string) []string {
		return []string{"profile", "--base-url", srv.URL() + "/v1", "--model", sim.DefaultConfig().Model, "--output", output,
			"--concurrency", "2", "--requests", "6", "--input-tokens", "32", "--output-tokens", "4", "--warmup-requests", "1",
			"--tables", tdir, "--vllm-metrics", "--vllm-metrics-interval", "0.1"}
	}
	if code := runQuiet(args(out)...); code != 0 {
		t.Fatalf("exit %d", code)
	}
	b, err := os.ReadFile(filepath.Join(tdir, tables.RequestMetricsFile))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if !strings.HasPrefix(lines[0], "Request Id,request_e2e_time,request_e2e_time_normalized,") || len(lines) != 7 {
		t.Errorf("request_metrics.csv: header %q, %d rows (want 6 measured)", lines[0], len(lines)-1)
	}
	for _, l := range lines[1:] {
		if !strings.Contains(l, "_measured_") {
			t.Errorf("row of a request not measured: %q", l)
		}
	}
	// The sim's /metrics scrapes give per-engine series and CDFs; the page has the run's
	// text report (analysed from the closed artifact) and the timeline names the engine.
	series, err := os.ReadFile(filepath.Join(tdir, tables.WorkerPlotsDir, "worker_queue_depth_waiting_time_series.csv"))
	if err != nil || !strings.HasPrefix(string(series), "Time (s),queue_depth_waiting,worker_id\n") || strings.Count(string(series), "\n") < 3 {
		t.Errorf("waiting series %q: %v", series, err)
	}
	cdf, err := os.ReadFile(filepath.Join(tdir, tables.WorkerPlotsDir, "worker_kv_page_utilization_ratio.csv"))
	if err != nil || strings.Count(string(cdf), "\n")%tables.WorkerCDFRows != 1 {
		t.Errorf("kv CDF: %d lines, %v", strings.Count(string(cdf), "\n"), err)
	}
	page, err := os.ReadFile(filepath.Join(tdir, tables.IndexFile))
	if err != nil || !strings.Contains(string(page), "<pre>") || strings.Contains(string(page), "could not be computed") ||
		!strings.Contains(string(page), "<h2>workers</h2>") {
		t.Errorf("index.html: %v", err)
	}
	if tl, err := os.ReadFile(filepath.Join(tdir, tables.TimelineFile)); err != nil || !strings.Contains(string(tl), `"name":"engine `) {
		t.Errorf("timeline.json: %v", err)
	}
	out2 := filepath.Join(dir, "b.jsonl")
	if code, _, stderr := runCLI(t, args(out2)...); code != exitUsage || !strings.Contains(stderr, "--tables") {
		t.Errorf("non-empty --tables: exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(out2); !os.IsNotExist(err) {
		t.Errorf("a refused profile wrote its artifact: %v", err)
	}
}

// TestTablesRefusesMixedShards: tables of a directory holding shards of two runs is exit 5
// before anything is written (as analyze refuses them); the two shards of one run are fine.
func TestTablesRefusesMixedShards(t *testing.T) {
	srv := startSim(t, nil)
	dir := t.TempDir()
	shard := func(k int, run, out string) {
		if code, stdout, stderr := runCLI(t, "profile", "--base-url", srv.URL()+"/v1", "--model", sim.DefaultConfig().Model,
			"--concurrency", "2", "--requests", "4", "--input-tokens", "16", "--output-tokens", "2",
			"--shards", "2", "--shard", fmt.Sprint(k), "--run-id", run, "--output", out); code != 0 {
			t.Fatalf("shard %d of %s: exit %d\n%s\n%s", k, run, code, stdout, stderr)
		}
	}
	mixed, one := filepath.Join(dir, "mixed"), filepath.Join(dir, "one")
	shard(0, "run-a", filepath.Join(mixed, "shard-0.jsonl"))
	shard(1, "run-b", filepath.Join(mixed, "shard-1.jsonl"))
	shard(0, "run-a", filepath.Join(one, "shard-0.jsonl"))
	shard(1, "run-a", filepath.Join(one, "shard-1.jsonl"))
	out := filepath.Join(dir, "t-mixed")
	code, _, stderr := runCLI(t, "tables", mixed, "--output", out)
	if code != exitBadInput || !strings.Contains(stderr, `is of run "run-b"`) {
		t.Fatalf("mixed: exit %d %q", code, stderr)
	}
	if entries, _ := os.ReadDir(out); len(entries) != 0 {
		t.Fatalf("mixed shards wrote %d entries", len(entries))
	}
	if code, _, stderr := runCLI(t, "tables", one, "--output", filepath.Join(dir, "t-one")); code != 0 {
		t.Fatalf("one run: exit %d %q", code, stderr)
	}
}

// TestAnalyzeOneShardAlone: a shard's own artifact, analysed alone, is a valid cohort of its
// share of the indexes (open and closed loop).
func TestAnalyzeOneShardAlone(t *testing.T) {
	srv := startSim(t, nil)
	for _, load := range [][]string{{"--arrival", "poisson", "--rate", "40", "--requests", "12"}, {"--concurrency", "3", "--requests", "9"}} {
		out := filepath.Join(t.TempDir(), "shard-1.jsonl")
		args := append([]string{"profile", "--base-url", srv.URL() + "/v1", "--model", sim.DefaultConfig().Model,
			"--input-tokens", "16", "--output-tokens", "2", "--shards", "2", "--shard", "1", "--run-id", "r", "--output", out}, load...)
		if code, stdout, stderr := runCLI(t, args...); code != 0 {
			t.Fatalf("%v: exit %d\n%s\n%s", load, code, stdout, stderr)
		}
		code, stdout, _ := runCLI(t, "analyze", out)
		if code != 0 || strings.Contains(stdout, "cohort invalid") {
			t.Fatalf("%v: analyze exit %d\n%s", load, code, stdout)
		}
	}
}
