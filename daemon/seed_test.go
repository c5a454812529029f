package daemon

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/loadgen"
)

// seedConfig is a continuous probe of unique prompts (back-to-back runs of 3 requests);
// seedLine is "" or a workload line such as "seed: 7".
func seedConfig(dir, simURL, seedLine string) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
receiver: {http_listen: "", grpc_listen: ""}
artifacts: {dir: %s}
targets:
  - name: sim
    base_url: %s/v1
    model: %s
probes:
  - name: uniq
    target: sim
    continuous: true
    workload:
      concurrency: [1]
      requests: 3
      prompt-mode: unique
      %s
`, dir, simURL, simModel, seedLine)
}

// seedRun is what a run's artifact says about its prompts: the workload record's seed and
// the measured phase window's prompts_digest.
type seedRun struct {
	runID  string
	seed   int64
	digest string
}

func twoSeedRuns(t *testing.T, seedLine string) ([2]seedRun, string) {
	t.Helper()
	srv := startSim(t, nil)
	logger, logs := bufferLogger()
	_, _, runs := startDaemonWith(t, seedConfig(t.TempDir(), srv.URL(), seedLine), Options{Logger: logger})
	var out [2]seedRun
	for i := range out {
		r := nextRun(t, runs, "uniq", 120*time.Second)
		if r.Outcome != artifact.RunCompleted || r.Err != nil {
			t.Fatalf("run %d: %+v", i, r)
		}
		a, _ := readArtifact(t, r.Path)
		if a.Workload == nil {
			t.Fatalf("run %d has no workload record", i)
		}
		out[i] = seedRun{runID: r.RunID, seed: a.Workload.Seed}
		for _, w := range a.PhaseWindows {
			if w.Phase == artifact.PhaseMeasured && w.PromptsDigest != nil {
				out[i].digest = *w.PromptsDigest
			}
		}
		if out[i].digest == "" {
			t.Fatalf("run %d has no measured prompts_digest", i)
		}
	}
	return out, logs.String()
}

// TestProbeRunsDrawTheirOwnSeed: without a seed in the workload, each probe run draws its
// prompts from a seed of its own, recorded in its workload record, so that a second run of
// unique prompts does not find the first run's prompts in the prefix cache; no warning says
// the prompts repeat.
func TestProbeRunsDrawTheirOwnSeed(t *testing.T) {
	r, logs := twoSeedRuns(t, "")
	if r[0].seed == r[1].seed {
		t.Fatalf("both runs have seed %d", r[0].seed)
	}
	for _, x := range r {
		if want := loadgen.RunSeed(x.runID); x.seed != want {
			t.Fatalf("run %s recorded seed %d, want its own %d", x.runID, x.seed, want)
		}
	}
	if r[0].digest == r[1].digest {
		t.Fatalf("both runs sent the same prompts (prompts_digest %s)", r[0].digest)
	}
	if strings.Contains(logs, "prompts are the same for every run") {
		t.Fatalf("a run without an explicit seed warned that its prompts repeat:\n%s", logs)
	}
}

// TestProbeExplicitSeedRepeats: an explicit workload seed is every run's seed, so every run
// sends the same prompts, and each run logs profile's warning about repeated prompts.
func TestProbeExplicitSeedRepeats(t *testing.T) {
	r, logs := twoSeedRuns(t, "seed: 7")
	if r[0].seed != 7 || r[1].seed != 7 {
		t.Fatalf("seeds %d, %d: want the explicit 7 twice", r[0].seed, r[1].seed)
	}
	if r[0].digest != r[1].digest {
		t.Fatalf("prompts_digest %s then %s: an explicit seed repeats the prompts", r[0].digest, r[1].digest)
	}
	for _, id := range []string{r[0].runID, r[1].runID} {
		found := false
		for _, line := range strings.Split(logs, "\n") {
			if strings.Contains(line, "prompts are the same for every run with --seed 7") && strings.Contains(line, "run_id="+id) {
				found = true
			}
		}
		if !found {
			t.Fatalf("run %s logged no warning about its repeated prompts:\n%s", id, logs)
		}
	}
}
