package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/pareto"
)

func init() { verbs = append(verbs, newParetoCmd) }

// paretoFlags are the raw flag values of `inferprobe pareto`.
type paretoFlags struct {
	analyzeFlags // --slo, --slo-file, --format, --output, cost flags
	png          string
	target       float64
}

func newParetoCmd() *cobra.Command {
	var pf paretoFlags
	cmd := &cobra.Command{
		Use:   "pareto RUN... | DIRECTORY... | SEARCH-DIRECTORY",
		Short: "Find the throughput–interactivity Pareto fronts of a set of runs or a capacity search",
		Long: `pareto analyses a set of runs — artifacts, directories of artifacts (each .jsonl file
its own run), or a capacity search's directory (its search.jsonl names the probes'
artifacts, values and decisions) — and plots every case as output tokens per second (per
GPU with --gpus) against interactivity: 1/TPOT (the p50 TPOT as one user's tokens per
second) and E2E normalized interactivity, 1 / p90 of each request's e2e ÷ output tokens.
A point is on a front when no other point has at least its throughput and its
interactivity. SLO-meeting points are marked: a search probe that passed, or a case whose
attainment's lower bound reaches the policy's target (--attainment-target without one).
--cost-per-hour adds dollars per million output tokens; --png draws both fronts.

Exit codes: 0 the table was written; 5 a missing or invalid artifact or search record;
2 bad flags; 1 an unwritable --output or --png, or anything else; 130 interrupted.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return pf.run(cmd, args)
		},
	}
	f := cmd.Flags()
	f.StringVar(&pf.format, "format", "txt", "txt (a table) or json (pretty-printed, sorted keys)")
	f.StringVar(&pf.output, "output", "", "write the table to this file instead of stdout")
	f.StringVar(&pf.png, "png", "", "draw both fronts into this PNG file")
	f.StringArrayVar(&pf.slo, "slo", nil, "SLO criterion KEY:MS judging every run, repeatable (ttft:500, e2e:2000)")
	f.StringVar(&pf.sloFile, "slo-file", "", "SLO policy document judging every run (stormlog.infer.slo version 1)")
	f.Float64Var(&pf.target, "attainment-target", pareto.DefaultAttainmentTarget, "attainment a case must reach to meet an SLO policy that states no target")
	pf.cost.register(f, 1)
	return cmd
}

func (pf *paretoFlags) run(cmd *cobra.Command, args []string) error {
	if pf.format != "txt" && pf.format != "json" {
		return usageErrorf("--format must be txt or json, not %q", pf.format)
	}
	if !(pf.target > 0 && pf.target <= 1) {
		return usageErrorf("--attainment-target must be in (0, 1], not %g", pf.target)
	}
	for _, flag := range []string{"output", "png"} {
		if v, _ := cmd.Flags().GetString(flag); cmd.Flags().Changed(flag) && v == "" {
			return usageErrorf("--%s needs a file name", flag)
		}
	}
	policy, source, err := pf.policy(cmd)
	if err != nil {
		return err
	}
	rates, gpus, err := pf.cost.rates()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := pareto.Run(ctx, pareto.Options{Inputs: args, GPUs: gpus[0], AttainmentTarget: pf.target,
		Analysis: analyze.Options{Policy: policy, PolicySource: source, Cost: rates[0]}})
	if err != nil {
		switch {
		case ctx.Err() != nil && errors.Is(err, ctx.Err()):
			fmt.Fprintln(cmd.ErrOrStderr(), "Interrupted")
			return &exitError{code: exitInterrupted}
		case errors.Is(err, artifact.ErrInvalidArtifact):
			return withCode(exitBadInput, err)
		default:
			return withCode(exitUnexpected, err)
		}
	}
	var buf bytes.Buffer
	if pf.format == "json" {
		err = pareto.WriteJSON(&buf, res)
	} else {
		err = pareto.RenderText(&buf, res)
	}
	if err != nil {
		return withCode(exitUnexpected, err)
	}
	if pf.output == "" {
		if _, err := cmd.OutOrStdout().Write(buf.Bytes()); err != nil {
			return withCode(exitUnexpected, err)
		}
	} else if err := writeReportFile(pf.output, buf.Bytes()); err != nil {
		return withCode(exitUnexpected, fmt.Errorf("cannot write --output: %w", err))
	}
	if pf.png != "" {
		if err := pareto.WritePNG(pf.png, res); err != nil {
			return withCode(exitUnexpected, fmt.Errorf("cannot draw --png: %w", err))
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "Pareto plot saved to: %s\n", pf.png)
	}
	return nil
}
