// Package calibrate is `inferprobe calibrate`: it drives the embedded simulated engine from
// this host at rising fixed rates and reports the envelope — the highest rate (and the
// streams in flight it implies) at which the load generator's own self-audit stays clean —
// so that a user knows what one client host can test before trusting a result.
//
// The engine is configured never to be the bottleneck (no per-sequence step cost, no
// prefill time, a batch and KV cache far larger than the load needs): every step is Gap
// long, so each streamed request holds its stream open for about OutputTokens × Gap, and
// what limits the run is the client. The engine shares this host's CPUs with the client,
// so the envelope is a conservative one for a client host that drives a remote server.
package calibrate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/loadgen"
	"github.com/inferprobe/inferprobe/loadgen/prompt"
	"github.com/inferprobe/inferprobe/loadgen/schedule"
	"github.com/inferprobe/inferprobe/run"
	"github.com/inferprobe/inferprobe/sim"
)

// RequestTimeout bounds each request of a step; a stream of OutputTokens × Gap must end
// well within it (Options are refused when it is not under half of it).
const RequestTimeout = 30 * time.Second

// MinStepArrivals is the fewest arrivals a step may schedule (StartRate × Step): with fewer,
// no dispatch rate or lag percentile says anything, and a step would read clean by default.
const MinStepArrivals = 10

// ErrOptions marks options that cannot calibrate anything (a bad value or combination).
var ErrOptions = errors.New("calibrate: bad options")

// Options configure a calibration. Zero values take the defaults named.
type Options struct {
	// Dir keeps one artifact per step (calibrate-<rate>.jsonl); "" uses a temporary
	// directory that is removed at the end.
	Dir string
	// StartRate is the first rate (requests/s; default 250); each clean step doubles it up
	// to MaxRate (default 16000).
	StartRate, MaxRate float64
	// Step is each step's measured window (default 3 s).
	Step time.Duration
	// Gap is the engine's step time: the gap between a stream's chunks (default 5 ms; at
	// least 1 ms).
	Gap time.Duration
	// InputTokens and OutputTokens size each request (defaults 16 and 16).
	InputTokens, OutputTokens int
	// MaxInFlight is the open loop's in-flight cap (default loadgen.DefaultMaxInFlight).
	MaxInFlight int
	// Refine is the number of bisection steps between the last clean and the first
	// client-limited rate (default 3; 0 keeps the default, negative skips refinement).
	Refine int
	// Version is inferprobe's version (recorded in each artifact).
	Version string
	// Progress, when set, receives each step as it finishes.
	Progress func(Step)
}

// Step is one rate tried: its client self-audit and where its artifact is.
type Step struct {
	RatePerSecond float64
	Audit         analyze.ClientAudit
	// PeakInFlight is the most requests outstanding at once (null without requests).
	PeakInFlight *int64
	// Clean is true when the case was not client-limited and every request succeeded.
	Clean bool
	// Failed counts the measured requests that did not succeed; TimedOut, those of them that
	// ran past RequestTimeout.
	Failed, TimedOut int
	Artifact         string
}

// Result is the envelope: the steps in the order run, the highest clean rate and its peak
// in flight (nil when not even StartRate was clean), the lowest client-limited rate tried
// (nil when MaxRate was clean), and the CPUs the client could use.
type Result struct {
	Steps         []Step
	CleanRate     *float64
	CleanInFlight *int64
	LimitedRate   *float64
	CPUs          int
}

// Run calibrates. Errors: bad options, the engine does not start, a step's run fails or its
// artifact cannot be analysed, ctx ends (the steps so far are returned with the error).
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	dir, cleanup, err := o.dir()
	if err != nil {
		return nil, err
	}
	defer cleanup()
	srv, err := sim.Start(ctx, engineConfig(o), "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("calibrate: start the simulated engine: %w", err)
	}
	defer srv.Close()
	tok, err := prompt.TiktokenCounter("cl100k_base")
	if err != nil {
		return nil, err
	}
	c := &calibration{o: o, dir: dir, url: srv.URL(), model: sim.DefaultConfig().Model, tok: tok}
	res := &Result{}
	err = ladder(ctx, o, res, c.step)
	res.CPUs = cpus(res.Steps)
	return res, err
}

// Validate fills the zero options with their defaults and checks the rest; its errors wrap
// ErrOptions. Run calls it; a caller may call it first, to refuse options before anything
// is printed.
func (o *Options) Validate() error {
	def := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.StartRate, 250)
	def(&o.MaxRate, 16000)
	if o.Step == 0 {
		o.Step = 3 * time.Second
	}
	if o.Gap == 0 {
		o.Gap = 5 * time.Millisecond
	}
	if o.InputTokens == 0 {
		o.InputTokens = 16
	}
	if o.OutputTokens == 0 {
		o.OutputTokens = 16
	}
	if o.MaxInFlight == 0 {
		o.MaxInFlight = loadgen.DefaultMaxInFlight
	}
	if o.Refine == 0 {
		o.Refine = 3
	}
	switch {
	case !(o.StartRate > 0) || math.IsInf(o.StartRate, 0) || !(o.MaxRate >= o.StartRate) || math.IsInf(o.MaxRate, 0):
		return fmt.Errorf("%w: rates must satisfy 0 < start ≤ max < ∞, not start %v, max %v", ErrOptions, o.StartRate, o.MaxRate)
	case o.Step < 100*time.Millisecond:
		return fmt.Errorf("%w: a step must last at least 100 ms, not %v", ErrOptions, o.Step)
	case o.Gap < time.Millisecond:
		return fmt.Errorf("%w: the chunk gap must be at least 1 ms, not %v", ErrOptions, o.Gap)
	case o.InputTokens < 1 || o.OutputTokens < 1 || o.MaxInFlight < 1:
		return fmt.Errorf("%w: input tokens, output tokens and the in-flight cap must be at least 1", ErrOptions)
	case o.MaxInFlight > loadgen.MaxConcurrency:
		return fmt.Errorf("%w: the in-flight cap must be at most %d, not %d", ErrOptions, loadgen.MaxConcurrency, o.MaxInFlight)
	case o.StartRate*o.Step.Seconds() < MinStepArrivals:
		return fmt.Errorf("%w: a %v step at %v req/s schedules %.3g arrivals, under the %d a step needs to judge the schedule: raise the start rate or the step",
			ErrOptions, o.Step, o.StartRate, o.StartRate*o.Step.Seconds(), MinStepArrivals)
	case float64(o.OutputTokens)*o.Gap.Seconds() > RequestTimeout.Seconds()/2:
		return fmt.Errorf("%w: %d output tokens %v apart keep a stream open %.4g s, over half the %v request timeout: lower the output tokens or the gap",
			ErrOptions, o.OutputTokens, o.Gap, float64(o.OutputTokens)*o.Gap.Seconds(), RequestTimeout)
	}
	return nil
}

// dir is the artifact directory and what removes it (a temporary one only).
func (o *Options) dir() (string, func(), error) {
	if o.Dir != "" {
		return o.Dir, func() {}, os.MkdirAll(o.Dir, 0o755)
	}
	d, err := os.MkdirTemp("", "inferprobe-calibrate-")
	if err != nil {
		return "", nil, err
	}
	return d, func() { _ = os.RemoveAll(d) }, nil
}

// engineConfig is an engine that is never the bottleneck: Gap-long steps whatever the
// batch, no prefill time, four engines with room for every stream.
func engineConfig(o Options) sim.Config {
	c := sim.DefaultConfig()
	c.Engines = 4
	c.DecodeStepBase, c.DecodeStepPerSeq, c.PrefillTokensPerSec = o.Gap, 0, 0
	c.MaxNumSeqs = max(o.MaxInFlight, 256)
	c.MaxNumBatchedTokens = c.MaxNumSeqs * (o.InputTokens + 1)
	c.BlockSize = 16
	blocks := (o.InputTokens + o.OutputTokens + c.BlockSize) / c.BlockSize
	c.NumGPUBlocks = max(c.MaxNumSeqs*blocks, c.NumGPUBlocks)
	c.MaxModelLen = max(c.MaxModelLen, o.InputTokens+o.OutputTokens+1)
	return c
}

// calibration is one Run's state.
type calibration struct {
	o          Options
	dir        string
	url, model string
	tok        prompt.Tokenizer
}

// stepFunc runs one step at a rate.
type stepFunc func(ctx context.Context, rate float64) (Step, error)

// ladder doubles the rate from StartRate (capped at MaxRate) while steps are clean, then
// bisects Refine times between the last clean and the first limited rate (midpoints
// rounded to whole requests per second), appending every step to res and handing it to
// Progress.
func ladder(ctx context.Context, o Options, res *Result, run stepFunc) error {
	var clean, limited *float64
	step := func(r float64) (Step, error) {
		st, err := run(ctx, r)
		if err == nil {
			res.Steps = append(res.Steps, st)
			if o.Progress != nil {
				o.Progress(st)
			}
		}
		return st, err
	}
	for r := o.StartRate; ; r = math.Min(2*r, o.MaxRate) {
		st, err := step(r)
		if err != nil {
			return err
		}
		if !st.Clean {
			limited = &r
			break
		}
		clean = &r
		if r >= o.MaxRate {
			break
		}
	}
	for i := 0; i < o.Refine && clean != nil && limited != nil; i++ {
		mid := math.Round((*clean + *limited) / 2)
		if mid <= *clean || mid >= *limited {
			break
		}
		st, err := step(mid)
		if err != nil {
			return err
		}
		if st.Clean {
			clean = &mid
		} else {
			limited = &mid
		}
	}
	res.CleanRate, res.LimitedRate = clean, limited
	for i := range res.Steps {
		if s := &res.Steps[i]; clean != nil && s.RatePerSecond == *clean {
			res.CleanInFlight = s.PeakInFlight
		}
	}
	return nil
}

// step runs one fixed-rate run at rate.
func (c *calibration) step(ctx context.Context, rate float64) (Step, error) {
	cfg := loadgen.Config{
		Endpoint: c.url + "/v1/chat/completions", Model: c.model, RunID: fmt.Sprintf("calibrate-%g", rate),
		Arrival: schedule.FixedRate, Rates: []float64{rate}, Duration: c.o.Step,
		Timeout: RequestTimeout, Stream: true, StreamUsage: true,
		InputTokens: []int{c.o.InputTokens}, OutputTokens: []int{c.o.OutputTokens},
		ExtraBody: map[string]any{"ignore_eos": true}, MaxInFlight: c.o.MaxInFlight, Overflow: loadgen.OverflowWait,
	}
	cfg.UseRunSeed()
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return Step{}, fmt.Errorf("calibrate: %g req/s: %w", rate, err)
	}
	spec := run.Spec{Workload: &cfg, Tokenizer: c.tok, TokenizerName: "auto", Version: c.o.Version,
		Output: filepath.Join(c.dir, fmt.Sprintf("calibrate-%g.jsonl", rate))}
	out := run.New(spec).Execute(ctx)
	switch {
	case out.Interrupted:
		return Step{}, ctx.Err()
	case out.Err != nil:
		return Step{}, fmt.Errorf("calibrate: %g req/s: %w", rate, out.Err)
	case out.Report == nil:
		return Step{}, fmt.Errorf("calibrate: %g req/s: %w", rate, out.ReportErr)
	}
	return stepOf(rate, out), nil
}

// stepOf is the step of a finished run: its one case's audit, peak in flight and failures.
func stepOf(rate float64, out *run.Result) Step {
	st := Step{RatePerSecond: rate, Artifact: out.Path}
	for _, cr := range out.Report.Cases {
		st.Audit, st.PeakInFlight = cr.Client, cr.Arrivals.PeakInFlight
		st.Failed, st.TimedOut = cr.Population.Offered-cr.SuccessfulRequests, cr.Population.TimedOut
	}
	st.Clean = !st.Audit.ClientLimited && st.Failed == 0 && len(out.Report.Cases) == 1
	return st
}

// cpus is the CPUs the steps' client health recorded (0 without any).
func cpus(steps []Step) int {
	for _, s := range steps {
		if s.Audit.CPUs != nil {
			return *s.Audit.CPUs
		}
	}
	return 0
}
