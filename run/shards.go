package run

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/artifact"
)

// ArtifactPaths expands analyze's arguments: a file stays as it is; a directory becomes its
// *.jsonl files (not its subdirectories'), sorted by name. merge says the artifacts are to be
// merged as the shards of one run (more than one argument, or any directory). Errors (wrapping
// artifact.ErrInvalidArtifact): an argument that does not exist, a directory without a
// .jsonl file, one file given twice.
func ArtifactPaths(args []string) (paths []string, merge bool, err error) {
	seen := map[string]bool{}
	for _, a := range args {
		fi, err := os.Stat(a)
		if err != nil {
			return nil, false, fmt.Errorf("%w: %w", artifact.ErrInvalidArtifact, err)
		}
		list := []string{a}
		if fi.IsDir() {
			merge = true
			if list, err = filepath.Glob(filepath.Join(a, "*.jsonl")); err != nil {
				return nil, false, fmt.Errorf("%w: %s: %w", artifact.ErrInvalidArtifact, a, err)
			}
			var files []string
			for _, p := range list {
				if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
					files = append(files, p)
				}
			}
			if len(files) == 0 {
				return nil, false, fmt.Errorf("%w: directory %s holds no .jsonl artifact", artifact.ErrInvalidArtifact, a)
			}
			sort.Strings(files)
			list = files
		}
		for _, p := range list {
			abs, _ := filepath.Abs(p)
			if seen[abs] {
				return nil, false, fmt.Errorf("%w: %s is given twice", artifact.ErrInvalidArtifact, p)
			}
			seen[abs] = true
			paths = append(paths, p)
		}
	}
	return paths, merge || len(paths) > 1, nil
}

// AnalyzeShards reads the artifacts at paths, merges them as the shards of one run
// (analyze.MergeShards: one exact report, as if one host had sent every request, with each
// shard's self-audit) and analyses the merge as Analyze does, the workload's schedule
// recomputed as the unsharded run's. A shard's truncated last line becomes a warning naming
// it. Errors: analyze.ReadInput's for an unreadable shard, analyze.MergeShards' (matching
// analyze.ErrShardSet) and analyze.AnalyzeInput's.
func AnalyzeShards(ctx context.Context, paths []string, opts analyze.Options) (*analyze.Report, error) {
	parts := make([]*analyze.Input, 0, len(paths))
	var warnings []string
	for _, p := range paths {
		in, err := analyze.ReadInput(ctx, p)
		if err != nil {
			return nil, err
		}
		if t := in.Artifact.Truncated; t != nil {
			warnings = append(warnings, fmt.Sprintf("%s: %s", p, t))
		}
		parts = append(parts, in)
	}
	in, err := analyze.MergeShards(parts)
	if err != nil {
		return nil, err
	}
	rep, err := analyzeInput(ctx, strings.Join(paths, ", "), in, opts)
	if err != nil {
		return nil, err
	}
	rep.Warnings = append(warnings, rep.Warnings...)
	return rep, nil
}
