package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/scrape/collect"
	"github.com/inferprobe/inferprobe/scrape/gpu"
	"github.com/inferprobe/inferprobe/scrape/proc"
)

func init() { verbs = append(verbs, newCollectCmd) }

// openGPU returns this build's NVML library; tests replace it with a fake.
var openGPU = gpu.Open

type collectOpts struct {
	runID, output, deviceUUID, replicaID, groupID string
	pid, deviceIndex, rank, worldSize             int
	interval, duration                            float64
	noGPU                                         bool
}

func newCollectCmd() *cobra.Command {
	var o collectOpts
	cmd := &cobra.Command{
		Use:   "collect-server --run-id ID --pid PID --output FILE",
		Short: "Record a server process's RSS, GPU memory, GPU energy and power as infer.telemetry_sample records",
		Long: `collect-server runs on the inference host beside a profile run with the same
--run-id. Every --interval it records the server process's resident set size and,
unless --no-gpu, the selected GPU's (or MIG instance's) memory used and reserved
(NVML v2; v1 fallback, announced), the process's GPU memory, and for a whole GPU its
cumulative energy counter (mJ since the driver loaded) and power draw (mW), one
infer.telemetry_sample per counter. Target the worker PID that owns the GPU.
analyze --server-telemetry turns the energy counter into joules per output token.

It stops after --duration, on Ctrl+C or SIGTERM (exit 0), when the server exits
(one invalid sample, a warning, exit 0), or when the GPU's UUID changes (one
invalid sample, exit 3). Unusable options, a PID that is not running, an unknown
device, or no NVML without --no-gpu exit 2 before anything is written.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runCollect(cmd, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.runID, "run-id", "", "run id shared with the profile run (required)")
	f.IntVar(&o.pid, "pid", 0, "server process id; use the GPU-owning worker (required)")
	f.StringVar(&o.output, "output", "", "telemetry JSONL file to write (required)")
	f.Float64Var(&o.interval, "interval", 0.1, "polling interval in seconds (≥ 0.001)")
	f.Float64Var(&o.duration, "duration", 0, "stop after this many seconds (default: until Ctrl+C or SIGTERM)")
	f.StringVar(&o.deviceUUID, "device-uuid", "", "GPU (GPU-…) or MIG (MIG-…) UUID to read; preferred")
	f.IntVar(&o.deviceIndex, "device-index", 0, "NVML device index (PCI bus order, not the CUDA ordinal)")
	f.BoolVar(&o.noGPU, "no-gpu", false, "record process RSS only; no NVML")
	f.StringVar(&o.replicaID, "replica-id", "", "replica label recorded in each sample's identity")
	f.StringVar(&o.groupID, "group-id", "", "collector group (e.g. tensor-parallel workers); needs --rank and --world-size")
	f.IntVar(&o.rank, "rank", 0, "this collector's rank (0 … world size-1)")
	f.IntVar(&o.worldSize, "world-size", 0, "number of collectors in the group")
	return cmd
}

func runCollect(cmd *cobra.Command, o collectOpts) error {
	cfg, err := o.config(cmd)
	if err != nil {
		return err
	}
	stderr := cmd.ErrOrStderr()
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	p, err := proc.Open(ctx, o.pid)
	if err != nil {
		if errors.Is(err, proc.ErrNotRunning) {
			return usageErrorf("--pid %d is not a running process", o.pid)
		}
		return usageErrorf("--pid %d: %v", o.pid, err)
	}
	defer func() { _ = p.Close() }()
	cfg.Process = p
	if !o.noGPU {
		lib, err := openGPU()
		if err == nil {
			err = lib.Init()
		}
		if err != nil {
			return usageErrorf("%v; pass --no-gpu to record process RSS only", err)
		}
		defer func() { _ = lib.Shutdown() }()
		dev, err := collect.OpenDevice(lib, o.deviceUUID, o.deviceIndex)
		if err != nil {
			return usageErrorf("cannot use the GPU: %v", err)
		}
		cfg.Device = dev
	}
	cfg.Warn = func(msg string) { fmt.Fprintf(stderr, "Warning: %s\n", msg) }

	var w *artifact.Writer
	cfg.Sink = artifact.SinkFunc(func(rec artifact.Record) error { return w.Write(rec) })
	c, err := collect.New(ctx, cfg)
	if err != nil {
		return usageErrorf("%v", err)
	}
	if w, err = artifact.NewWriter(o.output); err != nil {
		return withCode(exitUnexpected, err)
	}
	out, runErr := c.Run(ctx)
	closeErr := w.Close()
	if err := errors.Join(runErr, closeErr); err != nil {
		return withCode(exitUnexpected, fmt.Errorf("writing %s: %w", o.output, err))
	}
	return collectOutcome(stderr, out, o)
}

// config checks the flags (exit 2) and returns the collector's configuration without its
// process, device, warning and sink, which runCollect opens.
func (o collectOpts) config(cmd *cobra.Command) (collect.Config, error) {
	flags := cmd.Flags()
	for _, name := range []string{"run-id", "pid", "output"} {
		if !flags.Changed(name) {
			return collect.Config{}, usageErrorf("--%s is required", name)
		}
	}
	if err := o.check(flags.Changed); err != nil {
		return collect.Config{}, err
	}
	if st, err := os.Stat(o.output); err == nil && st.IsDir() {
		return collect.Config{}, usageErrorf("--output %s is a directory", o.output)
	}
	cfg := collect.Config{RunID: o.runID, Host: artifact.HostIdentity()}
	cfg.Interval = time.Duration(o.interval * float64(time.Second))
	cfg.Duration = time.Duration(o.duration * float64(time.Second))
	if flags.Changed("replica-id") {
		cfg.ReplicaID = &o.replicaID
	}
	if flags.Changed("rank") {
		r := int64(o.rank)
		cfg.Rank = &r
	}
	if flags.Changed("group-id") {
		w := int64(o.worldSize)
		cfg.GroupID, cfg.WorldSize = &o.groupID, &w
	}
	return cfg, nil
}

// check refuses unusable values and combinations of the flags (given reports whether a
// flag was set).
// collect-server's --interval (1 ms to 1 h) and --duration (a collection may outlive many
// profile runs: up to a year).
var (
	collectInterval = artifact.Range{Min: 0.001, Max: 3600, Unit: "seconds"}
	collectDuration = artifact.Range{Min: 0, MinExclusive: true, Max: 365 * 24 * 3600, Unit: "seconds"}
)

func (o collectOpts) check(given func(string) bool) error {
	switch {
	case o.runID == "":
		return usageErrorf("--run-id is empty")
	case o.output == "":
		return usageErrorf("--output is empty")
	case o.pid < 1:
		return usageErrorf("--pid %d is not a process id", o.pid)
	case collectInterval.Check(o.interval) != nil:
		return checkNumber("interval", o.interval, collectInterval)
	case given("duration") && collectDuration.Check(o.duration) != nil:
		return checkNumber("duration", o.duration, collectDuration)
	case given("device-uuid") && given("device-index"):
		return usageErrorf("--device-uuid and --device-index are mutually exclusive")
	case o.noGPU && (given("device-uuid") || given("device-index")):
		return usageErrorf("--no-gpu cannot be combined with --device-uuid or --device-index")
	case given("device-uuid") && o.deviceUUID == "":
		return usageErrorf("--device-uuid is empty")
	case o.deviceIndex < 0:
		return usageErrorf("--device-index %d is negative", o.deviceIndex)
	case given("replica-id") && o.replicaID == "":
		return usageErrorf("--replica-id is empty")
	case given("group-id") && o.groupID == "":
		return usageErrorf("--group-id is empty")
	case given("group-id") && !(given("rank") && given("world-size")):
		return usageErrorf("--group-id needs --rank and --world-size")
	case given("world-size") && !given("group-id"):
		return usageErrorf("--world-size needs --group-id")
	case given("rank") && !given("group-id"):
		return usageErrorf("--rank needs --group-id and --world-size")
	}
	return nil
}

// collectOutcome maps how the collection ended to an exit: 0 when the server exited (with a
// warning), 3 when the GPU changed under the collector.
func collectOutcome(stderr io.Writer, out collect.Outcome, o collectOpts) error {
	switch out {
	case collect.ServerExited:
		fmt.Fprintf(stderr, "Warning: server process %d exited; collection stopped (%s)\n", o.pid, o.output)
	case collect.DeviceChanged:
		fmt.Fprintf(stderr, "Findings: the GPU's UUID changed during collection; later samples would not belong to the same device (%s)\n", o.output)
		return withCode(exitFindings, nil)
	}
	return nil
}
