package kineto

import (
	"cmp"
	"slices"
	"sort"
)

// How an activity was tied to its launch (activity.scope).
const (
	scopeNone uint8 = iota
	scopeFlow
	scopeCorrelation
)

var scopeNames = [...]string{"none", "ac2g_flow", "correlation"}

// step is one iteration: its host range (or, for a trace with GPU ranges only, its GPU
// range), the paired GPU range, and the thread its launches must come from.
type step struct {
	host    annotation
	gpu     *annotation
	hostCPU bool // host is a CPU range (launches are matched against it)
}

// link ties every activity to its CPU launch: through its ac2g flow (the flow end bound
// to the activity's position, the flow start of the same id bound to the launch's
// position), else through args.correlation. It fills activity.launch and activity.scope.
func (c *collector) link() {
	// Launches are sorted in place by position key (no activity refers to one yet).
	sort.Sort(blockSort[launch]{&c.launches, func(x, y *launch) bool { return x.key < y.key }})
	byCorr := make([]int32, 0, c.launches.len())
	for i := range int32(c.launches.len()) {
		if c.launches.at(i).flags&flagCorr != 0 {
			byCorr = append(byCorr, i)
		}
	}
	slices.SortFunc(byCorr, func(a, b int32) int { return cmp.Compare(c.launches.at(a).corr, c.launches.at(b).corr) })
	sort.Sort(blockSort[flow]{&c.flowEnds, func(x, y *flow) bool { return x.key < y.key }})
	sort.Sort(blockSort[flow]{&c.flowStarts, func(x, y *flow) bool { return x.id < y.id }})
	for i := range int32(c.acts.len()) {
		a := c.acts.at(i)
		if li := c.viaFlow(a); li >= 0 {
			a.launch, a.scope = li, scopeFlow
			continue
		}
		if a.flags&flagCorr == 0 {
			continue
		}
		j := sort.Search(len(byCorr), func(k int) bool { return c.launches.at(byCorr[k]).corr >= a.corr })
		if j < len(byCorr) && c.launches.at(byCorr[j]).corr == a.corr {
			a.launch, a.scope = byCorr[j], scopeCorrelation
		}
	}
}

// viaFlow follows an activity's ac2g flow to its launch, or returns -1.
// The flow lists are sorted: ends by position key, starts by id.
func (c *collector) viaFlow(a *activity) int32 {
	ends, starts := &c.flowEnds, &c.flowStarts
	if ends.len() == 0 {
		return -1
	}
	k := c.posOf(a.thread, a.start)
	j := int32(sort.Search(ends.len(), func(x int) bool { return ends.at(int32(x)).key >= k }))
	if int(j) == ends.len() || ends.at(j).key != k {
		return -1
	}
	id := ends.at(j).id
	s := int32(sort.Search(starts.len(), func(x int) bool { return starts.at(int32(x)).id >= id }))
	if int(s) == starts.len() || starts.at(s).id != id {
		return -1
	}
	lk := starts.at(s).key
	n := c.launches.len()
	l := int32(sort.Search(n, func(x int) bool { return c.launches.at(int32(x)).key >= lk }))
	if int(l) < n && c.launches.at(l).key == lk {
		return l
	}
	return -1
}

// buildSteps orders the iteration ranges into steps: the CPU ranges by start (each paired
// with the first unpaired GPU range of the same name that starts at or after it), or, in
// a trace with GPU ranges only, the GPU ranges.
func (c *collector) buildSteps() []step {
	byStart := func(a, b annotation) int {
		return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(a.end, b.end))
	}
	slices.SortStableFunc(c.cpuRanges, byStart)
	slices.SortStableFunc(c.gpuRanges, byStart)
	c.gpuRanges = mergeGPURanges(c.gpuRanges)
	steps := make([]step, 0, max(len(c.cpuRanges), len(c.gpuRanges)))
	if len(c.cpuRanges) == 0 {
		for i := range c.gpuRanges {
			steps = append(steps, step{host: c.gpuRanges[i], gpu: &c.gpuRanges[i]})
		}
		return steps
	}
	queues := map[string][]int{}
	for i, g := range c.gpuRanges {
		queues[g.step.name] = append(queues[g.step.name], i)
	}
	for _, r := range c.cpuRanges {
		st := step{host: r, hostCPU: true}
		q := queues[r.step.name]
		for len(q) > 0 && c.gpuRanges[q[0]].start < r.start {
			q = q[1:] // a GPU range before its CPU range cannot be its pair
		}
		if len(q) > 0 {
			st.gpu = &c.gpuRanges[q[0]]
			q = q[1:]
		}
		queues[r.step.name] = q
		steps = append(steps, st)
	}
	return steps
}

// mergeGPURanges merges the GPU ranges (sorted by start) of one step: Kineto writes a
// gpu_user_annotation per stream, so ranges of the same name on the same device that
// overlap are one step's.
func mergeGPURanges(rs []annotation) []annotation {
	out := rs[:0]
	last := map[string]int{} // name → index in out of its latest range
	for _, r := range rs {
		if i, ok := last[r.step.name]; ok && out[i].pid == r.pid && r.start <= out[i].end {
			out[i].end = max(out[i].end, r.end)
			continue
		}
		last[r.step.name] = len(out)
		out = append(out, r)
	}
	return out
}

// thread is the host ranges of one (pid, tid), sorted by start, with the running maximum
// of their ends (to find every range holding a time).
type thread struct {
	idx    []int32 // step indices
	maxEnd []int64
}

// assignSteps gives every launch its step: the one host range of its thread that holds
// its start time, stepOutside when none does, stepAmbiguous when several do.
func (c *collector) assignSteps(steps []step) {
	threads := map[[2]int64]*thread{}
	for i, s := range steps {
		if !s.hostCPU {
			continue
		}
		k := [2]int64{s.host.pid, s.host.tid}
		t := threads[k]
		if t == nil {
			t = &thread{}
			threads[k] = t
		}
		end := s.host.end
		if n := len(t.maxEnd); n > 0 {
			end = max(end, t.maxEnd[n-1])
		}
		t.idx = append(t.idx, int32(i))
		t.maxEnd = append(t.maxEnd, end)
	}
	for li := range int32(c.launches.len()) {
		l := c.launches.at(li)
		l.step = stepOutside
		t := threads[c.threadList[l.thread]]
		if t == nil {
			continue
		}
		j := sort.Search(len(t.idx), func(x int) bool { return steps[t.idx[x]].host.start > l.ts }) - 1
		for ; j >= 0 && t.maxEnd[j] >= l.ts; j-- {
			if steps[t.idx[j]].host.end < l.ts {
				continue
			}
			if l.step != stepOutside {
				l.step = stepAmbiguous
				break
			}
			l.step = t.idx[j]
		}
	}
}

// gpuRangeStep returns the step whose GPU range holds activity a (on the range's device),
// for traces with GPU ranges only; -1 when none or several do. GPU ranges of one device do
// not nest, so only the last two ranges starting at or before a are looked at.
func gpuRangeStep(steps []step, a *activity, pid int64) int32 {
	j := sort.Search(len(steps), func(x int) bool { return steps[x].host.start > a.start }) - 1
	found := int32(-1)
	for k := j; k >= 0 && k >= j-1; k-- {
		h := steps[k].host
		if a.start >= h.start && a.end <= h.end && h.pid == pid {
			if found >= 0 {
				return -1
			}
			found = int32(k)
		}
	}
	return found
}
