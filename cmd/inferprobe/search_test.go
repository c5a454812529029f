package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/sim"
)

func TestSearchBadFlagsExit2(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	base := []string{"search", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--output", dir, "--system-sampler", "none"}
	for _, extra := range [][]string{
		{"--slo", "ttft:100", "--concurrency", "4"},
		{"--slo", "ttft:100", "--rate", "4"},
		{"--slo", "ttft:100", "--min", "0"},
		{"--slo", "ttft:100", "--min", "8", "--max", "4"},
		{"--slo", "ttft:100", "--min", "1.5"},
		{"--slo", "ttft:100", "--over", "tokens"},
		{"--slo", "ttft:100", "--quantile", "0.97"},
		{"--slo", "ttft:100", "--tolerance", "0"},
		{"--slo", "ttft:100", "--confidence", "1"},
		{"--slo", "ttft:100", "--max-requests-per-probe", "20"},
		{"--slo", "server.itl:100"},
		{"--slo", "server.ttft:100"},
		{"--slo", "ttft:100", "--arrival", "burst"},
		{"--slo", "ttft:100", "--over", "rate", "--max-lag", "0"},
		{"--slo", "ttft:100", "--max-probes", "1"},
		{},
	} {
		if code := runQuiet(append(append([]string{}, base...), extra...)...); code != exitUsage {
			t.Errorf("%v: exit %d, want 2", extra, code)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("a refused search wrote %s (%v)", dir, err)
	}
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code := runQuiet("search", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--output", file, "--slo", "ttft:100"); code != exitUsage {
		t.Errorf("--output a file: exit %d, want 2", code)
	}
	// A directory that holds another search's files, or one that cannot be made, is refused
	// before anything is sent.
	used := t.TempDir()
	old := filepath.Join(used, "probe-05.jsonl")
	if err := os.WriteFile(old, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{used, filepath.Join(file, "sub")} {
		if code := runQuiet("search", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--output", out, "--slo", "ttft:100"); code != exitUsage {
			t.Errorf("--output %s: exit %d, want 2", out, code)
		}
	}
	if entries, _ := os.ReadDir(used); len(entries) != 1 {
		t.Errorf("the used directory now holds %d entries", len(entries))
	}
}

// A server that answers nothing makes the search say so, not only "none".
func TestSearchUnreachableSaysWhy(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	code := runQuiet("search", "--base-url", "http://"+freeAddr(t)+"/v1", "--model", "m", "--output", dir, "--system-sampler", "none",
		"--input-tokens", "8", "--output-tokens", "2", "--slo", "ttft:100", "--min", "1", "--max", "2", "-q")
	if code != exitFindings {
		t.Fatalf("exit %d, want 3", code)
	}
	rec := readSearch(t, filepath.Join(dir, "search.jsonl"))
	warnings, _ := rec["warnings"].([]any)
	if len(warnings) == 0 || !strings.Contains(warnings[0].(string), "probe 1 at 1, run 1: none of its ") ||
		!strings.Contains(warnings[0].(string), "unreachable") {
		t.Fatalf("warnings %v", rec["warnings"])
	}
}

func fastSim(c *sim.Config) {
	c.DecodeStepBase = time.Millisecond
	c.DecodeStepPerSeq = 0
	c.PrefillTokensPerSec = 0
	c.StopProbability = 0
}

func readSearch(t *testing.T, path string) map[string]any {
	t.Helper()
	lines := readLines(t, path)
	if len(lines) != 1 || lines[0]["event_type"] != artifact.EventSearch || lines[0]["schema_version"] != float64(1) {
		t.Fatalf("%s: %v", path, lines)
	}
	return lines[0]
}

func TestSearchNothingPassesExits3(t *testing.T) {
	srv := startSim(t, fastSim)
	dir := t.TempDir()
	code := runQuiet("search", "--base-url", srv.URL()+"/v1", "--model", sim.DefaultConfig().Model, "--output", dir,
		"--system-sampler", "none", "--input-tokens", "8", "--output-tokens", "2", "--slo", "e2e:0.01", "--min", "1", "--max", "8", "-q")
	if code != exitFindings {
		t.Fatalf("exit %d, want 3", code)
	}
	rec := readSearch(t, filepath.Join(dir, "search.jsonl"))
	if rec["status"] != artifact.SearchNone || rec["capacity"] != nil || rec["probes_spent"] != float64(1) {
		t.Fatalf("record %v", rec)
	}
	if _, err := os.Stat(filepath.Join(dir, "probe-01.jsonl")); err != nil {
		t.Fatal(err)
	}
}

func TestSearchAboveRangeExits0WithJSONAndPlot(t *testing.T) {
	srv := startSim(t, fastSim)
	dir := t.TempDir()
	out := filepath.Join(t.TempDir(), "stdout.json")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = f
	code := execute([]string{"search", "--base-url", srv.URL() + "/v1", "--model", sim.DefaultConfig().Model, "--output", dir,
		"--system-sampler", "none", "--input-tokens", "8", "--output-tokens", "2", "--slo", "e2e:5000", "--min", "1", "--max", "2",
		"--seed", "40", "--json", "-q"})
	os.Stdout = stdout
	f.Close()
	if code != exitOK {
		t.Fatalf("exit %d, want 0", code)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep artifact.Search
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatalf("stdout is not the JSON record: %v\n%s", err, data)
	}
	if rep.Status != artifact.SearchAboveRange || rep.Capacity == nil || *rep.Capacity != 2 || len(rep.Probes) != 2 ||
		rep.Probes[0].Seed != 40 || rep.Probes[1].Seed != 41 || rep.Probes[1].Decision != artifact.DecisionPass {
		t.Fatalf("report %+v", rep)
	}
	if st, err := os.Stat(filepath.Join(dir, "search.png")); err != nil || st.Size() < 1000 {
		t.Fatalf("plot: %v", err)
	}
	rec := readSearch(t, filepath.Join(dir, "search.jsonl"))
	if rec["status"] != artifact.SearchAboveRange || rec["capacity"] != float64(2) {
		t.Fatalf("record %v", rec)
	}
}
