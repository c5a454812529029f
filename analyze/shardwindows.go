package analyze

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"

	"github.com/inferprobe/inferprobe/artifact"
)

// windowKey names a phase window: case id and phase.
type windowKey struct{ caseID, phase string }

// mergeWindows merges the shards' phase windows per case and phase, in the order the first
// shard that wrote each one wrote it: the earliest start, the latest window end and drain,
// scheduled arrivals summed, the first scheduled endpoint offset and drain timeout, abandoned
// requests summed (the longest wait), and prompts_digest over the merged measured requests in
// index order (null for warmup windows, whose prompts the analysis does not keep). A window
// that not every shard wrote has a null drained_at_ns (phase_window_incomplete) and null
// scheduled arrivals.
func mergeWindows(shards []*Input, in *Input) []artifact.PhaseWindow {
	var order []windowKey
	groups := map[windowKey][]*artifact.PhaseWindow{}
	for _, s := range shards {
		seen := map[windowKey]bool{}
		for i := range s.Artifact.PhaseWindows {
			w := &s.Artifact.PhaseWindows[i]
			k := windowKey{w.CaseID, w.Phase}
			if seen[k] {
				continue // a shard's second window of one phase: the analysis keeps one
			}
			seen[k] = true
			if _, ok := groups[k]; !ok {
				order = append(order, k)
			}
			groups[k] = append(groups[k], w)
		}
	}
	out := make([]artifact.PhaseWindow, 0, len(order))
	for _, k := range order {
		w := mergeWindow(groups[k], len(shards))
		w.PromptsDigest = nil
		if k.phase == artifact.PhaseMeasured {
			if d, ok := promptsDigest(in.Cases[k.caseID]); ok {
				w.PromptsDigest = &d
			}
		}
		out = append(out, w)
	}
	return out
}

// mergeWindow merges one phase's windows (one per shard that wrote it) of a run of n shards.
func mergeWindow(ws []*artifact.PhaseWindow, n int) artifact.PhaseWindow {
	m := *ws[0]
	complete := len(ws) == n
	var scheduled int64
	scheduledKnown := true
	var ab *artifact.AbandonedRequests
	for i, w := range ws {
		if i > 0 {
			m.StartedAtNS = minPtr(m.StartedAtNS, w.StartedAtNS)
			m.WindowEndedAtNS = maxPtr(m.WindowEndedAtNS, w.WindowEndedAtNS)
			m.DrainedAtNS = maxPtr(m.DrainedAtNS, w.DrainedAtNS)
		}
		if w.ScheduledArrivals == nil {
			scheduledKnown = false
		} else {
			scheduled += *w.ScheduledArrivals
		}
		if a := w.AbandonedRequests; a != nil {
			if ab == nil {
				ab = &artifact.AbandonedRequests{}
			}
			ab.RunningAtStart += a.RunningAtStart
			ab.StillRunning += a.StillRunning
			ab.WaitedSeconds = max(ab.WaitedSeconds, a.WaitedSeconds)
		}
	}
	m.ScheduledArrivals = nil
	if scheduledKnown && ws[0].ScheduledArrivals != nil {
		m.ScheduledArrivals = &scheduled
	}
	m.AbandonedRequests = ab
	m.ClientHealth = nil // the missing shard's CPU is unknown: a partial sum would read as the whole
	if complete {
		m.ClientHealth = mergeHealth(ws)
	} else {
		m.DrainedAtNS = nil
		m.ScheduledArrivals = nil // the missing shard's share is unknown: a partial sum would mislead
	}
	return m
}

// mergeHealth is the client health of the shards' windows as one client's: CPU seconds,
// CPUs (each shard's GOMAXPROCS) and reads summed, so that the merged utilisation is their
// total CPU over the merged window × their total CPUs; the GC figures are the shard's with
// the most pause time (a pause stops one process, not the others). The host figures are
// left out (0 and null): shards on one host would count its busy time once per shard, and
// each shard's own audit reads its host. Nil when a window has none.
func mergeHealth(ws []*artifact.PhaseWindow) *artifact.ClientHealth {
	var m artifact.ClientHealth
	cpuKnown := true
	var user, sys float64
	for _, w := range ws {
		h := w.ClientHealth
		if h == nil {
			return nil
		}
		m.CPUs += h.CPUs
		if h.GCPauseSeconds >= m.GCPauseSeconds {
			m.GCCycles, m.GCPauseSeconds = h.GCCycles, h.GCPauseSeconds
		}
		m.ReceiveReads += h.ReceiveReads
		m.ReceiveStampedReads += h.ReceiveStampedReads
		if h.CPUUserSeconds == nil || h.CPUSystemSeconds == nil {
			cpuKnown = false
			continue
		}
		user, sys = user+*h.CPUUserSeconds, sys+*h.CPUSystemSeconds
	}
	if cpuKnown {
		m.CPUUserSeconds, m.CPUSystemSeconds = &user, &sys
	}
	return &m
}

// minPtr and maxPtr are the smaller and larger of two times; null when either is null.
func minPtr(a, b *int64) *int64 {
	if a == nil || b == nil {
		return nil
	}
	if *b < *a {
		return b
	}
	return a
}

func maxPtr(a, b *int64) *int64 {
	if a == nil || b == nil {
		return nil
	}
	if *b > *a {
		return b
	}
	return a
}

// promptsDigest is a phase window's prompts_digest recomputed from its requests: the SHA-256
// (lowercase hex) of their prompt digests joined by "\n", in request_index order. ok is false
// when there are none, or one has no prompt digest or no request index.
func promptsDigest(requests []Request) (string, bool) {
	if len(requests) == 0 {
		return "", false
	}
	idx := make([]int, len(requests))
	for i := range requests {
		if requests[i].PromptDigest == nil || requests[i].RequestIndex == nil {
			return "", false
		}
		idx[i] = i
	}
	sorted := sort.SliceIsSorted(idx, func(i, j int) bool {
		return *requests[idx[i]].RequestIndex < *requests[idx[j]].RequestIndex
	})
	if !sorted {
		sort.SliceStable(idx, func(i, j int) bool { return *requests[idx[i]].RequestIndex < *requests[idx[j]].RequestIndex })
	}
	h := sha256.New()
	for n, i := range idx {
		if n > 0 {
			h.Write([]byte{'\n'})
		}
		h.Write([]byte(*requests[i].PromptDigest))
	}
	return hex.EncodeToString(h.Sum(nil)), true
}
