package trace

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/inferprobe/inferprobe/artifact"
)

// workerName matches a worker trace's file name and captures its global rank:
// rank<N>.<anything>.pt.trace.json[.gz] or
// dp<D>_pp<P>_tp<T>_dcp<C>_ep<E>_rank<N>.<anything>.pt.trace.json[.gz].
var workerName = regexp.MustCompile(`^(?:dp\d+_pp\d+_tp\d+_dcp\d+_ep\d+_)?rank(\d+)\..+\.pt\.trace\.json(?:\.gz)?$`)

// workerRank is the rank of a worker trace named name, and whether name is one. The API
// server's trace (a name holding ".async_llm.") never is.
func workerRank(name string) (int, bool) {
	if strings.Contains(name, ".async_llm.") {
		return 0, false
	}
	m := workerName.FindStringSubmatch(name)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		return 0, false
	}
	return n, true
}

// listing is what one look at the trace directory saw: the worker traces (by name) and the
// worker traces still being written (their names without ".tmp").
type listing struct {
	done    map[string]artifact.TraceFile
	pending map[string]bool
}

// list reads dir. An unreadable directory is an empty listing (the window then finds no
// file; the traces can still be imported later).
func list(dir string) listing {
	l := listing{done: map[string]artifact.TraceFile{}, pending: map[string]bool{}}
	if dir == "" {
		return l
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return l
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		name := e.Name()
		if base, ok := strings.CutSuffix(name, ".tmp"); ok {
			if _, ok := workerRank(base); ok {
				l.pending[base] = true
			}
			continue
		}
		rank, ok := workerRank(name)
		if !ok {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		l.done[name] = artifact.TraceFile{Path: filepath.Join(dir, name), Bytes: info.Size(), Rank: rank}
	}
	return l
}

// newSince is the worker traces of l that before did not hold, sorted by path; and whether
// l has a pending (.tmp) worker trace, not finished and not already pending in before.
func (l listing) newSince(before listing) (files []artifact.TraceFile, pending bool) {
	for name, f := range l.done {
		if _, old := before.done[name]; !old {
			files = append(files, f)
		}
	}
	for name := range l.pending {
		if _, done := l.done[name]; !done && !before.pending[name] {
			pending = true
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, pending
}
