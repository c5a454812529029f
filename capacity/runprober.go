package capacity

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/loadgen"
	"github.com/inferprobe/inferprobe/run"
)

// DefaultMaxLag is the backlog guard's default bound on a measured request's dispatch lag.
const DefaultMaxLag = time.Second

// RunProber sends every stage of a search as one ordinary run of the run pipeline
// (run.New(spec).Execute), with its own artifact and seed, and decides it from the
// analysis of that artifact alone under the stage's rule.
//
// Per stage, Workload (the user's, as profile's flags give it) is changed to one case: the
// stage's value as the only concurrency (Over "concurrency", closed loop) or the only rate
// (Over "rate": the workload's fixed-rate or poisson arrival, poisson when it has neither),
// the stage's requests, its seed (fresh prompts and nonces), Warmup warmup requests (nil:
// ⌈value⌉, one per worker or one second of arrivals — the warmup runs inside the probe,
// after the cache reset), and, when the workload names a run id, that id suffixed with the
// probe and stage. The workload's cache-reset URL, if any, is POSTed before each stage and
// must be acknowledged (or accepted), else the stage is an error. Spec is the template of
// every run (tokenizer, SLO, telemetry, warnings); its Workload, Output and Sinks are set
// per stage. Artifacts go to Dir/probe-NN.jsonl (NN the probe's index); when a probe is
// extended, its earlier run is kept as probe-NN.stage-K.jsonl.
//
// In rate mode a backlog guard stops a stage whose measured requests' dispatch lag exceeds
// MaxLag (0: DefaultMaxLag) or that had to hold an arrival for a free in-flight slot: its
// outcome is unsustainable.
type RunProber struct {
	Spec     run.Spec
	Workload loadgen.Workload
	Over     string
	Dir      string
	Tests    []Test
	Warmup   *int
	MaxLag   time.Duration
	// Started, when set, is told of each stage before it runs (a progress line).
	Started func(s Stage)
}

// Probe runs and judges one stage. Errors: an invalid workload for the value, a run that
// could not open its artifact or ended incomplete, an unreadable artifact, a refused cache
// reset, and ctx's error.
func (p *RunProber) Probe(ctx context.Context, s Stage) (Outcome, error) {
	spec, err := p.stageSpec(s)
	if err != nil {
		return Outcome{}, err
	}
	if s.Stage > 1 {
		prev := filepath.Join(p.Dir, fmt.Sprintf("probe-%02d.stage-%d.jsonl", s.Probe, s.Stage-1))
		if err := os.Rename(spec.Output, prev); err != nil && !errors.Is(err, os.ErrNotExist) {
			return Outcome{}, fmt.Errorf("probe %d: keeping the earlier run: %w", s.Probe, err)
		}
	}
	var g *guard
	if p.Over == artifact.OverRate {
		g = &guard{maxLagMs: float64(p.maxLag()) / 1e6}
		spec.Sinks = append(append([]artifact.Sink{}, spec.Sinks...), g)
	}
	if p.Started != nil {
		p.Started(s)
	}
	pl := run.New(spec)
	if g != nil {
		g.stop = pl.Stop
	}
	res := pl.Execute(ctx)
	if err := ctx.Err(); err != nil {
		return Outcome{Artifact: res.Path}, err
	}
	if res.Err != nil {
		return Outcome{Artifact: res.Path}, fmt.Errorf("probe %d at %g: %w", s.Probe, s.Value, res.Err)
	}
	rep, err := run.Analyze(ctx, res.Path, analyze.Options{Rule: s.Rule})
	if err != nil {
		return Outcome{Artifact: res.Path}, fmt.Errorf("probe %d at %g: %w", s.Probe, s.Value, err)
	}
	return p.judge(s, res.Path, rep, g)
}

// judge decides a stage from its report: its one case, its cache reset, the guard.
func (p *RunProber) judge(s Stage, path string, rep *analyze.Report, g *guard) (Outcome, error) {
	if len(rep.Cases) != 1 {
		return Outcome{Artifact: path}, fmt.Errorf("probe %d: %s holds %d cases, want 1", s.Probe, path, len(rep.Cases))
	}
	var c *analyze.CaseReport
	for _, v := range rep.Cases {
		c = v
	}
	out := Outcome{Artifact: path, Requests: c.Population.Offered}
	if c.Population.Successful == 0 && c.Population.Offered > 0 {
		out.Note = fmt.Sprintf("none of its %d requests succeeded", c.Population.Offered)
		if frs := rep.Summary.FailureReasons; len(frs) > 0 {
			out.Note += fmt.Sprintf(" (%d× %s)", frs[0].Count, analyze.FailureReasonText(frs[0]))
		}
	}
	if p.Workload.CacheResetURL != "" {
		if r := c.Cache.Reset; r == nil || (r.Answer != loadgen.ResetAcknowledged && r.Answer != loadgen.ResetAcceptedUnverified) {
			return out, fmt.Errorf("probe %d at %g: the prefix-cache reset did not succeed: %s", s.Probe, s.Value, c.Cache.Reason)
		}
	}
	out.Decision, out.Tests = Judge(c, p.Tests, s.Rule)
	if g != nil {
		if reason := g.tripped(); reason != "" {
			out.Decision, out.Reason = artifact.DecisionUnsustainable, reason
		}
	}
	return out, nil
}

func (p *RunProber) maxLag() time.Duration {
	if p.MaxLag > 0 {
		return p.MaxLag
	}
	return DefaultMaxLag
}

// stageSpec is the run of stage s: the workload at its value, size and seed.
func (p *RunProber) stageSpec(s Stage) (run.Spec, error) {
	w := p.Workload
	switch p.Over {
	case artifact.OverConcurrency:
		w.Concurrency, w.Rates, w.Arrival = []int{int(s.Value)}, nil, artifact.Ptr("closed")
	case artifact.OverRate:
		arrival := "poisson"
		if w.Arrival != nil && *w.Arrival == "fixed-rate" {
			arrival = "fixed-rate"
		}
		w.Concurrency, w.Rates, w.Arrival = nil, []float64{s.Value}, &arrival
	default:
		return run.Spec{}, fmt.Errorf("unknown control variable %q", p.Over)
	}
	w.Requests, w.Duration = artifact.Ptr(s.Requests), nil
	w.Seed = artifact.Ptr(s.Seed)
	w.WarmupRequests = int(math.Ceil(s.Value))
	if p.Warmup != nil {
		w.WarmupRequests = *p.Warmup
	}
	if w.RunID != "" {
		w.RunID = fmt.Sprintf("%s-p%02d-s%d", p.Workload.RunID, s.Probe, s.Stage)
	}
	cfg, err := w.Config()
	if err != nil {
		return run.Spec{}, fmt.Errorf("probe %d at %g: %w", s.Probe, s.Value, err)
	}
	cfg.RunSeeded = true // each run of the search draws its own seed (Stage.Seed)
	spec := p.Spec
	spec.Workload = cfg
	spec.Output = filepath.Join(p.Dir, fmt.Sprintf("probe-%02d.jsonl", s.Probe))
	return spec, nil
}

// guard is the rate mode's backlog guard: a sink that stops the run at the first measured
// request dispatched more than maxLagMs late or held for a free in-flight slot.
type guard struct {
	maxLagMs float64
	stop     func()

	mu     sync.Mutex
	reason string
}

// Write watches the measured infer.request records; it never fails.
func (g *guard) Write(rec artifact.Record) error {
	r, ok := rec.(*artifact.Request)
	if !ok || r.Phase != artifact.PhaseMeasured {
		return nil
	}
	var reason string
	switch {
	case r.DispatchLagMS != nil && *r.DispatchLagMS > g.maxLagMs:
		reason = fmt.Sprintf("a request was dispatched %.0f ms late (bound %.0f ms): the backlog grows", *r.DispatchLagMS, g.maxLagMs)
	case r.HeldForSlot != nil && *r.HeldForSlot:
		reason = "an arrival waited for a free in-flight slot: the backlog grows"
	default:
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.reason == "" {
		g.reason = reason
		if g.stop != nil {
			go g.stop()
		}
	}
	return nil
}

// Close does nothing.
func (g *guard) Close() error { return nil }

func (g *guard) tripped() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.reason
}
