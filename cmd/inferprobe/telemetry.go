package main

import (
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/loadgen"
	"github.com/inferprobe/inferprobe/run"
	"github.com/inferprobe/inferprobe/scrape/prom"
)

// Defaults of the vLLM telemetry flags (bare flag values).
const (
	defaultSpansHTTPListen = "127.0.0.1:4318"
	defaultSpansGRPCListen = "127.0.0.1:4317"
	bareMetricsFlag        = "endpoint-origin"
)

// The ranges of the telemetry flags in seconds: a scrape interval of 100 ms to 1 h, a span
// drain of up to 10 min.
var (
	metricsInterval = artifact.Range{Min: 0.1, Max: 3600, Unit: "seconds"}
	spansDrain      = artifact.Range{Min: 0, Max: 600, Unit: "seconds"}
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
	if tf.metrics != "" {
		if err := checkNumber("vllm-metrics-interval", tf.metricsInterval, metricsInterval); err != nil {
			return err
		}
	}
	spans := tf.spansHTTP != "" || tf.spansGRPC != ""
	if !spans && f.Changed("vllm-spans-drain") {
		return usageErrorf("--vllm-spans-drain needs --vllm-spans-listen or --vllm-spans-grpc-listen")
	}
	if spans {
		if err := checkNumber("vllm-spans-drain", tf.spansDrain, spansDrain); err != nil {
			return err
		}
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
		mc, err := tf.metricsConfig(cfg)
		if err == nil {
			_, err = prom.NewScraper(mc)
		}
		if err != nil {
			return usageErrorf("--vllm-metrics: %v", err)
		}
	}
	return nil
}

// metricsConfig is the scraper configuration of --vllm-metrics (the pipeline sets the
// session, run and clock domain).
func (tf *telemetryFlags) metricsConfig(cfg *loadgen.Config) (prom.Config, error) {
	u := tf.metrics
	if u == bareMetricsFlag {
		var err error
		if u, err = prom.DefaultMetricsURL(cfg.Endpoint); err != nil {
			return prom.Config{}, err
		}
	}
	return prom.Config{
		URL: u, Endpoint: cfg.Endpoint, APIKey: cfg.APIKey, Timeout: min(cfg.Timeout, 30*time.Second),
		Interval: time.Duration(tf.metricsInterval * float64(time.Second)),
	}, nil
}

// apply puts the validated telemetry flags on spec: the scraper, the run's own span receiver
// and the span drain.
func (tf *telemetryFlags) apply(spec *run.Spec) error {
	if tf.metrics != "" {
		mc, err := tf.metricsConfig(spec.Workload)
		if err != nil {
			return usageErrorf("--vllm-metrics: %v", err)
		}
		spec.Metrics = &mc
	}
	if tf.spansHTTP != "" || tf.spansGRPC != "" {
		spec.Receiver = &run.Receiver{HTTPListen: tf.spansHTTP, GRPCListen: tf.spansGRPC}
		spec.SpansDrain = time.Duration(tf.spansDrain * float64(time.Second))
	}
	return nil
}

// noArgsOptionalValueHint is cobra.NoArgs for verbs with optional-value flags (--vllm-metrics,
// --vllm-spans-listen, …): a stray argument right after such a flag given bare was most
// likely meant as its value, and the error says how to write it ("unexpected argument
// "127.0.0.1:4318": --vllm-spans-listen takes its value after '=' (…)"); any other is
// "unexpected argument "X"".
func noArgsOptionalValueHint(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	if name := optionalFlagBefore(cmd, args[0]); name != "" {
		return usageErrorf("unexpected argument %q: --%s takes its value after '=' (--%s=%s)", args[0], name, name, args[0])
	}
	return usageErrorf("unexpected argument %q", args[0])
}

// optionalFlagBefore is the optional-value flag (NoOptDefVal set) written bare — "--name"
// alone — right before arg on the command line (execute's raw arguments), or "".
func optionalFlagBefore(cmd *cobra.Command, arg string) string {
	ctx := cmd.Context()
	if ctx == nil {
		return ""
	}
	raw, _ := ctx.Value(rawArgsKey{}).([]string)
	for i := 1; i < len(raw); i++ {
		name, ok := strings.CutPrefix(raw[i-1], "--")
		if raw[i] != arg || !ok || name == "" {
			continue
		}
		if f := cmd.Flags().Lookup(name); f != nil && f.NoOptDefVal != "" {
			return name
		}
	}
	return ""
}
