package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/loadgen"
	"github.com/inferprobe/inferprobe/loadgen/prompt"
	"github.com/inferprobe/inferprobe/run"
	"github.com/inferprobe/inferprobe/scrape/collect"
	"github.com/inferprobe/inferprobe/tables"
)

func init() { verbs = append(verbs, newProfileCmd) }

// profileFlags are the flag values of `inferprobe profile`. The workload flags are bound to
// w, except those whose Workload field is set only when the flag is given (workload()).
type profileFlags struct {
	w                                                  loadgen.Workload
	timeout, drainTimeout, duration, cacheResetTimeout float64
	stream, noStream, streamUsage, noStreamUsage       bool
	requests, maxInFlight, prefixGroups                int
	seed                                               int64
	arrival, overflow, tokenizer                       string
	output                                             string
	tables                                             string
	quiet                                              bool
	allowClientLimited                                 bool
	slo                                                []string
	sloFile                                            string
	telemetry                                          telemetryFlags
	trace                                              traceFlags
	shard                                              shardFlags // profile only (not search)
	systemSampler                                      string
	sampleInterval                                     float64
}

func newProfileCmd() *cobra.Command {
	var pf profileFlags
	cmd := &cobra.Command{
		Use:   "profile",
		Short: "Send controlled traffic to a Chat Completions endpoint and record every request (JSONL artifact)",
		Long: `profile runs each workload case (arrival setting × input tokens × output tokens):
an optional warmup phase, then the measured phase, each a window followed by a drain,
and records every request as an infer.request line of the JSONL artifact at --output.

Exit codes: 0 a measured request succeeded; 3 none did (the artifact is complete);
4 the self-audit found a case client-limited (the load generator, not the server, shaped
its numbers: dispatch lag p99 over 1 ms, dispatch under 99.5% of the schedule, arrivals
held or dropped, client CPU at 95%), unless --allow-client-limited;
2 an unusable setting (nothing sent or written; a --tables directory that is a file or
not empty included), or an --output another run is writing (it holds a lock on the file); 5 an unreadable --arrival-trace or --slo-file;
130 interrupted (Ctrl+C); 1 anything else, and an artifact that cannot be read back
at the end.`,
		Args: noArgsOptionalValueHint,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := pf.shard.apply(cmd, &pf.w); err != nil {
				return err
			}
			cfg, tok, tokName, err := pf.config(cmd)
			if err != nil {
				return err
			}
			if pf.output == "" {
				return usageErrorf("--output is required")
			}
			if pf.w.ArrivalTrace != "" && samePath(pf.output, pf.w.ArrivalTrace) {
				return usageErrorf("--output would overwrite the --arrival-trace file %s", pf.w.ArrivalTrace)
			}
			spec, err := pf.spec(cmd, cfg, tok, tokName)
			if err != nil {
				return err
			}
			spec.Output = pf.output
			pf.shard.gate(cfg, &spec)
			if pf.shard.strip(cfg, &spec) {
				fmt.Fprintf(cmd.ErrOrStderr(), "Warning: shard %d of %d collects no server telemetry (shard 0 does; --shard-telemetry to collect it here too)\n", cfg.Shard, cfg.Shards)
			}
			if cmd.Flags().Changed("tables") {
				if err := checkTablesDir("--tables", pf.tables, false); err != nil {
					return err
				}
				ts, out := tables.New(pf.tables), pf.output
				// The artifact writer is closed before the sinks after it: the summary
				// analyses the finished artifact.
				ts.SetSummary(func() (tables.Summary, error) { return tables.SummaryFile(context.Background(), out) })
				spec.Sinks = append(spec.Sinks, ts)
			}
			res, err := runProfile(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), spec, pf.quiet)
			if err != nil {
				return err
			}
			return clientLimitedExit(cmd.ErrOrStderr(), res, pf.allowClientLimited)
		},
	}
	pf.register(cmd)
	pf.shard.register(cmd)
	return cmd
}

// sampleInterval is the range of --sample-interval: above 0 s, at most 1 h.
var sampleInterval = artifact.Range{Min: 0, MinExclusive: true, Max: 3600, Unit: "seconds"}

// spec is the run.Spec the flags describe for the validated workload cfg (everything but
// the output path): the SLO policy, the client-local sampler and the telemetry. Errors are
// exit 2, except an unreadable --slo-file (exit 5).
func (pf *profileFlags) spec(cmd *cobra.Command, cfg *loadgen.Config, tok prompt.Tokenizer, tokName string) (run.Spec, error) {
	policy, err := pf.policy()
	if err != nil {
		return run.Spec{}, err
	}
	if err := pf.telemetry.validate(cmd, cfg); err != nil {
		return run.Spec{}, err
	}
	switch pf.systemSampler {
	case collect.SamplerAuto, collect.SamplerNone, collect.SamplerPsutil, collect.SamplerNvidiaSMI:
	default:
		return run.Spec{}, usageErrorf("--system-sampler must be auto, none, psutil or nvidia-smi, not %q", pf.systemSampler)
	}
	if err := checkNumber("sample-interval", pf.sampleInterval, sampleInterval); err != nil {
		return run.Spec{}, err
	}
	if pf.systemSampler == collect.SamplerNvidiaSMI {
		if _, err := exec.LookPath("nvidia-smi"); err != nil {
			return run.Spec{}, usageErrorf("--system-sampler nvidia-smi: nvidia-smi is not on PATH")
		}
	}
	spec := run.Spec{Workload: cfg, Tokenizer: tok, TokenizerName: tokName, Version: version, SLO: policy,
		SystemSampler: pf.systemSampler, SampleEvery: time.Duration(pf.sampleInterval * float64(time.Second))}
	if err := pf.telemetry.apply(&spec); err != nil {
		return run.Spec{}, err
	}
	if spec.Trace, err = pf.trace.options(cmd, cfg); err != nil {
		return run.Spec{}, err
	}
	if spec.TraceImport, err = pf.trace.importOptions(cmd); err != nil {
		return run.Spec{}, err
	}
	return spec, nil
}

// register defines profile's flags on cmd, bound to pf.
func (pf *profileFlags) register(cmd *cobra.Command) {
	f, w := cmd.Flags(), &pf.w
	f.StringVar(&w.Endpoint, "endpoint", "", "full Chat Completions URL (…/v1/chat/completions)")
	f.StringVar(&w.BaseURL, "base-url", "", "a /v1 base URL; /chat/completions is appended")
	f.StringVar(&w.Model, "model", "", "model name sent in every request (required)")
	f.StringVar(&w.APIKey, "api-key", "", "bearer token (default $OPENAI_API_KEY); never recorded")
	f.StringVar(&w.RunID, "run-id", "", "run id shared with collectors (default: a new UUID); appears in X-Request-Id")
	f.StringVar(&pf.output, "output", "", "JSONL artifact path (required; parent directories are created)")
	f.BoolVar(&pf.allowClientLimited, "allow-client-limited", false, "exit 0 even when the self-audit finds the load generator, not the server, shaped a case's numbers (else exit 4)")
	f.StringVar(&pf.tables, "tables", "", "also write the run's per-request tables (inferprobe tables) into this new or empty directory")
	f.Float64Var(&pf.timeout, "timeout", loadgen.DefaultTimeout.Seconds(), "per-request client timeout, seconds")
	f.Float64Var(&pf.drainTimeout, "drain-timeout", 0, "drain deadline after each window end, seconds (default: --timeout)")
	f.BoolVar(&pf.stream, "stream", true, "streaming chat completions (SSE)")
	f.BoolVar(&pf.noStream, "no-stream", false, "non-streaming chat completions")
	f.BoolVar(&pf.streamUsage, "stream-usage", true, "send stream_options.include_usage")
	f.BoolVar(&pf.noStreamUsage, "no-stream-usage", false, "do not send stream_options (for endpoints that reject it)")
	f.StringVar(&w.MaxTokensField, "max-tokens-field", "max_tokens", "field carrying the output cap: max_tokens or max_completion_tokens")
	f.StringVar(&w.ExtraBody, "extra-body", "", "JSON object merged into every request (may not set model, messages, stream, stream_options or the output cap)")
	f.Int64Var(&pf.seed, "seed", 0, "seed of prompts, nonces and Poisson gaps")
	f.IntSliceVar(&w.Concurrency, "concurrency", nil, "closed-loop worker counts, e.g. 1,4,8 (default 1)")
	f.IntSliceVar(&w.InputTokens, "input-tokens", []int{loadgen.DefaultInputTokens}, "prompt token targets")
	f.IntSliceVar(&w.OutputTokens, "output-tokens", []int{loadgen.DefaultOutputTokens}, "output token caps")
	f.IntVar(&pf.requests, "requests", 0, "measured requests per case (default 1; replay: the whole trace)")
	f.Float64Var(&pf.duration, "duration", 0, "measured window per case, seconds (instead of --requests)")
	f.IntVar(&w.WarmupRequests, "warmup-requests", 0, "warmup requests per case (recorded, excluded from analysis)")
	f.StringVar(&pf.arrival, "arrival", "closed", "arrivals: closed, fixed-rate, poisson, burst or replay")
	f.Float64SliceVar(&w.Rates, "rate", nil, "fixed-rate / poisson rates, requests per second")
	f.IntVar(&w.BurstSize, "burst-size", 0, "requests per burst (--arrival burst)")
	f.Float64Var(&w.BurstInterval, "burst-interval", 0, "seconds between bursts (--arrival burst)")
	f.StringVar(&w.ArrivalTrace, "arrival-trace", "", "replay trace: JSONL of {\"offset_ms\": n}, or an inferprobe artifact")
	f.StringVar(&w.ArrivalTraceCase, "arrival-trace-case", "", "case of an artifact trace to replay")
	f.IntVar(&pf.maxInFlight, "max-in-flight", loadgen.DefaultMaxInFlight, "open loop: most requests outstanding at once")
	f.StringVar(&pf.overflow, "overflow", loadgen.OverflowWait, "open loop, every slot busy: wait (hold the arrival) or drop")
	f.StringVar(&w.PromptMode, "prompt-mode", "repeat", "prompts: repeat, unique or shared-prefix")
	f.Float64Var(&w.SharedPrefixRatio, "shared-prefix-ratio", 0, "shared-prefix: fraction of the prompt shared by its group (0..1)")
	f.IntVar(&pf.prefixGroups, "prefix-groups", 1, "shared-prefix: number of prefix groups")
	f.StringVar(&w.CacheState, "cache-state", loadgen.CacheUnspecified, "requested prefix-cache state per case: unspecified or cold")
	f.StringVar(&w.CacheResetURL, "cache-reset-url", "", "URL POSTed before each case to clear the prefix cache (e.g. vLLM /reset_prefix_cache)")
	f.Float64Var(&pf.cacheResetTimeout, "cache-reset-timeout", loadgen.DefaultCacheResetTimeout.Seconds(), "retry window for refused cache resets, seconds (0: one try)")
	f.StringVar(&pf.tokenizer, "tokenizer", loadgen.DefaultTokenizer, "prompt sizing and fallback counts: auto, tiktoken or none (an estimate)")
	f.StringVar(&w.TiktokenEncoding, "tiktoken-encoding", loadgen.DefaultTiktokenEncoding, "tiktoken encoding (embedded; no download)")
	f.BoolVar(&w.StrictTokenCounts, "strict-token-counts", false, "refuse to run with estimated token counts")
	f.BoolVarP(&pf.quiet, "quiet", "q", false, "no progress line")
	f.StringArrayVar(&pf.slo, "slo", nil, "SLO criterion KEY:MS, repeatable (e.g. ttft:500, e2e:2000, server.queue:100); recorded as infer.slo")
	f.StringVar(&pf.sloFile, "slo-file", "", "SLO policy document (JSON); recorded as infer.slo")
	f.StringVar(&pf.systemSampler, "system-sampler", collect.SamplerAuto, "client-local samples (infer.system_sample): auto (NVML device 0 when available, and this process's RSS), psutil (RSS only), nvidia-smi, or none")
	f.Float64Var(&pf.sampleInterval, "sample-interval", 1, "seconds between client-local samples")
	pf.telemetry.register(cmd)
	pf.trace.register(cmd)
}

// policy parses --slo / --slo-file: both → exit 2, a bad --slo → exit 2, a bad file → exit 5.
// A file used by profile must judge over the measured window.
func (pf *profileFlags) policy() (*run.SLO, error) {
	switch {
	case len(pf.slo) > 0 && pf.sloFile != "":
		return nil, usageErrorf("--slo and --slo-file are mutually exclusive")
	case len(pf.slo) > 0:
		p, err := analyze.ParseSLOFlags(pf.slo)
		if err != nil {
			return nil, usageErrorf("%v", err)
		}
		return &run.SLO{Policy: p, Source: analyze.SourceFlags}, nil
	case pf.sloFile != "":
		p, err := analyze.ParsePolicyFile(pf.sloFile)
		if err != nil {
			return nil, withCode(exitBadInput, err)
		}
		if p.Interval.Kind != analyze.IntervalMeasuredWindow {
			return nil, usageErrorf("--slo-file: profile records policies judged over the measured window (interval.kind %q)", p.Interval.Kind)
		}
		return &run.SLO{Policy: p, Source: analyze.SourceFile}, nil
	}
	return nil, nil
}

// ifGiven is p when the flag name was given, else nil (the Workload's default).
func ifGiven[T any](given func(string) bool, name string, p *T) *T {
	if given(name) {
		return p
	}
	return nil
}

// workload is the workload the flags describe.
func (pf *profileFlags) workload(cmd *cobra.Command) loadgen.Workload {
	w, given := pf.w, cmd.Flags().Changed
	w.Timeout = ifGiven(given, "timeout", &pf.timeout)
	w.Seed = ifGiven(given, "seed", &pf.seed)
	w.DrainTimeout = ifGiven(given, "drain-timeout", &pf.drainTimeout)
	w.Stream = ifGiven(given, "stream", &pf.stream)
	w.NoStream = ifGiven(given, "no-stream", &pf.noStream)
	w.StreamUsage = ifGiven(given, "stream-usage", &pf.streamUsage)
	w.NoStreamUsage = ifGiven(given, "no-stream-usage", &pf.noStreamUsage)
	w.Requests = ifGiven(given, "requests", &pf.requests)
	w.Duration = ifGiven(given, "duration", &pf.duration)
	w.Arrival = ifGiven(given, "arrival", &pf.arrival)
	w.MaxInFlight = ifGiven(given, "max-in-flight", &pf.maxInFlight)
	w.Overflow = ifGiven(given, "overflow", &pf.overflow)
	w.PrefixGroups = ifGiven(given, "prefix-groups", &pf.prefixGroups)
	w.CacheResetTimeout = ifGiven(given, "cache-reset-timeout", &pf.cacheResetTimeout)
	w.Tokenizer = ifGiven(given, "tokenizer", &pf.tokenizer)
	if w.APIKey == "" {
		w.APIKey = os.Getenv("OPENAI_API_KEY")
	}
	return w
}

// config turns the workload flags into the run's validated loadgen.Config and its
// tokenizer (loadgen.Workload's rules). Every error is exit 2, except an unreadable
// --arrival-trace (exit 5).
func (pf *profileFlags) config(cmd *cobra.Command) (*loadgen.Config, prompt.Tokenizer, string, error) {
	if cmd.Flags().Changed("endpoint") && cmd.Flags().Changed("base-url") {
		return nil, nil, "", usageErrorf("--endpoint and --base-url are mutually exclusive")
	}
	w := pf.workload(cmd)
	cfg, err := w.Config()
	if err != nil {
		var te *loadgen.TraceInputError
		if errors.As(err, &te) {
			return nil, nil, "", withCode(exitBadInput, err)
		}
		return nil, nil, "", usageErrorf("%v", err)
	}
	tok, tokName, err := w.NewTokenizer()
	if err != nil {
		return nil, nil, "", usageErrorf("%v", err)
	}
	return cfg, tok, tokName, nil
}

// runProfile runs spec through the pipeline and renders it: warnings and progress on stderr,
// the report and the artifact's path on stdout. It returns the pipeline's result and
// profileOutcome's error.
func runProfile(ctx context.Context, stdout, stderr io.Writer, spec run.Spec, quiet bool) (*run.Result, error) {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	prog := newProgress(stderr, quiet)
	spec.Warn = func(msg string) {
		prog.clear()
		fmt.Fprintf(stderr, "Warning: %s\n", msg)
	}
	spec.Hooks = loadgen.Hooks{CaseStart: prog.caseStart, Sent: prog.dispatched, Request: prog.request}
	prog.start()
	res := run.New(spec).Execute(ctx)
	prog.stop()
	return res, profileOutcome(stdout, stderr, res)
}

// profileOutcome renders a finished run — report warnings on stderr, the text report and the
// artifact's path on stdout — and returns an exitError for every code but 0: 2 when the
// artifact cannot be opened (another run writing it included), 130 interrupted, 1 an
// incomplete run or an artifact that could not be read back (run.ErrReadBack), 3 when no
// measured request succeeded.
func profileOutcome(stdout, stderr io.Writer, res *run.Result) error {
	if oe := (*run.OpenError)(nil); errors.As(res.Err, &oe) {
		return usageErrorf("cannot open --output: %v", oe.Err)
	}
	runErr := res.Err
	switch {
	case res.ReportErr != nil && errors.Is(res.ReportErr, run.ErrReadBack):
		if runErr == nil {
			runErr = res.ReportErr
		}
	case res.ReportErr != nil:
		fmt.Fprintf(stderr, "Warning: the report could not be computed: %v\n", res.ReportErr)
	default:
		for _, w := range res.Report.Warnings {
			fmt.Fprintf(stderr, "Warning: %s\n", w)
		}
		if err := analyze.RenderText(stdout, res.Report); err != nil && runErr == nil {
			runErr = err
		}
	}
	fmt.Fprintf(stdout, "Artifact: %s\n", res.Path)
	switch {
	case res.Interrupted:
		fmt.Fprintln(stderr, "Interrupted")
		return &exitError{code: exitInterrupted}
	case runErr != nil:
		return withCode(exitUnexpected, runErr)
	case !res.Succeeded():
		fmt.Fprintln(stderr, "No measured request succeeded.")
		return &exitError{code: exitFindings}
	}
	return nil
}

// samePath reports whether two paths name the same file (or would, once created).
func samePath(a, b string) bool {
	if sa, err := os.Stat(a); err == nil {
		if sb, err := os.Stat(b); err == nil {
			return os.SameFile(sa, sb)
		}
	}
	aa, err1 := filepath.Abs(a)
	ab, err2 := filepath.Abs(b)
	return err1 == nil && err2 == nil && aa == ab
}

// clientLimitedExit is profile's exit for a run whose report found client-limited cases:
// exit 4 naming them, unless allowed (or the run has no report).
func clientLimitedExit(stderr io.Writer, res *run.Result, allow bool) error {
	if res == nil || res.Report == nil || !res.Report.ClientLimited {
		return nil
	}
	msg := fmt.Sprintf("Client-limited: the load generator, not the server, shaped the numbers of %s (see the CLIENT-LIMITED lines)", strings.Join(res.Report.ClientLimitedCases, ", "))
	if allow {
		fmt.Fprintln(stderr, "Warning: "+msg+"; exit 0 as --allow-client-limited asks.")
		return nil
	}
	fmt.Fprintln(stderr, msg+"; --allow-client-limited exits 0 anyway.")
	return &exitError{code: exitClientLimited}
}
