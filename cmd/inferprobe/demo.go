package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/loadgen"
	"github.com/inferprobe/inferprobe/loadgen/prompt"
	"github.com/inferprobe/inferprobe/loadgen/schedule"
	"github.com/inferprobe/inferprobe/sim"
)

func init() { verbs = append(verbs, newDemoCmd) }

// newDemoCmd is `inferprobe demo`: the README's main command. It starts the simulated engine
// in-process, profiles it with a small closed-loop case and a small Poisson case (streaming,
// with warmup, an SLO of TTFT ≤ 100 ms and e2e ≤ 1.5 s, and a prefix-cache reset before the
// Poisson case), and prints the reports and the artifacts' paths.
func newDemoCmd() *cobra.Command {
	var dir string
	var quiet bool
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
			scfg := sim.DefaultConfig()
			srv, err := sim.Start(ctx, scfg, "127.0.0.1:0")
			if err != nil {
				return withCode(exitUnexpected, fmt.Errorf("start the simulated engine: %w", err))
			}
			defer srv.Close()
			out, errw := cmd.OutOrStdout(), cmd.ErrOrStderr()
			fmt.Fprintf(out, "Simulated engine %q at %s\n", scfg.Model, srv.URL())
			tok, err := prompt.TiktokenCounter("cl100k_base")
			if err != nil {
				return withCode(exitUnexpected, err)
			}
			runs := []struct {
				title string
				file  string
				cfg   loadgen.Config
			}{
				{"closed loop, 4 workers", "demo-closed.jsonl", loadgen.Config{
					Arrival: schedule.Closed, Concurrency: []int{4}, Requests: 40, WarmupRequests: 4,
				}},
				{"Poisson arrivals at 20 req/s", "demo-poisson.jsonl", loadgen.Config{
					Arrival: schedule.Poisson, Rates: []float64{20}, Requests: 100, WarmupRequests: 4,
					PromptMode: prompt.Unique, CacheState: loadgen.CacheCold,
				}},
			}
			policy, err := analyze.ParseSLOFlags([]string{"ttft:100", "e2e:1500"})
			if err != nil {
				return withCode(exitUnexpected, err)
			}
			slo := &sloPolicy{policy, analyze.SourceFlags}
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
				opts := profileOpts{cfg: &c, tok: tok, tokName: "auto", output: filepath.Join(dir, r.file), quiet: quiet, slo: slo}
				err := runProfile(ctx, out, errw, opts, nil)
				if ee, ok := err.(*exitError); ok && ee.code == exitInterrupted {
					return err
				} else if err != nil {
					fmt.Fprintf(errw, "%v\n", err)
					code = exitFindings
				}
			}
			fmt.Fprintf(out, "\nArtifacts in %s\n", dir)
			if code != 0 {
				return &exitError{code: code}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "directory for the artifacts (default: a new temporary directory)")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress line")
	return cmd
}
