package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/loadgen"
	"github.com/inferprobe/inferprobe/shard"
	"github.com/spf13/cobra"
)

func init() { verbs = append(verbs, newCoordinateCmd) }

// coordinateFlags are the flag values of `inferprobe coordinate`.
type coordinateFlags struct {
	shards                    int
	listen                    string
	startDelay, startDeadline float64
}

func newCoordinateCmd() *cobra.Command {
	var cf coordinateFlags
	cmd := &cobra.Command{
		Use:   "coordinate --shards N [--listen ADDR]",
		Short: "Start the shards of a sharded run together: registration, clock probes and one announced start time",
		Long: `coordinate serves the shards of one sharded run (profile --shards N --coordinator URL)
over HTTP: each shard registers (its index, the run id and the workload digest; an index
given twice, another run, workload or shard count are refused), probes this clock (the
shard records its offset and uncertainty as infer.clock_alignment), and waits. Once every
shard registered, the run starts at the last registration + --start-delay on this clock.
A shard missing at --start-deadline aborts the run on every shard: the others end with a
clear error and a closed artifact.

Exit codes: 0 every shard registered and the start was announced; 1 the run was aborted
(a shard never registered) or the listener failed; 2 bad flags; 130 interrupted.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cf.run(cmd) },
	}
	f := cmd.Flags()
	f.IntVar(&cf.shards, "shards", 0, "shards of the run (required, ≥ 1)")
	f.StringVar(&cf.listen, "listen", ":7070", "HTTP listen address")
	f.Float64Var(&cf.startDelay, "start-delay", 2, "seconds from the last registration to the start")
	f.Float64Var(&cf.startDeadline, "start-deadline", 300, "seconds every shard has to register before the run is aborted")
	return cmd
}

func (cf *coordinateFlags) run(cmd *cobra.Command) error {
	if cf.shards < 1 || cf.shards > loadgen.MaxShards {
		return usageErrorf("--shards must be within 1..%d (as profile's), not %d", loadgen.MaxShards, cf.shards)
	}
	for name, v := range map[string]float64{"start-delay": cf.startDelay, "start-deadline": cf.startDeadline} {
		if !(v > 0) || v > 86400 {
			return usageErrorf("--%s must be within (0, 86400] seconds, not %v", name, v)
		}
	}
	ln, err := net.Listen("tcp", cf.listen)
	if err != nil {
		return withCode(exitUnexpected, fmt.Errorf("--listen %s: %w", cf.listen, err))
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := shard.NewCoordinator(shard.Options{Shards: cf.shards, StartDelay: seconds(cf.startDelay),
		StartDeadline: seconds(cf.startDeadline), ClockDomain: artifact.HostIdentity().ClockDomain()})
	if err != nil {
		return usageErrorf("%v", err)
	}
	return serveCoordinator(ctx, ln, c, seconds(cf.startDelay), cmd.OutOrStdout(), cmd.ErrOrStderr())
}

func seconds(v float64) time.Duration { return time.Duration(v * float64(time.Second)) }

// serveCoordinator serves c on ln until the run's start was announced (or aborted) and the
// shards had grace to hear it (the start delay, and 5 s more), or ctx ends.
func serveCoordinator(ctx context.Context, ln net.Listener, c *shard.Coordinator, delay time.Duration, stdout, stderr io.Writer) error {
	srv := &http.Server{Handler: c.Handler(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "Coordinating the shards on %s\n", ln.Addr())
	var start time.Time
	var abort string
	for {
		s, a, decided := c.Outcome(ctx, time.Hour)
		if decided {
			start, abort = s, a
			break
		}
		if ctx.Err() != nil {
			_ = srv.Close()
			fmt.Fprintln(stderr, "Interrupted")
			return &exitError{code: exitInterrupted}
		}
	}
	if abort == "" {
		fmt.Fprintf(stdout, "Every shard registered (%v); the run starts at %s\n", c.Registered(), start.UTC().Format(time.RFC3339Nano))
	}
	select {
	case <-time.After(delay + 5*time.Second):
	case <-ctx.Done():
	case err := <-served:
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			return withCode(exitUnexpected, err)
		}
	}
	_ = srv.Close()
	if abort != "" {
		return withCode(exitUnexpected, errors.New(abort))
	}
	return nil
}
