package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/exporter"
	"github.com/inferprobe/inferprobe/sim"
)

// TestSearchProbeReloadInterrupts: a reload that changes a running search probe's search
// block stops its search, which is counted once as interrupted (its partial record written,
// no capacity published), and the changed probe starts a new search.
func TestSearchProbeReloadInterrupts(t *testing.T) {
	if testing.Short() {
		t.Skip("sends load to the simulated engine")
	}
	srv := startSim(t, func(c *sim.Config) { kneeSim(c); c.DecodeStepBase = 100 * time.Millisecond })
	dir := t.TempDir()
	text := strings.Replace(searchConfig(dir, srv.URL()), "keep: 1", "keep: 0", 1)
	d, path, runs := startDaemon(t, text)
	probeDir := filepath.Join(dir, "canary")
	started := func(n int) func() bool {
		return func() bool {
			m, _ := filepath.Glob(filepath.Join(probeDir, "*", "probe-01.jsonl"))
			return len(m) >= n
		}
	}
	waitFor(t, "the first search's first probe", 30*time.Second, started(1))
	if err := os.WriteFile(path, []byte(strings.Replace(text, "max: 8", "max: 9", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := d.Reload(); err != nil {
		t.Fatal(err)
	}
	r := nextRun(t, runs, "canary", 120*time.Second)
	if r.Outcome != exporter.SearchInterrupted || r.Search == nil || r.Err == nil {
		t.Fatalf("the stopped search: outcome %s search %v err %v, want interrupted with its partial result", r.Outcome, r.Search, r.Err)
	}
	if _, err := os.Stat(r.Path); err != nil {
		t.Errorf("the interrupted search's record: %v", err)
	}
	waitFor(t, "the changed probe's search", 30*time.Second, started(2))
	labels := map[string]string{"probe": "canary", "target": "sim", "model": simModel}
	if v, _ := metric(t, d, "inferprobe_capacity_searches_total", withLabel(labels, "outcome", exporter.SearchInterrupted)); v != 1 {
		t.Errorf("searches_total{interrupted} = %g, want 1", v)
	}
	if n := sumMetric(t, d, "inferprobe_capacity_searches_total", labels); n != 1 {
		t.Errorf("%g searches counted, want 1", n)
	}
	if _, ok := metric(t, d, "inferprobe_capacity", labels); ok {
		t.Error("an interrupted search published a capacity")
	}
}

// TestSearchProbeScheduleReloadKeepsTheSearch: a reload that changes only a search probe's
// schedule lets its running search finish (counted once, by its status) and publishes the
// new interval.
func TestSearchProbeScheduleReloadKeepsTheSearch(t *testing.T) {
	if testing.Short() {
		t.Skip("sends load to the simulated engine")
	}
	srv := startSim(t, kneeSim)
	dir := t.TempDir()
	text := searchConfig(dir, srv.URL())
	d, path, runs := startDaemon(t, text)
	waitFor(t, "the search's first probe", 30*time.Second, func() bool {
		m, _ := filepath.Glob(filepath.Join(dir, "canary", "*", "probe-01.jsonl"))
		return len(m) == 1
	})
	if err := os.WriteFile(path, []byte(strings.Replace(text, "every: 24h", "every: 12h", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := d.Reload(); err != nil {
		t.Fatal(err)
	}
	r := nextRun(t, runs, "canary", 2*time.Minute)
	if r.Err != nil || r.Search == nil || r.Outcome != r.Search.Status {
		t.Fatalf("the search across a schedule reload: outcome %s err %v", r.Outcome, r.Err)
	}
	labels := map[string]string{"probe": "canary", "target": "sim", "model": simModel}
	if n := sumMetric(t, d, "inferprobe_capacity_searches_total", labels); n != 1 {
		t.Errorf("%g searches counted, want 1", n)
	}
	if v, _ := metric(t, d, "inferprobe_capacity_searches_total", withLabel(labels, "outcome", r.Outcome)); v != 1 {
		t.Errorf("searches_total{outcome=%s} = %g, want 1", r.Outcome, v)
	}
	if v, _ := metric(t, d, "inferprobe_probe_interval_seconds", labels); v != 12*3600 {
		t.Errorf("interval %g, want 43200", v)
	}
}
