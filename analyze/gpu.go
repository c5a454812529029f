package analyze

import (
	"fmt"
	"sort"
	"strings"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/join"
)

// GPU statuses.
const (
	// GPUNotImported: the artifact holds no imported engine steps (infer.iteration).
	GPUNotImported = "not_imported"
	// GPUUnplaced: the steps' server clock could not be placed on the client's (Reason).
	GPUUnplaced = "unplaced"
	// GPUNoSteps: steps were imported, none in this case's measured span.
	GPUNoSteps = "no_steps_in_window"
	// GPUObserved: the case's window holds imported steps.
	GPUObserved = "observed"
)

// GPUQuantiles are the p50, p90 and p99 of a per-step figure (ms), each with its
// order-statistic interval under the report's rule.
type GPUQuantiles struct {
	P50 Estimate `json:"p50"`
	P90 Estimate `json:"p90"`
	P99 Estimate `json:"p99"`
}

// GPU is a case's gpu block (the quantiles null unless Status is observed): what the GPU did during the case's measured span (phase start →
// drained), from the engine steps imported from profiler traces (infer.iteration). A step
// belongs to the case when its host start, placed on the client clock (join.PlaceSteps),
// lies in the span. A step serves every request of its batch: nothing here is attributed to
// one request.
//
//   - StepTimeMs: host wall time of a step (end − start); BusyMs: its GPU busy time (the
//     union of its kernel, memcpy and memset intervals over all streams); IdleMs: idle
//     inside its kernel span.
//   - CoveredSeconds: per rank, from its first step's start to its last step's end within
//     the span, the longest over ranks; TraceCoverage = CoveredSeconds / WindowSeconds.
//   - BusyShare: Σ busy / Σ over ranks of each rank's covered seconds.
//   - IdleHostWaitShare, IdleKernelWaitShare, IdleOtherShare: shares of the summed idle
//     time (null without idle).
//   - TokensPerStep: context + generation tokens of the steps whose annotation counts
//     them; ContextSteps / GenerationSteps / MixedSteps count steps with only context
//     (prefill) requests, only generation (decode) requests, or both.
type GPU struct {
	Status              string        `json:"status"`
	Reason              *string       `json:"reason"`
	ClockSource         *string       `json:"clock_source"`
	Steps               int           `json:"steps"`
	Ranks               []int64       `json:"ranks"`
	WindowSeconds       *float64      `json:"window_seconds"`
	CoveredSeconds      *float64      `json:"covered_seconds"`
	TraceCoverage       *float64      `json:"trace_coverage"`
	StepTimeMs          *GPUQuantiles `json:"step_time_ms"`
	BusyMs              *GPUQuantiles `json:"busy_ms"`
	IdleMs              *GPUQuantiles `json:"idle_ms"`
	BusyShare           *float64      `json:"busy_share"`
	IdleHostWaitShare   *float64      `json:"idle_host_wait_share"`
	IdleKernelWaitShare *float64      `json:"idle_kernel_wait_share"`
	IdleOtherShare      *float64      `json:"idle_other_share"`
	TokensPerStep       Spread4       `json:"tokens_per_step"`
	ContextSteps        int           `json:"context_steps"`
	GenerationSteps     int           `json:"generation_steps"`
	MixedSteps          int           `json:"mixed_steps"`
}

// gpuInput is what every case's gpu block is computed from.
type gpuInput struct {
	steps      []artifact.Iteration
	client     string
	runID      string
	alignments []artifact.ClockAlignment
	rule       Rule
}

func gpuInputOf(a *artifact.Artifact, rule Rule) gpuInput {
	g := gpuInput{steps: a.Iterations, client: join.ClientDomain(a.Header), alignments: a.ClockAlignments, rule: rule}
	if a.Header != nil {
		g.runID = a.Header.Context.RunID
	}
	return g
}

// gpuOf computes a case's gpu block over its measured span [lo, hi) (Unix ns, client
// clock; known false without one).
func gpuOf(g gpuInput, lo, hi int64, known bool) GPU {
	out := GPU{Status: GPUNotImported, Ranks: []int64{}}
	if len(g.steps) == 0 {
		return out
	}
	if !known || hi <= lo {
		out.Status, out.Reason = GPUNoSteps, strPtr("the case has no measured span")
		return out
	}
	out.WindowSeconds = f64Ptr(float64(hi-lo) / 1e9)
	in, clk := g.inWindow(lo, hi)
	if !clk.OK {
		out.Status, out.Reason = GPUUnplaced, strPtr(clk.Reason)
		return out
	}
	out.ClockSource = strPtr(clk.Source)
	if len(in) == 0 {
		out.Status = GPUNoSteps
		return out
	}
	out.Status, out.Steps = GPUObserved, len(in)
	out.figures(in, clk.OffsetNS, lo, hi, g.rule)
	return out
}

// inWindow returns the steps whose placed start lies in [lo, hi), and the clock used (the
// first step's domain: an import writes one per file, and a second domain that cannot be
// placed makes the block unplaced).
func (g gpuInput) inWindow(lo, hi int64) ([]*artifact.Iteration, join.StepClock) {
	clocks := map[string]join.StepClock{}
	var in []*artifact.Iteration
	var first join.StepClock
	for i := range g.steps {
		s := &g.steps[i]
		d := s.Context.ClockDomain
		clk, ok := clocks[d]
		if !ok {
			clk = join.PlaceSteps(d, g.client, g.runID, g.alignments, s.StartNS)
			clocks[d] = clk
		}
		if !clk.OK {
			return nil, clk
		}
		if len(clocks) == 1 {
			first = clk
		}
		if t := s.StartNS + clk.OffsetNS; t >= lo && t < hi {
			in = append(in, s)
		}
	}
	return in, first
}

// figures fills the per-step figures of the steps in the window.
func (out *GPU) figures(in []*artifact.Iteration, offset, lo, hi int64, rule Rule) {
	var wall, busy, idle, tokens []float64
	var busySum, hostWait, kernelWait, other int64
	type span struct{ first, last int64 }
	ranks := map[int64]*span{}
	for _, s := range in {
		wall = append(wall, float64(s.EndNS-s.StartNS)/1e6)
		busy = append(busy, float64(s.GPUBusyNS)/1e6)
		idle = append(idle, float64(s.IdleNS)/1e6)
		busySum += s.GPUBusyNS
		hostWait, kernelWait, other = hostWait+s.IdleHostWaitNS, kernelWait+s.IdleKernelWaitNS, other+s.IdleOtherNS
		if n, ok := stepTokens(s); ok {
			tokens = append(tokens, n)
		}
		out.countMix(s)
		rank := int64(-1)
		if s.Rank != nil {
			rank = *s.Rank
		}
		start, end := max(s.StartNS+offset, lo), min(s.EndNS+offset, hi)
		if sp := ranks[rank]; sp == nil {
			ranks[rank] = &span{start, end}
		} else {
			sp.first, sp.last = min(sp.first, start), max(sp.last, end)
		}
	}
	var covered, longest int64
	for r, sp := range ranks {
		if r >= 0 {
			out.Ranks = append(out.Ranks, r)
		}
		covered += max(sp.last-sp.first, 0)
		longest = max(longest, sp.last-sp.first)
	}
	sort.Slice(out.Ranks, func(i, j int) bool { return out.Ranks[i] < out.Ranks[j] })
	out.CoveredSeconds = f64Ptr(float64(longest) / 1e9)
	out.TraceCoverage = f64Ptr(float64(longest) / float64(hi-lo))
	if covered > 0 {
		out.BusyShare = f64Ptr(float64(busySum) / float64(covered))
	}
	if sum := hostWait + kernelWait + other; sum > 0 {
		out.IdleHostWaitShare = f64Ptr(float64(hostWait) / float64(sum))
		out.IdleKernelWaitShare = f64Ptr(float64(kernelWait) / float64(sum))
		out.IdleOtherShare = f64Ptr(float64(other) / float64(sum))
	}
	out.StepTimeMs, out.BusyMs, out.IdleMs = gpuQuantiles(wall, rule), gpuQuantiles(busy, rule), gpuQuantiles(idle, rule)
	out.TokensPerStep = spread4(tokens)
}

// countMix counts the step as context-only, generation-only or mixed (steps whose
// annotation counts no requests are none of them).
func (out *GPU) countMix(s *artifact.Iteration) {
	ctx := s.ContextRequests != nil && *s.ContextRequests > 0
	gen := s.GenRequests != nil && *s.GenRequests > 0
	switch {
	case ctx && gen:
		out.MixedSteps++
	case ctx:
		out.ContextSteps++
	case gen:
		out.GenerationSteps++
	}
}

// stepTokens is a step's context + generation tokens; false when its annotation counts
// neither.
func stepTokens(s *artifact.Iteration) (float64, bool) {
	if s.ContextTokens == nil && s.GenTokens == nil {
		return 0, false
	}
	var n int64
	if s.ContextTokens != nil {
		n += *s.ContextTokens
	}
	if s.GenTokens != nil {
		n += *s.GenTokens
	}
	return float64(n), true
}

func gpuQuantiles(values []float64, rule Rule) *GPUQuantiles {
	sort.Float64s(values)
	return &GPUQuantiles{P50: EstimateSuccessful(values, 0.50, rule), P90: EstimateSuccessful(values, 0.90, rule), P99: EstimateSuccessful(values, 0.99, rule)}
}

// gpuLine renders the block (nothing when no steps were imported), e.g.
//
//	gpu: 412 steps on rank 0 over 97.0% of the window; step p50 9.10 ms, p99 14.20 ms; busy p50 7.90 ms (87.0% of the covered time), idle p50 1.10 ms (host wait 40.0%); 33 tokens/step p50; 4 context, 380 generation, 28 mixed steps; a step serves its whole batch
func gpuLine(g GPU) string {
	switch g.Status {
	case GPUNotImported:
		return ""
	case GPUUnplaced:
		return "  gpu: imported steps not placed on the client clock (" + strOr(g.Reason) + ")"
	case GPUNoSteps:
		line := "  gpu: no imported step in the case's window"
		if g.Reason != nil {
			line += " (" + *g.Reason + ")"
		}
		return line
	}
	ranks := make([]string, len(g.Ranks))
	for i, r := range g.Ranks {
		ranks[i] = fmt.Sprint(r)
	}
	rankText := "rank " + strings.Join(ranks, ",")
	if len(ranks) == 0 {
		rankText = "an unnamed rank"
	}
	line := fmt.Sprintf("  gpu: %d steps on %s over %s of the window; step p50 %s ms, p99 %s ms; busy p50 %s ms (%s of the covered time), idle p50 %s ms",
		g.Steps, rankText, pct(g.TraceCoverage), num(g.StepTimeMs.P50.ValueMs), num(g.StepTimeMs.P99.ValueMs),
		num(g.BusyMs.P50.ValueMs), pct(g.BusyShare), num(g.IdleMs.P50.ValueMs))
	if g.IdleHostWaitShare != nil {
		line += fmt.Sprintf(" (host wait %s)", pct(g.IdleHostWaitShare))
	}
	if g.TokensPerStep.P50 != nil {
		line += fmt.Sprintf("; %.4g tokens/step p50", *g.TokensPerStep.P50)
	}
	return line + fmt.Sprintf("; %d context, %d generation, %d mixed steps; a step serves its whole batch", g.ContextSteps, g.GenerationSteps, g.MixedSteps)
}

func strOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// caseGPU is the gpu block of a computed case: over its measured span.
func caseGPU(g gpuInput, c *CaseReport) GPU {
	if ms := c.Intervals.MeasuredSpan; ms != nil {
		return gpuOf(g, ms.StartedAtNs, ms.EndedAtNs, true)
	}
	return gpuOf(g, 0, 0, false)
}
