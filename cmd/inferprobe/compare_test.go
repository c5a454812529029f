package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/internal/synth"
)

func writeSynthRun(t *testing.T, dir, name string, run synth.Run) string {
	t.Helper()
	path := filepath.Join(dir, name)
	w, err := artifact.NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Write(w); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// The gate's exit codes: 3 when a --fail-on regression is significant, 0 when it is not or
// the runs do not differ, 2 for an unknown metric or percentile (before anything is read),
// 5 for a missing artifact or runs of different workloads.
func TestCompareExitCodes(t *testing.T) {
	dir := t.TempDir()
	base := writeSynthRun(t, dir, "base.jsonl", synth.Run{Requests: 2000, Cases: 1, Seed: 3})
	slow := writeSynthRun(t, dir, "slow.jsonl", synth.Run{Requests: 2000, Cases: 1, Seed: 3, TTFTScale: 1.5})
	other := writeSynthRun(t, dir, "other.jsonl", synth.Run{Requests: 2000, Cases: 1, Seed: 4})
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"fires", []string{base, slow, "--fail-on", "client.ttft.p90:+10%"}, exitFindings, "REGRESSION", ""},
		{"holds", []string{base, slow, "--fail-on", "client.ttft.p90:+80%"}, exitOK, "no significant regression", ""},
		{"same run", []string{base, base, "--fail-on", "ttft.p50:+1%", "--fail-on", "success:-1%"}, exitOK, "No gate fired", ""},
		{"json fires", []string{base, slow, "--fail-on", "ttft.p50:+10%", "--format", "json"}, exitFindings, `"fired": true`, "A --fail-on gate fired"},
		{"unknown metric", []string{base, slow, "--fail-on", "client.ttfb.p99:+5%"}, exitUsage, "", "unknown metric client.ttfb"},
		{"unknown percentile", []string{base, slow, "--fail-on", "client.ttft.p100:+5%"}, exitUsage, "", "unknown percentile p100"},
		{"improvement is no gate", []string{base, slow, "--fail-on", "client.ttft.p99:-5%"}, exitUsage, "", "is not a regression"},
		{"bad confidence", []string{base, slow, "--confidence", "1.5"}, exitUsage, "", "confidence"},
		{"bad format", []string{base, slow, "--format", "csv"}, exitUsage, "", "--format"},
		{"missing", []string{base, filepath.Join(dir, "nope.jsonl")}, exitBadInput, "", "candidate"},
		{"other workload", []string{base, other}, exitBadInput, "", "seed"},
		{"allowed", []string{base, other, "--allow-digest-mismatch"}, exitOK, "Warning: workload digests", ""},
		{"one metric", []string{base, slow, "--metric", "ttft", "--fail-on", "ttft.p50:+10%"}, exitFindings, "Confidence 95%: 6 tests", ""},
		{"unknown --metric", []string{base, slow, "--metric", "itl"}, exitUsage, "", "unknown metric client.itl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, append([]string{"compare"}, tc.args...)...)
			if code != tc.code || !strings.Contains(stdout, tc.stdout) || !strings.Contains(stderr, tc.stderr) {
				t.Fatalf("exit %d (want %d)\nstdout:\n%s\nstderr:\n%s", code, tc.code, stdout, stderr)
			}
		})
	}
}

// --output writes the HTML page; cost flags price both runs (one value each side).
func TestCompareHTMLAndCost(t *testing.T) {
	dir := t.TempDir()
	base := writeSynthRun(t, dir, "base.jsonl", synth.Run{Requests: 400, Cases: 1, Seed: 3})
	page := filepath.Join(dir, "cmp.html")
	code, stdout, stderr := runCLI(t, "compare", base, base, "--format", "html", "--output", page)
	if code != exitOK || !strings.Contains(stdout, "Comparison saved to: "+page) {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	data, err := os.ReadFile(page)
	if err != nil || !strings.Contains(string(data), "<img alt=\"CDFs of client.ttft\"") {
		t.Fatalf("page %v:\n%.300s", err, data)
	}
	code, stdout, _ = runCLI(t, "compare", base, base, "--format", "json", "--cost-per-hour", "2,4")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	var res struct {
		Cases []struct {
			Rates struct {
				USD struct{ Base, Candidate, Relative *float64 } `json:"usd_per_million_output_tokens"`
			} `json:"rates"`
		} `json:"cases"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatal(err)
	}
	usd := res.Cases[0].Rates.USD
	if usd.Base == nil || usd.Candidate == nil || *usd.Relative < 0.999 || *usd.Relative > 1.001 {
		t.Fatalf("cost %+v", usd)
	}
	if code, _, stderr := runCLI(t, "compare", base, base, "--cost-per-hour", "1,2,3"); code != exitUsage || !strings.Contains(stderr, "--cost-per-hour") {
		t.Fatalf("exit %d %s", code, stderr)
	}
}

// analyze --format vllm-bench and llmd-report write one object per case; --cost-per-hour
// adds the cost line; bad cost flags are exit 2.
func TestAnalyzeExportsAndCost(t *testing.T) {
	dir := t.TempDir()
	path := writeSynthRun(t, dir, "run.jsonl", synth.Run{Requests: 300, Cases: 2, Seed: 3})
	code, stdout, stderr := runCLI(t, "analyze", path, "--format", "vllm-bench")
	if code != exitOK || strings.Count(stdout, `{"date": `) != 2 || !strings.Contains(stdout, `"endpoint_type": "openai-chat"`) {
		t.Fatalf("vllm-bench exit %d\n%.300s\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = runCLI(t, "analyze", path, "--format", "llmd-report")
	if code != exitOK || strings.Count(stdout, `"version":"0.2"`) != 2 {
		t.Fatalf("llmd-report exit %d\n%.300s\n%s", code, stdout, stderr)
	}
	code, stdout, _ = runCLI(t, "analyze", path, "--cost-per-gpu-hour", "2.5", "--gpus", "4")
	if code != exitOK || !strings.Contains(stdout, "cost: $10.0/h (4 GPUs × $2.50/h): $") {
		t.Fatalf("cost exit %d\n%s", code, stdout)
	}
	for _, bad := range [][]string{{"--cost-per-hour", "-1"}, {"--cost-per-gpu-hour", "2"}, {"--gpus", "1.5", "--cost-per-gpu-hour", "2"},
		{"--cost-per-hour", "1", "--cost-per-gpu-hour", "1", "--gpus", "1"}, {"--format", "vllm"}} {
		if code, _, stderr := runCLI(t, append([]string{"analyze", path}, bad...)...); code != exitUsage {
			t.Errorf("%v: exit %d %s", bad, code, stderr)
		}
	}
}

// pareto: the table of a directory of runs, the PNG, and its exit codes.
func TestParetoVerb(t *testing.T) {
	dir := t.TempDir()
	writeSynthRun(t, dir, "a.jsonl", synth.Run{Requests: 200, Cases: 2, Seed: 1})
	writeSynthRun(t, dir, "b.jsonl", synth.Run{Requests: 200, Cases: 2, Seed: 2, TTFTScale: 2})
	out := filepath.Join(t.TempDir(), "front.png")
	code, stdout, stderr := runCLI(t, "pareto", dir, "--gpus", "8", "--cost-per-gpu-hour", "2", "--png", out)
	if code != exitOK || !strings.Contains(stdout, "4 points; throughput in output tok/s (per GPU, 8 GPUs)") || !strings.Contains(stderr, "Pareto plot saved to: "+out) {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if fi, err := os.Stat(out); err != nil || fi.Size() < 10_000 {
		t.Fatalf("png %v", err)
	}
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{filepath.Join(dir, "none.jsonl")}, exitBadInput},
		{[]string{dir, "--gpus", "0"}, exitUsage},
		{[]string{dir, "--attainment-target", "1.5"}, exitUsage},
		{[]string{dir, "--format", "html"}, exitUsage},
	} {
		if code, _, stderr := runCLI(t, append([]string{"pareto"}, tc.args...)...); code != tc.code {
			t.Errorf("%v: exit %d (want %d) %s", tc.args, code, tc.code, stderr)
		}
	}
}
