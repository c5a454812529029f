package main

import (
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/loadgen"
	"github.com/inferprobe/inferprobe/run"
	"github.com/inferprobe/inferprobe/trace"
	"github.com/inferprobe/inferprobe/trace/kineto"
)

// traceMaxSeconds is the range of --trace-max-seconds: above 0 s, at most 1 h.
var traceMaxSeconds = artifact.Range{Min: 0, MinExclusive: true, Max: 3600, Unit: "seconds"}

// traceSettle is how long a window waits for trace files after its stop (tests shorten it).
var traceSettle = trace.DefaultSettle

// traceFlags are profile's profiler trace window flags.
type traceFlags struct {
	kind       string // "" off, or trace.ProfilerVLLMTorch
	dir        string
	phase      string
	maxSeconds float64
	controlURL string
	maxBytes   int64
	detail     string
	noImport   bool
	deviceUUID []string
}

func (tf *traceFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&tf.kind, "trace", "", "open a profiler trace window around one phase of each case: vllm-torch (POST /start_profile, /stop_profile); recorded as infer.trace_window")
	f.StringVar(&tf.dir, "trace-dir", "", "the server's torch_profiler_dir as this client sees it: the worker traces each window wrote are listed in its record")
	f.StringVar(&tf.phase, "trace-phase", loadgen.PhaseMeasured, "the phase profiled in each case: measured or warmup")
	f.Float64Var(&tf.maxSeconds, "trace-max-seconds", 0, "end a window this many seconds after its start (the phase keeps running unprofiled); default: the phase's end")
	f.StringVar(&tf.controlURL, "trace-control-url", "", "base URL of /start_profile and /stop_profile (default: the endpoint's origin)")
	f.Int64Var(&tf.maxBytes, "trace-max-bytes", kineto.DefaultMaxBytes, "a worker trace larger than this (bytes on disk) is registered, not imported")
	f.StringVar(&tf.detail, "trace-detail", kineto.DetailLaunch, "activity records of the import: launch (one per CPU launch, device and kind) or kernel (one per GPU activity)")
	f.StringArrayVar(&tf.deviceUUID, "trace-device-uuid", nil, "RANK=UUID: the GPU of a worker rank, stamped as context.device_uuid on its imported records (repeatable)")
	f.BoolVar(&tf.noImport, "trace-no-import", false, "list the windows' trace files without importing them at the end of the run")
}

// importOptions are the end-of-run trace import the flags describe (exit 2: a bad
// --trace-max-bytes or --trace-detail, or one given without --trace).
func (tf *traceFlags) importOptions(cmd *cobra.Command) (run.TraceImport, error) {
	f := cmd.Flags()
	if tf.kind == "" {
		for _, name := range []string{"trace-max-bytes", "trace-detail", "trace-no-import", "trace-device-uuid"} {
			if f.Changed(name) {
				return run.TraceImport{}, usageErrorf("--%s needs --trace", name)
			}
		}
		return run.TraceImport{}, nil
	}
	if tf.maxBytes < 1 {
		return run.TraceImport{}, usageErrorf("--trace-max-bytes must be at least 1, not %d", tf.maxBytes)
	}
	if tf.detail != kineto.DetailLaunch && tf.detail != kineto.DetailKernel {
		return run.TraceImport{}, usageErrorf("--trace-detail must be launch or kernel, not %q", tf.detail)
	}
	uuids, err := deviceUUIDs(tf.deviceUUID)
	if err != nil {
		return run.TraceImport{}, err
	}
	return run.TraceImport{Options: kineto.Options{Detail: tf.detail, MaxBytes: tf.maxBytes}, Skip: tf.noImport || tf.dir == "",
		DeviceUUIDs: uuids}, nil
}

// deviceUUIDs parses --trace-device-uuid RANK=UUID values (exit 2: no "=", a rank that is
// not an integer in [0, 65535], an empty UUID or one with spaces or control characters, a
// rank given twice).
func deviceUUIDs(values []string) (map[int64]string, error) {
	if len(values) == 0 {
		return nil, nil
	}
	out := map[int64]string{}
	for _, v := range values {
		rank, uuid, ok := strings.Cut(v, "=")
		n, err := strconv.ParseInt(rank, 10, 64)
		switch {
		case !ok:
			return nil, usageErrorf("--trace-device-uuid %q: want RANK=UUID", v)
		case err != nil || n < 0 || n > 65535:
			return nil, usageErrorf("--trace-device-uuid %q: the rank must be an integer in [0, 65535]", v)
		case uuid == "" || strings.IndexFunc(uuid, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0:
			return nil, usageErrorf("--trace-device-uuid %q: the UUID must be non-empty, without spaces or control characters", v)
		}
		if _, dup := out[n]; dup {
			return nil, usageErrorf("--trace-device-uuid: rank %d given twice", n)
		}
		out[n] = uuid
	}
	return out, nil
}

// options are the trace window options the flags describe for the validated workload cfg
// (nil without --trace). Every problem is exit 2, before anything is sent: a --trace-* flag
// without --trace, an unknown profiler or phase, --trace-phase warmup without warmup
// requests, a bad --trace-max-seconds, a --trace-dir that is not a directory, or a control
// URL that is not an absolute http(s) URL.
func (tf *traceFlags) options(cmd *cobra.Command, cfg *loadgen.Config) (*trace.Options, error) {
	f := cmd.Flags()
	if tf.kind == "" {
		for _, name := range []string{"trace-dir", "trace-phase", "trace-max-seconds", "trace-control-url"} {
			if f.Changed(name) {
				return nil, usageErrorf("--%s needs --trace", name)
			}
		}
		return nil, nil
	}
	if tf.kind != trace.ProfilerVLLMTorch {
		return nil, usageErrorf("--trace must be %s, not %q", trace.ProfilerVLLMTorch, tf.kind)
	}
	switch tf.phase {
	case loadgen.PhaseMeasured:
	case loadgen.PhaseWarmup:
		if cfg.WarmupRequests == 0 {
			return nil, usageErrorf("--trace-phase warmup needs --warmup-requests")
		}
	default:
		return nil, usageErrorf("--trace-phase must be measured or warmup, not %q", tf.phase)
	}
	o := &trace.Options{Phase: tf.phase, Dir: tf.dir, Settle: traceSettle}
	if f.Changed("trace-max-seconds") {
		if err := checkNumber("trace-max-seconds", tf.maxSeconds, traceMaxSeconds); err != nil {
			return nil, err
		}
		o.MaxDuration = time.Duration(tf.maxSeconds * float64(time.Second))
	}
	if tf.dir != "" {
		if fi, err := os.Stat(tf.dir); err != nil || !fi.IsDir() {
			return nil, usageErrorf("--trace-dir %s is not a directory", tf.dir)
		}
	}
	o.ControlBase = tf.controlURL
	if o.ControlBase == "" {
		base, err := trace.ControlBase(cfg.Endpoint)
		if err != nil {
			return nil, usageErrorf("--trace: %v", err)
		}
		o.ControlBase = base
	}
	probe := *o
	probe.Sink = artifact.SinkFunc(func(artifact.Record) error { return nil })
	if _, err := trace.New(probe); err != nil {
		return nil, usageErrorf("--trace-control-url: %v", err)
	}
	return o, nil
}
