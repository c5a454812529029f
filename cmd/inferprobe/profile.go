package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/loadgen"
	"github.com/inferprobe/inferprobe/loadgen/prompt"
	"github.com/inferprobe/inferprobe/loadgen/schedule"
	"github.com/inferprobe/inferprobe/run"
	"github.com/inferprobe/inferprobe/scrape/collect"
)

func init() { verbs = append(verbs, newProfileCmd) }

// profileFlags are the raw flag values of `inferprobe profile`.
type profileFlags struct {
	endpoint, baseURL, model, apiKey, runID, output string
	timeout, drainTimeout                           float64
	stream, noStream, streamUsage, noStreamUsage    bool
	maxTokensField, extraBody                       string
	seed                                            int64
	concurrency, inputTokens, outputTokens          []int
	requests                                        int
	duration                                        float64
	warmup                                          int
	arrival                                         string
	rates                                           []float64
	burstSize                                       int
	burstInterval                                   float64
	arrivalTrace, arrivalTraceCase                  string
	maxInFlight                                     int
	overflow                                        string
	promptMode                                      string
	sharedPrefixRatio                               float64
	prefixGroups                                    int
	cacheState, cacheResetURL                       string
	cacheResetTimeout                               float64
	tokenizer, tiktokenEncoding                     string
	strictTokenCounts                               bool
	quiet                                           bool
	slo                                             []string
	sloFile                                         string
	telemetry                                       telemetryFlags
	systemSampler                                   string
	sampleInterval                                  float64
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
2 an unusable setting (nothing sent or written); 5 an unreadable
--arrival-trace or --slo-file;
130 interrupted (Ctrl+C); 1 anything else.`,
		Args: noArgsOptionalValueHint,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := pf.config(cmd)
			if err != nil {
				return err
			}
			tok, tokName, err := pf.tokenizerFor()
			if err != nil {
				return err
			}
			if pf.output == "" {
				return usageErrorf("--output is required")
			}
			if pf.arrivalTrace != "" && samePath(pf.output, pf.arrivalTrace) {
				return usageErrorf("--output would overwrite the --arrival-trace file %s", pf.arrivalTrace)
			}
			policy, err := pf.policy()
			if err != nil {
				return err
			}
			if err := pf.telemetry.validate(cmd, cfg); err != nil {
				return err
			}
			switch pf.systemSampler {
			case collect.SamplerAuto, collect.SamplerNone, collect.SamplerPsutil, collect.SamplerNvidiaSMI:
			default:
				return usageErrorf("--system-sampler must be auto, none, psutil or nvidia-smi, not %q", pf.systemSampler)
			}
			if !(pf.sampleInterval > 0 && pf.sampleInterval <= 3600) {
				return usageErrorf("--sample-interval must be > 0 and at most 3600 seconds")
			}
			if pf.systemSampler == collect.SamplerNvidiaSMI {
				if _, err := exec.LookPath("nvidia-smi"); err != nil {
					return usageErrorf("--system-sampler nvidia-smi: nvidia-smi is not on PATH")
				}
			}
			spec := run.Spec{Workload: cfg, Tokenizer: tok, TokenizerName: tokName, Output: pf.output, Version: version, SLO: policy,
				SystemSampler: pf.systemSampler, SampleEvery: time.Duration(pf.sampleInterval * float64(time.Second))}
			if err := pf.telemetry.apply(&spec); err != nil {
				return err
			}
			_, err = runProfile(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), spec, pf.quiet)
			return err
		},
	}
	pf.register(cmd)
	return cmd
}

// register defines profile's flags on cmd, bound to pf.
func (pf *profileFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&pf.endpoint, "endpoint", "", "full Chat Completions URL (…/v1/chat/completions)")
	f.StringVar(&pf.baseURL, "base-url", "", "a /v1 base URL; /chat/completions is appended")
	f.StringVar(&pf.model, "model", "", "model name sent in every request (required)")
	f.StringVar(&pf.apiKey, "api-key", "", "bearer token (default $OPENAI_API_KEY); never recorded")
	f.StringVar(&pf.runID, "run-id", "", "run id shared with collectors (default: a new UUID); appears in X-Request-Id")
	f.StringVar(&pf.output, "output", "", "JSONL artifact path (required; parent directories are created)")
	f.Float64Var(&pf.timeout, "timeout", 60, "per-request client timeout, seconds")
	f.Float64Var(&pf.drainTimeout, "drain-timeout", 0, "drain deadline after each window end, seconds (default: --timeout)")
	f.BoolVar(&pf.stream, "stream", true, "streaming chat completions (SSE)")
	f.BoolVar(&pf.noStream, "no-stream", false, "non-streaming chat completions")
	f.BoolVar(&pf.streamUsage, "stream-usage", true, "send stream_options.include_usage")
	f.BoolVar(&pf.noStreamUsage, "no-stream-usage", false, "do not send stream_options (for endpoints that reject it)")
	f.StringVar(&pf.maxTokensField, "max-tokens-field", "max_tokens", "field carrying the output cap: max_tokens or max_completion_tokens")
	f.StringVar(&pf.extraBody, "extra-body", "", "JSON object merged into every request (may not set model, messages, stream, stream_options or the output cap)")
	f.Int64Var(&pf.seed, "seed", 0, "seed of prompts, nonces and Poisson gaps")
	f.IntSliceVar(&pf.concurrency, "concurrency", nil, "closed-loop worker counts, e.g. 1,4,8 (default 1)")
	f.IntSliceVar(&pf.inputTokens, "input-tokens", []int{512}, "prompt token targets")
	f.IntSliceVar(&pf.outputTokens, "output-tokens", []int{128}, "output token caps")
	f.IntVar(&pf.requests, "requests", 0, "measured requests per case (default 1; replay: the whole trace)")
	f.Float64Var(&pf.duration, "duration", 0, "measured window per case, seconds (instead of --requests)")
	f.IntVar(&pf.warmup, "warmup-requests", 0, "warmup requests per case (recorded, excluded from analysis)")
	f.StringVar(&pf.arrival, "arrival", "closed", "arrivals: closed, fixed-rate, poisson, burst or replay")
	f.Float64SliceVar(&pf.rates, "rate", nil, "fixed-rate / poisson rates, requests per second")
	f.IntVar(&pf.burstSize, "burst-size", 0, "requests per burst (--arrival burst)")
	f.Float64Var(&pf.burstInterval, "burst-interval", 0, "seconds between bursts (--arrival burst)")
	f.StringVar(&pf.arrivalTrace, "arrival-trace", "", "replay trace: JSONL of {\"offset_ms\": n}, or an inferprobe artifact")
	f.StringVar(&pf.arrivalTraceCase, "arrival-trace-case", "", "case of an artifact trace to replay")
	f.IntVar(&pf.maxInFlight, "max-in-flight", 128, "open loop: most requests outstanding at once")
	f.StringVar(&pf.overflow, "overflow", "wait", "open loop, every slot busy: wait (hold the arrival) or drop")
	f.StringVar(&pf.promptMode, "prompt-mode", "repeat", "prompts: repeat, unique or shared-prefix")
	f.Float64Var(&pf.sharedPrefixRatio, "shared-prefix-ratio", 0, "shared-prefix: fraction of the prompt shared by its group (0..1)")
	f.IntVar(&pf.prefixGroups, "prefix-groups", 1, "shared-prefix: number of prefix groups")
	f.StringVar(&pf.cacheState, "cache-state", "unspecified", "requested prefix-cache state per case: unspecified or cold")
	f.StringVar(&pf.cacheResetURL, "cache-reset-url", "", "URL POSTed before each case to clear the prefix cache (e.g. vLLM /reset_prefix_cache)")
	f.Float64Var(&pf.cacheResetTimeout, "cache-reset-timeout", 10, "retry window for refused cache resets, seconds (0: one try)")
	f.StringVar(&pf.tokenizer, "tokenizer", "auto", "prompt sizing and fallback counts: auto, tiktoken or none (an estimate)")
	f.StringVar(&pf.tiktokenEncoding, "tiktoken-encoding", "cl100k_base", "tiktoken encoding (embedded; no download)")
	f.BoolVar(&pf.strictTokenCounts, "strict-token-counts", false, "refuse to run with estimated token counts")
	f.BoolVarP(&pf.quiet, "quiet", "q", false, "no progress line")
	f.StringArrayVar(&pf.slo, "slo", nil, "SLO criterion KEY:MS, repeatable (e.g. ttft:500, e2e:2000, server.queue:100); recorded as infer.slo")
	f.StringVar(&pf.sloFile, "slo-file", "", "SLO policy document (JSON); recorded as infer.slo")
	f.StringVar(&pf.systemSampler, "system-sampler", collect.SamplerAuto, "client-local samples (infer.system_sample): auto (NVML device 0 when available, and this process's RSS), psutil (RSS only), nvidia-smi, or none")
	f.Float64Var(&pf.sampleInterval, "sample-interval", 1, "seconds between client-local samples")
	pf.telemetry.register(cmd)
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

// seconds converts a flag value in seconds; NaN and ±Inf are refused.
func seconds(name string, v float64) (time.Duration, error) {
	if v != v || v > 1e9 || v < -1e9 {
		return 0, usageErrorf("--%s must be a finite number of seconds", name)
	}
	return time.Duration(v * float64(time.Second)), nil
}

// config turns the flags into a validated loadgen.Config. Every error is exit 2, except an
// unreadable --arrival-trace (exit 5).
func (pf *profileFlags) config(cmd *cobra.Command) (*loadgen.Config, error) {
	f := cmd.Flags()
	both := func(a, b string) bool { return f.Changed(a) && f.Changed(b) }
	for _, p := range [][2]string{{"endpoint", "base-url"}, {"stream", "no-stream"}, {"stream-usage", "no-stream-usage"}, {"requests", "duration"}} {
		if both(p[0], p[1]) && !(p[0] == "requests" && pf.requests == 1) {
			return nil, usageErrorf("--%s and --%s are mutually exclusive", p[0], p[1])
		}
	}
	cfg := &loadgen.Config{
		Model: pf.model, RunID: pf.runID, APIKey: pf.apiKey,
		Stream: pf.stream && !pf.noStream, StreamUsage: pf.streamUsage && !pf.noStreamUsage,
		MaxTokensField: pf.maxTokensField, Seed: pf.seed,
		Concurrency: pf.concurrency, InputTokens: pf.inputTokens, OutputTokens: pf.outputTokens,
		Requests: pf.requests, WarmupRequests: pf.warmup,
		Arrival: schedule.Mode(pf.arrival), Rates: pf.rates, BurstSize: pf.burstSize,
		PromptMode: prompt.Mode(pf.promptMode), SharedPrefixRatio: pf.sharedPrefixRatio, PrefixGroups: pf.prefixGroups,
		CacheState: pf.cacheState, CacheResetURL: pf.cacheResetURL,
	}
	if cfg.APIKey == "" {
		cfg.APIKey = os.Getenv("OPENAI_API_KEY")
	}
	switch {
	case pf.endpoint != "":
		cfg.Endpoint = pf.endpoint
	case pf.baseURL != "":
		u, err := url.Parse(pf.baseURL)
		if err != nil {
			return nil, usageErrorf("--base-url is not a URL: %v", artifact.RedactURL(pf.baseURL))
		}
		base := strings.TrimRight(u.Path, "/")
		if strings.HasSuffix(base, "/chat/completions") {
			return nil, usageErrorf("--base-url is the /v1 base (…/v1); give a full …/chat/completions URL with --endpoint")
		}
		u.Path = base + "/chat/completions"
		u.RawPath = ""
		cfg.Endpoint = u.String()
	}
	if cfg.RunID == "" {
		cfg.RunID = uuid.NewString()
	}
	var err error
	for _, d := range []struct {
		name string
		v    float64
		dst  *time.Duration
	}{
		{"timeout", pf.timeout, &cfg.Timeout}, {"drain-timeout", pf.drainTimeout, &cfg.DrainTimeout},
		{"duration", pf.duration, &cfg.Duration}, {"burst-interval", pf.burstInterval, &cfg.BurstInterval},
		{"cache-reset-timeout", pf.cacheResetTimeout, &cfg.CacheResetTimeout},
	} {
		if *d.dst, err = seconds(d.name, d.v); err != nil {
			return nil, err
		}
	}
	if f.Changed("drain-timeout") && pf.drainTimeout <= 0 {
		return nil, usageErrorf("--drain-timeout must be > 0")
	}
	if f.Changed("duration") && pf.duration <= 0 {
		return nil, usageErrorf("--duration must be > 0")
	}
	if f.Changed("requests") && pf.requests < 1 {
		return nil, usageErrorf("--requests must be ≥ 1")
	}
	if f.Changed("max-in-flight") && pf.maxInFlight < 1 {
		return nil, usageErrorf("--max-in-flight must be ≥ 1")
	}
	if f.Changed("prefix-groups") && pf.prefixGroups < 1 {
		return nil, usageErrorf("--prefix-groups must be ≥ 1")
	}
	if f.Changed("concurrency") && len(pf.concurrency) == 0 {
		return nil, usageErrorf("--concurrency needs at least one value")
	}
	if cfg.ExtraBody, err = loadgen.ParseExtraBody(pf.extraBody); err != nil {
		return nil, usageErrorf("%v", err)
	}
	switch cfg.Arrival {
	case schedule.Closed, schedule.FixedRate, schedule.Poisson, schedule.Burst, schedule.Replay:
	default:
		return nil, usageErrorf("--arrival must be closed, fixed-rate, poisson, burst or replay, not %q", pf.arrival)
	}
	open := cfg.Arrival != schedule.Closed
	if f.Changed("max-in-flight") || f.Changed("overflow") {
		if !open {
			return nil, usageErrorf("--max-in-flight and --overflow apply to open-loop arrivals only")
		}
	}
	if open {
		cfg.MaxInFlight, cfg.Overflow = pf.maxInFlight, pf.overflow
	}
	if pf.arrivalTraceCase != "" && pf.arrivalTrace == "" {
		return nil, usageErrorf("--arrival-trace-case needs --arrival-trace")
	}
	if pf.arrivalTrace != "" {
		if cfg.Arrival != schedule.Replay {
			return nil, usageErrorf("--arrival-trace applies to --arrival replay only")
		}
		if err := loadgen.LoadArrivalTrace(cfg, pf.arrivalTrace, pf.arrivalTraceCase); err != nil {
			var te *loadgen.TraceInputError
			if errors.As(err, &te) {
				return nil, withCode(exitBadInput, err)
			}
			return nil, usageErrorf("%v", err)
		}
	}
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, usageErrorf("%v", err)
	}
	return cfg, nil
}

// tokenizerFor resolves --tokenizer: auto and tiktoken use the embedded encoding; none gives
// the marked estimate (refused with --strict-token-counts).
func (pf *profileFlags) tokenizerFor() (prompt.Tokenizer, string, error) {
	switch pf.tokenizer {
	case "auto", "tiktoken":
		tok, err := prompt.TiktokenCounter(pf.tiktokenEncoding)
		if err != nil {
			return nil, "", usageErrorf("--tiktoken-encoding: %v", err)
		}
		return tok, pf.tokenizer, nil
	case "none":
		if pf.strictTokenCounts {
			return nil, "", usageErrorf("--strict-token-counts needs a tokenizer (--tokenizer auto or tiktoken)")
		}
		return prompt.EstimateCounter(), "none", nil
	default:
		return nil, "", usageErrorf("--tokenizer must be auto, tiktoken or none, not %q", pf.tokenizer)
	}
}

// runProfile runs spec through the pipeline and renders it: warnings and progress on stderr,
// the report and the artifact's path on stdout. It returns the pipeline's result and an
// exitError for every code but 0: 2 when the artifact cannot be opened, 130 interrupted,
// 1 an incomplete run, 3 when no measured request succeeded.
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
	if errors.Is(res.Err, run.ErrOpen) {
		return res, usageErrorf("cannot open --output: %v", errors.Unwrap(res.Err))
	}
	runErr := res.Err
	if res.ReportErr != nil {
		fmt.Fprintf(stderr, "Warning: the report could not be computed: %v\n", res.ReportErr)
	} else {
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
		return res, &exitError{code: exitInterrupted}
	case runErr != nil:
		return res, withCode(exitUnexpected, runErr)
	case !res.Succeeded():
		fmt.Fprintln(stderr, "No measured request succeeded.")
		return res, &exitError{code: exitFindings}
	}
	return res, nil
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
