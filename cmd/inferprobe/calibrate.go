package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/calibrate"
	"github.com/inferprobe/inferprobe/loadgen"
	"github.com/spf13/cobra"
)

func init() { verbs = append(verbs, newCalibrateCmd) }

// Ranges of calibrate's number flags.
var (
	calibrateRate = artifact.Range{Min: 0, MinExclusive: true, Max: 1e6, Unit: "requests per second"}
	calibrateStep = artifact.Range{Min: 0.1, Max: 3600, Unit: "seconds"}
	calibrateGap  = artifact.Range{Min: 1, Max: 10000, Unit: "ms"}
	calibrateSize = artifact.Range{Min: 1, Max: 100000, Unit: "tokens"}
)

// newCalibrateCmd is `inferprobe calibrate` (package calibrate): flags → options → the
// envelope, one line per step.
func newCalibrateCmd() *cobra.Command {
	var o calibrate.Options
	var step, gap float64
	cmd := &cobra.Command{
		Use:   "calibrate",
		Short: "Find what this host can test: the highest rate the load generator sustains cleanly against the embedded engine",
		Long: `calibrate drives the embedded simulated engine (never the bottleneck: every step
--gap-ms long whatever the batch) at fixed rates from --start-rate, doubling while the
client's self-audit stays clean (dispatch lag p99 ≤ 1 ms, dispatch ≥ 99.5% of the schedule,
no arrival held or dropped, client CPU < 95%, every request successful), then bisects
--refine times between the last clean and the first client-limited rate. Each stream stays
open about --output-tokens × --gap-ms, so the peak in flight grows with the rate; a stream
longer than half the 30 s request timeout, or a first step of fewer than 10 arrivals
(--start-rate × --step-seconds), is a bad flag.

The engine runs in this process, on this host's CPUs: the envelope is conservative for a
client host that drives a remote server.

Exit codes: 0 the envelope was found; 3 not even --start-rate was clean; 2 a bad flag;
130 interrupted; 1 anything else. --output DIR must be a directory (or creatable); a step's
artifact already there is replaced.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, c := range []struct {
				flag string
				v    float64
				r    artifact.Range
			}{{"start-rate", o.StartRate, calibrateRate}, {"max-rate", o.MaxRate, calibrateRate}, {"step-seconds", step, calibrateStep},
				{"gap-ms", gap, calibrateGap}, {"input-tokens", float64(o.InputTokens), calibrateSize}, {"output-tokens", float64(o.OutputTokens), calibrateSize}} {
				if err := checkNumber(c.flag, c.v, c.r); err != nil {
					return err
				}
			}
			if o.MaxRate < o.StartRate {
				return usageErrorf("--max-rate %v is below --start-rate %v", o.MaxRate, o.StartRate)
			}
			if o.MaxInFlight < 1 || o.MaxInFlight > loadgen.MaxConcurrency {
				return usageErrorf("--max-in-flight must be within 1..%d, not %d", loadgen.MaxConcurrency, o.MaxInFlight)
			}
			if o.Refine < 0 || o.Refine > 20 {
				return usageErrorf("--refine must be in [0, 20] bisection steps, not %d", o.Refine)
			}
			if o.Refine == 0 {
				o.Refine = -1 // --refine 0: no bisection (the package's 0 means its default)
			}
			o.Step = time.Duration(step * float64(time.Second))
			o.Gap = time.Duration(gap * float64(time.Millisecond))
			o.Version = version
			out := cmd.OutOrStdout()
			if o.Dir != "" {
				if err := os.MkdirAll(o.Dir, 0o755); err != nil {
					return usageErrorf("--output %s: %v", o.Dir, err)
				}
			}
			if err := o.Validate(); err != nil {
				return usageErrorf("%v", err)
			}
			fmt.Fprintf(out, "Calibrating against the embedded engine: %d-token prompts, %d output tokens, %g ms between chunks, %g s per step\n",
				o.InputTokens, o.OutputTokens, gap, step)
			o.Progress = func(s calibrate.Step) { fmt.Fprintln(out, stepLine(s)) }
			ctx, stop := signal.NotifyContext(cmdContext(cmd), os.Interrupt, syscall.SIGTERM)
			defer stop()
			res, err := calibrate.Run(ctx, o)
			switch {
			case errors.Is(err, context.Canceled):
				fmt.Fprintln(cmd.ErrOrStderr(), "Interrupted")
				return &exitError{code: exitInterrupted}
			case err != nil:
				return withCode(exitUnexpected, err)
			}
			return envelope(out, res)
		},
	}
	f := cmd.Flags()
	f.Float64Var(&o.StartRate, "start-rate", 250, "first rate, requests per second")
	f.Float64Var(&o.MaxRate, "max-rate", 16000, "highest rate tried, requests per second")
	f.Float64Var(&step, "step-seconds", 3, "measured window of each step, seconds")
	f.Float64Var(&gap, "gap-ms", 5, "the engine's step time: the gap between a stream's chunks, ms")
	f.IntVar(&o.InputTokens, "input-tokens", 16, "prompt tokens per request")
	f.IntVar(&o.OutputTokens, "output-tokens", 16, "output tokens per request (ignore_eos)")
	f.IntVar(&o.MaxInFlight, "max-in-flight", 10000, "the open loop's in-flight cap")
	f.IntVar(&o.Refine, "refine", 3, "bisection steps between the last clean and the first client-limited rate (0: none)")
	f.StringVar(&o.Dir, "output", "", "keep each step's artifact in this directory (default: a temporary one, removed)")
	return cmd
}

// cmdContext is the command's context, or Background when it has none.
func cmdContext(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}

// stepLine renders one step, e.g.
//
//	1000 req/s: clean; dispatch lag p99 0.21 ms, 100.0% of schedule, peak 83 in flight, CPU 41% of 2 CPUs, receive stamps 100.0%
func stepLine(s calibrate.Step) string {
	a := s.Audit
	var parts []string
	if a.DispatchLagP99Ms != nil {
		lag := "dispatch lag p99 " + analyze.FormatMs(*a.DispatchLagP99Ms) + " ms"
		if a.DispatchLagOverBound > 0 {
			lag += fmt.Sprintf(" (%d over the %s ms bound)", a.DispatchLagOverBound, analyze.FormatMs(a.DispatchLagBoundMs))
		}
		parts = append(parts, lag)
	}
	if a.AchievedOverScheduled != nil {
		parts = append(parts, fmt.Sprintf("%.1f%% of schedule", 100**a.AchievedOverScheduled))
	}
	if s.PeakInFlight != nil {
		parts = append(parts, fmt.Sprintf("peak %d in flight", *s.PeakInFlight))
	}
	if a.CPUUtilization != nil && a.CPUs != nil {
		parts = append(parts, fmt.Sprintf("CPU %.0f%% of %d CPUs", 100**a.CPUUtilization, *a.CPUs))
	}
	if a.OtherCPUUtilization != nil {
		parts = append(parts, fmt.Sprintf("other processes %.0f%% of the host", 100**a.OtherCPUUtilization))
	}
	if a.ReceiveStampCoverage != nil {
		parts = append(parts, fmt.Sprintf("receive stamps %.1f%%", 100**a.ReceiveStampCoverage))
	}
	return fmt.Sprintf("%8g req/s: %s; %s", s.RatePerSecond, verdict(s), strings.Join(parts, ", "))
}

// verdict is a step's word: clean; client-limited (the self-audit's reasons, and failures);
// or, when only requests failed, failed (how many, and how many timed out).
func verdict(s calibrate.Step) string {
	if s.Clean {
		return "clean"
	}
	var failed []string
	if s.Failed > 0 {
		line := fmt.Sprintf("%d %s failed", s.Failed, analyze.Plural(s.Failed, "request", "requests"))
		if s.TimedOut > 0 {
			line += fmt.Sprintf(", %d of them timed out (the %v request timeout)", s.TimedOut, calibrate.RequestTimeout)
		}
		failed = append(failed, line)
	}
	if !s.Audit.ClientLimited {
		return "failed (" + strings.Join(failed, "; ") + ")"
	}
	var reasons []string
	for _, r := range s.Audit.Reasons {
		reasons = append(reasons, strings.Replace(r, analyze.OverflowDropAdvice, "", 1)) // calibrate always waits
	}
	if s.Audit.HostContended {
		reasons = append(reasons, fmt.Sprintf("its host contended: other processes took %.0f%% of it", 100**s.Audit.OtherCPUUtilization))
	}
	return "client-limited (" + strings.Join(append(reasons, failed...), "; ") + ")"
}

// envelope prints the result; exit 3 when not even the start rate was clean.
func envelope(w io.Writer, res *calibrate.Result) error {
	if res.CleanRate == nil {
		fmt.Fprintf(w, "Envelope: not even the start rate was clean on this host (%d CPUs): %s\n", res.CPUs, startAdvice(res))
		return &exitError{code: exitFindings}
	}
	inflight := ""
	if res.CleanInFlight != nil {
		inflight = fmt.Sprintf(" with up to %d %s in flight", *res.CleanInFlight, analyze.Plural(int(*res.CleanInFlight), "stream", "streams"))
	}
	above := "the highest rate tried"
	if res.LimitedRate != nil {
		above = fmt.Sprintf("client-limited at %g req/s", *res.LimitedRate)
		switch s := stepAt(res, *res.LimitedRate); {
		case s != nil && !s.Audit.ClientLimited:
			above = fmt.Sprintf("requests failed at %g req/s", *res.LimitedRate)
		case s != nil && s.Audit.HostContended:
			above += " (its host contended: other processes took the CPUs, so the envelope is this busy host's)"
		}
	}
	fmt.Fprintf(w, "Envelope: %g req/s%s, cleanly, on this host (%d CPUs); %s\n", *res.CleanRate, inflight, res.CPUs, above)
	return nil
}

// stepAt is the step run at rate (nil when none was).
func stepAt(res *calibrate.Result, rate float64) *calibrate.Step {
	for i := range res.Steps {
		if res.Steps[i].RatePerSecond == rate {
			return &res.Steps[i]
		}
	}
	return nil
}

// startAdvice is what to change when the start rate was not clean, read from its step:
// requests that failed or timed out, arrivals held for a slot (the in-flight cap), a host
// other processes kept busy, or the rate itself.
func startAdvice(res *calibrate.Result) string {
	if len(res.Steps) == 0 {
		return "lower --start-rate"
	}
	s := res.Steps[0]
	switch {
	case s.TimedOut > 0:
		return fmt.Sprintf("its requests timed out (the %v request timeout): lower --output-tokens or --gap-ms", calibrate.RequestTimeout)
	case s.Audit.HeldForSlot > 0 || s.Audit.Dropped > 0:
		return "its arrivals waited for an in-flight slot: raise --max-in-flight"
	case s.Failed > 0 && !s.Audit.ClientLimited:
		return "its requests failed (see the step's artifact with --output)"
	case s.Audit.HostContended:
		return fmt.Sprintf("other processes kept %.0f%% of the host's CPUs busy: run it on a quieter host", 100**s.Audit.OtherCPUUtilization)
	}
	return "lower --start-rate"
}
