package kineto

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
)

// fixtureTraces are the hand-made traces of testdata/ (see testdata/README.md), written by
// KINETO_WRITE_FIXTURES=1 go test -run TestFixtures.
func fixtureTraces() map[string]*traceBuilder {
	graph := newTrace()
	graph.rank = 1
	graph.step("execute_context_0(0)_generation_32(32)", 0, 2_000_000, 40_000, 480_000)
	graph.kernel("prepare_inputs", 7, 19, 10_000, 50_000, 100_000)
	graph.launch("cudaGraphLaunch", 20, 20, 160_000, 8_000)
	for _, k := range [][2]int64{{200_000, 100_000}, {300_000, 50_000}, {400_000, 50_000}, {460_000, 10_000}} {
		graph.gpu("kernel", "graph_kernel", 7, 20, 20, k[0], k[1])
	}
	sgl := newTrace()
	sgl.cpuRange("step[EXTEND bs=8 toks=4096]", 0, 500_000)
	sgl.kernel("extend_attention_fwd_kernel", 7, 1, 10_000, 100_000, 300_000)
	sgl.cpuRange("step[DECODE bs=64]", 600_000, 800_000)
	sgl.kernel("decode_attention_fwd_grouped_kernel_stage1", 7, 2, 610_000, 650_000, 40_000)
	sgl.kernel("decode_attention_fwd_grouped_kernel_stage2", 8, 3, 620_000, 660_000, 40_000)
	bare := newTrace()
	bare.kernel("ampere_bf16_s16816gemm", 7, 1, 10_000, 20_000, 5_000)
	bare.kernel("ampere_bf16_s16816gemm", 8, 2, 11_000, 21_000, 5_000)
	return map[string]*traceBuilder{
		"rank0.vllm-two-steps.pt.trace.json": twoSteps(),
		"rank1.vllm-graph.pt.trace.json.gz":  graph,
		"sglang-steps.pt.trace.json":         sgl,
		"unannotated.pt.trace.json":          bare,
	}
}

func TestFixtures(t *testing.T) {
	if os.Getenv("KINETO_WRITE_FIXTURES") == "1" {
		for name, b := range fixtureTraces() {
			data := b.bytes()
			if filepath.Ext(name) == ".gz" {
				var z bytes.Buffer
				zw := gzip.NewWriter(&z)
				zw.Write(data)
				zw.Close()
				data = z.Bytes()
			}
			if err := os.WriteFile(filepath.Join("testdata", name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	load := func(name string) imported {
		im, err := importPath(t, filepath.Join("testdata", name), Options{})
		if err != nil {
			t.Fatal(err)
		}
		return im
	}
	// The figures are worked out in twoSteps and TestGraphLaunch.
	two := load("rank0.vllm-two-steps.pt.trace.json")
	if len(two.its) != 2 || two.its[0].GPUBusyNS != 450_000 || two.its[0].IdleHostWaitNS != 120_000 || two.its[0].CommunicationNS != 80_000 {
		t.Errorf("two steps: %+v", two.its)
	}
	g := load("rank1.vllm-graph.pt.trace.json.gz")
	if len(g.its) != 1 || *g.its[0].Rank != 1 || g.its[0].GraphLaunches != 1 || g.its[0].GPUBusyNS != 310_000 || len(g.refs) != 2 {
		t.Errorf("graph: %+v %d refs", g.its, len(g.refs))
	}
	// SGLang: EXTEND [100, 400) µs = 300 µs busy; DECODE two streams [650, 690) and [660, 700)
	// = 50 µs busy, 80 µs summed.
	s := load("sglang-steps.pt.trace.json")
	if len(s.its) != 2 || *s.its[0].ContextRequests != 8 || *s.its[0].ContextTokens != 4096 || s.its[0].GPUBusyNS != 300_000 ||
		*s.its[1].GenRequests != 64 || s.its[1].GPUBusyNS != 50_000 || s.its[1].SummedDurationNS != 80_000 || s.its[1].IterationRef.ProducerID != "sglang" {
		t.Errorf("sglang: %+v %+v", *s.its[0], *s.its[1])
	}
	bare := load("unannotated.pt.trace.json")
	if len(bare.its) != 0 || len(bare.refs) != 2 || bare.sum.Unresolved[artifact.UnresolvedOutsideRange] != 2 {
		t.Errorf("unannotated: %+v", bare.sum)
	}
}
