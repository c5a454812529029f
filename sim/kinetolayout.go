package sim

import (
	"math/rand/v2"
	"slices"
)

// The GPU streams of a simulated trace: the compute stream and a side stream whose kernels
// overlap the compute stream's.
const (
	computeStream = 7
	sideStream    = 13
)

// CUPTI runtime callback ids (cbid) of the calls a simulated trace launches with.
const (
	cbidMemcpyAsync  = 41
	cbidLaunchKernel = 211
	cbidGraphLaunch  = 311
)

// opKind is what a GPU interval is.
type opKind uint8

const (
	opKernel opKind = iota
	opMemcpy
	opNCCL
)

// kernelInfo is a kernel's name and the launch figures Kineto writes in its args.
type kernelInfo struct {
	name         string // JSON-safe: no quote, backslash or control character
	regs, smem   int
	blocksPerSM  string
	warpsPerSM   string
	grid, block  [3]int
	occupancyPct int
}

// computeKernels are the compute stream's kernels, cycled through in a step.
var computeKernels = []kernelInfo{
	{"void vllm::rms_norm_kernel<c10::BFloat16, 8, 3>(c10::BFloat16*, c10::BFloat16 const*, long, c10::BFloat16 const*, float, int, int)", 28, 1024, "0.242424", "7.757576", [3]int{32, 1, 1}, [3]int{1024, 1, 1}, 50},
	{"nvjet_tst_128x64_64x8_2x1_v_bz_coopA_TNT", 168, 197632, "1.000000", "12.000000", [3]int{132, 1, 1}, [3]int{384, 1, 1}, 19},
	{"void vllm::rotary_embedding_kernel<c10::BFloat16, true>(long const*, c10::BFloat16*, c10::BFloat16*, c10::BFloat16 const*, int, long, long, long, int, int, int)", 32, 0, "0.969697", "15.515152", [3]int{128, 1, 1}, [3]int{512, 1, 1}, 24},
	{"void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 4, cutlass::bfloat16_t> >, false, true, false, false, true, true, false, false>(flash::Flash_fwd_params)", 255, 49152, "2.909091", "11.636364", [3]int{1, 32, 12}, [3]int{128, 1, 1}, 18},
	{"triton_poi_fused_mul_silu_slice_0", 24, 0, "15.515152", "62.060606", [3]int{2048, 1, 1}, [3]int{128, 1, 1}, 92},
	{"void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>(cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8::Params)", 118, 20480, "0.484848", "3.878788", [3]int{64, 1, 1}, [3]int{256, 1, 1}, 12},
}

// sideKernel is the side stream's kernel; ncclKernel the step's all-reduce.
var (
	sideKernel = kernelInfo{"void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0>(__nv_bfloat16 const*, __nv_bfloat16 const*, __nv_bfloat16*, __nv_bfloat16*, long const*, long, long, long, long, int, int, int, float const*, float const*)", 32, 0, "1.939394", "15.515152", [3]int{256, 1, 1}, [3]int{256, 1, 1}, 24}
	ncclKernel = kernelInfo{"ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 96, 8960, "0.121212", "0.727273", [3]int{16, 1, 1}, [3]int{576, 1, 1}, 2}
)

// memcpyName is the name Kineto gives the step's input copy.
const memcpyName = "Memcpy HtoD (Pinned -> Device)"

// gpuOp is one GPU interval of a step.
type gpuOp struct {
	kind       opKind
	stream     int
	start, end int64 // unix ns
	kernel     *kernelInfo
	bytes      int64 // memcpy size
	launch     int   // index of its CPU launch in stepLayout.launches
}

// cpuLaunch is one CUDA runtime call on the step's CPU thread.
type cpuLaunch struct {
	cbid       int
	start, end int64 // unix ns
	corr       int64 // CUPTI correlation id
}

// stepLayout is what one step puts on the CPU thread and the GPU streams.
type stepLayout struct {
	ops      []gpuOp     // compute stream first (memcpy, kernels, NCCL), then the side stream
	launches []cpuLaunch // in CPU order; correlations increase in that order
	graph    bool        // the kernels share one cudaGraphLaunch
	order    []int       // scratch: op indices by GPU start
	early    []int       // scratch: ops launched before the GPU work
	late     []int       // scratch: ops launched inside the long gap
}

// layoutGen lays out a window's steps in order: correlations continue from step to step,
// and every eighth decode-only step (one with generation requests and no context
// request) replays a CUDA graph. The same seed and steps give the same layout.
type layoutGen struct {
	seed    uint64
	pcg     *rand.PCG
	r       *rand.Rand
	corr    int64 // last correlation id used
	decodes int   // decode-only steps laid out so far
	l       stepLayout
}

func newLayoutGen(seed int64) *layoutGen {
	pcg := rand.NewPCG(uint64(seed), 0)
	return &layoutGen{seed: uint64(seed), pcg: pcg, r: rand.New(pcg)}
}

// Gap lengths inside a step (ns): short gaps stay under the 30 µs kernel-wait threshold,
// the one long gap per step exceeds it.
const (
	shortGapMin, shortGapSpan = 2_000, 23_000
	longGapMin, longGapSpan   = 40_000, 160_000
)

// next lays out step i (its index in the window). Its GPU work runs on the middle 80% of
// the step: on the compute stream a memcpy, 6–10 kernels and an NCCL all-reduce, separated
// by short gaps and one long gap (all gaps shrink evenly when the step is too short for
// them); two side-stream kernels start a third of the way into compute kernels and last as
// long, overlapping them. Launches precede their GPU work: those of the work after the long
// gap run inside that gap (a host wait), the others in the step's first tenth.
func (g *layoutGen) next(i int, st Step) *stepLayout {
	g.pcg.Seed(g.seed, uint64(i)+1)
	l := &g.l
	l.ops, l.launches = l.ops[:0], l.launches[:0]
	l.graph = false
	if st.ContextRequests == 0 && st.GenerationRequests > 0 {
		l.graph = g.decodes%8 == 7
		g.decodes++
	}
	d := st.EndNs - st.StartNs
	win0, win1 := st.StartNs+d/10, st.EndNs-d/10
	nk := 6 + g.r.IntN(5)
	long := g.computeStream(st, nk, win0, win1)
	a := 1 + g.r.IntN(nk/2)
	for _, k := range [2]int{a, a + 2} { // compute kernels: ops 1..nk
		host := l.ops[k]
		n := host.end - host.start
		l.ops = append(l.ops, gpuOp{kind: opKernel, stream: sideStream, kernel: &sideKernel,
			start: host.start + n/3, end: min(host.start+n/3+n, win1)})
	}
	g.launch(st, long, win0)
	return l
}

// computeStream appends the compute stream's ops to g.l between win0 and win1 and returns
// the index of the op after the long gap.
func (g *layoutGen) computeStream(st Step, nk int, win0, win1 int64) int {
	l := &g.l
	m := nk + 2
	var gaps [12]int64
	var weights [12]int64
	long := 2 + g.r.IntN(m-2) // the long gap precedes op long (never the first kernel)
	var sumGaps, sumW int64
	for j := 1; j < m; j++ {
		gaps[j] = shortGapMin + g.r.Int64N(shortGapSpan)
		if j == long {
			gaps[j] = longGapMin + g.r.Int64N(longGapSpan)
		}
		sumGaps += gaps[j]
	}
	budget := win1 - win0
	if 2*sumGaps > budget {
		sumGaps = 0
		for j := 1; j < m; j++ {
			gaps[j] = budget / int64(4*(m-1))
			sumGaps += gaps[j]
		}
	}
	for j := 0; j < m; j++ {
		weights[j] = 1 + g.r.Int64N(9)
		if j == 0 {
			weights[j] = 1
		}
		sumW += weights[j]
	}
	rest, t := budget-sumGaps, win0
	for j := 0; j < m; j++ {
		t += gaps[j]
		op := gpuOp{kind: opKernel, stream: computeStream, start: t, end: t + rest*weights[j]/sumW}
		switch j {
		case 0:
			op.kind = opMemcpy
			op.bytes = int64(16*(st.ContextTokens+st.GenerationTokens) + 4096)
		case m - 1:
			op.kind, op.kernel = opNCCL, &ncclKernel
		default:
			op.kernel = &computeKernels[(j-1)%len(computeKernels)]
		}
		l.ops = append(l.ops, op)
		t = op.end
	}
	return long
}

// launch gives every op its CPU launch: one each, or under a graph replay one
// cudaMemcpyAsync and one cudaGraphLaunch for all the kernels. Ops that start at or after
// the long gap's end are launched inside the gap, the others in [start + d/50, win0).
func (g *layoutGen) launch(st Step, long int, win0 int64) {
	l := &g.l
	gapStart, gapEnd := l.ops[long-1].end, l.ops[long].start
	l.order = l.order[:0]
	for i := range l.ops {
		l.order = append(l.order, i)
	}
	slices.SortStableFunc(l.order, func(a, b int) int { return cmpInt64(l.ops[a].start, l.ops[b].start) })
	early, late := l.early[:0], l.late[:0]
	defer func() { l.early, l.late = early, late }()
	for _, i := range l.order {
		if !l.graph && l.ops[i].start >= gapEnd {
			late = append(late, i)
		} else {
			early = append(early, i)
		}
	}
	first := st.StartNs + (st.EndNs-st.StartNs)/50
	if l.graph { // the memcpy (the earliest op) first, then one graph launch for the rest
		g.placeEach(early[:1], first, first+(win0-first)/2)
		g.placeGraph(early[1:], first+(win0-first)/2, win0)
		return
	}
	g.placeEach(early, first, win0)
	g.placeEach(late, gapStart+(gapEnd-gapStart)/4, gapStart+(gapEnd-gapStart)*3/4)
}

// maxLaunchNs caps a runtime call's length (a cudaLaunchKernel takes a few µs).
const maxLaunchNs = 6_000

// placeEach gives each of ops its own launch, spread evenly over [a, b), each lasting half
// its slot or maxLaunchNs if shorter: cudaMemcpyAsync for the memcpy, cudaLaunchKernel for
// a kernel.
func (g *layoutGen) placeEach(ops []int, a, b int64) {
	l := &g.l
	span, n := max(b-a, 0), int64(max(len(ops), 1))
	for k, i := range ops {
		cbid := cbidLaunchKernel
		if l.ops[i].kind == opMemcpy {
			cbid = cbidMemcpyAsync
		}
		s := a + span*int64(k)/n
		g.corr++
		l.launches = append(l.launches, cpuLaunch{cbid: cbid, start: s, end: s + min(span/(2*n), maxLaunchNs), corr: g.corr})
		l.ops[i].launch = len(l.launches) - 1
	}
}

// placeGraph launches all of ops with one cudaGraphLaunch at a, lasting half of [a, b) or
// 2·maxLaunchNs if shorter.
func (g *layoutGen) placeGraph(ops []int, a, b int64) {
	l := &g.l
	g.corr++
	l.launches = append(l.launches, cpuLaunch{cbid: cbidGraphLaunch, start: a, end: a + min(max(b-a, 0)/2, 2*maxLaunchNs), corr: g.corr})
	for _, i := range ops {
		l.ops[i].launch = len(l.launches) - 1
	}
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// truth is the ground truth of a laid-out step.
func (l *stepLayout) truth(i, rank int, st Step) StepTruth {
	t := StepTruth{Step: i, Rank: rank, StartNs: st.StartNs, EndNs: st.EndNs,
		ContextRequests: st.ContextRequests, ContextTokens: st.ContextTokens,
		GenerationRequests: st.GenerationRequests, GenerationTokens: st.GenerationTokens}
	if l.graph {
		t.GraphLaunches = 1
	}
	l.order = l.order[:0]
	for i, op := range l.ops {
		l.order = append(l.order, i)
		switch op.kind {
		case opMemcpy:
			t.MemcpyNs += op.end - op.start
		case opNCCL:
			t.NCCLNs += op.end - op.start
			t.Kernels++
		default:
			t.Kernels++
		}
	}
	slices.SortStableFunc(l.order, func(a, b int) int { return cmpInt64(l.ops[a].start, l.ops[b].start) })
	cs, ce := l.ops[l.order[0]].start, l.ops[l.order[0]].end
	for _, i := range l.order[1:] {
		op := l.ops[i]
		if op.start > ce {
			t.GPUBusyNs += ce - cs
			cs, ce = op.start, op.end
			continue
		}
		ce = max(ce, op.end)
	}
	t.GPUBusyNs += ce - cs
	first, last := l.ops[l.order[0]].start, int64(0)
	for _, op := range l.ops {
		last = max(last, op.end)
	}
	t.GPUIdleNs = last - first - t.GPUBusyNs
	l.idleSplit(&t)
	return t
}

// idleSplit adds to t the gaps between consecutive ops on each stream (l.order holds the
// ops by start), classified by KernelWaitThresholdNs and the next op's launch.
func (l *stepLayout) idleSplit(t *StepTruth) {
	for _, stream := range [2]int{computeStream, sideStream} {
		prev := -1
		for _, i := range l.order {
			if l.ops[i].stream != stream {
				continue
			}
			if prev >= 0 {
				p, c := l.ops[prev], l.ops[i]
				switch gap := c.start - p.end; {
				case gap <= 0:
				case l.launches[c.launch].start > p.end:
					t.HostWaitNs += gap
				case gap < KernelWaitThresholdNs:
					t.KernelWaitNs += gap
				default:
					t.OtherIdleNs += gap
				}
			}
			prev = i
		}
	}
}
