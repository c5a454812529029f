package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	dto "github.com/prometheus/client_model/go"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/exporter"
	"github.com/inferprobe/inferprobe/sim"
)

// kneeSim is an engine whose concurrency capacity is 3 for a TTFT limit of 20 ms: 3 batch
// slots, 5 ms steps and 12 output tokens each (capacity's simKnee: 2·b + T·b/(2M)).
func kneeSim(c *sim.Config) {
	c.MaxNumSeqs = 3
	c.PrefillTokensPerSec = 0
	c.DecodeStepPerSeq = 0
	c.DecodeStepBase = 5 * time.Millisecond
	c.StopProbability = 0
}

// searchConfig is one search probe, every 24 h, over concurrency 2..8, keeping one search.
func searchConfig(dir, simURL string) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
receiver: {http_listen: "", grpc_listen: ""}
artifacts: {dir: %s, keep: 1}
slos:
  - name: fast
    criteria: ["ttft:20"]
targets:
  - name: sim
    base_url: %s/v1
    model: %s
probes:
  - name: canary
    kind: search
    target: sim
    slo: fast
    every: 24h
    search: {over: concurrency, min: 2, max: 8, max_requests_per_probe: 400}
    workload:
      input-tokens: [8]
      output-tokens: [12]
      cache-reset-url: %s/reset_prefix_cache
`, dir, simURL, simModel, simURL)
}

// servedFamilies reads the daemon's served /metrics page.
func servedFamilies(t *testing.T, d *Daemon) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := httpGet(t, "http://"+d.MetricsAddr()+"/metrics", "", "")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

// bracketOf is a family's canary series by bound (absent bounds missing), with their over.
func bracketOf(mfs map[string]*dto.MetricFamily, name string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range mfs[name].GetMetric() {
		l := map[string]string{}
		for _, lp := range m.GetLabel() {
			l[lp.GetName()] = lp.GetValue()
		}
		if l["probe"] == "canary" && l["target"] == "sim" && l["model"] == simModel {
			out[l["over"]+" "+l["bound"]] = m.GetGauge().GetValue()
		}
	}
	return out
}

// wantBracket is a record's bracket as bracketOf gives it.
func wantBracket(r *artifact.Search) map[string]float64 {
	out := map[string]float64{}
	if r.BracketLower != nil {
		out[r.Over+" lower"] = *r.BracketLower
	}
	if r.BracketUpper != nil {
		out[r.Over+" upper"] = *r.BracketUpper
	}
	return out
}

func equalBrackets(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestSearchProbeAgainstTheSim: a search probe's search writes its directory, and the
// served capacity series equal its record; the next search (24 h later on the daemon's
// clock) moves that bracket to _previous, and retention keeps one search directory.
func TestSearchProbeAgainstTheSim(t *testing.T) {
	if testing.Short() {
		t.Skip("sends load to the simulated engine")
	}
	srv := startSim(t, kneeSim)
	dir := t.TempDir()
	fc := clockwork.NewFakeClock()
	d, _, runs := startDaemonWith(t, searchConfig(dir, srv.URL()), Options{Clock: fc})
	first := nextRun(t, runs, "canary", 2*time.Minute)
	rec := checkSearchResult(t, first)
	if first.Outcome != artifact.SearchFound || *rec.BracketLower != 3 || *rec.BracketUpper != 4 {
		t.Logf("the search did not find the knee 3 (status %s, bracket %v %v): the series are still checked against its record",
			rec.Status, rec.BracketLower, rec.BracketUpper)
	}
	mfs := servedFamilies(t, d)
	if got, want := bracketOf(mfs, "inferprobe_capacity"), wantBracket(rec); !equalBrackets(got, want) || len(want) == 0 {
		t.Errorf("inferprobe_capacity %v, want the record's %v", got, want)
	}
	if n := len(bracketOf(mfs, "inferprobe_capacity_previous")); n != 0 {
		t.Errorf("%d previous series after one search", n)
	}
	checkBinding(t, d, rec)
	labels := map[string]string{"probe": "canary", "target": "sim", "model": simModel}
	if v, _ := metric(t, d, "inferprobe_capacity_searches_total", withLabel(labels, "outcome", rec.Status)); v != 1 {
		t.Errorf("searches_total{outcome=%s} = %g, want 1", rec.Status, v)
	}
	if v, ok := metric(t, d, "inferprobe_capacity_last_search_timestamp_seconds", labels); !ok || v <= 0 {
		t.Errorf("last search timestamp %g %v", v, ok)
	}
	if n := sumMetric(t, d, "inferprobe_probe_runs_total", labels); n != 0 {
		t.Errorf("a search's probe runs counted %g times as probe runs", n)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := fc.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	fc.Advance(24 * time.Hour)
	second := nextRun(t, runs, "canary", 2*time.Minute)
	rec2 := checkSearchResult(t, second)
	mfs = servedFamilies(t, d)
	if got, want := bracketOf(mfs, "inferprobe_capacity_previous"), wantBracket(rec); !equalBrackets(got, want) {
		t.Errorf("inferprobe_capacity_previous %v, want the first search's %v", got, want)
	}
	if got, want := bracketOf(mfs, "inferprobe_capacity"), wantBracket(rec2); !equalBrackets(got, want) {
		t.Errorf("inferprobe_capacity %v, want the second search's %v", got, want)
	}
	if n := sumMetric(t, d, "inferprobe_capacity_searches_total", labels); n != 2 {
		t.Errorf("%g searches counted, want 2", n)
	}
	entries, err := os.ReadDir(filepath.Join(dir, "canary"))
	if err != nil || len(entries) != 1 || entries[0].Name() != filepath.Base(filepath.Dir(second.Path)) {
		t.Errorf("retention kept %v (%v), want only the second search's directory", entries, err)
	}
}

func withLabel(m map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for a, b := range m {
		out[a] = b
	}
	return out
}

// checkSearchResult checks a finished search's directory and returns its record as written.
func checkSearchResult(t *testing.T, r RunResult) *artifact.Search {
	t.Helper()
	if r.Err != nil || r.Search == nil || r.Outcome != r.Search.Status {
		t.Fatalf("search: %+v", r)
	}
	b, err := os.ReadFile(r.Path)
	if err != nil || filepath.Base(r.Path) != "search.jsonl" {
		t.Fatalf("record %s: %v", r.Path, err)
	}
	var rec artifact.Search
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.SearchID != r.RunID || rec.Status != r.Search.Status || len(rec.Probes) != len(r.Search.Probes) || len(rec.Probes) == 0 {
		t.Fatalf("record on disk %+v, result %+v", rec, r.Search)
	}
	sdir := filepath.Dir(r.Path)
	for _, f := range []string{"search.png", "probe-01.jsonl"} {
		if _, err := os.Stat(filepath.Join(sdir, f)); err != nil {
			t.Errorf("search directory: %v", err)
		}
	}
	a, _ := readArtifact(t, rec.Probes[0].Artifact)
	if a.Workload == nil || a.Header == nil || a.Workload.Seed != rec.Probes[0].Seed || !strings.HasPrefix(a.Header.Context.RunID, r.RunID+"-p01-s") {
		t.Errorf("probe 1's artifact: workload %+v header %+v, want seed %d and run id %s-p01-s…", a.Workload, a.Header, rec.Probes[0].Seed, r.RunID)
	}
	return &rec
}

// checkBinding: the binding criterion series is the record's.
func checkBinding(t *testing.T, d *Daemon, rec *artifact.Search) {
	t.Helper()
	labels := map[string]string{"probe": "canary"}
	n := sumMetric(t, d, "inferprobe_capacity_binding_criterion", labels)
	if rec.BindingCriterion == nil {
		if n != 0 {
			t.Errorf("binding criterion series without a binding criterion")
		}
		return
	}
	if v, _ := metric(t, d, "inferprobe_capacity_binding_criterion", withLabel(labels, exporter.LabelCriterion, *rec.BindingCriterion)); v != 1 || n != 1 {
		t.Errorf("binding criterion %q: %g (of %g), want 1", *rec.BindingCriterion, v, n)
	}
}

// TestRetainSearchDirectories: a search probe's search directories count and age as
// artifacts and are removed whole; other directories stay.
func TestRetainSearchDirectories(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	dir := t.TempDir()
	var names []string
	for i, age := range []int{9, 4, 1} {
		n := now.AddDate(0, 0, -age).Format("20060102T150405.000Z") + fmt.Sprintf("-0000000%d", i)
		names = append(names, n)
		if err := os.MkdirAll(filepath.Join(dir, n), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, n), "search.jsonl", "{}\n")
		mt := now.AddDate(0, 0, -age)
		if err := os.Chtimes(filepath.Join(dir, n), mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "keep-me"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := retain(dir, 2, 3*24*time.Hour, now); err != nil {
		t.Fatal(err)
	}
	if got, want := listDir(t, dir), []string{names[2], "keep-me"}; !slices.Equal(got, want) {
		t.Errorf("left %q, want %q (keep 2 removes the 9-day one, max age 3d the 4-day one)", got, want)
	}
}
