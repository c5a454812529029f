package run

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/internal/testkit"
	"github.com/inferprobe/inferprobe/sim"
	"github.com/inferprobe/inferprobe/trace"
)

// TestPipelineTraceWindows: with Spec.Trace each case's measured phase gets one window,
// started after the phase's warmup and stopped at its end; the records reach the sinks and
// the artifact, each listing the trace the sim wrote during it.
func TestPipelineTraceWindows(t *testing.T) {
	dir := t.TempDir()
	srv := testkit.StartSim(t, func(c *sim.Config) { c.Seed = 3; c.ProfilerDir = dir })
	cfg := workload(t, srv)
	cfg.Concurrency = []int{1, 2}
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	base, err := trace.ControlBase(cfg.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	mem := &artifact.Memory{}
	out := filepath.Join(t.TempDir(), "a.jsonl")
	res := New(Spec{Workload: cfg, Tokenizer: tokenizer(t), TokenizerName: "auto", Output: out, Version: "test", Sinks: []artifact.Sink{mem},
		Trace: &trace.Options{ControlBase: base, Phase: "measured", Dir: dir, Settle: 50 * time.Millisecond, Poll: 5 * time.Millisecond}}).Execute(context.Background())
	if res.Err != nil || res.Status != artifact.StatusCompleted {
		t.Fatalf("result %+v", res)
	}
	var ws []*artifact.TraceWindow
	lastMeasured, firstMeasured := map[string]int64{}, map[string]int64{}
	for _, r := range mem.Records() {
		switch v := r.(type) {
		case *artifact.TraceWindow:
			ws = append(ws, v)
		case *artifact.Request:
			if v.Phase == "measured" && v.EndedAtNS != nil && v.StartedAtNS != nil {
				lastMeasured[v.CaseID] = max(lastMeasured[v.CaseID], *v.EndedAtNS)
				if f, ok := firstMeasured[v.CaseID]; !ok || *v.StartedAtNS < f {
					firstMeasured[v.CaseID] = *v.StartedAtNS
				}
			}
		}
	}
	if len(ws) != 2 || ws[0].CaseID != "c1_in32_out8" || ws[1].CaseID != "c2_in32_out8" {
		t.Fatalf("windows %+v", ws)
	}
	for _, w := range ws {
		if w.StartOutcome != artifact.StartAcknowledged || w.StopReason != artifact.StopPhaseEnd || w.SessionID != res.SessionID || w.RunID != "run-test-1" ||
			w.ControlURL != srv.URL()+"/start_profile" || len(w.TraceFiles) != 1 || !strings.HasPrefix(filepath.Base(w.TraceFiles[0].Path), "rank0.") {
			t.Fatalf("window %+v", w)
		}
		if *w.StopRequestedAtNS < lastMeasured[w.CaseID] || w.StartReturnedAtNS > firstMeasured[w.CaseID] || firstMeasured[w.CaseID] == 0 {
			t.Fatalf("the window of %s [%d, %d] does not cover its measured requests [%d, %d]", w.CaseID,
				w.StartReturnedAtNS, *w.StopRequestedAtNS, firstMeasured[w.CaseID], lastMeasured[w.CaseID])
		}
	}
	if ws[0].TraceFiles[0].Path == ws[1].TraceFiles[0].Path {
		t.Fatal("the second window took the first window's trace")
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), `"event_type":"infer.trace_window"`); n != 2 {
		t.Fatalf("the artifact has %d trace windows", n)
	}
}

// TestPipelineTraceWindowCancelled: a run cancelled during the profiled phase still stops
// its window once (stop_reason cancelled) and records it.
func TestPipelineTraceWindowCancelled(t *testing.T) {
	dir := t.TempDir()
	srv := testkit.StartSim(t, func(c *sim.Config) { c.ProfilerDir = dir; c.DecodeStepBase = 20 * time.Millisecond })
	cfg := workload(t, srv)
	base, _ := trace.ControlBase(cfg.Endpoint)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sinks := []artifact.Sink{artifact.SinkFunc(func(rec artifact.Record) error {
		if r, ok := rec.(*artifact.Request); ok && r.Phase == "measured" {
			cancel()
		}
		return nil
	})}
	mem := &artifact.Memory{}
	res := New(Spec{Workload: cfg, Tokenizer: tokenizer(t), TokenizerName: "auto", Output: filepath.Join(t.TempDir(), "a.jsonl"), Version: "test",
		Sinks: append(sinks, mem), Trace: &trace.Options{ControlBase: base, Phase: "measured", Dir: dir, Settle: 50 * time.Millisecond, Poll: 5 * time.Millisecond}}).Execute(ctx)
	if !res.Interrupted {
		t.Fatalf("result %+v", res)
	}
	var ws []*artifact.TraceWindow
	for _, r := range mem.Records() {
		if w, ok := r.(*artifact.TraceWindow); ok {
			ws = append(ws, w)
		}
	}
	if len(ws) != 1 || ws[0].StopReason != artifact.StopCancelled || ws[0].StopStatus == nil || *ws[0].StopStatus != 200 {
		t.Fatalf("windows %+v", ws)
	}
}

// TestPipelineBadTraceSendsNothing: a bad Spec.Trace fails the run before anything is sent.
func TestPipelineBadTraceSendsNothing(t *testing.T) {
	srv := testkit.StartSim(t, nil)
	cfg := workload(t, srv)
	res := New(Spec{Workload: cfg, Tokenizer: tokenizer(t), Output: filepath.Join(t.TempDir(), "a.jsonl"),
		Trace: &trace.Options{ControlBase: "not a url", Phase: "measured"}}).Execute(context.Background())
	if res.Status != artifact.RunFailed || res.Err == nil || len(res.Stats) != 0 {
		t.Fatalf("result %+v", res)
	}
}
