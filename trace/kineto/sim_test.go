package kineto

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/sim"
)

// TestSimGroundTruth imports the simulated engine's Kineto trace (per-stream GPU
// annotations, cudaGraphLaunch steps, NCCL, memcpy, two streams) and compares every step
// with the sim's ground truth, field by field: interval, counts, busy, idle and its
// per-stream split, memcpy and NCCL time, kernels, graph launches. The sim computes them
// on its own from the step layout it draws.
func TestSimGroundTruth(t *testing.T) {
	var trace, truth bytes.Buffer
	kt := sim.KinetoTrace{Rank: 1, WorldSize: 2, BaseNs: base0, Seed: 7}
	if err := kt.Write(&trace, sim.SyntheticSteps(400, base0+5_000_000, 3), &truth); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "rank1.1.pt.trace.json")
	if err := os.WriteFile(path, trace.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	im, err := importPath(t, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var want []sim.StepTruth
	sc := bufio.NewScanner(&truth)
	for sc.Scan() {
		var st sim.StepTruth
		if err := json.Unmarshal(sc.Bytes(), &st); err != nil {
			t.Fatal(err)
		}
		want = append(want, st)
	}
	if len(im.its) != len(want) || len(want) != 400 {
		t.Fatalf("%d steps imported, %d in the ground truth", len(im.its), len(want))
	}
	graphs := 0
	for i, w := range want {
		g := im.its[i]
		got := sim.StepTruth{Step: int(g.StepIndex), Rank: int(*g.Rank), StartNs: g.StartNS, EndNs: g.EndNS,
			ContextRequests: int(*g.ContextRequests), ContextTokens: int(*g.ContextTokens),
			GenerationRequests: int(*g.GenRequests), GenerationTokens: int(*g.GenTokens),
			GPUBusyNs: g.GPUBusyNS, Kernels: int(g.Kernels), MemcpyNs: g.MemcpyNS, NCCLNs: g.CommunicationNS,
			GraphLaunches: int(g.GraphLaunches), GPUIdleNs: g.IdleNS,
			HostWaitNs: g.IdleHostWaitNS, KernelWaitNs: g.IdleKernelWaitNS, OtherIdleNs: g.IdleOtherNS}
		if got != w {
			t.Fatalf("step %d:\n got %+v\nwant %+v", i, got, w)
		}
		graphs += w.GraphLaunches
	}
	if graphs == 0 || im.sum.Linked != im.sum.Activities {
		t.Fatalf("%d graph launches, %+v", graphs, im.sum)
	}
	for _, r := range im.refs {
		if r.AttributionStatus != artifact.AttributionLinked || r.CorrelationScope != "ac2g_flow" {
			t.Fatalf("ref %+v", *r)
		}
	}
}
