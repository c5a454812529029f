package artifact

// Event types and schema versions of the records imported from profiler traces.
const (
	EventIteration   = "infer.iteration"
	EventActivityRef = "infer.activity_ref"
	// IterationSchemaVersion is the correlation-model version of infer.iteration.
	IterationSchemaVersion = 2
	// ActivityRefSchemaVersion is 3: an activity ref carries a list of busy intervals
	// (metadata.intervals), which a reader of the single-interval version 2 must reject.
	ActivityRefSchemaVersion = 3
)

// Kinds of the trace-import records.
var (
	KindIteration   = Kind{EventIteration, IterationSchemaVersion}
	KindActivityRef = Kind{EventActivityRef, ActivityRefSchemaVersion}
)

// Iteration sources (Iteration.Source): which annotation named the step.
const (
	// IterationVLLM: vLLM's step annotation execute_context_{nc}({nct})_generation_{ng}({ngt}).
	IterationVLLM = "vllm_step_annotation"
	// IterationInferprobe: a range named inferprobe.iteration/<producer>/<id>.
	IterationInferprobe = "inferprobe_iteration_range"
	// IterationStormlog: a range named stormlog.iteration/<producer>/<id>.
	IterationStormlog = "stormlog_iteration_range"
	// IterationSGLang: SGLang's step[EXTEND bs=… toks=…] or step[DECODE bs=…].
	IterationSGLang = "sglang_step_annotation"
)

// Attribution statuses and unresolved reasons of ActivityRef.
const (
	AttributionLinked     = "linked"
	AttributionUnresolved = "unresolved"
	// UnresolvedNoLaunchRecord: no CPU launch (runtime or driver call) matches the
	// activity's ac2g flow or correlation id.
	UnresolvedNoLaunchRecord = "no_launch_record"
	// UnresolvedOutsideRange: the launch lies in no iteration range of its thread (also
	// every launch of a trace without iteration ranges).
	UnresolvedOutsideRange = "launch_outside_iteration_range"
	// UnresolvedAmbiguousRange: the launch lies in more than one iteration range of its
	// thread (nested or overlapping ranges).
	UnresolvedAmbiguousRange = "ambiguous_iteration_range"
)

// IterationRef names an iteration: the producer that numbered it and its id.
type IterationRef struct {
	ProducerID string `json:"producer_id"`
	ID         string `json:"id"`
}

// Iteration is the infer.iteration v2 record: one engine step (one batch) found in a
// profiler trace.
//
// Times are Unix nanoseconds on the server host's clock domain (Context.ClockDomain):
// a trace time is baseTimeNanoseconds + ts·1000, ts in µs. StartNS/EndNS is the step's
// host (CPU) annotation; GPUStartNS/GPUEndNS its GPU annotation (null without one).
// StepIndex counts the file's steps from 0 in start order; Rank is the trace's
// distributedInfo.rank, else the rank<N> of its file name, else null. The request and
// token counts are parsed from the annotation (null when it carries none: SGLang's
// DECODE names no token count, iteration ranges name none).
//
// The GPU figures cover the step's GPU activities (kernels, memcpy, memset), an activity
// belonging to the step whose CPU launch lies inside the step's host range on the same
// thread. Activities counts them, Kernels the kernels among them. GPUBusyNS is the length
// of the union of their intervals over all streams (never the sum: SummedDurationNS is
// the sum). KernelSpanNS runs from the first activity's start to the last one's end;
// IdleNS = KernelSpanNS − GPUBusyNS. The idle gaps between consecutive activities of each
// stream are split as Holistic Trace Analysis does, summed over the streams (so the three
// can add up to more than IdleNS: a gap on one stream may be busy on another): a gap is
// IdleHostWaitNS when the next activity's launch began after the previous one ended (the
// GPU waited for the host), else IdleKernelWaitNS when shorter than 30 µs (back-to-back
// launch latency), else IdleOtherNS. Under CUDA-graph replay one launch covers many
// activities: only the first activity of a graph launch is judged by its launch time, the
// gaps before the others are kernel-wait or other. MemcpyNS is the union of gpu_memcpy and
// gpu_memset intervals, CommunicationNS the union of NCCL kernels (name containing
// "nccl"). GPUStartNS/GPUEndNS merge the step's per-stream GPU annotations.
// GapToPreviousNS is StartNS minus the previous step's EndNS in the same file (negative
// when host ranges overlap; null for the first step).
type Iteration struct {
	Context  Context        `json:"context"`
	EventID  string         `json:"event_id"`
	Metadata map[string]any `json:"metadata"`
	// IterationRef names the step: producer "vllm", "sglang" or the range's producer, and
	// id the step index (vLLM, SGLang) or the range's id.
	IterationRef      IterationRef `json:"iteration_ref"`
	Source            string       `json:"source"`
	Name              string       `json:"name"`
	StepIndex         int64        `json:"step_index"`
	Rank              *int64       `json:"rank"`
	TraceFile         string       `json:"trace_file"`
	TraceAttachmentID string       `json:"trace_attachment_id"`
	StartNS           int64        `json:"start_ns"`
	EndNS             int64        `json:"end_ns"`
	GPUStartNS        *int64       `json:"gpu_start_ns"`
	GPUEndNS          *int64       `json:"gpu_end_ns"`
	ContextRequests   *int64       `json:"context_requests"`
	ContextTokens     *int64       `json:"context_tokens"`
	GenRequests       *int64       `json:"generation_requests"`
	GenTokens         *int64       `json:"generation_tokens"`
	Launches          int64        `json:"launches"`
	GraphLaunches     int64        `json:"graph_launches"`
	Activities        int64        `json:"activities"`
	Kernels           int64        `json:"kernels"`
	GPUBusyNS         int64        `json:"gpu_busy_ns"`
	SummedDurationNS  int64        `json:"summed_duration_ns"`
	KernelSpanNS      int64        `json:"kernel_span_ns"`
	IdleNS            int64        `json:"idle_ns"`
	IdleHostWaitNS    int64        `json:"idle_host_wait_ns"`
	IdleKernelWaitNS  int64        `json:"idle_kernel_wait_ns"`
	IdleOtherNS       int64        `json:"idle_other_ns"`
	MemcpyNS          int64        `json:"memcpy_ns"`
	CommunicationNS   int64        `json:"communication_ns"`
	GapToPreviousNS   *int64       `json:"gap_to_previous_ns"`
}

func (Iteration) selfEncoding() {}

// RecordKind returns KindIteration.
func (Iteration) RecordKind() Kind { return KindIteration }

// MarshalJSON writes the record header, then the fields; nil metadata is written as {}.
func (it Iteration) MarshalJSON() ([]byte, error) {
	type plain Iteration
	if it.Metadata == nil {
		it.Metadata = map[string]any{}
	}
	return withKind(KindIteration, plain(it))
}

// ActivityMetadata is an activity ref's metadata. Intervals are the sorted, disjoint busy
// intervals [offset_ns, duration_ns] of the ref's activities, offsets from StartNS;
// BusyNS is their total length and SummedDurationNS the sum of the activities' durations
// (larger than BusyNS when activities overlap). Activities counts them. Name is the
// kernel's name (kernel detail only). LaunchName is the CPU call that launched them
// (cudaLaunchKernel, cudaGraphLaunch, …; null when unresolved for lack of one).
// UnresolvedReason is one of the Unresolved* reasons, null when linked.
type ActivityMetadata struct {
	Intervals        [][2]int64 `json:"intervals"`
	BusyNS           int64      `json:"busy_ns"`
	SummedDurationNS int64      `json:"summed_duration_ns"`
	Activities       int64      `json:"activities"`
	Name             *string    `json:"name,omitempty"`
	LaunchName       *string    `json:"launch_name"`
	UnresolvedReason *string    `json:"unresolved_reason"`
}

// ActivityRef is the infer.activity_ref v3 record: GPU work of one CPU launch on one device
// and of one activity kind (launch detail, the default), or one GPU activity (kernel
// detail).
//
// ActivityKind is "kernel", "gpu_memcpy" or "gpu_memset"; ActivityDomain is "gpu".
// AttributionStatus is "linked" (IterationRef names the step whose host range holds the
// launch) or "unresolved" (IterationRef null, Metadata.UnresolvedReason says why).
// CorrelationScope says how the activity was tied to its launch: "ac2g_flow" (a flow
// from the launch to the activity), "correlation" (the same correlation id on both), or
// "none". RuntimeCorrelationID is the launch's correlation id, CUDACorrelationID the
// activity's (args.correlation); DeviceID and StreamID come from the activity (StreamID
// null when a launch's activities ran on several streams); GraphID is null (Kineto does
// not name graphs). StartNS/EndNS is the first start and last end, Unix ns on the server
// host's clock domain.
type ActivityRef struct {
	Context              Context          `json:"context"`
	EventID              string           `json:"event_id"`
	Metadata             ActivityMetadata `json:"metadata"`
	ActivityRef          string           `json:"activity_ref"`
	ActivityKind         string           `json:"activity_kind"`
	ActivityDomain       string           `json:"activity_domain"`
	AttributionStatus    string           `json:"attribution_status"`
	IterationRef         *IterationRef    `json:"iteration_ref"`
	CorrelationScope     string           `json:"correlation_scope"`
	TraceAttachmentID    string           `json:"trace_attachment_id"`
	RuntimeCorrelationID *int64           `json:"runtime_correlation_id"`
	CUDACorrelationID    *int64           `json:"cuda_correlation_id"`
	DeviceID             *int64           `json:"device_id"`
	StreamID             *int64           `json:"stream_id"`
	GraphID              *int64           `json:"graph_id"`
	StartNS              int64            `json:"start_ns"`
	EndNS                int64            `json:"end_ns"`
}

func (ActivityRef) selfEncoding() {}

// RecordKind returns KindActivityRef.
func (ActivityRef) RecordKind() Kind { return KindActivityRef }

// MarshalJSON writes the record header, then the fields; nil intervals are written as [].
func (a ActivityRef) MarshalJSON() ([]byte, error) {
	if a.Metadata.Intervals == nil {
		a.Metadata.Intervals = [][2]int64{}
	}
	return encodeActivityRef(&a)
}

// marshalActivityRefPlain is the reflection encoding encodeActivityRef reproduces.
func marshalActivityRefPlain(a ActivityRef) ([]byte, error) {
	type plain ActivityRef
	if a.Metadata.Intervals == nil {
		a.Metadata.Intervals = [][2]int64{}
	}
	return withKind(KindActivityRef, plain(a))
}
