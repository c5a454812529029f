package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

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
		Short: "Write per-request tables in sangam's layout (request_metrics.csv, request_plots/ CDFs, manifest.json) from artifacts",
		Long: `tables reads JSONL artifacts written by profile (offline: only the files) and writes
sangam's per-request tables into DIR: request_metrics.csv (one row per measured request,
one column per sangam metric that a source observes: client e2e, the joined vLLM span's
queue, prefill and decode times, the intended arrivals, the server's token usage),
request_plots/<metric>.csv (each column's exact CDF, at most 1,001 rows) and manifest.json
(every column's source, unit and definition, and why a column is left out). The records of
several artifacts (or of a directory's .jsonl artifacts, e.g. the shards of a sharded run)
go into one table.

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
	sink := tables.New(tf.output)
	for _, p := range paths {
		if err := feedArtifact(ctx, p, sink, cmd.ErrOrStderr()); err != nil {
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
	if err := sink.Close(); err != nil {
		return withCode(exitUnexpected, err)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "Tables saved to: %s\n", tf.output)
	return nil
}

// feedArtifact reads the artifact at path and replays its records to sink
// (artifact.Replay). A truncated last line, and requests of sessions the artifact does not
// declare (left out), are warnings on stderr. Errors: a missing, unreadable or invalid
// artifact (no infer.session or infer.request v1 record, an undecodable infer.vllm_span)
// wrap artifact.ErrInvalidArtifact; ctx's error when it ends.
func feedArtifact(ctx context.Context, path string, sink artifact.Sink, stderr io.Writer) error {
	a, err := artifact.ReadFileContext(ctx, path)
	if err != nil {
		return err
	}
	if err := a.Validate(); err != nil {
		return err
	}
	if a.Truncated != nil {
		fmt.Fprintf(stderr, "Warning: %s: %s\n", path, a.Truncated)
	}
	skipped, err := a.Replay(sink)
	if skipped > 0 {
		fmt.Fprintf(stderr, "Warning: %s: %d request records of a session no infer.session record declares are left out\n", path, skipped)
	}
	return err
}
