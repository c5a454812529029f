package kineto

import (
	"reflect"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
)

// twoSteps is a vLLM trace with two steps. Step 0 (host [0, 1 ms)) runs kernels on two
// streams; the figures below are worked out by hand from the intervals:
//
//	corr 1 stream 7 [100, 300) µs, corr 2 stream 8 [200, 400): union [100, 400) = 300 µs
//	corr 3 memcpy stream 7 [410, 420), launched at 30 µs
//	corr 4 NCCL stream 8 [520, 600), launched at 500 µs
//	corr 5 stream 7 [650, 700), launched at 40 µs; corr 6 stream 7 [710, 720)
//
// busy = 300+10+80+50+10 = 450 µs, summed = 200+200+10+80+50+10 = 550 µs, span 620 µs,
// idle 170 µs; memcpy 10 µs, communication 80 µs. Idle split per stream:
//
//	stream 7: 300→410 = 110 µs, corr 3 launched at 30 (before 300): other;
//	          420→650 = 230 µs, launched at 40: other; 700→710 = 10 µs: kernel-wait
//	stream 8: 400→520 = 120 µs, corr 4 launched at 500 (after 400): host-wait
//
// host 120, kernel 10, other 340 (470 µs in all: the streams' gaps overlap).
func twoSteps() *traceBuilder {
	b := newTrace()
	b.step("execute_context_2(300)_generation_5(5)", 0, 1_000_000, 90_000, 900_000)
	b.kernel("ampere_bf16_s16816gemm", 7, 1, 10_000, 100_000, 200_000)
	b.kernel("flash_fwd_kernel", 8, 2, 20_000, 200_000, 200_000)
	b.launch("cudaMemcpyAsync", 3, 3, 30_000, 2_000)
	b.gpu("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", 7, 3, 3, 410_000, 10_000)
	b.kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", 8, 4, 500_000, 520_000, 80_000)
	b.kernel("void at::native::vectorized_elementwise_kernel<4>", 7, 5, 40_000, 650_000, 50_000)
	b.kernel("triton_poi_fused_add_0", 7, 6, 50_000, 710_000, 10_000)
	b.step("execute_context_0(0)_generation_8(8)", 1_100_000, 1_500_000, 1_150_000, 1_450_000)
	b.kernel("triton_red_fused_1", 7, 7, 1_110_000, 1_200_000, 50_000)
	return b
}

func TestStepFiguresUnionNotSum(t *testing.T) {
	im := mustImport(t, twoSteps(), Options{})
	if len(im.its) != 2 {
		t.Fatalf("%d iterations", len(im.its))
	}
	it := im.its[0]
	want := artifact.Iteration{
		Context: it.Context, EventID: it.EventID, Metadata: it.Metadata, TraceFile: it.TraceFile, TraceAttachmentID: it.TraceAttachmentID,
		IterationRef: artifact.IterationRef{ProducerID: "vllm", ID: "0"}, Source: artifact.IterationVLLM,
		Name: "execute_context_2(300)_generation_5(5)", StepIndex: 0, Rank: artifact.Ptr(int64(0)),
		StartNS: base0, EndNS: base0 + 1_000_000, GPUStartNS: artifact.Ptr(base0 + 90_000), GPUEndNS: artifact.Ptr(base0 + 900_000),
		ContextRequests: artifact.Ptr(int64(2)), ContextTokens: artifact.Ptr(int64(300)),
		GenRequests: artifact.Ptr(int64(5)), GenTokens: artifact.Ptr(int64(5)),
		Launches: 6, Activities: 6, Kernels: 5, GPUBusyNS: 450_000, SummedDurationNS: 550_000, KernelSpanNS: 620_000,
		IdleNS: 170_000, IdleHostWaitNS: 120_000, IdleKernelWaitNS: 10_000, IdleOtherNS: 340_000,
		MemcpyNS: 10_000, CommunicationNS: 80_000,
	}
	if !reflect.DeepEqual(*it, want) {
		t.Errorf("step 0:\n got %+v\nwant %+v", *it, want)
	}
	s1 := im.its[1]
	if s1.StepIndex != 1 || s1.GapToPreviousNS == nil || *s1.GapToPreviousNS != 100_000 || s1.GPUBusyNS != 50_000 ||
		s1.IdleNS != 0 || *s1.ContextRequests != 0 || *s1.GenTokens != 8 || s1.IterationRef.ID != "1" {
		t.Errorf("step 1: %+v", *s1)
	}
	if it.Context.Rank == nil || *it.Context.Rank != 0 {
		t.Errorf("context rank %v", it.Context.Rank)
	}
	if len(im.refs) != 7 {
		t.Fatalf("%d refs:\n%s", len(im.refs), names(im.refs))
	}
	for _, r := range im.refs {
		if r.AttributionStatus != artifact.AttributionLinked || r.CorrelationScope != "ac2g_flow" || len(r.Metadata.Intervals) != 1 ||
			r.Metadata.BusyNS != r.EndNS-r.StartNS || r.Metadata.UnresolvedReason != nil {
			t.Errorf("ref %+v", *r)
		}
	}
	mc := im.refByCorr(t, 3)
	if mc.ActivityKind != "gpu_memcpy" || *mc.Metadata.LaunchName != "cudaMemcpyAsync" || mc.IterationRef.ID != "0" ||
		mc.StartNS != base0+410_000 || mc.Metadata.Intervals[0] != [2]int64{0, 10_000} {
		t.Errorf("memcpy ref %+v", *mc)
	}
	if got := im.order[len(im.order)-1]; got != artifact.EventCapabilities || len(im.caps) != 1 {
		t.Errorf("last record %s, %d capabilities", got, len(im.caps))
	}
	if im.caps[0].Metadata["event_loss"] != nil || im.sum.Steps != 2 || im.sum.Activities != 7 || im.sum.Linked != 7 {
		t.Errorf("summary %+v", im.sum)
	}
}

// TestGraphLaunch: one cudaGraphLaunch (correlation 20) replays four kernels. They make one
// launch-detail record; only the first is judged by the launch time.
//
//	corr 19 [50, 150) µs launched at 10
//	graph launched at 160 (after 150): kernels [200, 300), [300, 350), [400, 450), [460, 470)
//	gap 150→200 = 50 µs before the graph's first kernel, launched after 150: host-wait
//	gap 350→400 = 50 µs inside the replay: other; gap 450→460 = 10 µs: kernel-wait
func TestGraphLaunch(t *testing.T) {
	b := newTrace()
	b.step("execute_context_0(0)_generation_32(32)", 0, 2_000_000, 0, 0)
	b.kernel("prepare_inputs", 7, 19, 10_000, 50_000, 100_000)
	b.launch("cudaGraphLaunch", 20, 20, 160_000, 8_000)
	for _, k := range [][2]int64{{200_000, 100_000}, {300_000, 50_000}, {400_000, 50_000}, {460_000, 10_000}} {
		b.gpu("kernel", "graph_kernel", 7, 20, 20, k[0], k[1])
	}
	im := mustImport(t, b, Options{})
	it := im.its[0]
	if it.Launches != 2 || it.GraphLaunches != 1 || it.Activities != 5 || it.Kernels != 5 || it.IdleHostWaitNS != 50_000 ||
		it.IdleOtherNS != 50_000 || it.IdleKernelWaitNS != 10_000 || it.GPUBusyNS != 310_000 || it.GPUStartNS != nil {
		t.Errorf("step %+v", *it)
	}
	g := im.refByCorr(t, 20)
	wantIv := [][2]int64{{0, 150_000}, {200_000, 50_000}, {260_000, 10_000}}
	if g.Metadata.Activities != 4 || !reflect.DeepEqual(g.Metadata.Intervals, wantIv) || g.Metadata.BusyNS != 210_000 ||
		g.Metadata.SummedDurationNS != 210_000 || *g.Metadata.LaunchName != "cudaGraphLaunch" || g.EndNS != base0+470_000 {
		t.Errorf("graph ref %+v", *g)
	}
	if im.sum.GraphLaunches != 1 || im.sum.Launches != 2 {
		t.Errorf("summary %+v", im.sum)
	}
}

// TestFlowBeforeCorrelation: a kernel whose ac2g flow leads to one launch and whose
// correlation names another is tied by the flow; a kernel without a flow falls back to
// the correlation.
func TestFlowBeforeCorrelation(t *testing.T) {
	b := newTrace()
	b.cpuRange("execute_context_1(10)_generation_0(0)", 0, 100_000)
	b.cpuRange("execute_context_1(20)_generation_0(0)", 200_000, 300_000)
	b.launch("cudaLaunchKernel", 31, 900, 10_000, 2_000)
	b.launch("cudaLaunchKernel", 32, 0, 210_000, 2_000)
	b.gpu("kernel", "k_flow", 7, 32, 900, 50_000, 1_000)
	b.gpu("kernel", "k_corr", 8, 32, 0, 250_000, 1_000)
	im := mustImport(t, b, Options{Detail: DetailKernel})
	if len(im.refs) != 2 {
		t.Fatalf("refs:\n%s", names(im.refs))
	}
	for _, r := range im.refs {
		switch *r.Metadata.Name {
		case "k_flow":
			if r.CorrelationScope != "ac2g_flow" || r.IterationRef.ID != "0" || *r.RuntimeCorrelationID != 31 || *r.CUDACorrelationID != 32 {
				t.Errorf("flow-linked %+v", *r)
			}
		case "k_corr":
			if r.CorrelationScope != "correlation" || r.IterationRef.ID != "1" || *r.RuntimeCorrelationID != 32 || *r.StreamID != 8 {
				t.Errorf("correlation-linked %+v", *r)
			}
		}
	}
}

// TestUnresolvedReasons: one launch in no range, one in two nested ranges, one kernel
// without a launch record, one linked.
func TestUnresolvedReasons(t *testing.T) {
	b := newTrace()
	b.cpuRange("execute_context_4(40)_generation_0(0)", 0, 100_000)
	b.cpuRange("inferprobe.iteration/test/a", 40_000, 60_000)
	b.kernel("linked", 7, 1, 10_000, 20_000, 1_000)
	b.kernel("ambiguous", 7, 2, 50_000, 70_000, 1_000)
	b.kernel("outside", 7, 3, 150_000, 160_000, 1_000)
	b.gpu("kernel", "orphan", 7, 99, 0, 170_000, 1_000)
	im := mustImport(t, b, Options{})
	want := map[int64]string{2: artifact.UnresolvedAmbiguousRange, 3: artifact.UnresolvedOutsideRange, 99: artifact.UnresolvedNoLaunchRecord}
	for corr, reason := range want {
		r := im.refByCorr(t, corr)
		if r.AttributionStatus != artifact.AttributionUnresolved || r.IterationRef != nil || *r.Metadata.UnresolvedReason != reason {
			t.Errorf("corr %d: %+v (want %s)", corr, *r, reason)
		}
	}
	if r := im.refByCorr(t, 99); r.CorrelationScope != "none" || r.Metadata.LaunchName != nil || r.RuntimeCorrelationID != nil {
		t.Errorf("orphan %+v", *r)
	}
	if r := im.refByCorr(t, 1); r.AttributionStatus != artifact.AttributionLinked || r.IterationRef.ID != "0" {
		t.Errorf("linked %+v", *r)
	}
	wantU := map[string]int64{artifact.UnresolvedAmbiguousRange: 1, artifact.UnresolvedOutsideRange: 1, artifact.UnresolvedNoLaunchRecord: 1}
	if !reflect.DeepEqual(im.sum.Unresolved, wantU) || im.sum.Linked != 1 || len(im.its) != 2 {
		t.Errorf("summary %+v, %d steps", im.sum, len(im.its))
	}
	if r := im.its[1]; r.Source != artifact.IterationInferprobe || r.IterationRef != (artifact.IterationRef{ProducerID: "test", ID: "a"}) || r.Activities != 0 {
		t.Errorf("range %+v", *r)
	}
}

// TestUnannotated: without iteration ranges no step is found and every kernel is kept,
// unresolved.
func TestUnannotated(t *testing.T) {
	b := newTrace()
	b.kernel("a", 7, 1, 10_000, 20_000, 1_000)
	b.kernel("b", 8, 2, 11_000, 20_500, 1_000)
	im := mustImport(t, b, Options{})
	if len(im.its) != 0 || len(im.refs) != 2 || im.sum.StepsResolved || im.sum.Steps != 0 {
		t.Fatalf("%d its %d refs %+v", len(im.its), len(im.refs), im.sum)
	}
	for _, r := range im.refs {
		if *r.Metadata.UnresolvedReason != artifact.UnresolvedOutsideRange || r.CorrelationScope != "ac2g_flow" {
			t.Errorf("%+v", *r)
		}
	}
	if c := im.caps[0]; !c.Available || !reflect.DeepEqual(c.Collected, []string{artifact.EventActivityRef}) {
		t.Errorf("capabilities %+v", *c)
	}
}

// TestGPUOnlyRanges: a trace with gpu_user_annotation ranges and no CPU ones takes its
// steps from the GPU ranges and ties activities by the GPU time they ran in.
func TestGPUOnlyRanges(t *testing.T) {
	b := newTrace()
	// One annotation per stream, as Kineto writes them: one step [90, 200) µs.
	b.events = append(b.events, `{"ph":"X","cat":"gpu_user_annotation","name":"step[DECODE bs=64]","pid":0,"tid":7,"ts":100.000,"dur":100.000}`,
		`{"ph":"X","cat":"gpu_user_annotation","name":"step[DECODE bs=64]","pid":0,"tid":8,"ts":90.000,"dur":60.000}`)
	b.kernel("a", 7, 1, 10_000, 120_000, 10_000)
	b.kernel("b", 7, 2, 10_000, 250_000, 10_000)
	im := mustImport(t, b, Options{})
	if len(im.its) != 1 || im.its[0].Source != artifact.IterationSGLang || *im.its[0].GenRequests != 64 ||
		im.its[0].GenTokens != nil || im.its[0].ContextRequests != nil || im.its[0].GPUBusyNS != 10_000 ||
		*im.its[0].GPUStartNS != base0+90_000 || *im.its[0].GPUEndNS != base0+200_000 {
		t.Fatalf("%+v", im.its)
	}
	if r := im.refByCorr(t, 1); r.AttributionStatus != artifact.AttributionLinked {
		t.Errorf("%+v", *r)
	}
	if r := im.refByCorr(t, 2); *r.Metadata.UnresolvedReason != artifact.UnresolvedOutsideRange {
		t.Errorf("%+v", *r)
	}
}

func TestParseStepName(t *testing.T) {
	cases := []struct {
		in               string
		ok               bool
		source, prod, id string
		nc, nct, ng, ngt int64
	}{
		{"execute_context_3(1536)_generation_61(61)", true, artifact.IterationVLLM, "vllm", "", 3, 1536, 61, 61},
		{"execute_context_0(0)_generation_1(1)|sk=2", true, artifact.IterationVLLM, "vllm", "", 0, 0, 1, 1},
		{"step[EXTEND bs=8 toks=4096]", true, artifact.IterationSGLang, "sglang", "", 8, 4096, -1, -1},
		{"step[DECODE bs=64]", true, artifact.IterationSGLang, "sglang", "", -1, -1, 64, -1},
		{"step[IDLE]", true, artifact.IterationSGLang, "sglang", "", -1, -1, -1, -1},
		{"inferprobe.iteration/engine-0/17", true, artifact.IterationInferprobe, "engine-0", "17", -1, -1, -1, -1},
		{"stormlog.iteration/my-loop/3", true, artifact.IterationStormlog, "my-loop", "3", -1, -1, -1, -1},
		{"execute_model", false, "", "", "", 0, 0, 0, 0},
		{"execute_context_x(1)_generation_1(1)", false, "", "", "", 0, 0, 0, 0},
		{"stormlog.iteration/a/b/c", false, "", "", "", 0, 0, 0, 0},
		{"step[decode bs=1]", false, "", "", "", 0, 0, 0, 0},
		{"ProfilerStep#3", false, "", "", "", 0, 0, 0, 0},
	}
	for _, c := range cases {
		sn, ok := parseStepName([]byte(c.in), false)
		if ok != c.ok {
			t.Errorf("%q: ok %v", c.in, ok)
			continue
		}
		if !ok {
			continue
		}
		if sn.source != c.source || sn.producer != c.prod || sn.id != c.id || sn.nc != c.nc || sn.nct != c.nct || sn.ng != c.ng || sn.ngt != c.ngt {
			t.Errorf("%q: %+v", c.in, sn)
		}
	}
	if sn, ok := parseStepName([]byte(`inferprobe.iteration/a\u002fb/1`), true); ok {
		t.Errorf("escaped slash splits the producer: %+v", sn)
	}
	if rankFromName("dp0_pp0_tp0_dcp0_ep0_rank3.1767.pt.trace.json.gz") != 3 || rankFromName("rank12.5.pt.trace.json") != 12 ||
		rankFromName("trace.json") != -1 || rankFromName("worker.async_llm.json") != -1 {
		t.Error("rank from name")
	}
}
