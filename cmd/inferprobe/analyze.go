package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/export"
	"github.com/inferprobe/inferprobe/join"
	"github.com/inferprobe/inferprobe/receiver"
	"github.com/inferprobe/inferprobe/run"
)

func init() { verbs = append(verbs, newAnalyzeCmd) }

// analyzeFlags are the raw flag values of `inferprobe analyze`.
type analyzeFlags struct {
	format, output, sloFile string
	slo                     []string
	vllmSpans               []string
	serverTelemetry         []string
	directServer            bool
	clockOffsetNS           int64
	clockUncertaintyNS      int64
	cost                    costFlags
}

func newAnalyzeCmd() *cobra.Command {
	var af analyzeFlags
	cmd := &cobra.Command{
		Use:   "analyze ARTIFACT [ARTIFACT…] | DIRECTORY",
		Short: "Turn an artifact into the report: populations, rates, latency quantiles with confidence intervals, SLO attainment and goodput",
		Long: `analyze reads a JSONL artifact written by profile and reports, per workload case, who
was counted (population and cohort checks), over which interval every rate is divided,
latency quantiles with their order-statistic confidence intervals, and — with a policy from
--slo, --slo-file or the artifact's infer.slo record — SLO attainment and goodput as lower
and upper bounds over every offered request. Only measured requests are analysed.

--format vllm-bench writes, per case, the JSON that vllm bench serve --save-result writes
(its keys and units; one object per line); --format llmd-report writes, per case, an llm-d
Benchmark Report v0.2 (one JSON object per line). --cost-per-hour (the server's dollars
per hour) or --cost-per-gpu-hour with --gpus prices each case's tokens; with server
telemetry that recorded the GPU's energy counter, each case gives joules per output token.

Several artifacts (or a directory of .jsonl artifacts) are the shards of one sharded run
(profile --shards N): they are merged into one exact report, as if one host had sent every
request, with each shard's self-audit; shards of different runs, workloads, models, SLO
policies or shard counts, and a missing or repeated shard, are refused (exit 5); shards
whose measured windows never overlapped (run one after another) are a warning.

--slo KEY:MS (repeatable) judges e.g. ttft:500 (a key without a dot is client.KEY);
--slo-file reads a stormlog.infer.slo version-1 policy document. Either replaces the
artifact's recorded policy, with a warning.

Exit codes: 0 the report was produced (even when every request failed); 5 a missing,
unreadable or invalid artifact, --slo-file, --vllm-spans or --server-telemetry file (or a malformed
infer.clock_alignment record); 2 bad flags; 1 an unwritable --output or
anything else; 130 interrupted.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return af.run(cmd, args)
		},
	}
	f := cmd.Flags()
	f.StringVar(&af.format, "format", "txt", "report format: txt, json (pretty-printed, sorted keys), vllm-bench (vllm bench serve's result JSON) or llmd-report (llm-d Benchmark Report v0.2)")
	f.StringVar(&af.output, "output", "", "write the report to this file instead of stdout")
	f.StringArrayVar(&af.slo, "slo", nil, "SLO criterion KEY:MS, repeatable (ttft:500, e2e:2000, server.ttft:400)")
	f.StringVar(&af.sloFile, "slo-file", "", "SLO policy document (stormlog.infer.slo version 1)")
	f.StringArrayVar(&af.vllmSpans, "vllm-spans", nil, "vLLM spans from a file (OTLP JSON, or JSONL of infer.vllm_span records), joined with the artifact's own; repeatable")
	f.StringArrayVar(&af.serverTelemetry, "server-telemetry", nil, "server telemetry file written by collect-server (JSONL of infer.telemetry_sample), joined to the case windows; repeatable (one per group member)")
	f.BoolVar(&af.directServer, "direct-server", false, "assert that every request reached the one server process the telemetry observed (no load balancer)")
	f.Int64Var(&af.clockOffsetNS, "clock-offset-ns", 0, "server-to-client clock offset in ns (server timestamp + offset = client timestamp)")
	f.Int64Var(&af.clockUncertaintyNS, "clock-uncertainty-ns", 0, "bound on the clock offset's error in ns (≥ 0)")
	af.cost.register(f, 1)
	return cmd
}

// policy resolves --slo / --slo-file: nil without either; exit 2 for both or a bad --slo,
// exit 5 for an unreadable or invalid --slo-file.
func (af *analyzeFlags) policy(cmd *cobra.Command) (*analyze.Policy, string, error) {
	sloSet := cmd.Flags().Changed("slo")
	fileSet := cmd.Flags().Changed("slo-file")
	switch {
	case sloSet && fileSet:
		return nil, "", usageErrorf("--slo and --slo-file are mutually exclusive")
	case sloSet:
		p, err := analyze.ParseSLOFlags(af.slo)
		if err != nil {
			return nil, "", usageErrorf("%v", err)
		}
		return p, analyze.SourceFlags, nil
	case fileSet:
		if af.sloFile == "" {
			return nil, "", usageErrorf("--slo-file needs a file name")
		}
		p, err := analyze.ParsePolicyFile(af.sloFile)
		if err != nil {
			return nil, "", withCode(exitBadInput, err)
		}
		return p, analyze.SourceFile, nil
	}
	return nil, "", nil
}

func (af *analyzeFlags) run(cmd *cobra.Command, args []string) error {
	paths, merge, err := run.ArtifactPaths(args)
	if err != nil {
		return withCode(exitBadInput, err)
	}
	path := paths[0]
	switch af.format {
	case "txt", "json", formatVLLMBench, formatLLMDReport:
	default:
		return usageErrorf("--format must be txt, json, %s or %s, not %q", formatVLLMBench, formatLLMDReport, af.format)
	}
	if cmd.Flags().Changed("output") && af.output == "" {
		return usageErrorf("--output needs a file name")
	}
	for _, p := range paths {
		if af.output != "" && samePath(af.output, p) {
			return usageErrorf("--output would overwrite the artifact %s", p)
		}
	}
	policy, source, err := af.policy(cmd)
	if err != nil {
		return err
	}
	var spans []artifact.Span
	for _, f := range af.vllmSpans {
		recs, err := receiver.ReadSpanFile(f)
		if err != nil {
			return withCode(exitBadInput, fmt.Errorf("--vllm-spans %s: %w", f, err))
		}
		spans = append(spans, recs...)
	}
	server, err := af.serverTelemetryInput(cmd)
	if err != nil {
		return err
	}
	rates, _, err := af.cost.rates()
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(analyzeMemoryLimit(paths...)))
	if analyzeGCOff() {
		defer debug.SetGCPercent(debug.SetGCPercent(-1))
	}

	opts := analyze.Options{Policy: policy, PolicySource: source, VLLMSpans: spans, ServerTelemetry: server, Cost: rates[0]}
	exports := &export.Collector{}
	if af.format == formatVLLMBench || af.format == formatLLMDReport {
		exports.Attach(&opts)
	}
	var rep *analyze.Report
	if merge {
		rep, err = run.AnalyzeShards(ctx, paths, opts)
	} else {
		rep, err = analyzeArtifactReportContext(ctx, path, opts)
	}
	if err != nil {
		switch {
		case ctx.Err() != nil && errors.Is(err, ctx.Err()):
			fmt.Fprintln(cmd.ErrOrStderr(), "Interrupted")
			return &exitError{code: exitInterrupted}
		case errors.Is(err, artifact.ErrInvalidArtifact), errors.Is(err, join.ErrInvalidTelemetry):
			return withCode(exitBadInput, err)
		default:
			return withCode(exitUnexpected, err)
		}
	}
	for _, w := range rep.Warnings {
		fmt.Fprintf(cmd.ErrOrStderr(), "Warning: %s\n", w)
	}
	var buf bytes.Buffer
	switch af.format {
	case formatVLLMBench:
		err = export.WriteVLLMBench(&buf, exports, rep)
	case formatLLMDReport:
		err = export.WriteLLMDReport(&buf, exports, rep, version)
	default:
		err = renderReport(&buf, rep, af.format)
	}
	if err != nil {
		return withCode(exitUnexpected, err)
	}
	if af.output == "" {
		if _, err := cmd.OutOrStdout().Write(buf.Bytes()); err != nil {
			return withCode(exitUnexpected, err)
		}
		return nil
	}
	if err := writeReportFile(af.output, buf.Bytes()); err != nil {
		return withCode(exitUnexpected, fmt.Errorf("cannot write --output: %w", err))
	}
	fmt.Fprintf(cmd.OutOrStdout(), "Analysis report saved to: %s\n", af.output)
	return nil
}

// analyzeMemoryLimit is the soft memory limit (bytes) of the analyze verb: the larger of
// 1 GiB and three quarters of the artifacts' size (a merge's shards together), or the current limit when the user set
// GOMEMLIMIT. The analysis view of a streamed artifact is about half its size (ReadInput),
// while the Go collector's default pacing (GOGC=100) lets the heap grow to twice what is
// live before collecting; near this limit the runtime collects sooner instead, which keeps
// a 1,000,000-request artifact (1.5 GB) near 1.1 GiB of RSS instead of 1.5 GiB at no
// measurable CPU cost (bench/analyze-1m.sh). It is a soft limit: a larger live heap still
// runs, with the runtime's GC CPU limiter.
func analyzeMemoryLimit(paths ...string) int64 {
	if os.Getenv("GOMEMLIMIT") != "" {
		return debug.SetMemoryLimit(-1)
	}
	var size int64
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil {
			size += fi.Size()
		}
	}
	return max(int64(1<<30), size/4*3)
}

// analyzeGCOff says whether the analyze verb turns the proportional collector off (GOGC=off):
// yes unless the user set GOGC or GOMEMLIMIT. The soft memory limit (analyzeMemoryLimit)
// alone then paces the collector. Reading an artifact leaves almost no garbage (each
// infer.request is decoded into reused memory and copied into the packed view), so the heap
// is the view itself and the proportional collector would only rescan the growing view —
// twice while a 1,000,000-request artifact is read, each a full scan of hundreds of MB of
// pointer-dense requests — while the limit already bounds the heap. A heap that never reaches
// the limit is never collected: a small artifact's analysis keeps its garbage until it exits.
func analyzeGCOff() bool {
	return os.Getenv("GOGC") == "" && os.Getenv("GOMEMLIMIT") == ""
}

// The export formats of analyze --format.
const (
	formatVLLMBench  = "vllm-bench"
	formatLLMDReport = "llmd-report"
)

// renderReport writes rep as "txt" (analyze.RenderText) or "json" (analyze.WriteJSON).
func renderReport(w io.Writer, rep *analyze.Report, format string) error {
	if format == "json" {
		return analyze.WriteJSON(w, rep)
	}
	return analyze.RenderText(w, rep)
}

// analyzeArtifactReport reads the artifact at path and computes its report; see
// analyzeArtifactReportContext. The profile command calls it at the end of a run to print
// the text report (analyze.RenderText) of the artifact it just wrote.
func analyzeArtifactReport(path string, opts analyze.Options) (*analyze.Report, error) {
	return analyzeArtifactReportContext(context.Background(), path, opts)
}

// analyzeArtifactReportContext streams the artifact at path (analyze.ReadInput: each
// infer.request is converted to the analysis view as it is read, so memory grows with the
// analysis view only) and computes its report with opts. When opts.Scheduler is
// nil and the artifact records a workload, the scheduler recomputes open-loop schedules with
// the generator's own code (loadgen.WorkloadScheduler), so a Poisson case's endpoint and a
// duration-limited Poisson case's arrival count are checked too. A truncated last line is
// reported first among rep.Warnings, not as an error.
//
// Errors: a missing, unreadable, unparsable or invalid artifact (no infer.session or
// infer.request v1 record, a non-object line, an integer spelled as a float, an unusable
// infer.slo record that opts.Policy does not override) match artifact.ErrInvalidArtifact
// (exit 5); ctx's error when ctx ends.
func analyzeArtifactReportContext(ctx context.Context, path string, opts analyze.Options) (*analyze.Report, error) {
	return run.Analyze(ctx, path, opts)
}

// serverTelemetryInput reads --server-telemetry files (exit 5 for a missing or invalid one)
// and the clock flags (exit 2 for a negative --clock-uncertainty-ns); nil without files.
func (af *analyzeFlags) serverTelemetryInput(cmd *cobra.Command) (*analyze.ServerTelemetry, error) {
	st := &analyze.ServerTelemetry{DirectServer: af.directServer}
	if cmd.Flags().Changed("clock-offset-ns") {
		st.Clock.OffsetNS = artifact.Ptr(af.clockOffsetNS)
	}
	if cmd.Flags().Changed("clock-uncertainty-ns") {
		if af.clockUncertaintyNS < 0 {
			return nil, usageErrorf("--clock-uncertainty-ns must be ≥ 0, not %d", af.clockUncertaintyNS)
		}
		st.Clock.UncertaintyNS = artifact.Ptr(af.clockUncertaintyNS)
	}
	if len(af.serverTelemetry) == 0 {
		return nil, nil
	}
	for _, f := range af.serverTelemetry {
		samples, err := join.ReadTelemetryFile(f)
		if err != nil {
			return nil, withCode(exitBadInput, fmt.Errorf("--server-telemetry: %w", err))
		}
		st.Samples = append(st.Samples, samples...)
	}
	return st, nil
}

// writeReportFile writes a report to path without ever leaving a partial one: a regular file
// (or a path not yet there; through symlinks, the file they name, created when a link
// dangles) is written to a temporary file beside it, then renamed over it, so a failed
// write (a full disk) leaves the old file as it was and nothing half-written; the file gets
// the old one's permissions, else a new file's (0666 less the umask). A path that is not a
// regular file (a device, a pipe), or whose directory takes no new file, is written in
// place. Replacing a file makes it the writer's: a read-only report in a directory the
// writer may change is replaced, owned by the writer, with its old permissions. Errors name
// path (and the file its links name), not the temporary file; a missing directory is not
// created.
func writeReportFile(path string, report []byte) error {
	target, err := linkTarget(path)
	if err != nil {
		return err
	}
	if err := writeReplacing(target, report); err != nil {
		return reportPathError(path, target, err)
	}
	return nil
}

// reportPathError is err about path (through its links, target) with the file names the
// operation put in it — a temporary file's among them — replaced by the path the user gave.
func reportPathError(path, target string, err error) error {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		err = pe.Err
	case errors.As(err, &le): // a failed rename names the temporary file and the target
		err = le.Err
	}
	if target != path {
		return fmt.Errorf("%s (the file its link names, %s): %w", path, target, err)
	}
	return fmt.Errorf("%s: %w", path, err)
}

// maxLinks bounds the symbolic links linkTarget follows (Linux's own limit).
const maxLinks = 40

// linkTarget follows path's symbolic links, if any, to the file they name — which need
// not exist yet (a dangling link names the file to create). A loop, or more than maxLinks
// links, is an error.
func linkTarget(path string) (string, error) {
	cur := path
	for range maxLinks {
		fi, err := os.Lstat(cur)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			return cur, nil // not there yet, or not a link
		}
		dest, err := os.Readlink(cur)
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(dest) {
			dest = filepath.Join(filepath.Dir(cur), dest)
		}
		cur = dest
	}
	return "", fmt.Errorf("%s: more than %d symbolic links (a loop?)", path, maxLinks)
}

// writeReplacing is writeReportFile for the file itself (no link).
func writeReplacing(target string, report []byte) error {
	var mode fs.FileMode // the old file's permissions; 0: a new file, 0666 less the umask
	if fi, err := os.Stat(target); err == nil {
		if !fi.Mode().IsRegular() {
			return writeInPlace(target, report)
		}
		mode = fi.Mode().Perm()
	}
	tmp, err := createBeside(target)
	if err != nil {
		if errors.Is(err, fs.ErrPermission) {
			return writeInPlace(target, report)
		}
		return err
	}
	_, err = tmp.Write(report)
	if err == nil && mode != 0 {
		err = tmp.Chmod(mode)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), target)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
	}
	return err
}

// createBeside creates a new temporary file ".NAME.tmp-RANDOM" in target's directory, with
// the permissions a new file gets (0666 less the umask: os.CreateTemp's are 0600).
func createBeside(target string) (*os.File, error) {
	dir, base := filepath.Split(target)
	for range 100 {
		name := filepath.Join(dir, "."+base+".tmp-"+strconv.FormatUint(rand.Uint64(), 36))
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
		if !errors.Is(err, fs.ErrExist) {
			return f, err
		}
	}
	return nil, fmt.Errorf("no free temporary name beside %s", target)
}

// writeInPlace writes report to path, created (0666 less the umask) or truncated.
func writeInPlace(path string, report []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o666)
	if err != nil {
		return err
	}
	_, err = f.Write(report)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
