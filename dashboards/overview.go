package dashboards

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
)

// overview: is the service meeting its SLO, and is the probe itself healthy? Five rows, in
// this order (panel ids follow it): SLO, latency, requests, probes, capacity.
func overview() *dashboard.DashboardBuilder {
	bd := newBoard(UIDOverview, "inferprobe / Overview",
		"Goodput and SLO attainment of inferprobe's probes, client-side latency (TTFT, e2e, TPOT), request outcomes and the load generator's own health. Shaded regions: probe runs.")
	overviewSLO(bd)
	overviewLatency(bd)
	overviewRequests(bd)
	overviewProbes(bd)
	overviewCapacity(bd)
	return bd.b
}

// overviewSLO is the SLO row: goodput, attainment against the objective and the error
// budget burn rate over time, and stats of the last run and of the probe's liveness.
func overviewSLO(bd *board) {
	bd.row("SLO")
	bd.add(ts(bd, "Goodput (last run)",
		"Requests per second that met every criterion of the SLO in the last finished run, with the lower and upper bound of its interval (inferprobe_goodput_requests_per_second).",
		"reqps", third,
		query("A", `inferprobe_goodput_requests_per_second{`+sel+`}`, "{{probe}} {{case}} {{slo}} {{bound}}")).
		Min(0).LineInterpolation(common.LineInterpolationStepAfter))
	bd.add(ts(bd, "SLO attainment vs objective (last run)",
		"Share of the last run's judged requests that met the SLO (lower/upper bound of the interval) against the objective (attainment target) from the policy or probe.",
		"percentunit", third,
		query("A", `inferprobe_slo_attainment_ratio{`+sel+`}`, "{{probe}} {{case}} {{slo}} {{bound}}"),
		query("B", `max by (target, model, probe, slo) (inferprobe_slo_objective_ratio{`+sel+`})`, "objective {{probe}} {{slo}}")).
		Max(1).LineInterpolation(common.LineInterpolationStepAfter))
	bd.add(ts(bd, "Error budget burn rate",
		"SLO error ratio (missed / (met + missed); unknown excluded) divided by the error budget (1 − objective), over 1h and 6h. 1 spends the budget exactly over the SLO period; the page alert needs 14.4 (5m & 1h) or 6 (30m & 6h). Needs the recording rules in inferprobe-slo.rules.yml.",
		"none", third,
		query("A", `inferprobe:slo_error_ratio:rate1h{`+sel+`} / on (target, model, probe, slo) group_left () inferprobe:slo_error_budget:ratio`, "1h {{probe}} {{slo}}"),
		query("B", `inferprobe:slo_error_ratio:rate6h{`+sel+`} / on (target, model, probe, slo) group_left () inferprobe:slo_error_budget:ratio`, "6h {{probe}} {{slo}}")).
		Min(0))
	bd.add(st(bd, "Attainment, lower bound (last run)",
		"Worst case of the last run: the lowest lower bound of attainment across cases, per probe and SLO.",
		"percentunit", quarter,
		query("A", `min by (probe, slo) (inferprobe_slo_attainment_ratio{`+sel+`, bound="lower"})`, "{{probe}} {{slo}}")).
		Thresholds(steps("red", step{0.95, "orange"}, step{0.99, "green"})).
		Decimals(2))
	bd.add(st(bd, "Schedule met (last run)",
		"1 when the last finished open-loop run dispatched every scheduled arrival (none dropped) with p99 dispatch lag ≤ 1 ms; for closed loops, 1 without drops. 0 means the load generator fell behind and latencies understate what users would see.",
		"bool_yes_no", quarter,
		query("A", `min by (probe) (inferprobe_probe_schedule_met{`+sel+`})`, "{{probe}}")).
		Mappings([]dashboard.ValueMapping{{ValueMap: &dashboard.ValueMap{
			Type: dashboard.MappingTypeValueToText,
			Options: map[string]dashboard.ValueMappingResult{
				"0": {Text: cog.ToPtr("missed"), Color: cog.ToPtr("red"), Index: cog.ToPtr[int32](0)},
				"1": {Text: cog.ToPtr("met"), Color: cog.ToPtr("green"), Index: cog.ToPtr[int32](1)},
			},
		}}}).
		Thresholds(steps("red", step{1, "green"})))
	bd.add(st(bd, "Time since last successful run",
		"Seconds since the end of the last completed run with at least one successful request. The InferprobeProbeNotRunning alert fires above 3 probe intervals.",
		"s", quarter,
		query("A", `time() - max by (probe) (inferprobe_probe_last_success_timestamp_seconds{`+sel+`} > 0)`, "{{probe}}")).
		Thresholds(steps("green", step{900, "orange"}, step{3600, "red"})))
	bd.add(st(bd, "In-flight requests",
		"Requests inferprobe has sent and not yet finished, per probe.",
		"short", quarter,
		query("A", `sum by (probe) (inferprobe_in_flight_requests{`+sel+`})`, "{{probe}}")))
}

// overviewLatency is the client-side latency row: TTFT, e2e and TPOT percentiles, the TTFT
// and e2e heatmaps, and p99 from the send against p99 from the intended arrival.
func overviewLatency(bd *board) {
	bd.row("Latency (client side, measured phase only)")
	bd.add(ts(bd, "TTFT percentiles",
		"Time to first token: send → first non-empty content (or reasoning, or tool-call) delta. histogram_quantile over the rate of inferprobe_ttft_seconds_bucket; buckets include every configured SLO threshold exactly. Exemplars carry request_id and trace_id.",
		"s", half,
		probePercentiles("inferprobe_ttft_seconds", true)...).
		Min(0))
	bd.add(ts(bd, "e2e latency percentiles",
		"End to end: send → end of stream (inferprobe_e2e_seconds).",
		"s", half,
		probePercentiles("inferprobe_e2e_seconds", true)...).
		Min(0))
	bd.add(hm(bd, "TTFT distribution", "Per-bucket count of TTFT observations (inferprobe_ttft_seconds_bucket) over time.", "inferprobe_ttft_seconds", half))
	bd.add(hm(bd, "e2e distribution", "Per-bucket count of e2e observations (inferprobe_e2e_seconds_bucket) over time.", "inferprobe_e2e_seconds", half))
	bd.add(ts(bd, "p99 from send vs from intended arrival",
		"TTFT and e2e p99 measured from the send and from the scheduled (intended) arrival. The *_from_intended series include time a request waited to be sent, so they are safe from coordinated omission; a gap between the two means the load generator fell behind.",
		"s", half,
		query("A", quantile("0.99", "inferprobe_ttft_seconds", sel, ""), "TTFT p99"),
		query("B", quantile("0.99", "inferprobe_ttft_from_intended_seconds", sel, ""), "TTFT from intended p99"),
		query("C", quantile("0.99", "inferprobe_e2e_seconds", sel, ""), "e2e p99"),
		query("D", quantile("0.99", "inferprobe_e2e_from_intended_seconds", sel, ""), "e2e from intended p99")).
		Min(0))
	bd.add(ts(bd, "TPOT percentiles",
		"Time per output token = (e2e − TTFT) / (output_tokens − 1), only for requests with server-reported usage (inferprobe_tpot_seconds).",
		"s", half,
		probePercentiles("inferprobe_tpot_seconds", false)...).
		Min(0))
}

// overviewRequests is the requests row: outcomes and failures, dispatch lag, requests in
// flight and token throughput.
func overviewRequests(bd *board) {
	bd.row("Requests")
	bd.add(stacked(ts(bd, "Requests by status",
		"Measured requests per second by outcome (ok, timeout, rejected, unreachable, delivery_unknown, error, dropped, cancelled); warmup excluded.",
		"reqps", third,
		query("A", `sum by (status) (rate(inferprobe_requests_total{`+sel+`}[$__rate_interval]))`, "{{status}}"))))
	bd.add(ts(bd, "Failure ratio",
		"Share of measured requests per probe that did not end ok.",
		"percentunit", third,
		query("A", `sum by (probe) (rate(inferprobe_requests_total{`+sel+`, status!="ok"}[$__rate_interval])) / sum by (probe) (rate(inferprobe_requests_total{`+sel+`}[$__rate_interval]))`, "{{probe}}")).
		Min(0))
	bd.add(bars(bd, "Failures by status (dashboard range)",
		"Count of measured requests that did not end ok, by status, over the selected time range.",
		"short", third,
		query("A", `sum by (status) (increase(inferprobe_requests_total{`+sel+`, status!="ok"}[$__range]))`, "{{status}}")).
		Thresholds(steps("orange")))
	bd.add(ts(bd, "Dispatch lag",
		"Scheduled arrival → actual send (inferprobe_dispatch_lag_seconds). An open-loop run keeps its schedule when p99 ≤ 1 ms.",
		"s", third,
		query("A", quantile("0.5", "inferprobe_dispatch_lag_seconds", sel, "probe"), "p50 {{probe}}"),
		query("B", quantile("0.99", "inferprobe_dispatch_lag_seconds", sel, "probe"), "p99 {{probe}}")).
		Min(0))
	bd.add(ts(bd, "In-flight requests",
		"Requests outstanding now (inferprobe_in_flight_requests).",
		"short", third,
		query("A", `sum by (probe) (inferprobe_in_flight_requests{`+sel+`})`, "{{probe}}")).
		Min(0))
	bd.add(ts(bd, "Token throughput",
		"Prompt and output tokens per second of measured requests (inferprobe_prompt_tokens_total, inferprobe_output_tokens_total).",
		"short", third,
		query("A", `sum by (probe) (rate(inferprobe_prompt_tokens_total{`+sel+`}[$__rate_interval]))`, "prompt {{probe}}"),
		query("B", `sum by (probe) (rate(inferprobe_output_tokens_total{`+sel+`}[$__rate_interval]))`, "output {{probe}}")).
		Min(0).AxisLabel("tokens/s"))
}

// overviewProbes is the probes row: runs in progress, runs by outcome and whether the last
// run kept its schedule.
func overviewProbes(bd *board) {
	bd.row("Probes")
	bd.add(probeRunning(bd, "1 while a probe run is in progress (inferprobe_probe_running).", third))
	bd.add(bars(bd, "Probe runs by outcome (dashboard range)",
		"Finished probe runs over the selected range: completed, interrupted, incomplete, failed (could not start).",
		"short", third,
		query("A", `sum by (outcome) (increase(inferprobe_probe_runs_total{`+sel+`}[$__range]))`, "{{outcome}}")).
		Thresholds(steps("blue")))
	bd.add(stepped(ts(bd, "Schedule met, client-limited",
		"inferprobe_probe_schedule_met per probe: 1 = the last finished run kept its arrival schedule. inferprobe_probe_client_limited: 1 = the last run's self-audit found the load generator, not the server, shaped its numbers (dispatch lag, rate under schedule, held or dropped arrivals, client CPU saturated): its latencies describe the client host.",
		"bool_yes_no", third,
		query("A", `min by (probe) (inferprobe_probe_schedule_met{`+sel+`})`, "{{probe}} schedule met"),
		query("B", `max by (probe) (inferprobe_probe_client_limited{`+sel+`})`, "{{probe}} client-limited"))).
		Min(0).Max(1))
}

// overviewCapacity is the capacity row of search probes (capacity canaries): the bracket of
// each completed search over time, in the control variable's unit, and its binding criterion.
func overviewCapacity(bd *board) {
	bd.row("Capacity")
	bd.add(stepped(ts(bd, "Capacity bracket (last search)",
		"Bracket of each search probe's last completed capacity search (inferprobe_capacity): lower = the largest value shown to meet the SLO, upper = the lowest failing one, in workers (over=concurrency) or requests per second (over=rate). InferprobeCapacityDrop fires when a search's upper bound falls below the previous search's lower bound.",
		"short", 2*third,
		query("A", `inferprobe_capacity{`+sel+`}`, "{{probe}} {{over}} {{bound}}"))).
		Min(0))
	bd.add(st(bd, "Binding criterion",
		"The criterion that failed at the upper bound of each search probe's last completed search (inferprobe_capacity_binding_criterion): a latency criterion and quantile, attainment, or backlog.",
		"short", third,
		query("A", `inferprobe_capacity_binding_criterion{`+sel+`} == 1`, "{{probe}}: {{criterion}}")).
		GraphMode(common.BigValueGraphModeNone).
		TextMode(common.BigValueTextModeName))
}

// probePercentiles queries p50, p90 and p99 (refs A, B, C) of a histogram per probe; with
// exemplars, the p99 query shows them.
func probePercentiles(metric string, exemplars bool) []*prometheus.DataqueryBuilder {
	p99 := query("C", quantile("0.99", metric, sel, "probe"), "p99 {{probe}}")
	if exemplars {
		p99.Exemplar(true)
	}
	return []*prometheus.DataqueryBuilder{
		query("A", quantile("0.5", metric, sel, "probe"), "p50 {{probe}}"),
		query("B", quantile("0.9", metric, sel, "probe"), "p90 {{probe}}"),
		p99,
	}
}
