// Package export writes an analysed run in the formats other tools read: the JSON that
// `vllm bench serve --save-result` writes (WriteVLLMBench) and llm-d's Benchmark Report
// v0.2 (WriteLLMDReport), one per case. Both need per-request values that the report does
// not keep (means, standard deviations, every request's latency), so a Collector gathers
// them while the analysis holds the requests (analyze.Options.Inspect); the figures follow
// the report's definitions (analyze.Request.Metric) and its percentile rule
// (analyze.Quantile, which is numpy's default linear interpolation).
package export

import (
	"math"
	"sort"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/artifact"
)

// Collector gathers what the exports need from an analysis. Use Attach before the analysis
// runs, then the writers with its report.
type Collector struct {
	run   runInfo
	cases map[string]*caseData
}

// runInfo is what identifies the run: its model, tokenizer, producer version, ids, the
// session's start and end (Unix ns; 0 when unknown), the workload.
type runInfo struct {
	model, tokenizer, version, runID, sessionID string
	engine, engineVersion                       string
	startNS, endNS                              int64
	workload                                    *artifact.Workload
}

// caseData is one case's per-request values: every offered request's e2e latency and
// dispatch lag in seconds (0 for one without), and over the successful requests the client
// TTFT, TPOT, chunk gaps (pooled), e2e and e2e per output token in ms, prompt and output
// lengths, the busiest second's streamed chunks and the peak of requests in flight.
type caseData struct {
	latencies, queue               []float64
	ttft, tpot, itl, e2e, normTPOT []float64
	inputLens, outputLens          []float64
	completed, failed              int
	totalInput, totalOutput        int64
	maxChunksPerSecond             float64
	maxConcurrent                  int
}

// Attach sets opts.Inspect so that the analysis hands its input to the collector (any
// Inspect already set still runs first).
func (c *Collector) Attach(opts *analyze.Options) {
	prev := opts.Inspect
	opts.Inspect = func(in *analyze.Input, rep *analyze.Report) {
		if prev != nil {
			prev(in, rep)
		}
		c.inspect(in)
	}
}

func (c *Collector) inspect(in *analyze.Input) {
	a := in.Artifact
	c.cases = map[string]*caseData{}
	c.run.workload = a.Workload
	for i := range a.Sessions {
		if cfg := a.Sessions[i].Config; cfg != nil {
			c.run.model, c.run.tokenizer = cfg.Model, cfg.Tokenizer
			break
		}
	}
	if len(a.Sessions) > 0 {
		c.run.startNS, c.run.sessionID = a.Sessions[0].TimestampNS, a.Sessions[0].SessionID
	}
	if f := a.FinalSession(); f != nil {
		c.run.endNS = f.TimestampNS
	}
	if h := a.Header; h != nil {
		c.run.runID = h.Context.RunID
		if h.Context.SourceVersion != nil {
			c.run.version = *h.Context.SourceVersion
		}
		if h.Context.Engine != nil {
			c.run.engine = *h.Context.Engine
		}
		if h.Context.EngineVersion != nil {
			c.run.engineVersion = *h.Context.EngineVersion
		}
	}
	for id, requests := range in.Cases {
		c.cases[id] = caseDataOf(requests)
	}
}

func caseDataOf(requests []analyze.Request) *caseData {
	d := &caseData{}
	type span struct{ start, end float64 } // seconds
	var spans []span
	var chunkTimes []float64
	for i := range requests {
		r := &requests[i]
		lat, queue := 0.0, 0.0
		if r.DispatchLagMS != nil && finite(*r.DispatchLagMS) {
			queue = *r.DispatchLagMS / 1000
		}
		if r.Status != analyze.StatusOK {
			d.failed++
			d.latencies, d.queue = append(d.latencies, lat), append(d.queue, queue)
			continue
		}
		d.completed++
		if v := r.Metric(artifact.MetricE2E); v.OK && finite(v.Ms) {
			lat = v.Ms / 1000
			d.e2e = append(d.e2e, v.Ms)
		}
		d.latencies, d.queue = append(d.latencies, lat), append(d.queue, queue)
		add := func(dst *[]float64, key string) {
			if v := r.Metric(key); v.OK && finite(v.Ms) {
				*dst = append(*dst, v.Ms)
			}
		}
		add(&d.ttft, artifact.MetricTTFT)
		add(&d.tpot, artifact.MetricTPOT)
		add(&d.normTPOT, artifact.MetricE2EPerOutputToken)
		gaps := r.ChunkGapsMS()
		for _, g := range gaps {
			if finite(g) {
				d.itl = append(d.itl, g)
			}
		}
		if r.PromptTokens != nil {
			d.totalInput += *r.PromptTokens
			d.inputLens = append(d.inputLens, float64(*r.PromptTokens))
		}
		if r.OutputTokens != nil {
			d.totalOutput += *r.OutputTokens
			d.outputLens = append(d.outputLens, float64(*r.OutputTokens))
		}
		if r.StartedAtNS != nil && lat > 0 {
			start := float64(*r.StartedAtNS) / 1e9
			spans = append(spans, span{start, start + lat})
			if r.TTFTMS != nil {
				t := start + *r.TTFTMS/1000
				chunkTimes = append(chunkTimes, t)
				for _, g := range gaps {
					t += g / 1000
					chunkTimes = append(chunkTimes, t)
				}
			}
		}
	}
	if len(spans) > 0 {
		first := math.Inf(1)
		type event struct {
			at    float64
			delta int
		}
		events := make([]event, 0, 2*len(spans))
		for _, s := range spans {
			first = math.Min(first, s.start)
			events = append(events, event{s.start, 1}, event{s.end, -1})
		}
		// half-open [start, end): an end sorts before a start at the same time
		sort.Slice(events, func(i, j int) bool {
			if events[i].at != events[j].at {
				return events[i].at < events[j].at
			}
			return events[i].delta < events[j].delta
		})
		cur := 0
		for _, e := range events {
			cur += e.delta
			d.maxConcurrent = max(d.maxConcurrent, cur)
		}
		buckets := map[int64]float64{}
		for _, t := range chunkTimes {
			if t >= first {
				b := int64(t - first)
				buckets[b]++
				d.maxChunksPerSecond = math.Max(d.maxChunksPerSecond, buckets[b])
			}
		}
	}
	for _, v := range [][]float64{d.ttft, d.tpot, d.itl, d.e2e, d.normTPOT, d.inputLens, d.outputLens} {
		analyze.SortFloats(v)
	}
	return d
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// stats is a sample's mean, population standard deviation (numpy's default, ddof 0), and
// percentile function over its sorted values; all 0 for an empty sample (vLLM's `np.mean(x
// or 0)`).
type stats struct {
	sorted    []float64
	mean, std float64
}

func statsOf(sorted []float64) stats {
	s := stats{sorted: sorted}
	if len(sorted) == 0 {
		return s
	}
	sum := 0.0
	for _, v := range sorted {
		sum += v
	}
	s.mean = sum / float64(len(sorted))
	ss := 0.0
	for _, v := range sorted {
		ss += (v - s.mean) * (v - s.mean)
	}
	s.std = math.Sqrt(ss / float64(len(sorted)))
	return s
}

// q is the p-quantile (analyze.Quantile; numpy's linear rule), 0 for an empty sample.
func (s stats) q(p float64) float64 {
	v, ok := analyze.Quantile(s.sorted, p)
	if !ok {
		return 0
	}
	return v
}
