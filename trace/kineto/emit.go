package kineto

import (
	"cmp"
	"slices"
	"strconv"

	"github.com/inferprobe/inferprobe/artifact"
)

// fileResult is one parsed trace, ready to be turned into records.
type fileResult struct {
	c        *collector
	info     docInfo
	steps    []step
	stats    []stepStats
	actStep  []int32
	gpuOnly  bool
	ctx      artifact.Context
	attach   string // trace_attachment_id
	file     string // trace_file
	rank     *int64
	emitted  int64 // activity refs written
	linked   int64 // activities linked to a step
	reasons  map[string]int64
	launches int64 // launches with GPU activities
	graphs   int64
	iterRefs []artifact.IterationRef // built on first use
}

// attribute links the collected events: launches, steps, every activity's step.
func (r *fileResult) attribute() {
	c := r.c
	c.link()
	r.steps = c.buildSteps()
	r.gpuOnly = len(c.cpuRanges) == 0 && len(c.gpuRanges) > 0
	c.assignSteps(r.steps)
	r.actStep = make([]int32, c.acts.len())
	r.reasons = map[string]int64{}
	used := newBitset(c.launches.len())
	for i := range int32(c.acts.len()) {
		a := c.acts.at(i)
		s := stepOf(a, c, r.steps, r.gpuOnly)
		r.actStep[i] = s
		if s >= 0 {
			r.linked++
		} else {
			r.reasons[reasonOf(s)]++
		}
		if a.launch >= 0 && used.add(a.launch) {
			r.launches++
			if c.launches.at(a.launch).flags&flagGraph != 0 {
				r.graphs++
			}
		}
	}
	r.stats = computeSteps(c, len(r.steps), r.actStep)
}

func (r *fileResult) ns(rel int64) int64 { return r.info.baseTimeNS + rel }

// iterations emits one Iteration per step, in start order.
func (r *fileResult) iterations(emit func(artifact.Record) error) error {
	for i, s := range r.steps {
		st := r.stats[i]
		sn := s.host.step
		it := &artifact.Iteration{
			Context: r.ctx, EventID: r.attach + "/step/" + strconv.Itoa(i),
			IterationRef: r.iterationRef(int32(i)), Source: sn.source, Name: sn.name,
			StepIndex: int64(i), Rank: r.rank, TraceFile: r.file, TraceAttachmentID: r.attach,
			StartNS: r.ns(s.host.start), EndNS: r.ns(s.host.end),
			ContextRequests: count(sn.nc), ContextTokens: count(sn.nct),
			GenRequests: count(sn.ng), GenTokens: count(sn.ngt),
			Launches: st.launches, GraphLaunches: st.graphLaunches, Activities: st.activities, Kernels: st.kernels,
			GPUBusyNS: st.busy, SummedDurationNS: st.summed,
			IdleHostWaitNS: st.hostWait, IdleKernelWaitNS: st.kernelWait, IdleOtherNS: st.other,
			MemcpyNS: st.memcpy, CommunicationNS: st.comm,
		}
		if st.activities > 0 {
			it.KernelSpanNS = st.spanEnd - st.spanStart
			it.IdleNS = it.KernelSpanNS - st.busy
		}
		if s.gpu != nil {
			it.GPUStartNS, it.GPUEndNS = artifact.Ptr(r.ns(s.gpu.start)), artifact.Ptr(r.ns(s.gpu.end))
		}
		if i > 0 {
			it.GapToPreviousNS = artifact.Ptr(s.host.start - r.steps[i-1].host.end)
		}
		if err := emit(it); err != nil {
			return err
		}
	}
	return nil
}

func (r *fileResult) iterationRef(i int32) artifact.IterationRef {
	if r.iterRefs == nil {
		r.iterRefs = make([]artifact.IterationRef, len(r.steps))
	}
	if r.iterRefs[i].ProducerID != "" || r.iterRefs[i].ID != "" {
		return r.iterRefs[i]
	}
	r.iterRefs[i] = r.makeIterationRef(i)
	return r.iterRefs[i]
}

func (r *fileResult) makeIterationRef(i int32) artifact.IterationRef {
	sn := r.steps[i].host.step
	id := sn.id
	if id == "" {
		id = strconv.Itoa(int(i))
	}
	return artifact.IterationRef{ProducerID: sn.producer, ID: id}
}

func count(v int64) *int64 {
	if v < 0 {
		return nil
	}
	return &v
}

// activityRefs emits the activity refs: one per (launch, step, device, kind) in launch
// detail, one per activity in kernel detail. An activity without a launch is its own
// group.
func (r *fileResult) activityRefs(kernelDetail bool, emit func(artifact.Record) error) error {
	c := r.c
	order := make([]int32, c.acts.len())
	for i := range order {
		order[i] = int32(i)
	}
	group := func(i int32) int64 {
		if a := c.acts.at(i); a.launch >= 0 && !kernelDetail {
			return int64(a.launch)
		}
		return -1 - int64(i)
	}
	slices.SortFunc(order, func(x, y int32) int {
		ax, ay := c.acts.at(x), c.acts.at(y)
		return cmp.Or(cmp.Compare(group(x), group(y)), cmp.Compare(r.actStep[x], r.actStep[y]),
			cmp.Compare(ax.device, ay.device), cmp.Compare(ax.kind, ay.kind), cmp.Compare(ax.start, ay.start))
	})
	same := func(x, y int32) bool {
		ax, ay := c.acts.at(x), c.acts.at(y)
		return group(x) == group(y) && r.actStep[x] == r.actStep[y] && ax.device == ay.device && ax.kind == ay.kind
	}
	for i := 0; i < len(order); {
		j := i + 1
		for j < len(order) && same(order[i], order[j]) {
			j++
		}
		if err := emit(r.activityRef(order[i:j], kernelDetail)); err != nil {
			return err
		}
		r.emitted++
		i = j
	}
	return nil
}

// refBox is an activity ref with the values its pointer fields point at, so that a
// record costs one allocation.
type refBox struct {
	ref                      artifact.ActivityRef
	device, stream, cuda, rt int64
	name, launchName, reason string
	iter                     artifact.IterationRef
	ivs                      [1][2]int64
}

// activityRef builds the record of one group of activities (sorted by start).
func (r *fileResult) activityRef(g []int32, kernelDetail bool) *artifact.ActivityRef {
	c := r.c
	first := c.acts.at(g[0])
	box := &refBox{device: int64(first.device), stream: int64(first.stream)}
	ref := &box.ref
	*ref = artifact.ActivityRef{
		Context: r.ctx, ActivityKind: kindNames[first.kind], ActivityDomain: "gpu",
		CorrelationScope: scopeNames[first.scope], TraceAttachmentID: r.attach,
		DeviceID: &box.device, StreamID: &box.stream, StartNS: r.ns(first.start),
	}
	if first.flags&flagCorr != 0 {
		box.cuda = first.corr
		ref.CUDACorrelationID = &box.cuda
	}
	ref.ActivityRef = r.refID(g[0], first, kernelDetail)
	if kernelDetail {
		box.name = c.nameList[first.name]
		ref.Metadata.Name = &box.name
	}
	ref.EventID = ref.ActivityRef
	if first.launch >= 0 {
		l := c.launches.at(first.launch)
		box.launchName = c.nameList[l.name]
		ref.Metadata.LaunchName = &box.launchName
		if l.flags&flagCorr != 0 {
			box.rt = l.corr
			ref.RuntimeCorrelationID = &box.rt
		}
	}
	if s := r.actStep[g[0]]; s >= 0 {
		ref.AttributionStatus = artifact.AttributionLinked
		box.iter = r.iterationRef(s)
		ref.IterationRef = &box.iter
	} else {
		ref.AttributionStatus = artifact.AttributionUnresolved
		box.reason = reasonOf(s)
		ref.Metadata.UnresolvedReason = &box.reason
	}
	r.intervals(ref, g, box.ivs[:0])
	return ref
}

// refID names an activity ref: by launch, device and kind in launch detail (and step, for
// steps from GPU ranges), by activity index otherwise.
func (r *fileResult) refID(i int32, a *activity, kernelDetail bool) string {
	if kernelDetail || a.launch < 0 {
		return r.attach + "/activity/" + strconv.Itoa(int(i))
	}
	id := r.attach + "/launch/" + strconv.Itoa(int(a.launch)) + "/" + strconv.Itoa(int(a.device)) + "/" + kindNames[a.kind]
	if s := r.actStep[i]; r.gpuOnly && s >= 0 {
		id += "/step/" + strconv.Itoa(int(s))
	}
	return id
}

// intervals fills the ref's busy intervals, busy and summed time, activity count, stream
// (null when several) and end from its activities.
func (r *fileResult) intervals(ref *artifact.ActivityRef, g []int32, ivs [][2]int64) {
	c := r.c
	first := c.acts.at(g[0])
	var u union
	end := first.end
	for _, ai := range g {
		a := c.acts.at(ai)
		if ref.StreamID != nil && int64(a.stream) != *ref.StreamID {
			ref.StreamID = nil
		}
		ref.Metadata.SummedDurationNS += a.end - a.start
		ref.Metadata.Activities++
		end = max(end, a.end)
		if u.add(a.start, a.end) > 0 || len(ivs) == 0 {
			ivs = append(ivs, [2]int64{a.start - first.start, 0})
		}
		ivs[len(ivs)-1][1] = u.end - first.start - ivs[len(ivs)-1][0]
	}
	ref.EndNS = r.ns(end)
	ref.Metadata.Intervals = ivs
	ref.Metadata.BusyNS = u.sum()
}
