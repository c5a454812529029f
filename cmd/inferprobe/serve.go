package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/inferprobe/inferprobe/daemon"
)

func init() { verbs = append(verbs, newServeCmd) }

func newServeCmd() *cobra.Command {
	var (
		configPath string
		check      bool
		logFormat  string
		logLevel   string
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the continuous-profiling daemon: scheduled probes, span receiver, /metrics",
		Long: `serve runs the probes of a YAML configuration on their schedules (one artifact per
probe run, written like profile's), receives the servers' OTLP spans, scrapes their vLLM
/metrics, and serves inferprobe_* Prometheus series on /metrics.

Signals: SIGHUP reloads the configuration (a bad one keeps the running one and says why);
SIGTERM or SIGINT stops starting probes, drains the running ones within their drain
deadlines, closes their artifacts and exits 0; a second SIGTERM/SIGINT cancels what still
runs.

Exit codes: 0 stopped by a signal; 2 an unusable configuration (with --check: 0 when it is
valid); 1 anything else (e.g. the /metrics address cannot be bound).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if configPath == "" {
				return usageErrorf("--config is required")
			}
			logger, err := newLogger(cmd.ErrOrStderr(), logFormat, logLevel)
			if err != nil {
				return err
			}
			cfg, err := daemon.Load(configPath)
			if err != nil {
				var ce *daemon.ConfigError
				if errors.As(err, &ce) {
					return usageErrorf("%v", err)
				}
				return withCode(exitUnexpected, err)
			}
			if check {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: %d targets, %d probes: valid\n", configPath, len(cfg.Targets), len(cfg.Probes))
				return nil
			}
			return runServe(cmd.Context(), cfg, logger)
		},
	}
	f := cmd.Flags()
	f.StringVar(&configPath, "config", "", "YAML configuration file (required)")
	f.BoolVar(&check, "check", false, "validate the configuration and exit")
	f.StringVar(&logFormat, "log-format", "logfmt", "log format on stderr: logfmt or json")
	f.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn or error")
	return cmd
}

func newLogger(w interface{ Write([]byte) (int, error) }, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, usageErrorf("--log-level must be debug, info, warn or error, not %q", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "logfmt", "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usageErrorf("--log-format must be logfmt or json, not %q", format)
}

// runServe starts the daemon and handles signals until it stops.
func runServe(ctx context.Context, cfg *daemon.Config, logger *slog.Logger) error {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	d := daemon.New(cfg, daemon.Options{Version: version, Logger: logger})
	if err := d.Start(ctx); err != nil {
		return withCode(exitUnexpected, err)
	}
	for {
		select {
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				_ = d.Reload()
				continue
			}
			logger.Info("stopping: draining running probe runs (send the signal again to cancel them)", "signal", sig.String())
			hard, cancel := context.WithCancel(context.Background())
			go func() {
				for s := range sigs {
					if s != syscall.SIGHUP {
						logger.Warn("cancelling running probe runs", "signal", s.String())
						cancel()
						return
					}
				}
			}()
			err := d.Shutdown(hard)
			cancel()
			if err != nil && !errors.Is(err, context.Canceled) {
				logger.Warn("shutdown", "err", err)
			}
			logger.Info("stopped")
			return nil
		case err := <-d.Errors():
			_ = d.Shutdown(context.Background())
			return withCode(exitUnexpected, err)
		case <-ctx.Done():
			_ = d.Shutdown(context.Background())
			return nil
		}
	}
}
