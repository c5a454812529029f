package sim

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"slices"
	"strconv"
)

// KinetoTrace describes one rank's simulated torch-profiler trace: a Kineto Chrome trace as
// PyTorch ≥ 2 writes it for a vLLM worker. Write produces it.
//
// # Shape
//
// The document has, in this order: "schemaVersion": 1, "deviceProperties" (one GPU whose id
// is the rank), "distributedInfo" {"backend": "nccl", "rank", "world_size", "pg_count",
// "pg_config", "nccl_version"}, "displayTimeUnit": "ms", "baseTimeNanoseconds" (BaseNs),
// "traceEvents", a "WARNING" list when steps were dropped, and "traceName". Every ts and dur
// is microseconds with exactly three decimals (integer nanoseconds underneath), relative to
// baseTimeNanoseconds and clamped at 0: Unix ns = baseTimeNanoseconds + ts·1000.
//
// traceEvents holds, as Kineto orders them: first the CPU events of every step, then the
// GPU events of every step, then the GPU user annotations, then the metadata, then the
// "Record Window End" instant. Per step (see layoutGen.next for the timing rules):
//   - CPU (pid = PID, tid = PID): a "user_annotation" named
//     execute_context_{nc}({nct})_generation_{ng}({ngt}) over the step, args
//     {"External id": step + 1}; its "cuda_runtime" calls "cudaMemcpyAsync" (cbid 41),
//     "cudaLaunchKernel" (cbid 211) or, every eighth decode-only step, one
//     "cudaGraphLaunch" (cbid 311) for all the step's kernels, args {"External id",
//     "cbid", "correlation"}, each followed by its flow start {"ph": "s", "id": correlation,
//     "cat": "ac2g", "name": "ac2g"} at the call's ts.
//   - GPU (pid = the device = rank, tid = the stream): on stream 7 a "gpu_memcpy" "Memcpy
//     HtoD (Pinned -> Device)", 6–10 compute "kernel"s and the NCCL kernel
//     "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(...)"; on stream 13 two kernels overlapping
//     stream 7's. Kernel args: "External id", "queued", "device", "context", "stream",
//     "correlation", "registers per thread", "shared memory", "blocks per SM", "warps per
//     SM", "grid", "block", "est. achieved occupancy %"; memcpy args: "External id",
//     "device", "context", "stream", "correlation", "bytes", "memory bandwidth (GB/s)". Each
//     is followed by its flow end {"ph": "f", "id": correlation, "bp": "e"} at its ts.
//   - One "gpu_user_annotation" per stream with the step's name, from its first GPU op's
//     start − 1 ns to its last op's end + 1 ns on that stream (Kineto widens them so), args
//     {"External id": step + 1}.
//
// Metadata events ("ph": "M", "process_name", "process_labels", "process_sort_index",
// "thread_name", "thread_sort_index") name the CPU process and thread and the GPU's two
// streams.
type KinetoTrace struct {
	// Rank is distributedInfo.rank and the GPU device id; WorldSize is
	// distributedInfo.world_size (values below Rank + 1 are raised to it).
	Rank, WorldSize int
	// BaseNs is baseTimeNanoseconds (Unix ns): the profiled process's start.
	BaseNs int64
	// Seed seeds the layout of the steps' GPU work.
	Seed int64
	// PID is the CPU process and thread id (0: 4000 + Rank).
	PID int
	// Name is traceName (the file's path as Kineto writes it).
	Name string
	// Dropped counts steps not recorded (past MaxProfiledSteps); above 0 the trace carries a
	// WARNING saying so.
	Dropped int64
}

// WriteKinetoTrace writes steps as rank's Kineto trace with baseTimeNanoseconds baseNs and
// the layout seed seed (world size rank + 1, see KinetoTrace).
func WriteKinetoTrace(w io.Writer, rank int, baseNs int64, steps []Step, seed int64) error {
	k := KinetoTrace{Rank: rank, WorldSize: rank + 1, BaseNs: baseNs, Seed: seed}
	return k.Write(w, StepsOf(steps), nil)
}

// Write writes the trace of steps to w and, when truth is not nil, one StepTruth JSON line
// per step to truth. steps is ranged over three times and must yield the same steps each
// time (SyntheticSteps and StepsOf do); memory stays constant whatever their number. An
// error is the first write error, or a step with EndNs < StartNs.
func (k *KinetoTrace) Write(w io.Writer, steps iter.Seq[Step], truth io.Writer) error {
	t := &traceOut{k: *k, w: bufio.NewWriterSize(w, 1<<16)}
	if t.k.PID == 0 {
		t.k.PID = 4000 + t.k.Rank
	}
	t.k.WorldSize = max(t.k.WorldSize, t.k.Rank+1)
	var tw *bufio.Writer
	if truth != nil {
		tw = bufio.NewWriterSize(truth, 1<<16)
	}
	t.header()
	first, last, n := t.pass(steps, func(i int, st Step, l *stepLayout) {
		t.cpuStep(i, st, l)
		if tw != nil && t.err == nil {
			b, _ := json.Marshal(l.truth(i, t.k.Rank, st))
			b = append(b, '\n')
			_, t.err = tw.Write(b)
		}
	})
	t.pass(steps, t.gpuStep)
	t.pass(steps, t.gpuAnnotations)
	t.trailer(first, last, n)
	if t.err == nil && tw != nil {
		t.err = tw.Flush()
	}
	if t.err == nil {
		t.err = t.w.Flush()
	}
	return t.err
}

// traceOut is one trace being written; err is the first error.
type traceOut struct {
	k   KinetoTrace
	w   *bufio.Writer
	b   []byte
	err error
}

var errStepOrder = errors.New("a step ends before it starts")

// pass lays out every step and calls f on each, returning the first step's start, the last
// step's end and the step count.
func (t *traceOut) pass(steps iter.Seq[Step], f func(int, Step, *stepLayout)) (first, last int64, n int) {
	g := newLayoutGen(t.k.Seed)
	for st := range steps {
		if t.err != nil {
			break
		}
		if st.EndNs < st.StartNs {
			t.err = errStepOrder
			break
		}
		if n == 0 {
			first = st.StartNs
		}
		f(n, st, g.next(n, st))
		last = st.EndNs
		n++
	}
	return first, last, n
}

// flush writes t.b when it has grown.
func (t *traceOut) flush(force bool) {
	if t.err == nil && (force || len(t.b) > 1<<15) {
		_, t.err = t.w.Write(t.b)
	}
	if force || len(t.b) > 1<<15 {
		t.b = t.b[:0]
	}
}

// ts appends Unix ns time at as Kineto's relative microseconds with three decimals.
func (t *traceOut) ts(at int64) {
	t.dur(max(at-t.k.BaseNs, 0))
}

// dur appends a duration in ns as microseconds with three decimals.
func (t *traceOut) dur(ns int64) {
	ns = max(ns, 0)
	t.b = strconv.AppendInt(t.b, ns/1000, 10)
	f := ns % 1000
	t.b = append(t.b, '.', byte('0'+f/100), byte('0'+f/10%10), byte('0'+f%10))
}

func (t *traceOut) int(v int64) { t.b = strconv.AppendInt(t.b, v, 10) }

func (t *traceOut) str(s string) { t.b = append(t.b, s...) }

// header writes the document up to the opening of traceEvents.
func (t *traceOut) header() {
	k := &t.k
	t.str("\n  {\n    \"schemaVersion\": 1,\n    \"deviceProperties\": [\n      {\n      \"id\": ")
	t.int(int64(k.Rank))
	t.str(", \"name\": \"NVIDIA H100 80GB HBM3\", \"totalGlobalMem\": 84929347584,\n" +
		"      \"computeMajor\": 9, \"computeMinor\": 0,\n" +
		"      \"maxThreadsPerBlock\": 1024, \"maxThreadsPerMultiprocessor\": 2048,\n" +
		"      \"regsPerBlock\": 65536, \"warpSize\": 32,\n" +
		"      \"sharedMemPerBlock\": 49152, \"numSms\": 132\n" +
		"    , \"regsPerMultiprocessor\": 65536, \"sharedMemPerBlockOptin\": 232448, \"sharedMemPerMultiprocessor\": 233472\n" +
		"    }\n    ],\n  \"distributedInfo\": {\"backend\": \"nccl\", \"rank\": ")
	t.int(int64(k.Rank))
	t.str(", \"world_size\": ")
	t.int(int64(k.WorldSize))
	t.str(", \"pg_count\": 1, \"pg_config\": [{\"pg_name\": \"0\", \"pg_desc\": \"default_pg\", \"backend_config\": \"cuda:nccl\", \"pg_size\": ")
	t.int(int64(k.WorldSize))
	t.str(", \"ranks\": [")
	for r := 0; r < k.WorldSize; r++ {
		if r > 0 {
			t.str(", ")
		}
		t.int(int64(r))
	}
	t.str("]}], \"nccl_version\": \"2.21.5\"},\n  \"displayTimeUnit\": \"ms\",\n  \"baseTimeNanoseconds\": ")
	t.int(k.BaseNs)
	t.str(",\n  \"traceEvents\": [")
	t.flush(true)
}

// stepName appends vLLM's step annotation of st.
func (t *traceOut) stepName(st Step) {
	t.str("execute_context_")
	t.int(int64(st.ContextRequests))
	t.str("(")
	t.int(int64(st.ContextTokens))
	t.str(")_generation_")
	t.int(int64(st.GenerationRequests))
	t.str("(")
	t.int(int64(st.GenerationTokens))
	t.str(")")
}

// xHead appends an "X" event's head up to its ts.
func (t *traceOut) xHead(cat string) {
	t.str("\n  {\n    \"ph\": \"X\", \"cat\": \"")
	t.str(cat)
	t.str("\", \"name\": \"")
}

// xTimes appends the rest of an "X" event's first lines after its name, then opens args.
func (t *traceOut) xTimes(pid, tid int, start, end int64, extID int64) {
	t.str("\", \"pid\": ")
	t.int(int64(pid))
	t.str(", \"tid\": ")
	t.int(int64(tid))
	t.str(",\n    \"ts\": ")
	t.ts(start)
	t.str(", \"dur\": ")
	t.dur(end - start)
	t.str(",\n    \"args\": {\n      \"External id\": ")
	t.int(extID)
}

// flow appends a flow start ("s") or end ("f", bound to its enclosing slice).
func (t *traceOut) flow(end bool, id int64, pid, tid int, at int64) {
	t.str("\n  {\n    \"ph\": \"")
	if end {
		t.str("f")
	} else {
		t.str("s")
	}
	t.str("\", \"id\": ")
	t.int(id)
	t.str(", \"pid\": ")
	t.int(int64(pid))
	t.str(", \"tid\": ")
	t.int(int64(tid))
	t.str(", \"ts\": ")
	t.ts(at)
	t.str(",\n    \"cat\": \"ac2g\", \"name\": \"ac2g\"")
	if end {
		t.str(", \"bp\": \"e\"")
	}
	t.str("\n  },")
}

// runtimeNames are the cuda_runtime call names by cbid.
var runtimeNames = map[int]string{cbidMemcpyAsync: "cudaMemcpyAsync", cbidLaunchKernel: "cudaLaunchKernel", cbidGraphLaunch: "cudaGraphLaunch"}

// cpuStep writes step i's CPU events: its annotation, then its runtime calls and flow starts.
func (t *traceOut) cpuStep(i int, st Step, l *stepLayout) {
	pid := t.k.PID
	ext := int64(i) + 1
	t.xHead("user_annotation")
	t.stepName(st)
	t.xTimes(pid, pid, st.StartNs, st.EndNs, ext)
	t.str("\n    }\n  },")
	for _, c := range l.launches {
		t.xHead("cuda_runtime")
		t.str(runtimeNames[c.cbid])
		t.xTimes(pid, pid, c.start, c.end, ext)
		t.str(",\n      \"cbid\": ")
		t.int(int64(c.cbid))
		t.str(", \"correlation\": ")
		t.int(c.corr)
		t.str("\n    }\n  },")
		t.flow(false, c.corr, pid, pid, c.start)
	}
	t.flush(false)
}

// gpuStep writes step i's GPU ops in start order, each followed by its flow end.
func (t *traceOut) gpuStep(i int, st Step, l *stepLayout) {
	dev := t.k.Rank
	ext := int64(i) + 1
	l.order = l.order[:0]
	for j := range l.ops {
		l.order = append(l.order, j)
	}
	slices.SortStableFunc(l.order, func(a, b int) int { return cmpInt64(l.ops[a].start, l.ops[b].start) })
	for _, j := range l.order {
		op := &l.ops[j]
		corr := l.launches[op.launch].corr
		if op.kind == opMemcpy {
			t.xHead("gpu_memcpy")
			t.str(memcpyName)
		} else {
			t.xHead("kernel")
			t.str(op.kernel.name)
		}
		t.xTimes(dev, op.stream, op.start, op.end, ext)
		if op.kind == opMemcpy {
			t.memcpyArgs(op, dev, corr)
		} else {
			t.kernelArgs(op, dev, corr)
		}
		t.str("\n    }\n  },")
		t.flow(true, corr, dev, op.stream, op.start)
	}
	t.flush(false)
}

// kernelArgs appends a kernel's args after its External id, as CUPTI reports them.
func (t *traceOut) kernelArgs(op *gpuOp, dev int, corr int64) {
	k := op.kernel
	t.str(",\n      \"queued\": 0, \"device\": ")
	t.int(int64(dev))
	t.str(", \"context\": 1,\n      \"stream\": ")
	t.int(int64(op.stream))
	t.str(", \"correlation\": ")
	t.int(corr)
	t.str(",\n      \"registers per thread\": ")
	t.int(int64(k.regs))
	t.str(",\n      \"shared memory\": ")
	t.int(int64(k.smem))
	t.str(",\n      \"blocks per SM\": ")
	t.str(k.blocksPerSM)
	t.str(",\n      \"warps per SM\": ")
	t.str(k.warpsPerSM)
	t.str(",\n      \"grid\": ")
	t.dims(k.grid)
	t.str(",\n      \"block\": ")
	t.dims(k.block)
	t.str(",\n      \"est. achieved occupancy %\": ")
	t.int(int64(k.occupancyPct))
}

func (t *traceOut) dims(d [3]int) {
	t.str("[")
	t.int(int64(d[0]))
	t.str(", ")
	t.int(int64(d[1]))
	t.str(", ")
	t.int(int64(d[2]))
	t.str("]")
}

// memcpyArgs appends a memcpy's args after its External id; the bandwidth is bytes per ns
// (GB/s), "N/A" for an instantaneous copy.
func (t *traceOut) memcpyArgs(op *gpuOp, dev int, corr int64) {
	t.str(",\n      \"device\": ")
	t.int(int64(dev))
	t.str(", \"context\": 1,\n      \"stream\": ")
	t.int(int64(op.stream))
	t.str(", \"correlation\": ")
	t.int(corr)
	t.str(",\n      \"bytes\": ")
	t.int(op.bytes)
	t.str(", \"memory bandwidth (GB/s)\": ")
	if d := op.end - op.start; d > 0 {
		t.b = strconv.AppendFloat(t.b, float64(op.bytes)/float64(d), 'g', -1, 64)
	} else {
		t.str("\"N/A\"")
	}
}

// gpuAnnotations writes step i's gpu_user_annotation on each stream that ran its work.
func (t *traceOut) gpuAnnotations(i int, st Step, l *stepLayout) {
	for _, stream := range [2]int{computeStream, sideStream} {
		var lo, hi int64
		seen := false
		for _, op := range l.ops {
			if op.stream != stream {
				continue
			}
			if !seen || op.start < lo {
				lo = op.start
			}
			if !seen || op.end > hi {
				hi = op.end
			}
			seen = true
		}
		if !seen {
			continue
		}
		t.xHead("gpu_user_annotation")
		t.stepName(st)
		t.xTimes(t.k.Rank, stream, lo-1, hi+1, int64(i)+1)
		t.str("\n    }\n  },")
	}
	t.flush(false)
}

// meta appends one metadata event: {"name": name, "ph": "M", "ts", "pid", "tid", "args":
// {key: value}}, value already JSON.
func (t *traceOut) meta(name string, at int64, pid, tid int, key, value string) {
	t.str("\n  {\n    \"name\": \"")
	t.str(name)
	t.str("\", \"ph\": \"M\", \"ts\": ")
	t.ts(at)
	t.str(", \"pid\": ")
	t.int(int64(pid))
	t.str(", \"tid\": ")
	t.int(int64(tid))
	t.str(",\n    \"args\": {\n      \"")
	t.str(key)
	t.str("\": ")
	t.str(value)
	t.str("\n    }\n  },")
}

// trailer writes the metadata events, the Record Window End instant at the last step's
// end, the WARNING bucket when steps were dropped, and traceName.
func (t *traceOut) trailer(first, last int64, n int) {
	k := &t.k
	if n == 0 {
		first, last = k.BaseNs, k.BaseNs
	}
	q := func(s string) string { v, _ := jsonString(s); return v }
	itoa64 := func(v int) string { return strconv.Itoa(v) }
	t.meta("process_name", first, k.PID, 0, "name", q("python3"))
	t.meta("process_labels", first, k.PID, 0, "labels", q("CPU"))
	t.meta("process_sort_index", first, k.PID, 0, "sort_index", itoa64(k.PID))
	t.meta("process_name", first, k.Rank, 0, "name", q("python3"))
	t.meta("process_labels", first, k.Rank, 0, "labels", q("GPU "+itoa64(k.Rank)))
	t.meta("process_sort_index", first, k.Rank, 0, "sort_index", itoa64(5000000+k.Rank))
	t.meta("thread_name", first, k.PID, k.PID, "name", q("thread "+itoa64(k.PID)+" (python3)"))
	t.meta("thread_sort_index", first, k.PID, k.PID, "sort_index", itoa64(k.PID))
	for _, s := range [2]int{computeStream, sideStream} {
		t.meta("thread_name", first, k.Rank, s, "name", q("stream "+itoa64(s)+" "))
		t.meta("thread_sort_index", first, k.Rank, s, "sort_index", itoa64(s))
	}
	t.str("\n  {\n    \"name\": \"Record Window End\", \"ph\": \"i\", \"s\": \"g\",\n    \"pid\": \"\", \"tid\": \"\", \"ts\": ")
	t.ts(last)
	t.str("\n  }\n  ],")
	if k.Dropped > 0 {
		t.str("\n      \"WARNING\": [")
		t.str(q("inferprobe sim: " + strconv.FormatInt(k.Dropped, 10) + " steps dropped past the limit of " + itoa64(MaxProfiledSteps) + " per window"))
		t.str("],")
	}
	t.str("\n  \"traceName\": ")
	t.str(q(k.Name))
	t.str("\n}")
	t.flush(true)
}
