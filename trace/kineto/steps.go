package kineto

import (
	"cmp"
	"slices"

	"github.com/inferprobe/inferprobe/artifact"
)

// KernelWaitNS is the consecutive-kernel delay: an idle gap shorter than this between two
// GPU activities, not explained by a late launch, is kernel-wait (launch latency).
const KernelWaitNS = 30_000

// Activity step codes (attribution.step values below 0).
const (
	actNoLaunch  int32 = -1
	actOutside   int32 = -2
	actAmbiguous int32 = -3
)

// reasonOf names the unresolved reason of a negative step code.
func reasonOf(code int32) string {
	switch code {
	case actNoLaunch:
		return artifact.UnresolvedNoLaunchRecord
	case actAmbiguous:
		return artifact.UnresolvedAmbiguousRange
	}
	return artifact.UnresolvedOutsideRange
}

// stepOf attributes activity a to a step index (≥ 0) or a negative code. With CPU ranges
// the step is its launch's; with GPU ranges only, the range holding it on its device.
func stepOf(a *activity, c *collector, steps []step, gpuOnly bool) int32 {
	if gpuOnly {
		if s := gpuRangeStep(steps, a, c.threadList[a.thread][0]); s >= 0 {
			return s
		}
		if a.launch < 0 {
			return actNoLaunch
		}
		return actOutside
	}
	if a.launch < 0 {
		return actNoLaunch
	}
	switch s := c.launches.at(a.launch).step; s {
	case stepOutside, stepUnset:
		return actOutside
	case stepAmbiguous:
		return actAmbiguous
	default:
		return s
	}
}

// stepStats is what one step's GPU activities add up to (see artifact.Iteration).
type stepStats struct {
	launches, graphLaunches, activities int64
	kernels                             int64
	busy, summed, spanStart, spanEnd    int64
	hostWait, kernelWait, other         int64
	memcpy, comm                        int64
}

// union accumulates the length of the union of intervals given in start order.
type union struct {
	start, end, total int64
	open              bool
}

// add adds [s, e) and returns the idle gap before it (0 when it overlaps or touches the
// intervals so far, or is the first).
func (u *union) add(s, e int64) int64 {
	if !u.open {
		u.start, u.end, u.open = s, e, true
		return 0
	}
	if s > u.end {
		gap := s - u.end
		u.total += u.end - u.start
		u.start, u.end = s, e
		return gap
	}
	u.end = max(u.end, e)
	return 0
}

func (u *union) sum() int64 {
	if !u.open {
		return u.total
	}
	return u.total + u.end - u.start
}

// computeSteps adds up the GPU activities of every step. order holds the activity indices
// with a step, sorted by (step, start, end).
func computeSteps(c *collector, nSteps int, actStep []int32) []stepStats {
	order := make([]int32, 0, len(actStep))
	for i, s := range actStep {
		if s >= 0 {
			order = append(order, int32(i))
		}
	}
	slices.SortFunc(order, func(x, y int32) int {
		ax, ay := c.acts.at(x), c.acts.at(y)
		return cmp.Or(cmp.Compare(actStep[x], actStep[y]), cmp.Compare(ax.start, ay.start), cmp.Compare(ax.end, ay.end))
	})
	out := make([]stepStats, nSteps)
	seen := map[int32]bool{}
	for i := 0; i < len(order); {
		s := actStep[order[i]]
		j := i
		for j < len(order) && actStep[order[j]] == s {
			j++
		}
		clear(seen)
		out[s] = c.stepStats(order[i:j], seen)
		i = j
	}
	return out
}

// streamEnd is the end of the last activity seen on one stream of a step.
type streamEnd struct {
	device, stream int32
	end            int64
}

// stepStats adds up one step's activities (sorted by start). seen records the launches met.
// Idle gaps are split per stream (Holistic Trace Analysis's idle breakdown): the gap
// before an activity on its stream is host-wait when its launch began after the stream's
// previous activity ended, else kernel-wait under KernelWaitNS, else other.
func (c *collector) stepStats(acts []int32, seen map[int32]bool) stepStats {
	var st stepStats
	var all, mem, comm union
	var ends []streamEnd
	for _, ai := range acts {
		a := c.acts.at(ai)
		st.activities++
		if a.kind == kindKernel {
			st.kernels++
		}
		st.summed += a.end - a.start
		firstOfLaunch := false
		var l *launch
		if a.launch >= 0 {
			l = c.launches.at(a.launch)
			if !seen[a.launch] {
				seen[a.launch] = true
				firstOfLaunch = true
				st.launches++
				if l.flags&flagGraph != 0 {
					st.graphLaunches++
				}
			}
		}
		if st.activities == 1 {
			st.spanStart, st.spanEnd = a.start, a.end
		}
		st.spanEnd = max(st.spanEnd, a.end)
		all.add(a.start, a.end)
		// A graph replay's later kernels are not judged by the launch time: one
		// cudaGraphLaunch covers them all.
		st.splitGap(&ends, a, l != nil && (l.flags&flagGraph == 0 || firstOfLaunch), l)
		switch {
		case a.kind == kindMemcpy || a.kind == kindMemset:
			mem.add(a.start, a.end)
		case a.flags&flagNCCL != 0:
			comm.add(a.start, a.end)
		}
	}
	st.busy, st.memcpy, st.comm = all.sum(), mem.sum(), comm.sum()
	return st
}

// splitGap classifies the idle gap before a on its stream and moves the stream's end.
func (st *stepStats) splitGap(ends *[]streamEnd, a *activity, judgeLaunch bool, l *launch) {
	var e *streamEnd
	for i := range *ends {
		if (*ends)[i].device == a.device && (*ends)[i].stream == a.stream {
			e = &(*ends)[i]
			break
		}
	}
	if e == nil {
		*ends = append(*ends, streamEnd{a.device, a.stream, a.end})
		return
	}
	if gap := a.start - e.end; gap > 0 {
		switch {
		case judgeLaunch && l.ts > e.end:
			st.hostWait += gap
		case gap < KernelWaitNS:
			st.kernelWait += gap
		default:
			st.other += gap
		}
	}
	e.end = max(e.end, a.end)
}
