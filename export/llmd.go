package export

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/join"
)

// LLMDReportVersion is the Benchmark Report schema version WriteLLMDReport writes.
const LLMDReportVersion = "0.2"

// brStatistics is Benchmark Report v0.2's Statistics: units, mean, stddev, min, the
// percentiles p0p1 … p99p9 and max.
type brStatistics struct {
	Units  string   `json:"units"`
	Mean   float64  `json:"mean"`
	Stddev *float64 `json:"stddev,omitempty"`
	Min    *float64 `json:"min,omitempty"`
	P0p1   *float64 `json:"p0p1,omitempty"`
	P1     *float64 `json:"p1,omitempty"`
	P5     *float64 `json:"p5,omitempty"`
	P10    *float64 `json:"p10,omitempty"`
	P25    *float64 `json:"p25,omitempty"`
	P50    *float64 `json:"p50,omitempty"`
	P75    *float64 `json:"p75,omitempty"`
	P90    *float64 `json:"p90,omitempty"`
	P95    *float64 `json:"p95,omitempty"`
	P99    *float64 `json:"p99,omitempty"`
	P99p9  *float64 `json:"p99p9,omitempty"`
	Max    *float64 `json:"max,omitempty"`
}

// distribution is the full Statistics of a sorted sample (nil when empty).
func distribution(units string, sorted []float64) *brStatistics {
	if len(sorted) == 0 {
		return nil
	}
	s := statsOf(sorted)
	q := func(p float64) *float64 { v := s.q(p); return &v }
	return &brStatistics{Units: units, Mean: s.mean, Stddev: &s.std, Min: &sorted[0], P0p1: q(0.001), P1: q(0.01), P5: q(0.05),
		P10: q(0.1), P25: q(0.25), P50: q(0.5), P75: q(0.75), P90: q(0.9), P95: q(0.95), P99: q(0.99), P99p9: q(0.999),
		Max: &sorted[len(sorted)-1]}
}

// rate is a Statistics of one measured rate (its mean only); nil when unknown.
func rate(units string, v *float64) *brStatistics {
	if v == nil {
		return nil
	}
	return &brStatistics{Units: units, Mean: *v}
}

// WriteLLMDReport writes, per case in the report's case order, one llm-d Benchmark Report
// v0.2 (one JSON object per line; each validates against the schema): run (uid: session and
// case; eid: the run id, shared by the cases; the session's start, end and ISO-8601
// duration), scenario (the server as a generic stack component named "server" with its
// engine when the artifact names one; the load: tool "inferprobe", its version, source
// random (generated prompts), the case's index as stage, the target input and output
// lengths as fixed, the open loop's rate_qps or the closed loop's concurrency; the session
// configuration as native config), and results: request counts (failures: the offered
// requests that did not succeed), prompt and output length distributions (count), TTFT and
// request latency (ms), TPOT, e2e per output token (normalized_time_per_output_token) and
// chunk gaps (inter_token_latency) in ms/token, the report's rates (tokens/s, queries/s),
// and — when the energy is observed — the server's mean GPU power (Watts) under
// observability. Percentiles follow analyze.Quantile.
func WriteLLMDReport(w io.Writer, c *Collector, rep *analyze.Report, toolVersion string) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for stage, id := range rep.CaseOrder {
		d, cr := c.cases[id], rep.Cases[id]
		if d == nil || cr == nil {
			continue
		}
		if err := enc.Encode(c.llmdReport(stage, id, d, cr, rep, toolVersion)); err != nil {
			return fmt.Errorf("export: llmd-report: %w", err)
		}
	}
	return nil
}

func (c *Collector) llmdReport(stage int, id string, d *caseData, cr *analyze.CaseReport, rep *analyze.Report, toolVersion string) map[string]any {
	runTime := map[string]any{}
	if c.run.startNS > 0 {
		runTime["start"] = time.Unix(0, c.run.startNS).UTC().Format(time.RFC3339Nano)
	}
	if c.run.endNS > 0 {
		runTime["end"] = time.Unix(0, c.run.endNS).UTC().Format(time.RFC3339Nano)
		if c.run.startNS > 0 && c.run.endNS >= c.run.startNS {
			runTime["duration"] = "PT" + strconv.FormatFloat(float64(c.run.endNS-c.run.startNS)/1e9, 'f', -1, 64) + "S"
		}
	}
	run := map[string]any{"uid": c.run.sessionID + "/" + id, "description": "inferprobe case " + id, "keywords": []string{"inferprobe", id}}
	if c.run.runID != "" {
		run["eid"] = c.run.runID
	}
	if len(runTime) > 0 {
		run["time"] = runTime
	}
	if toolVersion == "" {
		toolVersion = c.run.version
	}
	if toolVersion == "" {
		toolVersion = "unknown"
	}
	standardized := map[string]any{"tool": "inferprobe", "tool_version": toolVersion, "source": "random", "stage": stage}
	digest := ""
	if w := c.run.workload; w != nil {
		digest = w.WorkloadDigest
		for _, wc := range w.Cases {
			if wc.CaseID != id {
				continue
			}
			standardized["input_seq_len"] = map[string]any{"distribution": "fixed", "value": wc.InputTokens}
			standardized["output_seq_len"] = map[string]any{"distribution": "fixed", "value": wc.OutputTokens}
			if wc.Arrival.RatePerSecond != nil {
				standardized["rate_qps"] = *wc.Arrival.RatePerSecond
			}
			if wc.Concurrency != nil {
				standardized["concurrency"] = *wc.Concurrency
			}
		}
	}
	if _, ok := standardized["input_seq_len"]; !ok {
		mean := 0.0
		if len(d.inputLens) > 0 {
			mean = statsOf(d.inputLens).mean
		}
		standardized["input_seq_len"] = map[string]any{"distribution": "other", "value": mean}
	}
	engine, engineVersion := c.run.engine, c.run.engineVersion
	if engine == "" {
		engine = "unknown"
	}
	if engineVersion == "" {
		engineVersion = "unknown"
	}
	stack := []any{map[string]any{
		"metadata":     map[string]any{"schema_version": "0.0.1", "label": "server", "cfg_id": c.run.model},
		"standardized": map[string]any{"kind": "generic", "tool": engine, "tool_version": engineVersion, "model": c.run.model},
		"native":       map[string]any{},
	}}
	latency := map[string]any{}
	put := func(m map[string]any, k string, s *brStatistics) {
		if s != nil {
			m[k] = s
		}
	}
	put(latency, "time_to_first_token", distribution("ms", d.ttft))
	put(latency, "time_per_output_token", distribution("ms/token", d.tpot))
	put(latency, "normalized_time_per_output_token", distribution("ms/token", d.normTPOT))
	put(latency, "inter_token_latency", distribution("ms/token", d.itl))
	put(latency, "request_latency", distribution("ms", d.e2e))
	throughput := map[string]any{}
	tp := cr.Throughput
	var input *float64
	if tp.TotalTokensPerSecond != nil && tp.OutputTokensPerSecond != nil {
		v := *tp.TotalTokensPerSecond - *tp.OutputTokensPerSecond
		input = &v
	}
	put(throughput, "input_token_rate", rate("tokens/s", input))
	put(throughput, "output_token_rate", rate("tokens/s", tp.OutputTokensPerSecond))
	put(throughput, "total_token_rate", rate("tokens/s", tp.TotalTokensPerSecond))
	put(throughput, "request_rate", rate("queries/s", tp.RequestsPerSecond))
	requests := map[string]any{"total": cr.Population.Offered, "failures": cr.Population.Offered - cr.Population.Successful}
	put(requests, "input_length", distribution("count", d.inputLens))
	put(requests, "output_length", distribution("count", d.outputLens))
	results := map[string]any{"request_performance": map[string]any{"aggregate": map[string]any{
		"requests": requests, "latency": latency, "throughput": throughput}}}
	if e := cr.Energy; e.Status == join.EnergyObserved && e.MeanPowerW != nil {
		results["observability"] = map[string]any{"components": []any{map[string]any{
			"component_label": "server",
			"aggregate":       map[string]any{"power_consumption": rate("Watts", e.MeanPowerW)},
		}}}
	}
	native := map[string]any{}
	if c.run.workload != nil {
		native["config"] = c.run.workload
	}
	return map[string]any{
		"version": LLMDReportVersion,
		"run":     run,
		"scenario": map[string]any{
			"stack": stack,
			"load": map[string]any{
				"metadata":     map[string]any{"schema_version": "0.0.1", "cfg_id": digest},
				"standardized": standardized,
				"native":       native,
			},
		},
		"results": results,
	}
}
