// Package pareto finds the throughput–interactivity Pareto fronts of a set of runs
// (`inferprobe pareto`): every case of every run is a point of output tokens per second (per
// server, or per GPU when the GPU count is given) against interactivity — 1/TPOT (the p50
// TPOT's tokens per second for one user) and E2E normalized interactivity, 1 / p90 of each
// request's e2e ÷ output tokens, which a server cannot improve by trading TTFT for TPOT.
// A point is on a front when no other point has at least its throughput and its
// interactivity, one of them strictly more. SLO-meeting points are marked: a capacity
// search's probe that passed, or a case whose SLO attainment's lower bound reaches the
// policy's target. Cost and energy per output token ride along.
package pareto

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/run"
)

// SearchRecordFile is the capacity search's record in its directory (capacity.RecordFile).
const SearchRecordFile = "search.jsonl"

// DefaultAttainmentTarget is the SLO attainment a case must reach (its lower bound) to meet
// the SLO when the policy states no target.
const DefaultAttainmentTarget = 0.99

// Options configure a Pareto analysis. Inputs are artifacts, directories of artifacts (each
// .jsonl file its own run) or capacity search directories (holding search.jsonl: its
// probes' artifacts, values and decisions). GPUs, when set, divides throughput per GPU.
// Analysis holds the SLO policy and cost rate every run is analysed with.
type Options struct {
	Inputs           []string
	GPUs             *int
	Analysis         analyze.Options
	AttainmentTarget float64
}

// Point is one case of one run. Throughput is output tokens per second of the server;
// PerGPU the same divided by the GPU count. Interactivity is 1000 / TPOT p50 (tokens/s for
// one user), E2EInteractivity 1000 / p90 of e2e ÷ output tokens (tokens/s); either is null
// when the run has no such values. Value is the search's probed concurrency or rate (null
// for a plain run). SLOMet is null when nothing judged the point, with the reason.
type Point struct {
	Source               string   `json:"source"`
	CaseID               string   `json:"case_id"`
	Value                *float64 `json:"value"`
	Over                 string   `json:"over,omitempty"`
	Throughput           *float64 `json:"output_tokens_per_second"`
	PerGPU               *float64 `json:"output_tokens_per_second_per_gpu"`
	TPOTp50Ms            *float64 `json:"tpot_p50_ms"`
	Interactivity        *float64 `json:"interactivity"`
	E2EPerTokenP90Ms     *float64 `json:"e2e_per_output_token_p90_ms"`
	E2EInteractivity     *float64 `json:"e2e_normalized_interactivity"`
	SLOMet               *bool    `json:"slo_met"`
	SLOReason            string   `json:"slo_reason,omitempty"`
	OnFront              bool     `json:"on_front"`
	OnE2EFront           bool     `json:"on_e2e_front"`
	USDPerMillionOutput  *float64 `json:"usd_per_million_output_tokens"`
	JoulesPerOutputToken *float64 `json:"joules_per_output_token"`
}

// Result is the points in input order (cases in each run's case order), and whether the
// throughput is per GPU.
type Result struct {
	PerGPU   bool     `json:"per_gpu"`
	GPUs     *int     `json:"gpus"`
	Points   []Point  `json:"points"`
	Warnings []string `json:"warnings"`
}

// Run analyses every input and marks the fronts. Errors: no input, an input that is not an
// artifact, a directory without one, or a search record that cannot be read (wrapping
// artifact.ErrInvalidArtifact), an analysis's error, ctx's error.
func Run(ctx context.Context, o Options) (*Result, error) {
	if len(o.Inputs) == 0 {
		return nil, errors.New("pareto needs at least one run")
	}
	if o.GPUs != nil && *o.GPUs < 1 {
		return nil, fmt.Errorf("the GPU count must be at least 1, not %d", *o.GPUs)
	}
	if o.AttainmentTarget == 0 {
		o.AttainmentTarget = DefaultAttainmentTarget
	}
	res := &Result{PerGPU: o.GPUs != nil, GPUs: o.GPUs, Points: []Point{}, Warnings: []string{}}
	runs, err := expand(o.Inputs)
	if err != nil {
		return nil, err
	}
	for _, r := range runs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		pts, err := points(ctx, r, o)
		if err != nil {
			return nil, err
		}
		res.Points = append(res.Points, pts...)
	}
	mark(res.Points, func(p *Point) *float64 { return p.Interactivity }, func(p *Point, on bool) { p.OnFront = on }, o.GPUs != nil)
	mark(res.Points, func(p *Point) *float64 { return p.E2EInteractivity }, func(p *Point, on bool) { p.OnE2EFront = on }, o.GPUs != nil)
	return res, nil
}

// runRef is one run to analyse: its artifact, and for a search's probe its value, the
// search's dimension and the probe's decision.
type runRef struct {
	path     string
	value    *float64
	over     string
	decision string
}

// expand turns the inputs into runs: a file is a run; a directory with search.jsonl is a
// capacity search (its probes); any other directory holds one run per .jsonl file.
func expand(inputs []string) ([]runRef, error) {
	var out []runRef
	for _, in := range inputs {
		fi, err := os.Stat(in)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", artifact.ErrInvalidArtifact, err)
		}
		if !fi.IsDir() {
			out = append(out, runRef{path: in})
			continue
		}
		record := filepath.Join(in, SearchRecordFile)
		if _, err := os.Stat(record); err == nil {
			refs, err := searchRuns(in, record)
			if err != nil {
				return nil, err
			}
			out = append(out, refs...)
			continue
		}
		files, _ := filepath.Glob(filepath.Join(in, "*.jsonl"))
		sort.Strings(files)
		n := 0
		for _, f := range files {
			if st, err := os.Stat(f); err == nil && st.Mode().IsRegular() {
				out = append(out, runRef{path: f})
				n++
			}
		}
		if n == 0 {
			return nil, fmt.Errorf("%w: directory %s holds no .jsonl artifact", artifact.ErrInvalidArtifact, in)
		}
	}
	return out, nil
}

// searchRuns reads a search record: each probe's artifact (as recorded, or by its name in
// the directory when the recorded path does not exist), value and decision.
func searchRuns(dir, record string) ([]runRef, error) {
	data, err := os.ReadFile(record)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", artifact.ErrInvalidArtifact, err)
	}
	s, err := parseSearch(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", artifact.ErrInvalidArtifact, record, err)
	}
	var out []runRef
	for _, p := range s.Probes {
		path := p.Artifact
		if _, err := os.Stat(path); err != nil {
			path = filepath.Join(dir, filepath.Base(p.Artifact))
		}
		out = append(out, runRef{path: path, value: ptr(p.Value), over: s.Over, decision: p.Decision})
	}
	return out, nil
}

// parseSearch reads a search record file: its first line, an infer.search record with at
// least one probe, each naming an artifact.
func parseSearch(data []byte) (*artifact.Search, error) {
	line, _, _ := strings.Cut(strings.TrimSpace(string(data)), "\n")
	var s artifact.Search
	if err := json.Unmarshal([]byte(line), &s); err != nil {
		return nil, err
	}
	var kind artifact.Header
	if err := json.Unmarshal([]byte(line), &kind); err != nil || kind.RecordKind() != artifact.KindSearch {
		return nil, fmt.Errorf("not an %s record", artifact.KindSearch)
	}
	if len(s.Probes) == 0 {
		return nil, errors.New("the search records no probe")
	}
	for _, p := range s.Probes {
		if p.Artifact == "" {
			return nil, fmt.Errorf("probe %d names no artifact", p.Index)
		}
	}
	return &s, nil
}

// points analyses one run: a point per case.
func points(ctx context.Context, r runRef, o Options) ([]Point, error) {
	opts := o.Analysis
	e2e := map[string]*float64{}
	opts.Inspect = func(in *analyze.Input, _ *analyze.Report) {
		for id, requests := range in.Cases {
			var values []float64
			for i := range requests {
				q := &requests[i]
				if q.Status != analyze.StatusOK {
					continue
				}
				if v := q.Metric(artifact.MetricE2EPerOutputToken); v.OK && v.Ms > 0 && v.Ms-v.Ms == 0 {
					values = append(values, v.Ms)
				}
			}
			analyze.SortFloats(values)
			if v, ok := analyze.Quantile(values, 0.9); ok {
				e2e[id] = &v
			}
		}
	}
	rep, err := run.Analyze(ctx, r.path, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.path, err)
	}
	var out []Point
	for _, id := range rep.CaseOrder {
		c := rep.Cases[id]
		p := Point{Source: r.path, CaseID: id, Value: r.value, Over: r.over, Throughput: c.Throughput.OutputTokensPerSecond,
			JoulesPerOutputToken: c.Energy.JoulesPerOutputToken}
		if p.Throughput != nil && o.GPUs != nil {
			p.PerGPU = ptr(*p.Throughput / float64(*o.GPUs))
		}
		if m, ok := c.Latency.Metrics[artifact.MetricTPOT]; ok {
			if est := m.Successful["p50"]; est.ValueMs != nil && *est.ValueMs > 0 {
				p.TPOTp50Ms, p.Interactivity = est.ValueMs, ptr(1000 / *est.ValueMs)
			}
		}
		if v := e2e[id]; v != nil {
			p.E2EPerTokenP90Ms, p.E2EInteractivity = v, ptr(1000 / *v)
		}
		if c.Cost != nil {
			p.USDPerMillionOutput = c.Cost.USDPerMillionOutputTokens
		}
		p.SLOMet, p.SLOReason = sloMet(r, c, rep, o.AttainmentTarget)
		out = append(out, p)
	}
	return out, nil
}

// sloMet: a search probe's decision (pass meets, fail and unsustainable do not, undecided
// is unknown); else the case's attainment lower bound against the policy's target (or
// target); null without a policy.
func sloMet(r runRef, c *analyze.CaseReport, rep *analyze.Report, target float64) (*bool, string) {
	switch r.decision {
	case artifact.DecisionPass:
		return ptr(true), "search probe passed"
	case artifact.DecisionFail, artifact.DecisionUnsustainable:
		return ptr(false), "search probe " + r.decision
	case artifact.DecisionUndecided:
		return nil, "search probe undecided"
	}
	if c.SLO == nil || rep.SLO == nil {
		return nil, "no SLO policy"
	}
	if t, ok := rep.SLO.Policy["attainment_target"].(float64); ok && t > 0 {
		target = t
	}
	if c.SLO.AttainmentLower == nil {
		return nil, "attainment unknown"
	}
	met := *c.SLO.AttainmentLower >= target
	verb := "is below"
	if met {
		verb = "reaches"
	}
	return &met, fmt.Sprintf("attainment's lower bound %.4g %s the target %g", *c.SLO.AttainmentLower, verb, target)
}

// mark sets each point's front flag for one interactivity measure: a point with both values
// is on the front when no other point has at least its interactivity and its throughput
// (per GPU when perGPU) with one strictly more; equal points share the front.
func mark(pts []Point, x func(*Point) *float64, set func(*Point, bool), perGPU bool) {
	y := func(p *Point) *float64 {
		if perGPU {
			return p.PerGPU
		}
		return p.Throughput
	}
	var idx []int
	for i := range pts {
		set(&pts[i], false)
		if x(&pts[i]) != nil && y(&pts[i]) != nil {
			idx = append(idx, i)
		}
	}
	sort.SliceStable(idx, func(a, b int) bool {
		pa, pb := &pts[idx[a]], &pts[idx[b]]
		if *x(pa) != *x(pb) {
			return *x(pa) > *x(pb)
		}
		return *y(pa) > *y(pb)
	})
	best := -1.0
	var lastX, lastY float64
	for k, i := range idx {
		p := &pts[i]
		px, py := *x(p), *y(p)
		if k == 0 || py > best || (px == lastX && py == lastY) {
			if py > best || k == 0 {
				best = py
			}
			set(p, true)
			lastX, lastY = px, py
		}
	}
}

func ptr[T any](v T) *T { return &v }
