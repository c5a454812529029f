package analyze

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/inferprobe/inferprobe/artifact"
)

// ErrShardSet marks artifacts that are not the shards of one run: different run ids, workload
// digests, SLO policies or shard counts, a shard index missing or given twice, a request index
// recorded by two shards, or an artifact of a sharded run merged alone. It also matches
// artifact.ErrInvalidArtifact (exit 5).
var ErrShardSet = fmt.Errorf("%w: not the shards of one run", artifact.ErrInvalidArtifact)

// ReadShards reads the artifacts at paths (ReadInput each) and merges them (MergeShards).
// Errors: ReadInput's for the first artifact that cannot be read, then MergeShards'.
func ReadShards(ctx context.Context, paths []string) (*Input, error) {
	parts := make([]*Input, 0, len(paths))
	for _, p := range paths {
		in, err := ReadInput(ctx, p)
		if err != nil {
			return nil, err
		}
		parts = append(parts, in)
	}
	return MergeShards(parts)
}

// MergeShards merges the shards of one sharded run (profile --shards N) into one Input that
// analyses as if one host had sent every request: each case's measured requests in global
// order (request_index, then intended time), the phase windows of each case and phase merged
// (earliest start, latest window end and drain, scheduled arrivals summed, prompts_digest
// recomputed over the merged requests in index order), every shard's sessions, spans, scrapes,
// samples and clock alignments, and the head records (artifact header, workload without its
// shard block, SLO, cache states) of shard 0. Input.Shards holds each shard's self-audit.
//
// A phase window that some shard did not write (the shard stopped mid-run) merges with a null
// drained_at_ns, so the case is marked phase_window_incomplete, and the merged artifact holds a
// closing infer.session only when every shard wrote one (the worst status: incomplete, then
// interrupted, then completed).
//
// One artifact without a shard block goes through the same merge and analyses to its plain
// report (no shards block). The parts' measured requests move into the merged Input: their
// Cases are emptied.
// Errors wrap ErrShardSet.
func MergeShards(parts []*Input) (*Input, error) {
	if len(parts) == 0 {
		return nil, fmt.Errorf("%w: no artifact given", ErrShardSet)
	}
	for _, p := range parts {
		if p == nil || p.Artifact == nil {
			return nil, fmt.Errorf("%w: no artifact", ErrShardSet)
		}
	}
	if len(parts) == 1 && shardOf(parts[0]) == nil {
		return mergeInputs(parts) // the plain report: Shards stays nil
	}
	ordered, err := checkShards(parts)
	if err != nil {
		return nil, err
	}
	audits := auditShards(ordered) // before the merge, which releases the shards' requests
	in, err := mergeInputs(ordered)
	if err != nil {
		return nil, err
	}
	in.Shards = audits
	return in, nil
}

// shardOf is an input's shard block (nil when it has none).
func shardOf(in *Input) *artifact.ShardInfo {
	if w := in.Artifact.Workload; w != nil {
		return w.Shard
	}
	return nil
}

// sessionModel is the model the artifact's first configured infer.session asked for ("" when
// none records one). The workload digest leaves the model out, so checkShards compares it.
func sessionModel(in *Input) string {
	for _, s := range in.Artifact.Sessions {
		if s.Config != nil {
			return s.Config.Model
		}
	}
	return ""
}

// checkShards checks that parts are the shards 0..N−1 of one run, each once, with one
// workload digest, model and SLO policy, and returns them by shard index.
func checkShards(parts []*Input) ([]*Input, error) {
	first := parts[0]
	info0 := shardOf(first)
	for _, p := range parts {
		if p.Artifact.Workload == nil {
			return nil, fmt.Errorf("%w: %s has no infer.workload record, so it names no shard: an empty file, not an inferprobe artifact, or a shard that stopped before it sent anything (its set cannot merge without it: run that shard again)", ErrShardSet, nameOf(p))
		}
		if shardOf(p) == nil {
			return nil, fmt.Errorf("%w: %s is not a shard (its infer.workload has no shard block; an unsharded artifact is analysed alone)", ErrShardSet, nameOf(p))
		}
	}
	n := int(info0.Shards)
	byIndex := make([]*Input, n)
	for _, p := range parts {
		info := shardOf(p)
		switch {
		case info.Shards != info0.Shards:
			return nil, fmt.Errorf("%w: %s is a shard of %d, %s of %d", ErrShardSet, nameOf(p), info.Shards, nameOf(first), info0.Shards)
		case info.RunID != info0.RunID:
			return nil, fmt.Errorf("%w: %s is of run %q, %s of run %q", ErrShardSet, nameOf(p), info.RunID, nameOf(first), info0.RunID)
		case p.Artifact.Workload.WorkloadDigest != first.Artifact.Workload.WorkloadDigest:
			return nil, fmt.Errorf("%w: %s has workload digest %s, %s %s", ErrShardSet, nameOf(p), p.Artifact.Workload.WorkloadDigest, nameOf(first), first.Artifact.Workload.WorkloadDigest)
		case sessionModel(p) != sessionModel(first):
			return nil, fmt.Errorf("%w: %s asked model %q, %s model %q (the shards of one run measure one model)", ErrShardSet, nameOf(p), sessionModel(p), nameOf(first), sessionModel(first))
		case sloDigest(p) != sloDigest(first):
			return nil, fmt.Errorf("%w: %s and %s record different SLO policies", ErrShardSet, nameOf(p), nameOf(first))
		case info.Shard < 0 || info.Shard >= info.Shards:
			return nil, fmt.Errorf("%w: %s claims shard %d of %d", ErrShardSet, nameOf(p), info.Shard, info.Shards)
		}
		if prev := byIndex[info.Shard]; prev != nil {
			return nil, fmt.Errorf("%w: shard %d given twice (%s and %s)", ErrShardSet, info.Shard, nameOf(prev), nameOf(p))
		}
		byIndex[info.Shard] = p
	}
	var missing []string
	for k, p := range byIndex {
		if p == nil {
			missing = append(missing, fmt.Sprint(k))
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: run %q has %d shards; shard %s missing", ErrShardSet, info0.RunID, n, strings.Join(missing, ", "))
	}
	return byIndex, nil
}

func nameOf(in *Input) string {
	if in.Artifact.Path != "" {
		return in.Artifact.Path
	}
	return "artifact"
}

func sloDigest(in *Input) string {
	var ds []string
	for _, s := range in.Artifact.SLOs {
		ds = append(ds, s.Digest)
	}
	return strings.Join(ds, ",")
}

// mergeInputs builds the merged Input of shards ordered by index (MergeShards' rules).
func mergeInputs(shards []*Input) (*Input, error) {
	a0 := shards[0].Artifact
	paths := make([]string, len(shards))
	for i, s := range shards {
		paths[i] = nameOf(s)
	}
	m := &artifact.Artifact{Path: strings.Join(paths, ", "), Header: a0.Header, SLOs: a0.SLOs, CacheStates: a0.CacheStates,
		Stats: artifact.Stats{Kinds: map[artifact.Kind]int{}}}
	if a0.Workload != nil {
		w := *a0.Workload
		w.Shard = nil
		m.Workload = &w
	}
	m.Sessions = a0.Sessions
	if len(shards) > 1 {
		m.Sessions = mergeSessions(shards)
	}
	in := &Input{Artifact: m, Cases: map[string][]Request{}, Ignored: []IgnoredRecords{}}
	for _, s := range shards {
		a := s.Artifact
		m.Capabilities = append(m.Capabilities, a.Capabilities...)
		m.ClockAlignments = append(m.ClockAlignments, a.ClockAlignments...)
		m.TelemetrySamples = append(m.TelemetrySamples, a.TelemetrySamples...)
		m.Others = append(m.Others, a.Others...)
		m.Requests = append(m.Requests, a.Requests...)
		m.Stats.Lines += a.Stats.Lines
		m.Stats.Records += a.Stats.Records
		m.Stats.BlankLines += a.Stats.BlankLines
		for k, n := range a.Stats.Kinds {
			m.Stats.Kinds[k] += n
		}
		in.RequestRecords += s.RequestRecords
		in.Warmup = append(in.Warmup, s.Warmup...)
		in.Ignored = append(in.Ignored, s.Ignored...)
	}
	if err := mergeCases(in, shards); err != nil {
		return nil, err
	}
	m.PhaseWindows = a0.PhaseWindows // one artifact: its own windows, as recorded
	if len(shards) > 1 {
		m.PhaseWindows = mergeWindows(shards, in)
	}
	if len(shards) > 1 && len(a0.Sessions) > 0 {
		// One run, one session: the merged view names every request and window by shard 0's
		// session (each request's shard field and the audit say which shard sent it).
		sid := a0.Sessions[0].SessionID
		for _, list := range in.Cases {
			for i := range list {
				list[i].SessionID = sid
			}
		}
		for i := range m.PhaseWindows {
			m.PhaseWindows[i].SessionID = sid
		}
	}
	return in, nil
}

// mergeSessions lists every shard's opening session, then — only when every shard closed its
// session — the closing ones, the worst status last (what FinalSession reads).
func mergeSessions(shards []*Input) []artifact.Session {
	var open, closing []artifact.Session
	for _, s := range shards {
		for _, ss := range s.Artifact.Sessions {
			if !ss.Terminal() {
				open = append(open, ss)
			}
		}
		if f := s.Artifact.FinalSession(); f != nil {
			closing = append(closing, *f)
		}
	}
	if len(closing) < len(shards) {
		return open
	}
	rank := map[string]int{artifact.StatusCompleted: 0, artifact.StatusInterrupted: 1, artifact.StatusIncomplete: 2}
	sort.SliceStable(closing, func(i, j int) bool { return rank[closing[i].Status] < rank[closing[j].Status] })
	return append(open, closing...)
}

// mergeCases files every shard's measured requests into their case, in global order, and
// releases each shard's own lists (parts' Cases are emptied). Errors: one request index of a
// case recorded by two shards.
func mergeCases(in *Input, shards []*Input) error {
	sizes := map[string]int{}
	for _, s := range shards {
		for id, list := range s.Cases {
			sizes[id] += len(list)
		}
	}
	for id, n := range sizes {
		in.Cases[id] = make([]Request, 0, n)
	}
	for _, s := range shards {
		for id, list := range s.Cases {
			in.Cases[id] = append(in.Cases[id], list...)
			s.Cases[id] = nil
		}
	}
	for id, list := range in.Cases {
		sortGlobal(list)
		// Sorted, a request index two shards recorded is adjacent to itself.
		for i := 1; len(shards) > 1 && i < len(list); i++ {
			a, b := &list[i-1], &list[i]
			if a.RequestIndex != nil && b.RequestIndex != nil && *a.RequestIndex == *b.RequestIndex && shardNum(a) != shardNum(b) {
				return fmt.Errorf("%w: request index %d of case %s recorded by shards %d and %d", ErrShardSet, *a.RequestIndex, id, shardNum(a), shardNum(b))
			}
		}
		in.Cases[id] = list
	}
	return nil
}

// sortGlobal sorts requests into global order (globalLess; stable) by sorting a permutation
// and applying it in place, so that each ~0.5 KB request moves once instead of at every swap.
func sortGlobal(list []Request) {
	perm := make([]int32, len(list))
	for i := range perm {
		perm[i] = int32(i)
	}
	sort.SliceStable(perm, func(i, j int) bool { return globalLess(&list[perm[i]], &list[perm[j]]) })
	// Position i must receive list[perm[i]]: follow each cycle once.
	for i := range perm {
		if perm[i] < 0 || int(perm[i]) == i {
			continue
		}
		tmp := list[i]
		j := i
		for {
			k := int(perm[j])
			perm[j] = -1
			if k == i {
				list[j] = tmp
				break
			}
			list[j] = list[k]
			j = k
		}
	}
}

// shardNum is a request's shard field (−1 when it has none).
func shardNum(r *Request) int64 {
	if r.Shard == nil {
		return -1
	}
	return *r.Shard
}

// globalLess orders requests by request_index (null last), then intended time (null last).
func globalLess(a, b *Request) bool {
	if x, y := a.RequestIndex, b.RequestIndex; (x == nil) != (y == nil) {
		return x != nil
	} else if x != nil && *x != *y {
		return *x < *y
	}
	if x, y := a.IntendedAtNS, b.IntendedAtNS; (x == nil) != (y == nil) {
		return x != nil
	} else if x != nil {
		return *x < *y
	}
	return false
}

// errHeadsRead ends ShardHeads' read of one artifact at its first infer.request record.
var errHeadsRead = errors.New("heads read")

// CheckShardHeads checks, from their head records only (the infer.workload and infer.slo
// records before the first infer.request), that artifacts which include a shard are the
// shards 0..N−1 of one run, each once, with one workload digest and SLO policy — the rules
// ReadShards applies — so that a verb can refuse a mixed set before it writes anything.
// Artifacts none of which is a shard pass. Errors wrap ErrShardSet, or the read error.
func CheckShardHeads(ctx context.Context, paths []string) error {
	heads := make([]*Input, 0, len(paths))
	anyShard := false
	for _, p := range paths {
		a, err := readHeads(ctx, p)
		if err != nil {
			return err
		}
		in := &Input{Artifact: a}
		anyShard = anyShard || shardOf(in) != nil
		heads = append(heads, in)
	}
	if !anyShard {
		return nil
	}
	_, err := checkShards(heads)
	return err
}

// readHeads reads path's records up to its first infer.request: its workload and SLO records.
func readHeads(ctx context.Context, path string) (*artifact.Artifact, error) {
	f, err := openContext(ctx, path)
	if ctx.Err() != nil && err == ctx.Err() {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", artifact.ErrInvalidArtifact, err)
	}
	defer f.Close()
	a := &artifact.Artifact{Path: path}
	_, err = artifact.Read(f, func(l artifact.Line) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		switch v := l.Value.(type) {
		case *artifact.Workload:
			if a.Workload == nil {
				a.Workload = v
			}
		case *artifact.SLORecord:
			a.SLOs = append(a.SLOs, *v)
		case *artifact.Request:
			return errHeadsRead
		case *artifact.Raw:
			if v.Kind.EventType == artifact.KindRequest.EventType {
				return errHeadsRead
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, errHeadsRead) {
		return nil, err
	}
	return a, nil
}
