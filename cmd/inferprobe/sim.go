package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/inferprobe/inferprobe/sim"
)

func init() { verbs = append(verbs, newSimCmd) }

// newSimCmd is `inferprobe sim`: the simulated vLLM-compatible server (package sim).
func newSimCmd() *cobra.Command {
	cfg := sim.DefaultConfig()
	listen := "127.0.0.1:8000"
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Serve a simulated vLLM-compatible engine (OpenAI Chat Completions, /metrics, OTLP spans)",
		Long: `sim serves an OpenAI-compatible Chat Completions API backed by a simulated
continuous-batching engine that behaves like vLLM where a profiler can observe it:
queueing, KV-cache blocks, preemption, prefix caching, vLLM V1 /metrics, llm_request
OTLP spans, X-Request-Id and traceparent handling, and injectable faults.

Prompt tokens are whitespace-separated words of the message contents; every generated
token is one word. The listen URL is printed on stderr; SIGINT/SIGTERM stop it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runSim(cmd, cfg, listen) },
	}
	if cmd.Context() == nil {
		cmd.SetContext(context.Background())
	}
	addSimFlags(cmd, &cfg, &listen)
	return cmd
}

// addSimFlags binds every flag of `inferprobe sim`: --listen to listen, each other flag to
// its field of cfg.
func addSimFlags(cmd *cobra.Command, cfg *sim.Config, listen *string) {
	f := cmd.Flags()
	f.StringVar(listen, "listen", *listen, "address to listen on (host:port; port 0 picks a free one)")
	f.StringVar(&cfg.Model, "model", cfg.Model, "served model name (requests naming another model get 404)")
	f.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of every random draw (outputs, early stops, faults, ids)")
	f.IntVar(&cfg.Engines, "engines", cfg.Engines, "independent engines (engine label 0..N-1), requests assigned round-robin")
	f.IntVar(&cfg.MaxNumSeqs, "max-num-seqs", cfg.MaxNumSeqs, "running batch cap per engine")
	f.IntVar(&cfg.MaxNumBatchedTokens, "max-num-batched-tokens", cfg.MaxNumBatchedTokens, "token budget of one engine step (prefill chunks + decode tokens)")
	f.IntVar(&cfg.NumGPUBlocks, "num-gpu-blocks", cfg.NumGPUBlocks, "KV-cache blocks per engine")
	f.IntVar(&cfg.BlockSize, "block-size", cfg.BlockSize, "tokens per KV-cache block")
	f.IntVar(&cfg.MaxModelLen, "max-model-len", cfg.MaxModelLen, "context length in tokens (prompt + max_tokens)")
	f.BoolVar(&cfg.EnablePrefixCaching, "enable-prefix-caching", cfg.EnablePrefixCaching, "prefix cache by prompt block hashes (--enable-prefix-caching=false to disable)")
	f.Float64Var(&cfg.PrefillTokensPerSec, "prefill-tps", cfg.PrefillTokensPerSec, "prefill throughput in tokens/s (0 = instantaneous)")
	f.DurationVar(&cfg.DecodeStepBase, "decode-step-base", cfg.DecodeStepBase, "fixed time of one engine step")
	f.DurationVar(&cfg.DecodeStepPerSeq, "decode-step-per-seq", cfg.DecodeStepPerSeq, "extra step time per decoding sequence")
	f.Float64Var(&cfg.StopProbability, "stop-prob", cfg.StopProbability, "chance that a request without ignore_eos stops early (finish_reason stop)")
	f.IntVar(&cfg.DefaultMaxTokens, "default-max-tokens", cfg.DefaultMaxTokens, "max_tokens when a request sets none (0 = max-model-len minus prompt, as vLLM)")
	f.IntVar(&cfg.TokensPerChunk, "tokens-per-chunk", cfg.TokensPerChunk, "tokens per streamed SSE content event")
	f.Int64Var(&cfg.MaxBodyBytes, "max-body-bytes", cfg.MaxBodyBytes, "request body size limit in bytes (larger: 413)")
	f.BoolVar(&cfg.EnableRequestIDHeaders, "enable-request-id-headers", cfg.EnableRequestIDHeaders, "echo X-Request-Id on every response, as vLLM's flag")
	f.StringVar(&cfg.ResetAnswer, "reset-answer", cfg.ResetAnswer, "POST /reset_prefix_cache body: json ({\"success\": bool}) or empty (older vLLM)")
	f.StringVar(&cfg.OTLPTracesEndpoint, "otlp-traces-endpoint", cfg.OTLPTracesEndpoint, "export llm_request spans there (gRPC host:port, or the full URL with OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf)")
	f.StringVar(&cfg.OTLPProtocol, "otlp-protocol", cfg.OTLPProtocol, "grpc or http/protobuf (default: $OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else grpc)")
	f.DurationVar(&cfg.OTLPBatchDelay, "otlp-batch-delay", cfg.OTLPBatchDelay, "batch span processor schedule delay")
	f.StringVar(&cfg.GroundTruthPath, "ground-truth", cfg.GroundTruthPath, "write one JSONL line of true engine times (unix ns) per request to this file")
	f.StringVar(&cfg.ProfilerDir, "profiler-dir", cfg.ProfilerDir, "serve POST /start_profile and /stop_profile (404 without it); each stop writes per engine a Kineto trace rank<N>.<ts>.pt.trace.json.gz of its steps and their ground truth rank<N>.<ts>.steps.jsonl here")
	f.Float64Var(&cfg.Faults.Reset, "fault-reset", 0, "fraction of requests whose connection is reset before the status line")
	f.Float64Var(&cfg.Faults.Reject429, "fault-reject-429", 0, "fraction of requests rejected with 429")
	f.Float64Var(&cfg.Faults.Reject503, "fault-reject-503", 0, "fraction of requests rejected with 503")
	f.Float64Var(&cfg.Faults.StreamError, "fault-stream-error", 0, "fraction of requests ending in an error event inside a 200 stream (500 when not streamed)")
	f.Float64Var(&cfg.Faults.Truncate, "fault-truncate", 0, "fraction of streams closed mid-way without finish_reason or [DONE]")
	f.Float64Var(&cfg.Faults.Stall, "fault-stall", 0, "fraction of streams that stall mid-stream")
	f.DurationVar(&cfg.Faults.StallDuration, "fault-stall-duration", 0, "length of a mid-stream stall")
	f.Float64Var(&cfg.Faults.SlowHeaders, "fault-slow-headers", 0, "fraction of responses whose headers are delayed")
	f.DurationVar(&cfg.Faults.SlowHeadersDuration, "fault-slow-headers-duration", 0, "delay of slow response headers")
	f.Float64Var(&cfg.Faults.Metrics503, "fault-metrics-503", 0, "fraction of /metrics scrapes answered 503")
	f.Float64Var(&cfg.Faults.MetricsHTML, "fault-metrics-html", 0, "fraction of /metrics scrapes answered with an HTML page")
	f.DurationVar(&cfg.Faults.RestartAt, "fault-restart-at", 0, "restart the engines once this long after start (counters start again)")
	f.DurationVar(&cfg.Faults.RestartDowntime, "fault-restart-downtime", 0, "after the restart, /health and chat answer 503 this long")
	f.StringVar(&cfg.Faults.ProfileStart, "fault-profile-start", "", "POST /start_profile fault: 500, or timeout (the profile starts, the reply never comes)")
	f.BoolVar(&cfg.Faults.ProfileStopNoFile, "fault-profile-stop-no-file", false, "POST /stop_profile answers 200 without writing a trace")
	f.StringVar(&cfg.Faults.ProfileTruncatedTrace, "fault-profile-truncated-trace", "", "cut each trace: json (alone: the JSON stops mid-event inside a valid gzip stream) or gzip (the .gz file stops at half its bytes); its .steps.jsonl stays whole")
	f.Lookup("fault-profile-truncated-trace").NoOptDefVal = sim.TruncateJSON
}

// runSim serves cfg on listen until SIGINT or SIGTERM (or the command's context ends). An
// invalid config or an unusable listen address is a usage error; an error closing the
// server is unexpected, unless it only concerns undelivered spans: then it is a warning.
func runSim(cmd *cobra.Command, cfg sim.Config, listen string) error {
	if err := cfg.Validate(); err != nil {
		return usageErrorf("%v", err)
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv, err := sim.Start(ctx, cfg, listen)
	if err != nil {
		return usageErrorf("%v", err)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "inferprobe sim: serving model %q on %s (engines=%d)\n", cfg.Model, srv.URL(), cfg.Engines)
	<-ctx.Done()
	fmt.Fprintln(cmd.ErrOrStderr(), "inferprobe sim: shutting down")
	if err := srv.Close(); err != nil {
		if onlySpanExport(err) {
			fmt.Fprintf(cmd.ErrOrStderr(), "Warning: %v\n", err)
			return nil
		}
		return withCode(exitUnexpected, err)
	}
	return nil
}

// onlySpanExport reports whether a Close error concerns only undelivered spans
// (sim.SpanExportOnly).
func onlySpanExport(err error) bool { return sim.SpanExportOnly(err) }
