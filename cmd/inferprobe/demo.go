package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/dashboards"
	"github.com/inferprobe/inferprobe/exporter"
	"github.com/inferprobe/inferprobe/loadgen"
	"github.com/inferprobe/inferprobe/loadgen/prompt"
	"github.com/inferprobe/inferprobe/loadgen/schedule"
	"github.com/inferprobe/inferprobe/sim"
)

func init() { verbs = append(verbs, newDemoCmd) }

// newDemoCmd is `inferprobe demo`: the README's main command. It starts the simulated engine,
// the span receiver and the exporter in-process, profiles the engine with a small
// closed-loop case and a small Poisson case (streaming, with warmup, an SLO of TTFT ≤ 100 ms
// and e2e ≤ 1.5 s, a prefix-cache reset before the Poisson case, the engine's spans received
// over OTLP/gRPC and its /metrics scraped), publishes both runs as live inferprobe_* series,
// writes the Grafana dashboards and Prometheus rules, and prints the reports and where the
// artifacts, the dashboards and /metrics are.
func newDemoCmd() *cobra.Command {
	var dir, metricsListen string
	var quiet, serve bool
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Profile the embedded simulated engine (closed loop and Poisson) and print the results",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			if dir != "" {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					return usageErrorf("--dir: %v", err)
				}
			}
			if dir == "" {
				d, err := os.MkdirTemp("", "inferprobe-demo-")
				if err != nil {
					return withCode(exitUnexpected, err)
				}
				dir = d
			}
			if _, port, err := net.SplitHostPort(metricsListen); err != nil || port == "" {
				return usageErrorf("--metrics-listen must be HOST:PORT, not %q", metricsListen)
			} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
				return usageErrorf("--metrics-listen: the port must be within 0..65535, not %q", port)
			}
			out, errw := cmd.OutOrStdout(), cmd.ErrOrStderr()
			// The span receiver's gRPC port is chosen first: the engine exports to it.
			spansAddr, err := freeLoopbackAddr()
			if err != nil {
				return withCode(exitUnexpected, err)
			}
			scfg := sim.DefaultConfig()
			scfg.OTLPTracesEndpoint, scfg.OTLPProtocol, scfg.OTLPBatchDelay = spansAddr, sim.ProtocolGRPC, 200*time.Millisecond
			srv, err := sim.Start(ctx, scfg, "127.0.0.1:0")
			if err != nil {
				return withCode(exitUnexpected, fmt.Errorf("start the simulated engine: %w", err))
			}
			defer srv.Close()
			fmt.Fprintf(out, "Simulated engine %q at %s (spans to %s over OTLP/gRPC)\n", scfg.Model, srv.URL(), spansAddr)

			policy, err := analyze.ParseSLOFlags([]string{"ttft:100", "e2e:1500"})
			if err != nil {
				return withCode(exitUnexpected, err)
			}
			policy.Name = "demo"
			thresholds := map[string][]float64{}
			for _, c := range policy.Criteria {
				thresholds[c.Key()] = append(thresholds[c.Key()], c.MaxMs/1000)
			}
			exp := exporter.New(exporter.Options{Thresholds: thresholds, Version: version})
			mln, err := net.Listen("tcp", metricsListen)
			if err != nil {
				fmt.Fprintf(errw, "Warning: %s is busy (%v); /metrics listens on a free port instead\n", metricsListen, err)
				if mln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
					return withCode(exitUnexpected, err)
				}
			}
			mux := http.NewServeMux()
			mux.Handle("/metrics", exp.Handler())
			msrv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
			go func() { _ = msrv.Serve(mln) }()
			defer msrv.Close()
			metricsURL := "http://" + mln.Addr().String() + "/metrics"
			fmt.Fprintf(out, "Live Prometheus series at %s\n", metricsURL)
			dashDir := filepath.Join(dir, "dashboards")
			if err := dashboards.WriteAll(dashDir); err != nil {
				return withCode(exitUnexpected, err)
			}
			tok, err := prompt.TiktokenCounter("cl100k_base")
			if err != nil {
				return withCode(exitUnexpected, err)
			}
			runs := []struct {
				title string
				file  string
				probe string
				cfg   loadgen.Config
			}{
				{"closed loop, 4 workers", "demo-closed.jsonl", "demo-closed", loadgen.Config{
					Arrival: schedule.Closed, Concurrency: []int{4}, Requests: 40, WarmupRequests: 4,
				}},
				{"Poisson arrivals at 20 req/s", "demo-poisson.jsonl", "demo-poisson", loadgen.Config{
					Arrival: schedule.Poisson, Rates: []float64{20}, Requests: 100, WarmupRequests: 4,
					PromptMode: prompt.Unique, CacheState: loadgen.CacheCold,
				}},
			}
			slo := &sloPolicy{policy, analyze.SourceFlags}
			objective := 0.99
			code := 0
			for _, r := range runs {
				c := r.cfg
				c.Endpoint = srv.URL() + "/v1/chat/completions"
				c.Model = scfg.Model
				c.RunID = fmt.Sprintf("demo-%d", time.Now().Unix())
				c.Timeout = 30 * time.Second
				c.Stream, c.StreamUsage = true, true
				c.InputTokens, c.OutputTokens = []int{256}, []int{64}
				c.Seed = time.Now().UnixNano() // fresh prompts per demo run (nothing is cached yet)
				if c.CacheState == loadgen.CacheCold {
					c.CacheResetURL = srv.URL() + "/reset_prefix_cache"
				}
				if err := c.Validate(); err != nil {
					return withCode(exitUnexpected, err)
				}
				fmt.Fprintf(out, "\n== %s\n", r.title)
				labels := exporter.Labels{Target: "sim", Model: scfg.Model, Probe: r.probe}
				exp.SetProbeConfig(labels, 0, policy.Name, &objective)
				if cases, err := c.Cases(); err == nil {
					exp.InitCases(labels, policy.Name, []string{cases[0].ID})
				}
				tf := &telemetryFlags{metrics: bareMetricsFlag, metricsInterval: 1, spansGRPC: spansAddr, spansDrain: 1}
				opts := profileOpts{cfg: &c, tok: tok, tokName: "auto", output: filepath.Join(dir, r.file), quiet: quiet, slo: slo,
					telemetry: tf, exp: exp, expLabels: labels}
				err := runProfile(ctx, out, errw, opts, nil)
				if ee, ok := err.(*exitError); ok && ee.code == exitInterrupted {
					return err
				} else if err != nil {
					fmt.Fprintf(errw, "%v\n", err)
					code = exitFindings
				}
			}
			fmt.Fprintf(out, "\nArtifacts:  %s, %s (inferprobe analyze FILE)\n", filepath.Join(dir, runs[0].file), filepath.Join(dir, runs[1].file))
			fmt.Fprintf(out, "Dashboards: %s (Grafana JSON; Prometheus rules in %s)\n",
				filepath.Join(dashDir, "grafana"), filepath.Join(dashDir, "rules"))
			if !serve {
				fmt.Fprintf(out, "Metrics:    %s served while the demo ran; inferprobe demo --serve keeps it up until Ctrl+C\n", metricsURL)
			} else {
				fmt.Fprintf(out, "Metrics:    %s (Ctrl+C stops)\n", metricsURL)
				sctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
				<-sctx.Done()
				stop()
			}
			if code != 0 {
				return &exitError{code: code}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "directory for the artifacts (default: a new temporary directory)")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress line")
	cmd.Flags().StringVar(&metricsListen, "metrics-listen", "127.0.0.1:9464", "address of the live /metrics (a free port when it is busy)")
	cmd.Flags().BoolVar(&serve, "serve", false, "keep serving /metrics after the runs, until Ctrl+C")
	return cmd
}

// freeLoopbackAddr returns a loopback address with a port free at the time of the call.
func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
