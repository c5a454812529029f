package capacity

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/loadgen"
)

func TestRunProberStageSpec(t *testing.T) {
	base := loadgen.Workload{Endpoint: "http://127.0.0.1:9/v1/chat/completions", Model: "m", RunID: "nightly", Tokenizer: artifact.Ptr("none")}
	dir := t.TempDir()
	for _, tc := range []struct {
		over, arrival string
		given         *string
		value         float64
		warmup        *int
		wantWarmup    int
	}{
		{artifact.OverConcurrency, "closed", nil, 6, nil, 6},
		{artifact.OverRate, "poisson", nil, 12.5, nil, 13},
		{artifact.OverRate, "fixed-rate", artifact.Ptr("fixed-rate"), 40, artifact.Ptr(3), 3},
	} {
		w := base
		w.Arrival = tc.given
		p := &RunProber{Workload: w, Over: tc.over, Dir: dir, Warmup: tc.warmup}
		spec, err := p.stageSpec(Stage{Probe: 7, Stage: 2, Value: tc.value, Requests: 208, Seed: 99})
		if err != nil {
			t.Fatal(err)
		}
		cfg := spec.Workload
		cases, err := cfg.Cases()
		if err != nil || len(cases) != 1 {
			t.Fatalf("%s: %d cases, %v", tc.over, len(cases), err)
		}
		if cfg.Requests != 208 || cfg.Seed != 99 || cfg.WarmupRequests != tc.wantWarmup || cfg.RunID != "nightly-p07-s2" ||
			string(cfg.Arrival) != tc.arrival || spec.Output != filepath.Join(dir, "probe-07.jsonl") {
			t.Errorf("%s %g: requests %d seed %d warmup %d run %s arrival %s output %s", tc.over, tc.value, cfg.Requests, cfg.Seed, cfg.WarmupRequests, cfg.RunID, cfg.Arrival, spec.Output)
		}
	}
	if _, err := (&RunProber{Workload: base, Over: "tokens"}).stageSpec(Stage{Value: 1, Requests: 1}); err == nil {
		t.Error("unknown control variable: want an error")
	}
}

// errProber fails its third stage, as a cancelled run does.
type errProber struct{ fake }

func (e *errProber) Probe(ctx context.Context, s Stage) (Outcome, error) {
	if len(e.stages) == 2 {
		e.stages = append(e.stages, s)
		return Outcome{}, context.Canceled
	}
	return e.fake.Probe(ctx, s)
}

func TestSearchReturnsThePartialResultWithTheProbersError(t *testing.T) {
	p := &errProber{fake{truth: smooth(50), threshold: 200, sigma: 0.1}}
	res, err := Search(context.Background(), p, Options{Over: artifact.OverRate, Min: 1, Max: 100, Tests: e2eTests})
	if !errors.Is(err, context.Canceled) || res == nil || len(res.Probes) != 3 || res.Probes[2].Decision != artifact.DecisionUndecided || val(res.Capacity) != 2 {
		t.Fatalf("err %v result %+v", err, res)
	}
}

// A search whose context ends mid-way is recorded interrupted, with what it had learnt.
type cancelProber struct {
	fake
	cancel context.CancelFunc
}

func (c *cancelProber) Probe(ctx context.Context, s Stage) (Outcome, error) {
	if len(c.stages) == 2 {
		c.stages = append(c.stages, s)
		c.cancel()
		return Outcome{}, ctx.Err()
	}
	return c.fake.Probe(ctx, s)
}

func TestSearchInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := &cancelProber{fake: fake{truth: smooth(50), threshold: 200, sigma: 0.1}, cancel: cancel}
	res, err := Search(ctx, p, Options{Over: artifact.OverRate, Min: 1, Max: 100, Tests: e2eTests})
	if !errors.Is(err, context.Canceled) || res.Status != artifact.SearchInterrupted || len(res.Probes) != 3 || val(res.Capacity) != 2 ||
		res.Probes[2].Reason != "the search was interrupted while this probe ran" {
		t.Fatalf("err %v result %+v", err, res)
	}
}
