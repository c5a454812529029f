package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/run"
	"github.com/inferprobe/inferprobe/tables"
)

func init() { verbs = append(verbs, newTablesCmd) }

// tablesFlags are the raw flag values of `inferprobe tables`.
type tablesFlags struct {
	output    string
	overwrite bool
}

func newTablesCmd() *cobra.Command {
	var tf tablesFlags
	cmd := &cobra.Command{
		Use:   "tables ARTIFACT...|DIRECTORY --output DIR",
		Short: "Write sangam-layout tables, CDFs, plots, index.html and timeline.json from artifacts",
		Long: `tables reads JSONL artifacts written by profile (offline: only the files) and writes
sangam's tables into DIR: request_metrics.csv (one row per measured request, one column per
sangam metric that a source observes: client e2e, the joined vLLM span's queue, prefill and
decode times, the intended arrivals, the server's token usage), request_plots/<metric>.csv
(each column's exact CDF, at most 1,001 rows), the request_arrival and request_completion
time series, worker_plots/ (per vLLM engine: queue_depth_waiting, queue_depth_active and
kv_page_utilization_ratio from the /metrics scrapes, as time series and 101-quantile
DDSketch CDFs), with imported engine steps (infer.iteration, from profile --trace or
import-trace) the per-batch files worker_batch_metrics.csv (one row per step: tokens,
requests, GPU busy execution time, wall time, inter-batch delay, phase, nearest KV ratio),
worker_timeline.csv (busy, queued, idle) and worker_plots/ state time, utilization, idle-gap
summary, phase totals and per-worker batch CDFs, a PNG of each, timeline.json (a
Chrome/Perfetto trace: each request's client events beside its joined vLLM span, the engines'
scraped gauges as counters and their steps), manifest.json
(every file's and column's source, unit and definition, and why one is left out) and
index.html (open it first: the analyze text report, the SLO bounds and every plot with its
caption, self-contained). The records of several artifacts (or of a directory's .jsonl
artifacts, e.g. the shards of a sharded run) go into one table.

DIR must be new or empty unless --overwrite is given (the files tables writes are replaced).

Exit codes: 0 the tables were written; 5 a missing, unreadable or invalid artifact; 2 bad
flags (no --output, or a DIR that is a file or not empty without --overwrite); 1 an
unwritable DIR or anything else; 130 interrupted.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return tf.run(cmd, args)
		},
	}
	f := cmd.Flags()
	f.StringVar(&tf.output, "output", "", "directory to write the tables into (new or empty, unless --overwrite)")
	f.BoolVar(&tf.overwrite, "overwrite", false, "write into a non-empty --output directory, replacing the files tables writes")
	return cmd
}

// checkTablesDir refuses (exit 2) an empty dir, a dir that is not a directory, and a
// non-empty one unless overwrite; flag names the setting in the messages.
func checkTablesDir(flag, dir string, overwrite bool) error {
	if dir == "" {
		return usageErrorf("%s needs a directory", flag)
	}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return usageErrorf("%s %s: %v", flag, dir, err)
	case !fi.IsDir():
		return usageErrorf("%s %s is not a directory", flag, dir)
	}
	d, err := os.Open(dir)
	if err != nil {
		return usageErrorf("%s %s: %v", flag, dir, err)
	}
	defer d.Close()
	_, err = d.Readdirnames(1)
	switch {
	case err == nil && !overwrite:
		return usageErrorf("%s %s is not empty (tables --overwrite replaces its tables)", flag, dir)
	case err != nil && err != io.EOF:
		return usageErrorf("%s %s: %v", flag, dir, err)
	}
	return nil
}

func (tf *tablesFlags) run(cmd *cobra.Command, args []string) error {
	if err := checkTablesDir("--output", tf.output, tf.overwrite); err != nil {
		return err
	}
	paths, _, err := run.ArtifactPaths(args) // a directory: its .jsonl artifacts (a sharded run's shards)
	if err != nil {
		return withCode(exitBadInput, err)
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(paths) > 1 { // shards of one run only, as analyze merges them: refused before anything is written
		if err := analyze.CheckShardHeads(ctx, paths); err != nil {
			return withCode(exitBadInput, err)
		}
	}
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(tablesMemoryLimit(paths)))
	sink := tables.New(tf.output)
	var sum tables.Summary
	var sumErr error
	for _, p := range paths {
		text, slo, aerr, err := feedArtifact(ctx, p, sink, cmd.ErrOrStderr())
		if len(paths) > 1 {
			text = "== " + p + "\n" + text
		}
		sum.Text, sum.SLO = sum.Text+text, sum.SLO+slo
		if aerr != nil && sumErr == nil {
			sumErr = fmt.Errorf("%s: %w", p, aerr)
		}
		if err != nil {
			if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				fmt.Fprintln(cmd.ErrOrStderr(), "Interrupted")
				return &exitError{code: exitInterrupted}
			}
			if errors.Is(err, artifact.ErrInvalidArtifact) {
				return withCode(exitBadInput, err)
			}
			return withCode(exitUnexpected, err)
		}
	}
	sink.SetSummary(func() (tables.Summary, error) { return sum, sumErr })
	if err := sink.Close(); err != nil {
		return withCode(exitUnexpected, err)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "Tables saved to: %s\n", tf.output)
	return nil
}

// tablesMemoryLimit is the soft memory limit (bytes) of the tables verb: analyze's rule
// (analyzeMemoryLimit) over the artifacts' total size, plus 256 MiB for the tables
// themselves; the current limit when GOMEMLIMIT is set.
func tablesMemoryLimit(paths []string) int64 {
	if os.Getenv("GOMEMLIMIT") != "" {
		return debug.SetMemoryLimit(-1)
	}
	var size int64
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil {
			size += fi.Size()
		}
	}
	return max(1<<30, size/4*3) + 256<<20
}

// feedArtifact reads the artifact at path once (analyze.ReadInput: streamed, the requests
// packed), writes it to sink (tables.Sink.WriteInput) and returns its text report and SLO
// policy (tables.SummaryOf); an analysis error (aerr) is shown on the page, not fatal. A truncated last line, and requests of
// sessions the artifact does not declare (left out), are warnings on stderr. Errors: a
// missing, unreadable or invalid artifact (no infer.session or infer.request v1 record, an
// undecodable infer.vllm_span or infer.vllm_scrape) wrap artifact.ErrInvalidArtifact; ctx's
// error when it ends.
func feedArtifact(ctx context.Context, path string, sink *tables.Sink, stderr io.Writer) (text, slo string, aerr, err error) {
	in, err := analyze.ReadInputRecords(ctx, path) // the sink keeps the records: no packed gaps
	if err != nil {
		return "", "", nil, err
	}
	if err := in.Validate(); err != nil {
		return "", "", nil, err
	}
	if t := in.Artifact.Truncated; t != nil {
		fmt.Fprintf(stderr, "Warning: %s: %s\n", path, t)
	}
	for _, ig := range in.Ignored {
		fmt.Fprintf(stderr, "Warning: %s: %s\n", path, ig.Text())
	}
	if err := sink.WriteInput(in); err != nil {
		return "", "", nil, err
	}
	text, slo, aerr = tables.SummaryOf(ctx, path, in)
	if ctx.Err() != nil {
		return "", "", nil, ctx.Err()
	}
	return text, slo, aerr, nil
}
