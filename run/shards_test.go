package run

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/internal/synth"
	"github.com/inferprobe/inferprobe/internal/testkit"
	"github.com/inferprobe/inferprobe/loadgen"
	"github.com/inferprobe/inferprobe/loadgen/prompt"
	"github.com/inferprobe/inferprobe/loadgen/schedule"
	"github.com/inferprobe/inferprobe/sim"
)

// shardModes are the arrival shapes the shard proof covers; each sets a 3-shard-divisible
// closed loop and small open loops against the sim. The open loops' measured windows last
// 0.2–0.3 s: each shard's starts when its own warm-up drains, and on a loaded host those
// drains differ by tens of ms, which must stay well inside the windows' overlap (the merge
// names shards whose windows never overlapped).
var shardModes = map[string]func(*loadgen.Config){
	"poisson":    func(c *loadgen.Config) { c.Arrival, c.Rates, c.Requests = schedule.Poisson, []float64{100}, 23 },
	"fixed-rate": func(c *loadgen.Config) { c.Arrival, c.Rates, c.Requests = schedule.FixedRate, []float64{100}, 20 },
	"burst": func(c *loadgen.Config) {
		c.Arrival, c.BurstSize, c.BurstInterval, c.Requests = schedule.Burst, 4, 75*time.Millisecond, 17
	},
	"replay": func(c *loadgen.Config) {
		c.Arrival, c.TraceSource = schedule.Replay, "offsets"
		for i := 0; i < 19; i++ {
			c.Trace = append(c.Trace, time.Duration(i*i)*750*time.Microsecond)
		}
	},
	"closed": func(c *loadgen.Config) { c.Arrival, c.Concurrency, c.Requests = schedule.Closed, []int{4}, 21 },
}

// shardConfig is the workload of mode against srv, as shard k of n (n 0: unsharded).
func shardConfig(t *testing.T, srv *sim.Server, mode string, runID string, n, k int) *loadgen.Config {
	t.Helper()
	cfg := &loadgen.Config{
		Endpoint: srv.URL() + "/v1/chat/completions", Model: sim.DefaultConfig().Model, RunID: runID,
		Timeout: 10 * time.Second, Stream: true, StreamUsage: true, Seed: 11, PromptMode: prompt.Unique,
		InputTokens: []int{32}, OutputTokens: []int{4}, WarmupRequests: 3, Shards: n, Shard: k,
	}
	shardModes[mode](cfg)
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// runShards runs shards 0..n−1 of mode at once into dir and returns their artifacts' paths.
// They start together, as a coordinator starts them: each waits at a start gate until every
// shard has reached it (launched one after another, a loaded host can start them further
// apart than these short windows last, and the merge then rightly names the shards as run
// one after another).
func runShards(t *testing.T, srv *sim.Server, mode, runID, dir string, n int) []string {
	t.Helper()
	paths := make([]string, n)
	errs := make([]error, n)
	var wg, arrived sync.WaitGroup
	arrived.Add(n)
	reached := make([]sync.Once, n) // a shard that fails before its gate must not hold the others
	for k := 0; k < n; k++ {
		paths[k] = filepath.Join(dir, fmt.Sprintf("shard-%d.jsonl", k))
		gate := func(context.Context, artifact.Sink, artifact.Context, string) error {
			reached[k].Do(arrived.Done)
			arrived.Wait()
			return nil
		}
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			defer reached[k].Do(arrived.Done)
			res := New(Spec{Workload: shardConfig(t, srv, mode, runID, n, k), Tokenizer: tokenizer(t), TokenizerName: "auto",
				Output: paths[k], Version: "test", StartGate: gate}).Execute(context.Background())
			errs[k] = errors.Join(res.Err, res.ReportErr)
		}(k)
	}
	wg.Wait()
	for k, err := range errs {
		if err != nil {
			t.Fatalf("shard %d: %v", k, err)
		}
	}
	return paths
}

func TestShardsMergeToTheSingleHostRun(t *testing.T) {
	srv := testkit.StartSim(t, func(c *sim.Config) { c.Seed = 3 })
	for mode := range shardModes {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			single := filepath.Join(dir, "single.jsonl")
			res := New(Spec{Workload: shardConfig(t, srv, mode, "run-x", 0, 0), Tokenizer: tokenizer(t), TokenizerName: "auto",
				Output: single, Version: "test"}).Execute(context.Background())
			if res.Err != nil || res.ReportErr != nil {
				t.Fatal(res.Err, res.ReportErr)
			}
			shardDir := filepath.Join(dir, "shards")
			os.Mkdir(shardDir, 0o755)
			paths := runShards(t, srv, mode, "run-x", shardDir, 3)
			checkMerged(t, mode, single, paths)
			// A directory is the same merge.
			dirPaths, merge, err := ArtifactPaths([]string{shardDir})
			if err != nil || !merge || strings.Join(dirPaths, ",") != strings.Join(paths, ",") {
				t.Fatalf("directory expands to %v (merge %v, %v), want %v", dirPaths, merge, err, paths)
			}
		})
	}
}

// checkMerged compares the merge of paths with the single-host artifact single, request for
// request, and the merged report's counts with the sum of the shards' own reports.
func checkMerged(t *testing.T, mode, single string, paths []string) {
	t.Helper()
	ctx := context.Background()
	one, err := analyze.ReadInput(ctx, single)
	if err != nil {
		t.Fatal(err)
	}
	merged, err := analyze.ReadShards(ctx, paths)
	if err != nil {
		t.Fatal(err)
	}
	if len(one.Cases) != 1 || len(merged.Cases) != 1 {
		t.Fatalf("cases %d and %d", len(one.Cases), len(merged.Cases))
	}
	for id, want := range one.Cases {
		got := merged.Cases[id]
		sort.SliceStable(want, func(i, j int) bool { return *want[i].RequestIndex < *want[j].RequestIndex })
		if len(got) != len(want) {
			t.Fatalf("%s: merged %d requests, single host %d", id, len(got), len(want))
		}
		for i := range want {
			g, w := &got[i], &want[i]
			if *g.RequestIndex != int64(i) || *w.RequestIndex != int64(i) {
				t.Fatalf("request %d: merged index %d, single %d", i, *g.RequestIndex, *w.RequestIndex)
			}
			if *g.PromptDigest != *w.PromptDigest || g.Status != w.Status || *g.Shard != int64(i)%3 && mode != "closed" {
				t.Fatalf("request %d: prompt %s/%s status %s/%s shard %d", i, *g.PromptDigest, *w.PromptDigest, g.Status, w.Status, *g.Shard)
			}
			if mode != "closed" && g.RequestID != w.RequestID {
				t.Fatalf("request %d: id %s, single host %s", i, g.RequestID, w.RequestID)
			}
		}
	}
	wantWin, gotWin := windowOf(one.Artifact, loadgen.PhaseMeasured), windowOf(merged.Artifact, loadgen.PhaseMeasured)
	if h := gotWin.ClientHealth; h == nil || h.CPUs != 3*wantWin.ClientHealth.CPUs || h.CPUUserSeconds == nil || h.HostCPUBusySeconds != nil {
		t.Fatalf("merged client health %+v: want the three shards' CPUs and CPU time, no host figures", h)
	}
	if *gotWin.PromptsDigest != *wantWin.PromptsDigest {
		t.Fatal("merged prompts_digest differs from the single host's")
	}
	if (wantWin.ScheduledArrivals == nil) != (gotWin.ScheduledArrivals == nil) ||
		wantWin.ScheduledArrivals != nil && *wantWin.ScheduledArrivals != *gotWin.ScheduledArrivals {
		t.Fatalf("scheduled arrivals %v, single host %v", gotWin.ScheduledArrivals, wantWin.ScheduledArrivals)
	}
	if merged.RequestRecords != one.RequestRecords || len(merged.Warmup) != len(one.Warmup) {
		t.Fatalf("records %d warmup %d, single host %d and %d", merged.RequestRecords, len(merged.Warmup), one.RequestRecords, len(one.Warmup))
	}
	// The merged report's counts are the sums over the shards' own reports.
	rep, err := AnalyzeShards(ctx, paths, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := Analyze(ctx, single, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var total, ok, offered, successful int
	var ttfts []float64
	for _, p := range paths {
		r, err := Analyze(ctx, p, analyze.Options{})
		if err != nil {
			t.Fatal(err)
		}
		total += r.Summary.TotalRequests
		ok += r.Summary.SuccessfulRequests
		for _, c := range r.Cases {
			offered += c.Population.Offered
			successful += c.Population.Successful
		}
		in, _ := analyze.ReadInput(ctx, p)
		for _, list := range in.Cases {
			for _, q := range list {
				if q.Status == analyze.StatusOK && q.TTFTMS != nil {
					ttfts = append(ttfts, *q.TTFTMS)
				}
			}
		}
	}
	if rep.Summary.TotalRequests != total || rep.Summary.SuccessfulRequests != ok || total != plain.Summary.TotalRequests {
		t.Fatalf("merged %d/%d requests, shards %d/%d, single host %d", rep.Summary.TotalRequests, rep.Summary.SuccessfulRequests, total, ok, plain.Summary.TotalRequests)
	}
	for id, c := range rep.Cases {
		pc := plain.Cases[id]
		if c.Population.Offered != offered || c.Population.Successful != successful || c.Population.Offered != pc.Population.Offered {
			t.Fatalf("%s: merged population %+v, shard sums %d/%d, single host %+v", id, c.Population, offered, successful, pc.Population)
		}
		if (c.Population.Scheduled == nil) != (pc.Population.Scheduled == nil) || c.Population.Scheduled != nil && *c.Population.Scheduled != *pc.Population.Scheduled {
			t.Fatalf("%s: scheduled %v, single host %v", id, c.Population.Scheduled, pc.Population.Scheduled)
		}
		if !c.Population.CohortValid {
			t.Fatalf("%s: merged cohort invalid: %v", id, c.Population.Issues)
		}
		sort.Float64s(ttfts)
		p50, _ := analyze.Quantile(ttfts, 0.5)
		if e := c.Latency.Metrics[artifact.MetricTTFT].Successful["p50"]; e.ValueMs == nil || *e.ValueMs != p50 {
			t.Fatalf("%s: merged TTFT p50 %v, quantile of the shards' values %v", id, e.ValueMs, p50)
		}
	}
	if rep.Shards == nil || rep.Shards.Shards != 3 || rep.Shards.RunID != "run-x" || len(rep.Shards.Problems) != 0 {
		t.Fatalf("shards block %+v", rep.Shards)
	}
	for k, a := range rep.Shards.PerShard {
		if a.Shard != int64(k) || a.Status != artifact.StatusCompleted || a.Path != paths[k] {
			t.Fatalf("shard audit %+v", a)
		}
	}
}

func windowOf(a *artifact.Artifact, phase string) *artifact.PhaseWindow {
	for i := range a.PhaseWindows {
		if a.PhaseWindows[i].Phase == phase {
			return &a.PhaseWindows[i]
		}
	}
	return nil
}

// TestMergeOfOneIsThePlainReport: one unsharded artifact through the merge gives the plain
// report, byte for byte (JSON and text).
func TestMergeOfOneIsThePlainReport(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.jsonl")
	w, err := artifact.NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := (synth.Run{Requests: 3000, Cases: 2, Seed: 5}).Write(w); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	plain, err := Analyze(ctx, path, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	merged, err := AnalyzeShards(ctx, []string{path}, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, render := range []func(*bytes.Buffer, *analyze.Report) error{
		func(b *bytes.Buffer, r *analyze.Report) error { return analyze.WriteJSON(b, r) },
		func(b *bytes.Buffer, r *analyze.Report) error { return analyze.RenderText(b, r) },
	} {
		var a, b bytes.Buffer
		if err := render(&a, plain); err != nil {
			t.Fatal(err)
		}
		if err := render(&b, merged); err != nil {
			t.Fatal(err)
		}
		if a.Len() < 1000 || !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Fatalf("merge of one differs from the plain report (%d and %d bytes)", a.Len(), b.Len())
		}
	}
}

func TestShardMergeRefusals(t *testing.T) {
	srv := testkit.StartSim(t, func(c *sim.Config) { c.Seed = 3 })
	dir := t.TempDir()
	paths := runShards(t, srv, "fixed-rate", "run-r", dir, 3)
	other := t.TempDir()
	otherRun := runShards(t, srv, "fixed-rate", "run-other", other, 3)
	single := filepath.Join(other, "single.jsonl")
	if res := New(Spec{Workload: shardConfig(t, srv, "fixed-rate", "run-r", 0, 0), Tokenizer: tokenizer(t), TokenizerName: "auto",
		Output: single, Version: "test"}).Execute(context.Background()); res.Err != nil {
		t.Fatal(res.Err)
	}
	dup := filepath.Join(other, "copy-of-1.jsonl")
	b, _ := os.ReadFile(paths[1])
	os.WriteFile(dup, b, 0o644)
	// Shard 2 killed before its infer.workload: only its first line was written.
	headOnly := filepath.Join(other, "head-of-2.jsonl")
	os.WriteFile(headOnly, []byte(readLinesOf(t, paths[2])[0]+"\n"), 0o644)
	for _, tc := range []struct {
		paths []string
		want  string
	}{
		{paths[:2], "run \"run-r\" has 3 shards; shard 2 missing"},
		{[]string{paths[0], paths[1], dup}, "shard 1 given twice"},
		{[]string{paths[0], paths[1], otherRun[2]}, "is of run \"run-other\""},
		{[]string{paths[0], paths[1], single}, "is not a shard"},
		{[]string{paths[0], paths[1], headOnly}, "head-of-2.jsonl has no infer.workload record, so it names no shard"},
		{paths[2:], "shard 0, 1 missing"},
	} {
		_, err := AnalyzeShards(context.Background(), tc.paths, analyze.Options{})
		if err == nil || !errors.Is(err, analyze.ErrShardSet) || !errors.Is(err, artifact.ErrInvalidArtifact) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want ErrShardSet with %q", tc.paths, err, tc.want)
		}
	}
	if _, _, err := ArtifactPaths([]string{paths[0], paths[0]}); err == nil || !strings.Contains(err.Error(), "given twice") {
		t.Errorf("one file twice: %v", err)
	}
	if _, _, err := ArtifactPaths([]string{t.TempDir()}); err == nil || !strings.Contains(err.Error(), "holds no .jsonl artifact") {
		t.Errorf("empty directory: %v", err)
	}
}

// TestKilledShardIsNamed: a shard whose artifact stops mid-run (no measured window, no
// closing session) still merges; the report names it, marks the case's cohort invalid, and
// keeps every request it recorded.
func TestKilledShardIsNamed(t *testing.T) {
	srv := testkit.StartSim(t, func(c *sim.Config) { c.Seed = 3 })
	paths := runShards(t, srv, "poisson", "run-k", t.TempDir(), 3)
	lines := readLinesOf(t, paths[2])
	cut := 0
	kept := 0
	for i, l := range lines {
		if strings.Contains(l, `"event_type":"infer.phase_window"`) && strings.Contains(l, `"phase":"measured"`) {
			cut = i
			break
		}
		if strings.Contains(l, `"event_type":"infer.request"`) && strings.Contains(l, `"phase":"measured"`) {
			kept++
		}
	}
	// Keep the head, the warmup and half the measured requests: the process died there.
	var out []string
	half := 0
	for _, l := range lines[:cut] {
		if strings.Contains(l, `"event_type":"infer.request"`) && strings.Contains(l, `"phase":"measured"`) {
			if half++; half > kept/2 {
				continue
			}
		}
		out = append(out, l)
	}
	os.WriteFile(paths[2], []byte(strings.Join(out, "\n")+"\n"), 0o644)
	rep, err := AnalyzeShards(context.Background(), paths, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := rep.Shards.PerShard[2]
	if a.Status != "not_closed" || a.MeasuredRequests != kept/2 || len(a.MissingWindows) != 1 {
		t.Fatalf("killed shard audit %+v (kept %d of %d)", a, kept/2, kept)
	}
	if len(rep.Shards.Problems) != 2 || !strings.Contains(rep.Shards.Problems[0], "shard 2 (") || !strings.Contains(rep.Shards.Problems[0], "no closing infer.session") {
		t.Fatalf("problems %q", rep.Shards.Problems)
	}
	merged, err := analyze.ReadShards(context.Background(), paths)
	if err != nil {
		t.Fatal(err)
	}
	for id, c := range rep.Cases {
		if c.Population.CohortValid || c.Population.Scheduled != nil || c.Population.Offered != rep.Shards.PerShard[0].MeasuredRequests+rep.Shards.PerShard[1].MeasuredRequests+kept/2 {
			t.Fatalf("population %+v", c.Population)
		}
		// With no schedule, the arrivals expected reach the highest index: the killed
		// shard's lost records are the gaps below it, and no index is out of range.
		highest := int64(-1)
		for _, q := range merged.Cases[id] {
			highest = max(highest, *q.RequestIndex)
		}
		want := fmt.Sprintf("records_missing: at least %d of at least %d", highest+1-int64(len(merged.Cases[id])), highest+1)
		if !slices.Contains(c.Population.Issues, want) || slices.Contains(c.Population.Issues, "request_index_out_of_range") {
			t.Fatalf("%s: issues %q, want %q and no index out of range", id, c.Population.Issues, want)
		}
	}
	if rep.Summary.SessionClosed {
		t.Fatal("a merge with a shard that never closed reads as closed")
	}
	if w := windowOf(merged.Artifact, loadgen.PhaseMeasured); w.ClientHealth != nil {
		t.Fatalf("merged client health %+v without the killed shard's", w.ClientHealth)
	}
	var txt bytes.Buffer
	analyze.RenderText(&txt, rep)
	if !strings.Contains(txt.String(), "problem: shard 2 (") {
		t.Fatalf("text report does not name the killed shard:\n%s", txt.String())
	}
}

func readLinesOf(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

// Shards run one after another (no coordinator, each started when the last had finished)
// merge, and the merged report names the windows that never overlapped.
func TestShardsRunOneAfterAnotherAreNamed(t *testing.T) {
	srv := testkit.StartSim(t, func(c *sim.Config) { c.Seed = 3 })
	dir := t.TempDir()
	var paths []string
	for k := 0; k < 2; k++ {
		p := filepath.Join(dir, fmt.Sprintf("shard-%d.jsonl", k))
		res := New(Spec{Workload: shardConfig(t, srv, "fixed-rate", "run-seq", 2, k), Tokenizer: tokenizer(t), TokenizerName: "auto",
			Output: p, Version: "test"}).Execute(context.Background())
		if res.Err != nil || res.ReportErr != nil {
			t.Fatal(res.Err, res.ReportErr)
		}
		paths = append(paths, p)
	}
	rep, err := AnalyzeShards(context.Background(), paths, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p := rep.Shards.Problems; len(p) != 1 || !strings.HasPrefix(p[0], "fixed100_in32_out4/measured: shard 1 started its window ") ||
		!strings.Contains(p[0], " after shard 0's had ended: the shards ran one after another") {
		t.Fatalf("problems %q", p)
	}
}
