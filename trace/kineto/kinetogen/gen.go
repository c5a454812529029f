// Package kinetogen writes synthetic Kineto Chrome traces of a vLLM worker, as large as
// asked, for benchmarks of the trace importer: vLLM step annotations (user_annotation and
// gpu_user_annotation), cudaLaunchKernel and cudaMemcpyAsync calls with correlations and
// ac2g flows, kernels on two streams with the args libkineto writes, an NCCL kernel per
// step and a cudaGraphLaunch replaying several kernels every few steps. Times are µs with
// three decimals relative to baseTimeNanoseconds.
package kinetogen

import (
	"bufio"
	"io"
	"strconv"
)

// Config sizes a trace. Bytes is the size to reach (the trace stops at the first step
// that passes it); KernelsPerStep the eager launches per step; GraphEvery puts a graph
// launch of GraphKernels kernels in every GraphEvery-th step (0: none).
type Config struct {
	Bytes          int64
	KernelsPerStep int
	GraphEvery     int
	GraphKernels   int
	BaseTimeNS     int64
}

// Stats is what a written trace holds.
type Stats struct {
	Bytes, Steps, Kernels, Launches int64
}

const (
	pid = 1731
	tid = 1731
)

var kernelNames = []string{
	"void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>(cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8::Params)",
	"void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 4, cutlass::bfloat16_t> >, false, true, false, false, true, true, false, false>(flash::Flash_fwd_params)",
	"void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)",
	"triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0",
	"void vllm::rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, c10::BFloat16 const*, long, c10::BFloat16 const*, float, int, int)",
}

type gen struct {
	w     *bufio.Writer
	n     int64
	b     []byte
	first bool
	corr  int64
	st    Stats
	base  int64
}

// Write writes one trace to w.
func Write(w io.Writer, cfg Config) (Stats, error) {
	if cfg.KernelsPerStep <= 0 {
		cfg.KernelsPerStep = 40
	}
	if cfg.GraphKernels <= 0 {
		cfg.GraphKernels = 12
	}
	if cfg.BaseTimeNS == 0 {
		cfg.BaseTimeNS = 1_767_225_600_000_000_000
	}
	g := &gen{w: bufio.NewWriterSize(w, 1<<20), first: true}
	g.raw(`{"schemaVersion":1,"deviceProperties":[{"id":0,"name":"NVIDIA H100 80GB HBM3","totalGlobalMem":85045379072,"computeMajor":9,"computeMinor":0,"maxThreadsPerBlock":1024,"numSms":132}],` +
		`"distributedInfo":{"backend":"nccl","rank":0,"world_size":2,"pg_count":1},"vllm_version":"0.30.0","record_shapes":0,"with_stack":0,"baseTimeNanoseconds":` +
		strconv.FormatInt(cfg.BaseTimeNS, 10) + `,"displayTimeUnit":"ms","traceEvents":[` + "\n")
	t := int64(1_000_000)
	for step := 0; g.n < cfg.Bytes; step++ {
		t = g.step(t, step, cfg)
		g.st.Steps++
	}
	g.raw("\n],\"traceName\":\"rank0.1767225600.pt.trace.json\"}\n")
	g.st.Bytes = g.n
	return g.st, g.w.Flush()
}

func (g *gen) raw(s string) {
	n, _ := g.w.WriteString(s)
	g.n += int64(n)
}

func (g *gen) flush() {
	if !g.first {
		g.b = append([]byte(",\n"), g.b...)
	}
	g.first = false
	n, _ := g.w.Write(g.b)
	g.n += int64(n)
	g.b = g.b[:0]
}

func us(b []byte, ns int64) []byte {
	b = strconv.AppendInt(b, ns/1000, 10)
	b = append(b, '.')
	f := ns % 1000
	if f < 100 {
		b = append(b, '0')
	}
	if f < 10 {
		b = append(b, '0')
	}
	return strconv.AppendInt(b, f, 10)
}

func (g *gen) complete(cat, name string, p, th, ts, dur int64, args string) {
	g.b = append(g.b, `{"ph":"X","cat":"`...)
	g.b = append(g.b, cat...)
	g.b = append(g.b, `","name":"`...)
	g.b = append(g.b, name...)
	g.b = append(g.b, `","pid":`...)
	g.b = strconv.AppendInt(g.b, p, 10)
	g.b = append(g.b, `,"tid":`...)
	g.b = strconv.AppendInt(g.b, th, 10)
	g.b = append(g.b, `,"ts":`...)
	g.b = us(g.b, ts)
	g.b = append(g.b, `,"dur":`...)
	g.b = us(g.b, dur)
	g.b = append(g.b, `,"args":{`...)
	g.b = append(g.b, args...)
	g.b = append(g.b, "}}"...)
	g.flush()
}

func (g *gen) flow(ph string, id, p, th, ts int64) {
	g.b = append(g.b, `{"ph":"`...)
	g.b = append(g.b, ph...)
	g.b = append(g.b, `","id":`...)
	g.b = strconv.AppendInt(g.b, id, 10)
	g.b = append(g.b, `,"pid":`...)
	g.b = strconv.AppendInt(g.b, p, 10)
	g.b = append(g.b, `,"tid":`...)
	g.b = strconv.AppendInt(g.b, th, 10)
	g.b = append(g.b, `,"ts":`...)
	g.b = us(g.b, ts)
	g.b = append(g.b, `,"cat":"ac2g","name":"ac2g"`...)
	if ph == "f" {
		g.b = append(g.b, `,"bp":"e"`...)
	}
	g.b = append(g.b, '}')
	g.flush()
}

func corrArgs(corr int64) string {
	c := strconv.FormatInt(corr, 10)
	return `"External id":` + c + `,"cbid":211,"correlation":` + c
}

func kernelArgs(corr, stream int64) string {
	c := strconv.FormatInt(corr, 10)
	return `"External id":` + c + `,"queued":0,"device":0,"context":1,"stream":` + strconv.FormatInt(stream, 10) +
		`,"correlation":` + c + `,"registers per thread":128,"shared memory":49152,"blocks per SM":0.969697,"warps per SM":3.878788,"grid":[128,1,1],"block":[128,1,1],"est. achieved occupancy %":6`
}

// step writes one engine step starting at t (ns) and returns the next step's start.
func (g *gen) step(t int64, step int, cfg Config) int64 {
	name := "execute_context_1(512)_generation_" + strconv.Itoa(7+step%25) + "(" + strconv.Itoa(7+step%25) + ")"
	nk := cfg.KernelsPerStep
	graph := cfg.GraphEvery > 0 && step%cfg.GraphEvery == 0
	hostDur := int64(nk)*6_000 + 50_000
	g.complete("user_annotation", name, pid, tid, t, hostDur, `"External id":1,"Record function id":0`)
	gpuT := t + 20_000
	gpuStart := gpuT
	for k := 0; k < nk; k++ {
		g.corr++
		lt := t + 5_000 + int64(k)*6_000
		stream := int64(7 + k%2)
		launch, cat, kname := "cudaLaunchKernel", "kernel", kernelNames[k%len(kernelNames)]
		switch {
		case k == 0:
			launch, cat, kname = "cudaMemcpyAsync", "gpu_memcpy", "Memcpy HtoD (Pinned -> Device)"
		case k == nk-1:
			kname = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
		}
		g.complete("cuda_runtime", launch, pid, tid, lt, 3_500, corrArgs(g.corr))
		g.flow("s", g.corr, pid, tid, lt)
		kt := max(gpuT, lt+4_000)
		dur := int64(4_000 + (k*7919)%9_000)
		g.complete(cat, kname, 0, stream, kt, dur, kernelArgs(g.corr, stream))
		g.flow("f", g.corr, 0, stream, kt)
		gpuT = kt + dur*2/3 // the next kernel overlaps on the other stream
		g.st.Kernels++
		g.st.Launches++
	}
	if graph {
		g.corr++
		lt := t + hostDur - 10_000
		g.complete("cuda_runtime", "cudaGraphLaunch", pid, tid, lt, 9_000, corrArgs(g.corr))
		g.flow("s", g.corr, pid, tid, lt)
		kt := max(gpuT, lt+5_000)
		for k := 0; k < cfg.GraphKernels; k++ {
			g.complete("kernel", kernelNames[k%len(kernelNames)], 0, 7, kt, 3_000, kernelArgs(g.corr, 7))
			g.flow("f", g.corr, 0, 7, kt)
			kt += 3_500
			g.st.Kernels++
		}
		gpuT = kt
		g.st.Launches++
	}
	g.complete("gpu_user_annotation", name, 0, 7, gpuStart-1, gpuT-gpuStart+2, `"External id":1`)
	return max(t+hostDur, gpuT) + 30_000
}
