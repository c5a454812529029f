package sim

import (
	"iter"
	"math/rand/v2"
	"slices"
)

// Step is one engine step as the simulated profiler records it: its wall interval and the
// batch it ran, counted as vLLM's step annotation counts them.
type Step struct {
	// StartNs and EndNs bound the step on the server's wall clock (Unix ns): StartNs is when
	// the scheduler planned it, EndNs when its tokens were emitted. EndNs ≥ StartNs.
	StartNs int64
	EndNs   int64
	// ContextRequests are the requests whose step computed a prefill chunk (no output token
	// from this step's work yet, including a preempted request prefilling again);
	// ContextTokens are the prompt tokens those chunks computed.
	ContextRequests int
	ContextTokens   int
	// GenerationRequests are the requests that decoded one token each in this step;
	// GenerationTokens is their number of tokens (one per request).
	GenerationRequests int
	GenerationTokens   int
}

// StepTruth is one line of a trace's ground-truth file (rank<N>.<ts>.steps.jsonl beside
// rank<N>.<ts>.pt.trace.json.gz): what the simulator put into the trace for one step, so a
// trace importer can be checked exactly. Times are integer nanoseconds.
type StepTruth struct {
	// Step is the step's index in the profiling window, from 0; Rank is the trace's rank.
	Step int `json:"step"`
	Rank int `json:"rank"`
	// StartNs and EndNs are the step's CPU user_annotation interval (Unix ns, server clock):
	// baseTimeNanoseconds + ts·1000 and that + dur·1000 in the trace.
	StartNs int64 `json:"start_ns"`
	EndNs   int64 `json:"end_ns"`
	// The step annotation's four numbers: execute_context_{context_requests}({context_tokens})
	// _generation_{generation_requests}({generation_tokens}).
	ContextRequests    int `json:"context_requests"`
	ContextTokens      int `json:"context_tokens"`
	GenerationRequests int `json:"generation_requests"`
	GenerationTokens   int `json:"generation_tokens"`
	// GPUBusyNs is the length of the union of the step's GPU intervals (kernels on every
	// stream and the memcpy): overlapping streams count once.
	GPUBusyNs int64 `json:"gpu_busy_ns"`
	// Kernels counts the step's kernel events (compute, side-stream and NCCL; not the memcpy).
	Kernels int `json:"kernels"`
	// MemcpyNs is the summed duration of the step's gpu_memcpy events; NCCLNs that of its
	// NCCL kernels (names starting "nccl").
	MemcpyNs int64 `json:"memcpy_ns"`
	NCCLNs   int64 `json:"nccl_ns"`
	// GraphLaunches counts the step's cudaGraphLaunch calls (0 or 1): under one, every
	// kernel of the step shares the launch's correlation.
	GraphLaunches int `json:"graph_launches"`
	// GPUIdleNs is the span of the step's GPU intervals (first start to last end, all
	// streams) less GPUBusyNs.
	GPUIdleNs int64 `json:"gpu_idle_ns"`
	// HostWaitNs, KernelWaitNs and OtherIdleNs split the idle gaps between consecutive GPU
	// intervals (kernels and the memcpy) of the step on each stream, summed over the
	// streams, by Holistic Trace Analysis's rule: a gap is host wait when the next
	// interval's runtime call started after the previous interval ended, else kernel wait
	// when it is under 30 µs, else other. Their sum can exceed GPUIdleNs: a gap on one
	// stream may be busy on the other.
	HostWaitNs   int64 `json:"host_wait_ns"`
	KernelWaitNs int64 `json:"kernel_wait_ns"`
	OtherIdleNs  int64 `json:"other_idle_ns"`
}

// KernelWaitThresholdNs is the gap under which idle between two consecutive GPU intervals
// on a stream is kernel wait (Holistic Trace Analysis's consecutive_kernel_delay, 30 µs).
const KernelWaitThresholdNs = 30_000

// MaxProfiledSteps bounds the steps one engine records in one profiling window; later steps
// are counted as dropped (a WARNING in the trace) instead.
const MaxProfiledSteps = 1_000_000

// stepRecorder is an engine's profiling buffer; the engine's mutex guards it.
type stepRecorder struct {
	active  bool
	limit   int
	steps   []Step
	dropped int64
}

// add records st, or counts it as dropped past the limit.
func (r *stepRecorder) add(st Step) {
	if len(r.steps) >= r.limit {
		r.dropped++
		return
	}
	r.steps = append(r.steps, st)
}

// startRecording opens a profiling window on the engine (a second start keeps the window
// already open, as vLLM's profiler does).
func (e *engine) startRecording(limit int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.rec.active {
		return
	}
	e.rec = stepRecorder{active: true, limit: limit}
}

// stopRecording closes the window and returns its steps and the count dropped past the
// limit (nil, 0 when none was open).
func (e *engine) stopRecording() ([]Step, int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	steps, dropped := e.rec.steps, e.rec.dropped
	e.rec = stepRecorder{}
	return steps, dropped
}

// StepsOf yields steps in order.
func StepsOf(steps []Step) iter.Seq[Step] { return slices.Values(steps) }

// SyntheticSteps yields n back-to-back engine steps from startNs (Unix ns), drawn from seed
// and the step index without holding them (a trace of any size needs constant memory): one
// step in eight is a prefill step (1–4 context requests of 64–4,095 tokens, beside 0–63
// decoding requests), the others decode 1–256 requests. Step times follow the sim's
// default model (8 ms + 150 µs per decoding request + prefill tokens at 20,000 tokens/s),
// and consecutive steps are 20–219 µs apart. The same arguments give the same steps.
func SyntheticSteps(n int, startNs int64, seed int64) iter.Seq[Step] {
	return func(yield func(Step) bool) {
		pcg := rand.NewPCG(uint64(seed), 0x73746570)
		r := rand.New(pcg)
		t := startNs
		for i := 0; i < n; i++ {
			var st Step
			if r.IntN(8) == 0 {
				st.ContextRequests = 1 + r.IntN(4)
				for j := 0; j < st.ContextRequests; j++ {
					st.ContextTokens += 64 + r.IntN(4032)
				}
				st.GenerationRequests = r.IntN(64)
			} else {
				st.GenerationRequests = 1 + r.IntN(256)
			}
			st.GenerationTokens = st.GenerationRequests
			dur := int64(8_000_000) + int64(st.GenerationRequests)*150_000 + int64(st.ContextTokens)*50_000
			st.StartNs, st.EndNs = t, t+dur
			if !yield(st) {
				return
			}
			t = st.EndNs + 20_000 + r.Int64N(200_000)
		}
	}
}
