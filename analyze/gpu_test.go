package analyze

import (
	"strings"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/join"
)

func i64(v int64) *int64 { return &v }

// step is a rank-0 step from start to end (ms on the trace's clock, from 1 s), busy and
// idle ms (idle split host/kernel/other), requests and tokens (-1 = not counted).
func step(domain string, startMs, endMs, busyMs float64, host, kernel, other float64, ctxReq, ctxTok, genReq, genTok int64) artifact.Iteration {
	ms := func(v float64) int64 { return int64(v * 1e6) }
	s := artifact.Iteration{StartNS: 1e9 + ms(startMs), EndNS: 1e9 + ms(endMs), GPUBusyNS: ms(busyMs), Rank: i64(0),
		IdleNS: ms(host + kernel + other), IdleHostWaitNS: ms(host), IdleKernelWaitNS: ms(kernel), IdleOtherNS: ms(other)}
	s.Context.ClockDomain = domain
	for _, p := range []struct {
		dst **int64
		v   int64
	}{{&s.ContextRequests, ctxReq}, {&s.ContextTokens, ctxTok}, {&s.GenRequests, genReq}, {&s.GenTokens, genTok}} {
		if p.v >= 0 {
			*p.dst = i64(p.v)
		}
	}
	return s
}

func TestGPUBlock(t *testing.T) {
	const d = "h/b/unix_epoch_ns"
	g := gpuInput{client: d, rule: DefaultRule, steps: []artifact.Iteration{
		step(d, 100, 110, 8, 1, 0.5, 0.5, 2, 100, 0, 0),
		step(d, 200, 212, 9, 3, 0, 0, 0, 0, 4, 4),
		step(d, 300, 314, 10, 0, 0, 4, 1, 20, 3, 3),
		step(d, 1500, 1510, 9, 0, 0, 0, 1, 1, 1, 1), // after the window
	}}
	b := gpuOf(g, 1e9, 2e9, true)
	if b.Status != GPUObserved || b.Steps != 3 || len(b.Ranks) != 1 || b.Ranks[0] != 0 || *b.ClockSource != "same_host" {
		t.Fatalf("block %+v", b)
	}
	// covered 100 → 314 ms of a 1 s window; busy 27 of 214 ms; idle 9 ms: host 4, kernel 0.5, other 4.5.
	if !near(b.WindowSeconds, 1) || !near(b.CoveredSeconds, 0.214) || !near(b.TraceCoverage, 0.214) ||
		!near(b.BusyShare, 27.0/214) || !near(b.IdleHostWaitShare, 4.0/9) || !near(b.IdleKernelWaitShare, 0.5/9) || !near(b.IdleOtherShare, 4.5/9) {
		t.Fatalf("shares %+v", b)
	}
	if !near(b.StepTimeMs.P50.ValueMs, 12) || !near(b.BusyMs.P50.ValueMs, 9) || !near(b.IdleMs.P50.ValueMs, 3) ||
		b.StepTimeMs.P99.N != 3 || !near(b.TokensPerStep.P50, 23) || !near(b.TokensPerStep.Max, 100) {
		t.Fatalf("quantiles %+v %+v", b.StepTimeMs.P50, b.TokensPerStep)
	}
	if b.ContextSteps != 1 || b.GenerationSteps != 1 || b.MixedSteps != 1 {
		t.Fatalf("mix %d %d %d", b.ContextSteps, b.GenerationSteps, b.MixedSteps)
	}
	line := gpuLine(b)
	for _, want := range []string{"gpu: 3 steps on rank 0 over 21.4% of the window", "step p50 12.00 ms", "busy p50 9.00 ms (12.6% of the covered time)",
		"(host wait 44.4%)", "23 tokens/step p50", "1 context, 1 generation, 1 mixed steps; a step serves its whole batch"} {
		if !strings.Contains(line, want) {
			t.Errorf("line %q lacks %q", line, want)
		}
	}
}

func TestGPUBlockClock(t *testing.T) {
	const client, server = "c/b/unix_epoch_ns", "s/b/unix_epoch_ns"
	steps := []artifact.Iteration{step(server, -900, -890, 5, 0, 0, 0, -1, -1, -1, -1)} // server clock 1 s behind
	if b := gpuOf(gpuInput{client: client, runID: "r", steps: steps}, 1e9, 2e9, true); b.Status != GPUUnplaced || *b.Reason != join.ReasonClockAlignmentRequired ||
		!strings.Contains(gpuLine(b), "not placed on the client clock (clock_alignment_required)") {
		t.Fatalf("unaligned %+v", b)
	}
	al := artifact.ClockAlignment{FromClockDomain: server, ToClockDomain: client, OffsetNS: 1e9, UncertaintyNS: 1000}
	al.Context.RunID = "r"
	b := gpuOf(gpuInput{client: client, runID: "r", steps: steps, alignments: []artifact.ClockAlignment{al}, rule: DefaultRule}, 1e9, 2e9, true)
	if b.Status != GPUObserved || b.Steps != 1 || *b.ClockSource != "artifact_record" || b.TokensPerStep.P50 != nil || b.ContextSteps+b.GenerationSteps+b.MixedSteps != 0 {
		t.Fatalf("aligned %+v", b)
	}
	if b := gpuOf(gpuInput{client: client}, 1e9, 2e9, true); b.Status != GPUNotImported || gpuLine(b) != "" {
		t.Fatalf("none %+v", b)
	}
	if b := gpuOf(gpuInput{client: client, runID: "r", steps: steps, alignments: []artifact.ClockAlignment{al}}, 3e9, 4e9, true); b.Status != GPUNoSteps {
		t.Fatalf("outside %+v", b)
	}
}

func TestPlaceSteps(t *testing.T) {
	const c, s = "c/unix_epoch_ns", "s/unix_epoch_ns"
	mk := func(run string, off int64, from, to *int64) artifact.ClockAlignment {
		a := artifact.ClockAlignment{FromClockDomain: s, ToClockDomain: c, OffsetNS: off, ValidFromNS: from, ValidToNS: to}
		a.Context.RunID = run
		return a
	}
	cases := []struct {
		al     []artifact.ClockAlignment
		ok     bool
		off    int64
		reason string
	}{
		{nil, false, 0, join.ReasonClockAlignmentRequired},
		{[]artifact.ClockAlignment{mk("other", 5, nil, nil)}, false, 0, join.ReasonClockAlignmentOtherRun},
		{[]artifact.ClockAlignment{mk("r", 5, nil, nil)}, true, 5, ""},
		{[]artifact.ClockAlignment{mk("r", 5, nil, nil), mk("r", 6, nil, nil)}, false, 0, join.ReasonClockAlignmentAmbiguous},
		{[]artifact.ClockAlignment{mk("r", 5, i64(0), i64(100)), mk("r", 6, i64(100), i64(200))}, true, 6, ""},
		{[]artifact.ClockAlignment{mk("r", 5, i64(200), i64(100))}, false, 0, join.ReasonClockAlignmentRequired},
	}
	for i, k := range cases {
		got := join.PlaceSteps(s, c, "r", k.al, 150)
		if got.OK != k.ok || got.OffsetNS != k.off || got.Reason != k.reason {
			t.Errorf("case %d: %+v", i, got)
		}
	}
	if got := join.PlaceSteps("", c, "r", nil, 0); !got.OK || got.Source != "same_host" {
		t.Errorf("no domain: %+v", got)
	}
}
