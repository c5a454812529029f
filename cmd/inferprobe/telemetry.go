package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/loadgen"
	"github.com/inferprobe/inferprobe/receiver"
	"github.com/inferprobe/inferprobe/scrape/vllm"
)

// Defaults of the vLLM telemetry flags (bare flag values).
const (
	defaultSpansHTTPListen = "127.0.0.1:4318"
	defaultSpansGRPCListen = "127.0.0.1:4317"
	bareMetricsFlag        = "endpoint-origin"
)

// telemetryFlags are profile's vLLM native telemetry flags.
type telemetryFlags struct {
	metrics         string  // "" off; bareMetricsFlag: the endpoint origin + /metrics
	metricsInterval float64 // seconds
	spansHTTP       string  // "" off unless spansGRPC is set
	spansGRPC       string
	spansDrain      float64 // seconds
}

func (tf *telemetryFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&tf.metrics, "vllm-metrics", "", "scrape vLLM's Prometheus /metrics around and during each phase (bare flag: the endpoint's origin + /metrics)")
	f.Lookup("vllm-metrics").NoOptDefVal = bareMetricsFlag
	f.Float64Var(&tf.metricsInterval, "vllm-metrics-interval", 1, "seconds between scrapes during a phase (≥ 0.1; with --vllm-metrics)")
	f.StringVar(&tf.spansHTTP, "vllm-spans-listen", "", "receive vLLM's OTLP spans over HTTP on HOST:PORT (bare flag: "+defaultSpansHTTPListen+"); gRPC is received too")
	f.Lookup("vllm-spans-listen").NoOptDefVal = defaultSpansHTTPListen
	f.StringVar(&tf.spansGRPC, "vllm-spans-grpc-listen", "", "OTLP/gRPC listen address of the span receiver (default "+defaultSpansGRPCListen+" when spans are received); given alone, it turns the receiver on too")
	f.Lookup("vllm-spans-grpc-listen").NoOptDefVal = defaultSpansGRPCListen
	f.Float64Var(&tf.spansDrain, "vllm-spans-drain", 6, "seconds to keep receiving spans after the last phase (vLLM batches spans about every 5 s)")
}

// validate checks the telemetry flags before anything is sent (exit 2).
func (tf *telemetryFlags) validate(cmd *cobra.Command, cfg *loadgen.Config) error {
	f := cmd.Flags()
	if tf.metrics == "" && f.Changed("vllm-metrics-interval") {
		return usageErrorf("--vllm-metrics-interval needs --vllm-metrics")
	}
	if tf.metrics != "" && !(tf.metricsInterval >= 0.1 && tf.metricsInterval <= 3600) {
		return usageErrorf("--vllm-metrics-interval must be between 0.1 and 3600 seconds")
	}
	spans := tf.spansHTTP != "" || tf.spansGRPC != ""
	if !spans && f.Changed("vllm-spans-drain") {
		return usageErrorf("--vllm-spans-drain needs --vllm-spans-listen or --vllm-spans-grpc-listen")
	}
	if spans && !(tf.spansDrain >= 0 && tf.spansDrain <= 600) {
		return usageErrorf("--vllm-spans-drain must be between 0 and 600 seconds")
	}
	if spans {
		for _, a := range []struct{ flag, addr string }{{"--vllm-spans-listen", tf.spansHTTP}, {"--vllm-spans-grpc-listen", tf.spansGRPC}} {
			if a.addr == "" {
				continue
			}
			host, port, err := net.SplitHostPort(a.addr)
			n, perr := strconv.Atoi(port)
			if err != nil || perr != nil || n < 0 || n > 65535 || strings.ContainsAny(host, " /") {
				return usageErrorf("%s must be HOST:PORT with a port within 0..65535, not %q", a.flag, a.addr)
			}
		}
		if tf.spansHTTP == "" {
			tf.spansHTTP = defaultSpansHTTPListen
		}
		if tf.spansGRPC == "" {
			tf.spansGRPC = defaultSpansGRPCListen
		}
	}
	if spans && tf.spansHTTP == tf.spansGRPC && !strings.HasSuffix(tf.spansHTTP, ":0") {
		return usageErrorf("--vllm-spans-listen and --vllm-spans-grpc-listen need two addresses (both are %s)", tf.spansHTTP)
	}
	if tf.metrics != "" {
		if _, err := tf.newScraper(cfg, "", ""); err != nil {
			return usageErrorf("--vllm-metrics: %v", err)
		}
	}
	return nil
}

func (tf *telemetryFlags) newScraper(cfg *loadgen.Config, sessionID, clockDomain string) (*vllm.Scraper, error) {
	u := tf.metrics
	if u == bareMetricsFlag {
		var err error
		if u, err = vllm.DefaultMetricsURL(cfg.Endpoint); err != nil {
			return nil, err
		}
	}
	return vllm.NewScraper(vllm.Config{
		URL: u, Endpoint: cfg.Endpoint, APIKey: cfg.APIKey, Timeout: min(cfg.Timeout, 30*time.Second),
		Interval:  time.Duration(tf.metricsInterval * float64(time.Second)),
		SessionID: sessionID, RunID: cfg.RunID, ClockDomain: clockDomain,
	})
}

// telemetry is a run's vLLM native telemetry: the /metrics sampler and the span receiver.
type telemetry struct {
	tf       *telemetryFlags
	scraper  *vllm.Scraper
	sampler  *vllm.PhaseSampler
	recv     *receiver.Receiver
	bindErr  error
	drain    time.Duration
	writeErr error
}

// startTelemetry prepares the scraper and binds the span receiver before the first request.
// A bind failure is not fatal: it is warned about, recorded in the receiver's capability as
// unavailable, and the run continues.
//
// also, when set, receives every span after the artifact (the exporter).
func startTelemetry(ctx context.Context, tf *telemetryFlags, cfg *loadgen.Config, w *artifact.Writer, also func(any) error, sessionID, clockDomain string, warn func(string)) (*telemetry, error) {
	t := &telemetry{tf: tf, drain: time.Duration(tf.spansDrain * float64(time.Second))}
	if tf.metrics != "" {
		s, err := tf.newScraper(cfg, sessionID, clockDomain)
		if err != nil {
			return nil, err
		}
		t.scraper = s
		t.sampler = vllm.NewPhaseSampler(s, w, warn)
	}
	if tf.spansHTTP != "" || tf.spansGRPC != "" {
		t.recv = receiver.New(receiver.Options{
			SessionID: sessionID, RunID: cfg.RunID,
			Consume: func(rec receiver.SpanRecord) {
				if err := w.Write(rec); err != nil && t.writeErr == nil {
					t.writeErr = err
				}
				if also != nil {
					_ = also(rec)
				}
			},
		})
		if err := t.recv.Listen(ctx, tf.spansHTTP, tf.spansGRPC); err != nil {
			t.bindErr = err
			warn(fmt.Sprintf("the span receiver could not bind (%s); spans on that listener will not be received", strings.ReplaceAll(err.Error(), "\n", "; ")))
		}
	}
	return t, nil
}

// hooks adds the scraper's phase hooks to h.
func (t *telemetry) hooks(h *loadgen.Hooks) {
	if t.sampler == nil {
		return
	}
	h.PhaseStart = t.sampler.PhaseStart
	h.PhaseEnd = t.sampler.PhaseEnd
}

// sessionConfig fills the session config's vllm_metrics and vllm_spans blocks.
func (t *telemetry) sessionConfig(sc *artifact.SessionConfig, cfg *loadgen.Config) {
	if t.scraper != nil {
		sc.VLLMMetrics = &artifact.VLLMMetricsConfig{
			URL: t.scraper.SourceURL(), IntervalSeconds: t.scraper.Interval().Seconds(),
			TimeoutSeconds: t.scraper.Timeout().Seconds(), Authorization: t.scraper.Authorization(),
		}
	}
	if t.recv != nil {
		b, _ := json.Marshal(map[string]any{
			"http_listen": t.tf.spansHTTP, "grpc_listen": t.tf.spansGRPC, "drain_seconds": t.tf.spansDrain,
		})
		sc.VLLMSpans = b
	}
}

// finish stops the sampler, keeps receiving spans for the drain (skipped when the run was
// interrupted), stops the receiver, and writes each component's infer.capabilities record.
func (t *telemetry) finish(ctx context.Context, w *artifact.Writer, header artifact.Context, interrupted bool) error {
	var errs []error
	if t.sampler != nil {
		t.sampler.Close()
		if err := t.sampler.WriteErr(); err != nil {
			errs = append(errs, err)
		}
		errs = append(errs, w.Write(t.scraper.Capabilities(header, t.sampler.Tally())))
	}
	if t.recv != nil {
		if !interrupted && t.drain > 0 {
			select {
			case <-time.After(t.drain):
			case <-ctx.Done():
			}
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if err := t.recv.Shutdown(sctx); err != nil {
			errs = append(errs, fmt.Errorf("span receiver: %w", err))
		}
		cancel()
		errs = append(errs, t.writeErr, w.Write(t.recv.Capabilities(header)))
	}
	return errors.Join(errs...)
}

// noArgsOptionalValueHint is cobra.NoArgs for verbs with optional-value flags (--vllm-metrics,
// --vllm-spans-listen, …): a stray argument is most often such a value written after a space.
func noArgsOptionalValueHint(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageErrorf("unexpected argument %q: a flag with an optional value (--vllm-metrics, --vllm-spans-listen, --vllm-spans-grpc-listen) takes it after '=', e.g. --vllm-spans-listen=127.0.0.1:4318", args[0])
	}
	return nil
}
