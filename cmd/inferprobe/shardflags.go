package main

import (
	"net/url"
	"os"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/shard"

	"github.com/inferprobe/inferprobe/loadgen"
	"github.com/inferprobe/inferprobe/run"
	"github.com/spf13/cobra"
)

// shardFlags are profile's sharding flags: --shards N, --shard K (default: the
// JOB_COMPLETION_INDEX variable a Kubernetes Indexed Job sets) and --shard-telemetry.
type shardFlags struct {
	shards      int
	shard       string
	telemetry   bool
	coordinator string
	getenv      func(string) string // os.Getenv; tests replace it
}

func (sf *shardFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.IntVar(&sf.shards, "shards", 1, "load-generator shards of this run (each sends its slice of one schedule; --run-id is then required)")
	f.StringVar(&sf.shard, "shard", "", "this shard's index 0..N-1 (default $"+loadgen.ShardIndexEnv+", as a Kubernetes Indexed Job sets it)")
	f.StringVar(&sf.coordinator, "coordinator", "", "with --shards > 1: the coordinator's URL (inferprobe coordinate); the shards then start together at the time it announces")
	f.BoolVar(&sf.telemetry, "shard-telemetry", false, "with --shards > 1: collect server telemetry (--vllm-metrics, spans, --trace) on this shard even when it is not shard 0")
}

// apply sets w's shard fields from the flags. Errors (exit 2): --shards below 1, a --shard or
// JOB_COMPLETION_INDEX that is not an integer within 0..N-1, a sharded run without --run-id
// (every shard must send the same run id), --shard without --shards > 1.
func (sf *shardFlags) apply(cmd *cobra.Command, w *loadgen.Workload) error {
	if sf.shards < 1 || sf.shards > loadgen.MaxShards {
		return usageErrorf("--shards must be within 1..%d, not %d", loadgen.MaxShards, sf.shards)
	}
	getenv := sf.getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	k := 0
	switch {
	case cmd.Flags().Changed("shard"):
		var err error
		if k, err = loadgen.ParseShardIndex(sf.shard, "--shard", sf.shards); err != nil {
			return usageErrorf("%v", err)
		}
	case sf.shards > 1:
		v := getenv(loadgen.ShardIndexEnv)
		if v == "" {
			return usageErrorf("--shards %d needs --shard K or $%s", sf.shards, loadgen.ShardIndexEnv)
		}
		var err error
		if k, err = loadgen.ParseShardIndex(v, "$"+loadgen.ShardIndexEnv, sf.shards); err != nil {
			return usageErrorf("%v", err)
		}
	}
	if sf.shards > 1 && w.RunID == "" {
		return usageErrorf("--shards %d needs --run-id: every shard must send the same run id", sf.shards)
	}
	if sf.shards > 1 {
		w.Shards, w.Shard = sf.shards, k
	}
	if sf.coordinator != "" {
		u, err := url.Parse(sf.coordinator)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return usageErrorf("--coordinator must be an http or https URL, not %q", artifact.EchoURL(sf.coordinator))
		}
		if sf.shards < 2 {
			return usageErrorf("--coordinator needs --shards of at least 2")
		}
	}
	return nil
}

// gate sets spec's start gate when --coordinator was given.
func (sf *shardFlags) gate(cfg *loadgen.Config, spec *run.Spec) {
	if sf.coordinator == "" || !cfg.Sharded() {
		return
	}
	g := &shard.Gate{Client: &shard.Client{Base: sf.coordinator}, Shard: cfg.Shard, Shards: cfg.Shards}
	spec.StartGate = g.Wait
}

// strip leaves server telemetry to shard 0: on any other shard of a sharded run, without
// --shard-telemetry, the vLLM scraper, the span receiver and trace windows are turned off, so
// that nothing is collected N times. It returns whether it turned anything off.
func (sf *shardFlags) strip(cfg *loadgen.Config, spec *run.Spec) bool {
	if !cfg.Sharded() || cfg.Shard == 0 || sf.telemetry {
		return false
	}
	off := spec.Metrics != nil || spec.Receiver != nil || spec.Trace != nil
	spec.Metrics, spec.Receiver, spec.Trace = nil, nil, nil
	return off
}
