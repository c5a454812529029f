package compare

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/internal/testkit"
	"github.com/inferprobe/inferprobe/loadgen"
	"github.com/inferprobe/inferprobe/loadgen/prompt"
	"github.com/inferprobe/inferprobe/run"
	"github.com/inferprobe/inferprobe/sim"
)

// stepEngine is a simulated engine whose every step lasts exactly step: no prefill time, no
// per-sequence cost, no early stop. A lone request (one closed-loop worker) starts its first
// step on arrival and gets its first token at that step's end, so its TTFT is one step plus
// the client's and the HTTP stack's own time: two engines whose steps differ by d have TTFTs
// that differ by d at every quantile.
func stepEngine(step time.Duration) func(*sim.Config) {
	return func(c *sim.Config) {
		c.DecodeStepBase, c.DecodeStepPerSeq, c.PrefillTokensPerSec, c.StopProbability = step, 0, 0, 0
	}
}

// simPair runs the same workload (seed) against two engines at the same time — so that the
// host's load falls on both alike — and returns the two artifacts.
func simPair(t *testing.T, dir string, base, cand *sim.Server, seed int64, requests int) (string, string) {
	t.Helper()
	tok, err := prompt.TiktokenCounter("cl100k_base")
	if err != nil {
		t.Fatal(err)
	}
	paths := [2]string{filepath.Join(dir, fmt.Sprintf("base-%d.jsonl", seed)), filepath.Join(dir, fmt.Sprintf("cand-%d.jsonl", seed))}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, srv := range []*sim.Server{base, cand} {
		cfg := &loadgen.Config{
			Endpoint: srv.URL() + "/v1/chat/completions", Model: sim.DefaultConfig().Model, RunID: fmt.Sprintf("run-%d-%d", seed, i),
			Timeout: 10 * time.Second, Stream: true, StreamUsage: true, Seed: seed,
			Concurrency: []int{1}, InputTokens: []int{16}, OutputTokens: []int{2}, Requests: requests, WarmupRequests: 5,
		}
		cfg.Defaults()
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := run.New(run.Spec{Workload: cfg, Tokenizer: tok, TokenizerName: "tiktoken", Output: paths[i], Version: "test"}).Execute(context.Background())
			if res.Err != nil || res.Status != artifact.StatusCompleted {
				errs[i] = fmt.Errorf("run %d: %v (status %s)", i, res.Err, res.Status)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return paths[0], paths[1]
}

// Done-when: two simulated engines whose steps are 10 and 15 ms give TTFTs 5 ms apart; compare
// says TTFT is worse and the p50 difference's interval covers +5 ms. A host stall can still
// push one interval off the truth (it covers it in 95% of runs by construction): a miss is
// run again, up to three times, each logged.
func TestCompareSimKnownShift(t *testing.T) {
	if testing.Short() {
		t.Skip("sends load to the simulated engine")
	}
	base := testkit.StartSim(t, stepEngine(10*time.Millisecond))
	cand := testkit.StartSim(t, stepEngine(15*time.Millisecond))
	const truth = 5.0 // ms
	for attempt := 1; ; attempt++ {
		b, c := simPair(t, t.TempDir(), base, cand, int64(attempt), 120)
		res, err := Run(context.Background(), Options{Base: []string{b}, Candidate: []string{c}})
		if err != nil {
			t.Fatal(err)
		}
		ttft := metric(t, res.Cases[0], artifact.MetricTTFT)
		p50 := ttft.Quantiles[0]
		ok := ttft.Verdict == VerdictWorse && p50.Sufficient && p50.Verdict == VerdictWorse &&
			*p50.DiffLower <= truth && truth <= *p50.DiffUpper
		t.Logf("attempt %d: ttft %s (effect %.3f), p50 %s → %s ms, %+.2f ms [%+.2f, %+.2f] %s",
			attempt, ttft.Verdict, ttft.Rank.Effect, ms(p50.BaseMs), ms(p50.CandMs), *p50.DiffMs, *p50.DiffLower, *p50.DiffUpper, p50.Verdict)
		if ok {
			return
		}
		if attempt == 3 {
			t.Fatalf("TTFT 5 ms slower by construction: verdict %s, p50 interval [%g, %g] ms", ttft.Verdict, *p50.DiffLower, *p50.DiffUpper)
		}
	}
}

// Done-when: two runs of one configuration are not distinguishable — no metric, quantile or
// share better or worse — in at least 95% of 40 seeded repeats (38). Each repeat is a pair of
// 120-request runs against two engines of one configuration. Slow (about 40 × 2 s): it runs
// with INFERPROBE_SLOW_TESTS=1.
func TestCompareSimSameConfigNotDistinguishable(t *testing.T) {
	if os.Getenv("INFERPROBE_SLOW_TESTS") == "" {
		t.Skip("set INFERPROBE_SLOW_TESTS=1: 40 pairs of runs against the simulated engine")
	}
	a := testkit.StartSim(t, stepEngine(10*time.Millisecond))
	b := testkit.StartSim(t, stepEngine(10*time.Millisecond))
	quiet := 0
	for seed := int64(1); seed <= 40; seed++ {
		bp, cp := simPair(t, t.TempDir(), a, b, seed, 120)
		res, err := Run(context.Background(), Options{Base: []string{bp}, Candidate: []string{cp}})
		if err != nil {
			t.Fatal(err)
		}
		if verdicts := distinguished(res); len(verdicts) == 0 {
			quiet++
		} else {
			t.Logf("seed %d: %v", seed, verdicts)
		}
	}
	t.Logf("not distinguishable in %d of 40 repeats", quiet)
	if quiet < 38 {
		t.Fatalf("not distinguishable in %d of 40 repeats, want at least 38", quiet)
	}
}

// distinguished lists every better or worse verdict of a comparison.
func distinguished(r *Result) []string {
	var out []string
	for _, c := range r.Cases {
		for _, m := range c.Metrics {
			if m.Verdict == VerdictBetter || m.Verdict == VerdictWorse {
				out = append(out, m.Key+" "+m.Verdict)
			}
			for _, q := range m.Quantiles {
				if q.Verdict == VerdictBetter || q.Verdict == VerdictWorse {
					out = append(out, m.Key+" "+q.Level+" "+q.Verdict)
				}
			}
		}
		for name, d := range map[string]*ProportionDiff{"success": c.Success, "attainment": c.Attainment} {
			if d != nil && (d.Verdict == VerdictBetter || d.Verdict == VerdictWorse) {
				out = append(out, name+" "+d.Verdict)
			}
		}
	}
	return out
}
