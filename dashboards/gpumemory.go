package dashboards

import (
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// mib is bytes per MiB: dcgm-exporter reports framebuffer memory in MiB.
const mib = "1048576"

// gpuMemory: memory on the GPU and in the processes, aligned with probe runs.
func gpuMemory() *dashboard.DashboardBuilder {
	gpuSel := `instance=~"$gpu_instance"`
	bd := newBoard(UIDGPUMemory, "inferprobe / GPU and memory",
		"GPU framebuffer memory (NVIDIA dcgm-exporter), vLLM's KV-cache usage and process memory of vLLM and of inferprobe itself. Shaded regions: probe runs.",
		labelVar("gpu_instance", "GPU exporter", "label_values(DCGM_FI_DEV_FB_USED, instance)"))

	bd.row("GPU")
	bd.add(stacked(ts(bd, "GPU framebuffer used / free",
		"DCGM_FI_DEV_FB_USED and DCGM_FI_DEV_FB_FREE (MiB, converted to bytes) per GPU. Reserved memory (DCGM_FI_DEV_FB_RESERVED) is in neither.",
		"bytes", half,
		query("A", `DCGM_FI_DEV_FB_USED{`+gpuSel+`} * `+mib, "used GPU {{gpu}} {{Hostname}}"),
		query("B", `DCGM_FI_DEV_FB_FREE{`+gpuSel+`} * `+mib, "free GPU {{gpu}} {{Hostname}}"))))
	bd.add(ts(bd, "GPU framebuffer used share",
		"DCGM_FI_DEV_FB_USED / (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE) per GPU. vLLM preallocates its KV cache (--gpu-memory-utilization), so this stays flat under load; KV-cache usage shows the occupancy.",
		"percentunit", half,
		query("A", `DCGM_FI_DEV_FB_USED{`+gpuSel+`} / (DCGM_FI_DEV_FB_USED{`+gpuSel+`} + DCGM_FI_DEV_FB_FREE{`+gpuSel+`})`, "GPU {{gpu}} {{Hostname}}")).
		Min(0).Max(1))

	bd.row("Server")
	bd.add(kvCacheUsage(bd,
		"Fraction of vLLM's KV-cache blocks in use (vllm:kv_cache_usage_perc; older vLLM: vllm:gpu_cache_usage_perc)."))
	bd.add(ts(bd, "vLLM process RSS",
		"Resident memory of the vLLM process serving the selected models: process_resident_memory_bytes of every scrape target (job, instance) that also exports vllm:num_requests_running for the model (the API-server process that serves /metrics).",
		"bytes", third,
		query("A", `process_resident_memory_bytes and on (job, instance) vllm:num_requests_running{`+vsel+`}`, "{{job}} {{instance}}")).
		Min(0))
	bd.add(ts(bd, "vLLM waiting / running",
		"vllm:num_requests_waiting and vllm:num_requests_running: the load that drives KV-cache occupancy.",
		"short", third,
		vllmWaitingRunning()...).
		Min(0))

	bd.row("inferprobe")
	bd.add(ts(bd, "inferprobe memory",
		"Resident memory and Go heap in use of the inferprobe daemon (process and Go collectors of every target exporting inferprobe_build_info).",
		"bytes", half,
		query("A", `process_resident_memory_bytes and on (job, instance) inferprobe_build_info`, "RSS {{instance}}"),
		query("B", `go_memstats_heap_inuse_bytes and on (job, instance) inferprobe_build_info`, "Go heap in use {{instance}}")).
		Min(0))
	bd.add(probeRunning(bd,
		"1 while a probe run is in progress (inferprobe_probe_running), for lining memory changes up with load.", half))
	return bd.b
}
