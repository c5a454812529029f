package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/compare"
	"github.com/inferprobe/inferprobe/join"
)

func init() { verbs = append(verbs, newCompareCmd) }

// compareFlags are the raw flag values of `inferprobe compare`.
type compareFlags struct {
	analyzeFlags // --slo, --slo-file, --format, --output
	failOn       []string
	confidence   float64
	allowDigest  bool
	telemetry    [2][]string
	metrics      []string
}

func newCompareCmd() *cobra.Command {
	var cf compareFlags
	cmd := &cobra.Command{
		Use:   "compare BASE CANDIDATE",
		Short: "Decide whether a candidate run is better, worse or not distinguishable from a base run, with a regression gate for CI",
		Long: `compare reads two runs of one workload — each an artifact, a directory of a sharded
run's artifacts, or comma-separated shard files — matches their cases by id, and for
every case and per-request metric (client TTFT, TPOT, e2e, their _from_intended forms, e2e
per output token, and server.* with joined spans) gives each quantile's difference with a
distribution-free confidence interval, a Brunner–Munzel rank test for a shift, and the
difference in success and SLO attainment with Newcombe's interval. Every verdict —
better, worse or not distinguishable — holds at the stated confidence over all the tests
together (Holm). A quantile with too few requests for its interval says so instead of a
verdict. Throughput, goodput, energy and cost per token are shown side by side.

Workloads with different digests are refused (name what differs) unless
--allow-digest-mismatch; different models, APIs, engines and SLO policies are named.

--fail-on SPEC (repeatable) is a regression gate: client.ttft.p99:+5% fires when the
candidate's p99 TTFT exceeds the base's by more than 5% and that is significant;
+20ms is absolute; slo.attainment:-1% and success:-1% fire on a fall of more than one
percentage point. A gate with too few requests to test does not fire, and says so.

Exit codes: 0 compared (no gate fired); 3 a gate fired; 2 bad flags (an unknown metric or
percentile in --fail-on); 5 a missing, unreadable or invalid artifact, runs of different
workloads, or no case in both; 1 anything else; 130 interrupted.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cf.run(cmd, args)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cf.format, "format", "txt", "txt, json (pretty-printed, sorted keys) or html (a page with the overlaid CDFs)")
	f.StringVar(&cf.output, "output", "", "write the comparison to this file instead of stdout")
	f.StringArrayVar(&cf.failOn, "fail-on", nil, "regression gate METRIC.pQ:+N% | +Nms, slo.attainment:-N% or success:-N%; repeatable (exit 3 when one fires)")
	f.Float64Var(&cf.confidence, "confidence", compare.DefaultConfidence, "confidence of every interval and verdict, over all tests together")
	f.StringArrayVar(&cf.metrics, "metric", nil, "compare only this per-request metric (repeatable; a name without a dot is client.NAME): fewer tests, more power each")
	f.BoolVar(&cf.allowDigest, "allow-digest-mismatch", false, "compare runs whose workload digests differ (the difference is named)")
	f.StringArrayVar(&cf.slo, "slo", nil, "SLO criterion KEY:MS judging both runs, repeatable (ttft:500, e2e:2000)")
	f.StringVar(&cf.sloFile, "slo-file", "", "SLO policy document judging both runs (stormlog.infer.slo version 1)")
	f.StringArrayVar(&cf.telemetry[0], "base-server-telemetry", nil, "collect-server file of the base run (energy); repeatable")
	f.StringArrayVar(&cf.telemetry[1], "candidate-server-telemetry", nil, "collect-server file of the candidate run (energy); repeatable")
	f.BoolVar(&cf.directServer, "direct-server", false, "assert that each run's requests reached the one server its telemetry observed")
	cf.cost.register(f, 2)
	return cmd
}

// options turns the flags into compare.Options; every error is a usage error (exit 2)
// except an unreadable --slo-file or telemetry file (exit 5).
func (cf *compareFlags) options(cmd *cobra.Command, args []string) (compare.Options, error) {
	o := compare.Options{Confidence: cf.confidence, AllowDigestMismatch: cf.allowDigest}
	for _, m := range cf.metrics {
		if !strings.Contains(m, ".") {
			m = "client." + m
		}
		o.Metrics = append(o.Metrics, m)
	}
	for _, s := range cf.failOn {
		g, err := compare.ParseGate(s)
		if err != nil {
			return o, usageErrorf("%v", err)
		}
		o.Gates = append(o.Gates, g)
	}
	if cf.format != "txt" && cf.format != "json" && cf.format != "html" {
		return o, usageErrorf("--format must be txt, json or html, not %q", cf.format)
	}
	if cmd.Flags().Changed("output") && cf.output == "" {
		return o, usageErrorf("--output needs a file name")
	}
	policy, source, err := cf.policy(cmd)
	if err != nil {
		return o, err
	}
	rates, _, err := cf.cost.rates()
	if err != nil {
		return o, err
	}
	sides := [2]*analyze.Options{&o.BaseAnalysis, &o.CandidateAnalysis}
	for i, arg := range args {
		paths := splitPaths(arg)
		for _, p := range paths {
			if cf.output != "" && samePath(cf.output, p) {
				return o, usageErrorf("--output would overwrite the artifact %s", p)
			}
		}
		if i == 0 {
			o.Base = paths
		} else {
			o.Candidate = paths
		}
		*sides[i] = analyze.Options{Policy: policy, PolicySource: source, Cost: rates[i]}
		if len(cf.telemetry[i]) > 0 {
			st := &analyze.ServerTelemetry{DirectServer: cf.directServer}
			for _, file := range cf.telemetry[i] {
				samples, err := join.ReadTelemetryFile(file)
				if err != nil {
					return o, withCode(exitBadInput, fmt.Errorf("%s server telemetry: %w", [2]string{"base", "candidate"}[i], err))
				}
				st.Samples = append(st.Samples, samples...)
			}
			sides[i].ServerTelemetry = st
		}
	}
	if err := o.Validate(); err != nil {
		return o, usageErrorf("%v", err)
	}
	return o, nil
}

// splitPaths reads a run argument: comma-separated files are one sharded run's artifacts.
func splitPaths(arg string) []string {
	var out []string
	for _, p := range strings.Split(arg, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return []string{arg}
	}
	return out
}

func (cf *compareFlags) run(cmd *cobra.Command, args []string) error {
	o, err := cf.options(cmd, args)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The runs are read one after the other: the limit is the larger run's, not their sum.
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(max(analyzeMemoryLimit(o.Base...), analyzeMemoryLimit(o.Candidate...))))
	if analyzeGCOff() {
		defer debug.SetGCPercent(debug.SetGCPercent(-1))
	}
	res, err := compare.Run(ctx, o)
	if err != nil {
		switch {
		case ctx.Err() != nil && errors.Is(err, ctx.Err()):
			fmt.Fprintln(cmd.ErrOrStderr(), "Interrupted")
			return &exitError{code: exitInterrupted}
		case errors.Is(err, artifact.ErrInvalidArtifact), errors.Is(err, join.ErrInvalidTelemetry):
			return withCode(exitBadInput, err)
		default:
			return withCode(exitUnexpected, err)
		}
	}
	var buf bytes.Buffer
	switch cf.format {
	case "json":
		err = compare.WriteJSON(&buf, res)
	case "html":
		err = compare.WriteHTML(&buf, res)
	default:
		err = compare.RenderText(&buf, res)
	}
	if err != nil {
		return withCode(exitUnexpected, err)
	}
	if cf.output == "" {
		if _, err := cmd.OutOrStdout().Write(buf.Bytes()); err != nil {
			return withCode(exitUnexpected, err)
		}
	} else {
		if err := writeReportFile(cf.output, buf.Bytes()); err != nil {
			return withCode(exitUnexpected, fmt.Errorf("cannot write --output: %w", err))
		}
		fmt.Fprintf(cmd.OutOrStdout(), "Comparison saved to: %s\n", cf.output)
	}
	if res.Fired {
		if cf.format != "txt" || cf.output != "" {
			fmt.Fprintln(cmd.ErrOrStderr(), "A --fail-on gate fired: the regression is significant")
		}
		return &exitError{code: exitFindings}
	}
	return nil
}
