package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/capacity"
	"github.com/inferprobe/inferprobe/loadgen"
	"github.com/inferprobe/inferprobe/run"
)

func init() { verbs = append(verbs, newSearchCmd) }

// searchFlags are `inferprobe search`'s own flags; the target, prompt, SLO and telemetry
// flags are profile's (profileFlags).
type searchFlags struct {
	pf                              profileFlags
	over                            string
	min, max, tolerance, confidence float64
	quantile, maxLag                float64
	maxProbes, maxRequests          int
	json                            bool
}

func newSearchCmd() *cobra.Command {
	var sf searchFlags
	cmd := &cobra.Command{
		Use:   "search",
		Short: "Find the largest concurrency or rate that meets an SLO (a capacity search)",
		Long: `search probes the target at values of a control variable — --over concurrency
(closed loop, the default) or --over rate (open loop) — between --min and --max, and reports
the largest value that meets the SLO (--slo or --slo-file), to a relative --tolerance.

Each probe is one ordinary run (its own artifact DIR/probe-NN.jsonl, seed, cache reset when
--cache-reset-url is given, and warmup). A criterion passes when the upper confidence bound
of its failure-penalised --quantile is within its threshold (and an attainment target's
lower Clopper-Pearson bound reaches it), fails when the lower bound is beyond it, and is
otherwise extended with twice the requests, up to --max-requests-per-probe, then undecided.
--confidence is split over a probe's looks and tests. The infer.search record goes to
DIR/search.jsonl and the plot to DIR/search.png.

Exit codes: 0 a value in range meets the SLO; 3 none was shown to; 2 an unusable setting
(nothing sent); 5 an unreadable --slo-file; 130 interrupted; 1 anything else.`,
		Args: noArgsOptionalValueHint,
		RunE: func(cmd *cobra.Command, _ []string) error {
			prober, opts, err := sf.prober(cmd)
			if err != nil {
				return err
			}
			return runSearch(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), prober, opts, sf)
		},
	}
	sf.pf.register(cmd)
	f := cmd.Flags()
	f.Lookup("output").Usage = "directory for search.jsonl, search.png and probe-NN.jsonl (required)"
	f.Lookup("requests").Usage = "measured requests of a probe's first run (default: the fewest that can decide)"
	f.StringVar(&sf.over, "over", "concurrency", "control variable: concurrency (closed loop) or rate (open loop, requests/s)")
	f.Float64Var(&sf.min, "min", capacity.DefaultMin, "lowest value probed")
	f.Float64Var(&sf.max, "max", capacity.DefaultMax, "highest value probed")
	f.Float64Var(&sf.tolerance, "tolerance", capacity.DefaultTolerance, "relative width of the final bracket (0.1: 10 %)")
	f.Float64Var(&sf.confidence, "confidence", capacity.DefaultConfidence, "confidence of each probe's decision")
	f.Float64Var(&sf.quantile, "quantile", capacity.DefaultQuantile, "quantile of each criterion judged against its threshold: 0.5, 0.9, 0.95 or 0.99")
	f.IntVar(&sf.maxProbes, "max-probes", capacity.DefaultMaxProbes, "most values probed")
	f.IntVar(&sf.maxRequests, "max-requests-per-probe", capacity.DefaultMaxRequestsPerProbe, "most measured requests of a probe's (last) run")
	f.Float64Var(&sf.maxLag, "max-lag", capacity.DefaultMaxLag.Seconds(), "rate mode: a dispatch lag beyond this many seconds marks the probe unsustainable")
	f.BoolVar(&sf.json, "json", false, "print the infer.search record as JSON instead of the text report")
	return cmd
}

// prober turns the flags into the search's prober and options; every error is exit 2
// (an unreadable --slo-file exit 5) and comes before anything is sent.
func (sf *searchFlags) prober(cmd *cobra.Command) (*capacity.RunProber, capacity.Options, error) {
	pf, f := &sf.pf, cmd.Flags()
	if err := sf.check(cmd); err != nil {
		return nil, capacity.Options{}, err
	}
	policy, err := pf.policy()
	if err != nil {
		return nil, capacity.Options{}, err
	}
	if policy == nil {
		return nil, capacity.Options{}, usageErrorf("search needs an SLO: give --slo KEY:MS or --slo-file")
	}
	tests, err := capacity.TestsOf(policy.Policy, sf.quantile)
	if err != nil {
		return nil, capacity.Options{}, usageErrorf("%v", err)
	}
	opts := capacity.Options{Over: sf.over, Min: sf.min, Max: sf.max, Tolerance: sf.tolerance, Confidence: sf.confidence,
		MaxProbes: sf.maxProbes, MaxRequestsPerProbe: sf.maxRequests, Tests: tests, Seed: pf.seed}
	if f.Changed("requests") {
		opts.Requests = pf.requests
	}
	plan, err := capacity.PlanOf(opts)
	if err != nil {
		return nil, capacity.Options{}, usageErrorf("%v", err)
	}
	// The workload is validated as the first probe will run it.
	if !f.Changed("requests") {
		_ = f.Set("requests", strconv.Itoa(plan.First))
	}
	if sf.over == artifact.OverRate {
		pf.w.Rates = []float64{sf.min}
		if !f.Changed("arrival") {
			_ = f.Set("arrival", "poisson")
		}
	} else {
		pf.w.Concurrency = []int{int(sf.min)}
	}
	cfg, tok, tokName, err := pf.config(cmd)
	if err != nil {
		return nil, capacity.Options{}, err
	}
	if pf.output == "" {
		return nil, capacity.Options{}, usageErrorf("--output (the search directory) is required")
	}
	if st, err := os.Stat(pf.output); err == nil && !st.IsDir() {
		return nil, capacity.Options{}, usageErrorf("--output %s is a file; search writes a directory", pf.output)
	}
	spec, err := pf.spec(cmd, cfg, tok, tokName)
	if err != nil {
		return nil, capacity.Options{}, err
	}
	if spec.Trace != nil {
		return nil, capacity.Options{}, usageErrorf("--trace opens trace windows in profile runs only, not in a search's probes")
	}
	for _, t := range tests {
		if strings.HasPrefix(t.Key, "server.") && spec.Receiver == nil {
			return nil, capacity.Options{}, usageErrorf("criterion %s needs vLLM's spans: give --vllm-spans-listen", t.Key)
		}
	}
	opts.SearchID = cfg.RunID
	if !f.Changed("seed") {
		// Without --seed, a search draws its runs' seeds from its run id: another search
		// never finds this one's prompts in the prefix cache.
		opts.Seed = loadgen.RunSeed(cfg.RunID)
	}
	w := pf.workload(cmd)
	var warmup *int
	if f.Changed("warmup-requests") {
		warmup = &pf.w.WarmupRequests
	}
	if err := searchDir(pf.output); err != nil {
		return nil, capacity.Options{}, err
	}
	return &capacity.RunProber{Spec: spec, Workload: w, Over: sf.over, Dir: pf.output, Tests: tests, Warmup: warmup,
		MaxLag: time.Duration(sf.maxLag * float64(time.Second))}, opts, nil
}

// searchDir makes the search directory dir, which must be new or empty (another search's
// probe files beside this one's would read as its own), and checks that a file can be
// created in it; every error is exit 2 and comes before anything is sent.
func searchDir(dir string) error {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return usageErrorf("--output %s is not empty (%d entries, e.g. %s): give a new or empty directory for the search", dir, len(entries), entries[0].Name())
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return usageErrorf("cannot create --output: %v", err)
	}
	f, err := os.CreateTemp(dir, ".write-check-*")
	if err != nil {
		return usageErrorf("cannot write into --output: %v", err)
	}
	f.Close()
	return os.Remove(f.Name())
}

// check refuses the flags search sets itself and the unusable values of its own (exit 2). A
// zero option means the default to the capacity package; given as a flag it is refused.
func (sf *searchFlags) check(cmd *cobra.Command) error {
	pf, f := &sf.pf, cmd.Flags()
	for _, name := range []string{"concurrency", "rate", "duration", "arrival-trace"} {
		if f.Changed(name) {
			return usageErrorf("--%s cannot be given to search: the control variable is --over between --min and --max, and each probe's size is --requests", name)
		}
	}
	if f.Changed("arrival") && !(sf.over == artifact.OverRate && (pf.arrival == "poisson" || pf.arrival == "fixed-rate")) {
		return usageErrorf("--arrival: search takes poisson or fixed-rate with --over rate only")
	}
	switch {
	case !(sf.tolerance > 0 && sf.tolerance < 1):
		return usageErrorf("--tolerance must be between 0 and 1, not %g", sf.tolerance)
	case !(sf.confidence > 0 && sf.confidence < 1):
		return usageErrorf("--confidence must be between 0 and 1, not %g", sf.confidence)
	case sf.maxProbes < 2 || sf.maxRequests < 1 || f.Changed("requests") && pf.requests < 1:
		return usageErrorf("--max-probes must be at least 2, --max-requests-per-probe and --requests at least 1")
	}
	if !(sf.maxLag > 0 && sf.maxLag <= 3600) {
		return usageErrorf("--max-lag must be > 0 and at most 3600 seconds")
	}
	return nil
}

// runSearch runs the search and renders it: progress and warnings on stderr, the report on
// stdout, the record to DIR/search.jsonl and the plot to DIR/search.png. Exit: 0 with a
// capacity, 3 without, 130 interrupted, 1 on any other error.
func runSearch(ctx context.Context, stdout, stderr io.Writer, pr *capacity.RunProber, opts capacity.Options, sf searchFlags) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	pr.Spec.Warn = func(msg string) { fmt.Fprintf(stderr, "Warning: %s\n", msg) }
	if !sf.pf.quiet {
		pr.Started = func(s capacity.Stage) {
			fmt.Fprintf(stderr, "probe %d at %g: run %d, %d requests\n", s.Probe, s.Value, s.Stage, s.Requests)
		}
	}
	res, recordPath, err := capacity.SearchAndWrite(ctx, pr, pr.Dir, opts, func(msg string) { fmt.Fprintf(stderr, "Warning: %s\n", msg) })
	if res == nil {
		return withCode(exitUnexpected, err)
	}
	render := capacity.RenderText
	if sf.json {
		render = capacity.WriteJSON
	}
	if rerr := render(stdout, res); rerr != nil && err == nil {
		err = rerr
	}
	if sf.json {
		fmt.Fprintf(stderr, "Search record: %s\n", recordPath)
	} else {
		fmt.Fprintf(stdout, "Search record: %s\n", recordPath)
	}
	switch {
	case errors.Is(err, run.ErrOpen):
		return usageErrorf("cannot write into --output: %v", err)
	case errors.Is(err, context.Canceled) || ctx.Err() != nil:
		fmt.Fprintln(stderr, "Interrupted")
		return &exitError{code: exitInterrupted}
	case err != nil:
		return withCode(exitUnexpected, err)
	case res.Capacity == nil:
		fmt.Fprintln(stderr, "No value in range was shown to meet the SLO.")
		return &exitError{code: exitFindings}
	}
	return nil
}
