// Package dashboards generates inferprobe's Grafana dashboards and ships its Prometheus rule files.
//
// The dashboards are built as code with github.com/grafana/grafana-foundation-sdk/go and read only
// the series that `inferprobe serve` exports (the exporter's metric catalogue: inferprobe_*,
// process_*, go_*), the recording rules shipped here (inferprobe:*), and the server-side series a
// monitoring stack scrapes next to them: vLLM's /metrics (vllm:*), NVIDIA dcgm-exporter
// (DCGM_FI_DEV_FB_USED / DCGM_FI_DEV_FB_FREE, MiB) and the vLLM process's
// process_resident_memory_bytes. Three dashboards, with stable uids:
//
//   - inferprobe-overview (overview.json): goodput and SLO attainment against the objective,
//     TTFT / e2e / TPOT percentiles and heatmaps, requests and failures by status, dispatch lag,
//     in-flight requests, probe runs, schedule met;
//   - inferprobe-server-join (server-join.json): client TTFT/e2e next to the joined server span
//     and vLLM's own histograms, the queue/prefill/decode split, vLLM waiting/running, KV-cache
//     and prefix-cache use, span-join coverage and the OTLP receiver's counters;
//   - inferprobe-gpu-memory (gpu-memory.json): GPU framebuffer use, vLLM and inferprobe
//     process RSS, KV-cache usage.
//
// Every dashboard marks probe runs with an annotation from inferprobe_probe_running, so server
// behaviour lines up with the load inferprobe sent.
//
// The rule files (rules/*.yml, embedded) hold the SLO recording rules, the multiwindow,
// multi-burn-rate alerts for a 30-day SLO period (burn rate = error ratio / (1 − objective);
// page when both 1h and 5m burn above 14.4, or 6h and 30m above 6; ticket when both 1d and
// 2h burn above 3, or 3d and 6h above 1; no `for:`, the short window debounces), plus
// probe-health alerts. The checked-in copies under grafana/ are regenerated with
// `go test ./dashboards -run TestGolden -update`.
package dashboards
