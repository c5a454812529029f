package capacity

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/loadgen"
)

// TestSearchAndWrite: the record written to search.jsonl is the result returned, and the
// plot is drawn beside it.
func TestSearchAndWrite(t *testing.T) {
	dir := t.TempDir()
	f := &fake{truth: cliff(20), threshold: 200, sigma: 0.1}
	var warned []string
	res, path, err := SearchAndWrite(context.Background(), f, dir, Options{Over: artifact.OverConcurrency, Min: 1, Max: 64, Tests: e2eTests, Seed: 3},
		func(m string) { warned = append(warned, m) })
	if err != nil || res == nil || path != filepath.Join(dir, RecordFile) || len(warned) != 0 {
		t.Fatalf("result %v path %s err %v warnings %v", res, path, err, warned)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got artifact.Search
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Status != res.Status || val(got.BracketLower) != val(res.BracketLower) || val(got.BracketUpper) != val(res.BracketUpper) ||
		val(got.BracketLower) != 20 || val(got.BracketUpper) != 21 {
		t.Errorf("record %s [%g, %g], result %s [%g, %g], want [20, 21]", got.Status, val(got.BracketLower), val(got.BracketUpper),
			res.Status, val(res.BracketLower), val(res.BracketUpper))
	}
	if st, err := os.Stat(filepath.Join(dir, PlotFile)); err != nil || st.Size() == 0 {
		t.Errorf("plot: %v", err)
	}
	// Invalid options: no result, nothing written.
	empty := t.TempDir()
	if res, _, err := SearchAndWrite(context.Background(), f, empty, Options{Min: 5, Max: 2, Tests: e2eTests}, nil); res != nil || err == nil {
		t.Errorf("min > max: result %v err %v", res, err)
	}
	if entries, _ := os.ReadDir(empty); len(entries) != 0 {
		t.Errorf("invalid options wrote %d files", len(entries))
	}
}

// TestRunProberCheck: the options and the workload at the first probe are checked.
func TestRunProberCheck(t *testing.T) {
	w := loadgen.Workload{Endpoint: "http://127.0.0.1:9/v1/chat/completions", Model: "m", Tokenizer: artifact.Ptr("none")}
	p := &RunProber{Workload: w, Over: artifact.OverConcurrency, Dir: t.TempDir()}
	plan, cfg, err := p.Check(Options{Over: artifact.OverConcurrency, Min: 2, Max: 16, Tests: e2eTests})
	if err != nil || plan.First < 1 || cfg.Requests != plan.First || len(cfg.Concurrency) != 1 || cfg.Concurrency[0] != 2 {
		t.Fatalf("plan %+v config %+v err %v", plan, cfg, err)
	}
	if _, _, err := p.Check(Options{Over: artifact.OverConcurrency, Min: 2, Max: 16, Tests: e2eTests, MaxRequestsPerProbe: 3}); err == nil ||
		!strings.Contains(err.Error(), "--max-requests-per-probe 3 is too small") {
		t.Errorf("a probe too small to decide: %v", err)
	}
	w.InputTokens = []int{-4}
	p.Workload = w
	if _, _, err := p.Check(Options{Over: artifact.OverConcurrency, Min: 2, Max: 16, Tests: e2eTests}); err == nil || !strings.Contains(err.Error(), "input-tokens") {
		t.Errorf("an invalid workload: %v", err)
	}
}
