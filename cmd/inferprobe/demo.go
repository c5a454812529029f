package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/inferprobe/inferprobe/demo"
	"github.com/spf13/cobra"
)

func init() { verbs = append(verbs, newDemoCmd) }

// newDemoCmd is `inferprobe demo`: the README's main command (package demo), each of its
// runs rendered like a profile run, then where the artifacts, tables, dashboards and
// /metrics are; the last line names the HTML page to open.
func newDemoCmd() *cobra.Command {
	var dir, metricsListen string
	var quiet, serve bool
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Profile the embedded simulated engine (closed loop and Poisson), print the reports and write their tables and HTML pages",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			if _, port, err := net.SplitHostPort(metricsListen); err != nil || port == "" {
				return usageErrorf("--metrics-listen must be HOST:PORT, not %q", metricsListen)
			} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
				return usageErrorf("--metrics-listen: the port must be within 0..65535, not %q", port)
			}
			if dir != "" {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					return usageErrorf("--dir: %v", err)
				}
			}
			out, errw := cmd.OutOrStdout(), cmd.ErrOrStderr()
			d, err := demo.Start(ctx, demo.Options{Dir: dir, MetricsListen: metricsListen, Version: version,
				Warn: func(msg string) { fmt.Fprintf(errw, "Warning: %s\n", msg) }})
			if err != nil {
				return withCode(exitUnexpected, err)
			}
			defer d.Close()
			fmt.Fprintf(out, "Simulated engine %q at %s (spans to %s over OTLP/gRPC)\n", d.Model, d.EngineURL, d.SpansAddr)
			fmt.Fprintf(out, "Live Prometheus series at %s\n", d.MetricsURL)
			code := 0
			var paths []string
			for i := range d.Runs {
				r := &d.Runs[i]
				fmt.Fprintf(out, "\n== %s\n", r.Title)
				spec := r.Spec()
				paths = append(paths, spec.Output)
				_, err := runProfile(ctx, out, errw, spec, quiet)
				if ee, ok := err.(*exitError); ok && ee.code == exitInterrupted {
					return err
				} else if err != nil {
					fmt.Fprintf(errw, "%v\n", err)
					code = exitFindings
				}
			}
			fmt.Fprintf(out, "\nArtifacts:  %s (inferprobe analyze FILE)\n", strings.Join(paths, ", "))
			var tdirs []string
			for _, r := range d.Runs {
				tdirs = append(tdirs, r.TablesDir)
			}
			fmt.Fprintf(out, "Tables:     %s (CSV tables, CDFs, plots, timeline.json; inferprobe tables)\n", strings.Join(tdirs, ", "))
			fmt.Fprintf(out, "Dashboards: %s (Grafana JSON; Prometheus rules in %s)\n",
				filepath.Join(d.DashboardDir, "grafana"), filepath.Join(d.DashboardDir, "rules"))
			if !serve {
				fmt.Fprintf(out, "Metrics:    %s served while the demo ran; inferprobe demo --serve keeps it up until Ctrl+C\n", d.MetricsURL)
			} else {
				fmt.Fprintf(out, "Metrics:    %s (kept up until Ctrl+C)\n", d.MetricsURL)
			}
			fmt.Fprintf(out, "Open %s in a browser: the report, the SLO and every plot of the last run\n", d.Page())
			if serve {
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
