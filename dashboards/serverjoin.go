package dashboards

import (
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// serverJoin: what the server says about the same requests (joined spans) and about itself
// (vLLM's /metrics), next to what the client measured.
func serverJoin() *dashboard.DashboardBuilder {
	bd := newBoard(UIDServerJoin, "inferprobe / Server join",
		"Client-side latency next to the server's view: inferprobe_server_* histograms come from the vLLM llm_request span joined to each request (same requests as the client series); vllm:* series come from vLLM's /metrics and cover all traffic to the model, not only the probe's. Shaded regions: probe runs.")

	bd.row("TTFT and e2e: client vs server")
	bd.add(ts(bd, "TTFT p50: client vs server",
		"Client TTFT (inferprobe_ttft_seconds), the joined span's TTFT (inferprobe_server_ttft_seconds, same requests) and vLLM's own histogram (vllm:time_to_first_token_seconds, all traffic). The client-minus-server gap is network, HTTP and API-server time.",
		"s", third,
		query("A", quantile("0.5", "inferprobe_ttft_seconds", sel, ""), "client"),
		query("B", quantile("0.5", "inferprobe_server_ttft_seconds", sel, ""), "server span"),
		query("C", quantile("0.5", "vllm:time_to_first_token_seconds", vsel, ""), "vLLM histogram")).
		Min(0))
	bd.add(ts(bd, "TTFT p99: client vs server",
		"As TTFT p50, at the 99th percentile. Exemplars link client observations to request_id and trace_id.",
		"s", third,
		query("A", quantile("0.99", "inferprobe_ttft_seconds", sel, ""), "client").Exemplar(true),
		query("B", quantile("0.99", "inferprobe_server_ttft_seconds", sel, ""), "server span").Exemplar(true),
		query("C", quantile("0.99", "vllm:time_to_first_token_seconds", vsel, ""), "vLLM histogram")).
		Min(0))
	bd.add(ts(bd, "e2e p90: client vs server span",
		"Client e2e (send → end of stream) against the joined span's e2e (inferprobe_server_e2e_seconds).",
		"s", third,
		query("A", quantile("0.9", "inferprobe_e2e_seconds", sel, ""), "client"),
		query("B", quantile("0.9", "inferprobe_server_e2e_seconds", sel, ""), "server span")).
		Min(0))
	bd.add(stacked(ts(bd, "Server time split per request (joined spans, mean)",
		"Mean queue, prefill and decode time of the probe's requests, from the joined vLLM spans (inferprobe_server_queue_seconds, _prefill_seconds, _decode_seconds). Stacked, they approach the server e2e.",
		"s", half,
		query("A", mean("inferprobe_server_queue_seconds", sel, "probe"), "queue {{probe}}"),
		query("B", mean("inferprobe_server_prefill_seconds", sel, "probe"), "prefill {{probe}}"),
		query("C", mean("inferprobe_server_decode_seconds", sel, "probe"), "decode {{probe}}"))))
	bd.add(ts(bd, "vLLM queue / prefill / decode p90 (all traffic)",
		"p90 of vLLM's own phase histograms (vllm:request_queue_time_seconds, vllm:request_prefill_time_seconds, vllm:request_decode_time_seconds).",
		"s", half,
		query("A", quantile("0.9", "vllm:request_queue_time_seconds", vsel, "model_name"), "queue {{model_name}}"),
		query("B", quantile("0.9", "vllm:request_prefill_time_seconds", vsel, "model_name"), "prefill {{model_name}}"),
		query("C", quantile("0.9", "vllm:request_decode_time_seconds", vsel, "model_name"), "decode {{model_name}}")).
		Min(0))

	bd.row("vLLM engine")
	bd.add(ts(bd, "vLLM waiting / running vs inferprobe in flight",
		"Requests waiting and running in vLLM's scheduler (vllm:num_requests_waiting, vllm:num_requests_running) against the requests inferprobe has outstanding (inferprobe_in_flight_requests).",
		"short", third,
		append(vllmWaitingRunning(), query("C", `sum(inferprobe_in_flight_requests{`+sel+`})`, "inferprobe in flight"))...).
		Min(0))
	bd.add(kvCacheUsage(bd,
		"Fraction of vLLM's KV-cache blocks in use (vllm:kv_cache_usage_perc, a 0–1 fraction; older vLLM: vllm:gpu_cache_usage_perc)."))
	bd.add(ts(bd, "Prefix-cache hit ratio",
		"Share of prompt tokens served from vLLM's prefix cache: rate(vllm:prefix_cache_hits_total) / rate(vllm:prefix_cache_queries_total).",
		"percentunit", third,
		query("A", `sum by (model_name) (rate(vllm:prefix_cache_hits_total{`+vsel+`}[$__rate_interval])) / sum by (model_name) (rate(vllm:prefix_cache_queries_total{`+vsel+`}[$__rate_interval]))`, "{{model_name}}")).
		Min(0).Max(1))

	bd.row("Span join")
	bd.add(thresholdLine(ts(bd, "Span join coverage (last run)",
		"Share of the last run's successful requests with a joined server span (inferprobe_span_join_coverage_ratio). The dashed line is the InferprobeSpanJoinCoverageDropped threshold (0.9). Absent when no spans are received.",
		"percentunit", half,
		query("A", `inferprobe_span_join_coverage_ratio{`+sel+`}`, "{{probe}} {{case}}")).
		Min(0).Max(1).LineInterpolation(common.LineInterpolationStepAfter), 0.9))
	bd.add(ts(bd, "OTLP receiver spans",
		"Spans received by transport, and spans rejected (refused or invalid), dropped (accepted, not delivered) or unrouted (matching no running or draining probe run). Receiver counters have no target/probe labels.",
		"cps", half,
		query("A", `sum by (transport) (rate(inferprobe_receiver_spans_received_total[$__rate_interval]))`, "received {{transport}}"),
		query("B", `sum(rate(inferprobe_receiver_spans_rejected_total[$__rate_interval]))`, "rejected"),
		query("C", `sum(rate(inferprobe_receiver_spans_dropped_total[$__rate_interval]))`, "dropped"),
		query("D", `sum(rate(inferprobe_receiver_spans_unrouted_total[$__rate_interval]))`, "unrouted")).
		Min(0))
	return bd.b
}

// kvCache is vLLM's KV-cache usage fraction; vllm:gpu_cache_usage_perc is the pre-rename name
// (deprecated in vLLM), used only where the new one is absent.
const kvCache = `max by (model_name, instance) (vllm:kv_cache_usage_perc{` + vsel + `} or vllm:gpu_cache_usage_perc{` + vsel + `})`
