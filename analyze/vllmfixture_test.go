package analyze

import (
	"strings"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
)

// The deltas of the real vLLM 0.30.0 captures around a 32-request phase, as
// the fixtures' own README lists them.
func TestRealCapturesGiveTheListedDeltas(t *testing.T) {
	b := VLLMCaseTelemetry(scrapeWindow(t, preText, postText), testCase)
	if b.State != StateResolved || len(b.Reasons) != 0 {
		t.Fatalf("case state %s %v, want resolved", b.State, b.Reasons)
	}
	if b.Window == nil || b.Window.Seconds != 13.0 || !b.Window.IncludesDrain || b.Window.Scrapes != 2 {
		t.Fatalf("window %+v, want 13 s incl. drain over 2 scrapes", b.Window)
	}
	if got := keysOf(b.Engines); len(got) != 1 || got[0] != "0" {
		t.Fatalf("engines %v, want [0]", got)
	}
	e := engine0(t, b)
	for field, c := range e.Counters {
		if c.State != StateResolved {
			t.Errorf("counter %s is %s %v; every counter of the captures resolves", field, c.State, c.Reasons)
		}
	}
	for field, h := range e.Histograms {
		if h.State != StateResolved {
			t.Errorf("histogram %s is %s %v", field, h.State, h.Reasons)
		}
	}
	if len(e.Unresolved) != 0 {
		t.Errorf("unresolved fields %v", e.Unresolved)
	}

	counters := map[string]float64{
		"prompt_tokens": 16384, "prefix_cache_queries": 16384, "prefix_cache_hits": 0,
		"generation_tokens": 4096, "request_success": 32, "preemptions": 0,
		"estimated_flops_per_gpu": 0, "estimated_read_bytes_per_gpu": 0, "estimated_write_bytes_per_gpu": 0,
	}
	for field, want := range counters {
		c := e.Counters[field]
		if c == nil || c.Delta == nil || *c.Delta != want {
			t.Errorf("%s delta %v, want %v", field, fieldDelta(c), want)
		}
	}
	bySource := e.Counters["prompt_tokens_by_source"].ByLabel
	for key, want := range map[string]float64{"source=local_compute": 16384, "source=local_cache_hit": 0, "source=external_kv_transfer": 0} {
		if d := bySource[key]; d.State != StateResolved || d.Delta == nil || *d.Delta != want {
			t.Errorf("prompt_tokens_by_source{%s} %+v, want %v", key, d, want)
		}
	}
	success := e.Counters["request_success"]
	if success.Native != "vllm:request_success_total" {
		t.Errorf("native %q", success.Native)
	}
	for _, reason := range []string{"stop", "length", "abort", "error", "repetition"} {
		want := 0.0
		if reason == "length" {
			want = 32
		}
		d := success.ByLabel["finished_reason="+reason]
		if d.Delta == nil || *d.Delta != want {
			t.Errorf("request_success{finished_reason=%s} delta %v, want %v", reason, deref(d.Delta), want)
		}
	}
	if d := success.ByLabel["finished_reason=length"]; float64(*d.Start) != 108 || float64(*d.End) != 140 {
		t.Errorf("request_success{length} start/end %v/%v, want 108/140", *d.Start, *d.End)
	}

	hists := []struct {
		field      string
		count, sum float64
	}{
		{"request_prompt_tokens", 32, 16384},
		{"request_generation_tokens", 32, 4096},
		{"iteration_tokens", 520, 20480},
		{"time_to_first_token", 32, 1.7810461521148682},
		{"inter_token_latency", 4064, 12.866546919569373},
		{"time_per_output_token", 32, 0.10131139306747539},
		{"e2e_latency", 32, 14.644397497177124},
		{"queue_time", 32, 0.25945762917399406},
		{"inference_time", 32, 14.050124494358897},
		{"prefill_time", 32, 1.183577574789524},
		{"decode_time", 32, 12.866546919569373},
		{"preemptions_per_request", 32, 0},
	}
	for _, want := range hists {
		h := e.Histograms[want.field]
		if h == nil {
			t.Errorf("no histogram %s", want.field)
			continue
		}
		if h.Count != want.count || h.Sum != want.sum {
			t.Errorf("%s count/sum %v/%v, want %v/%v", want.field, h.Count, h.Sum, want.count, want.sum)
		}
		if h.Mean == nil || *h.Mean != want.sum/want.count {
			t.Errorf("%s mean %v, want %v", want.field, deref(h.Mean), want.sum/want.count)
		}
	}
	q := e.Histograms["queue_time"]
	if n := len(q.Buckets); n != 22 || q.Buckets[0].LE != "0.3" || q.Buckets[n-1].LE != "+Inf" || q.Buckets[n-1].Delta != 32 {
		t.Errorf("queue_time buckets %v, want 22 from le 0.3 to +Inf with +Inf delta 32", q.Buckets)
	}
	if e.Histograms["iteration_tokens"].Native != "vllm:iteration_tokens_total" {
		t.Errorf("iteration_tokens native %q", e.Histograms["iteration_tokens"].Native)
	}

	kvUsage := e.Gauges["kv_cache_usage"].Stats["_"]
	if kvUsage.Samples != 2 || *kvUsage.Max != 0 || *kvUsage.Min != 0 || *kvUsage.Last != 0 {
		t.Errorf("kv_cache_usage %+v, want 0 in both scrapes", kvUsage)
	}
	d := e.Derived
	kv := d.KVCache
	if kv.State != StateResolved || *kv.BlockSize != 16 || *kv.KVCacheSizeTokens != 1715728 || *kv.NumGPUBlocks != 107233 ||
		*kv.MaxUsageFraction != 0 || *kv.MaxBlocksInUse != 0 {
		t.Errorf("kv_cache %+v", kv)
	}
	if *kv.KVCacheSizeTokens / *kv.BlockSize != *kv.NumGPUBlocks {
		t.Errorf("num_gpu_blocks %d is not kv_cache_size_tokens // block_size", *kv.NumGPUBlocks)
	}
	if p := d.PrefixCache; p.State != StateResolved || *p.Queries != 16384 || *p.Hits != 0 || p.HitRatio == nil || *p.HitRatio != 0 {
		t.Errorf("prefix cache %+v, want 0 of 16384, ratio 0.0", p)
	}
	if d.MFU.State != ReasonNotEnabled {
		t.Errorf("mfu %s, want not_enabled", d.MFU.State)
	}
	r := d.Rates
	if *r.PromptTokensPerSecond != 16384.0/13 || *r.GenerationTokensPerSecond != 4096.0/13 || *r.FinishedRequestsPerSecond != 32.0/13 || r.WindowSeconds != 13 {
		t.Errorf("rates %+v", r)
	}
	for _, s := range []artifact.MetricsScrape{scrapeOf(t, preText, artifact.ScrapeMarkerPhaseStart, 1), scrapeOf(t, postText, artifact.ScrapeMarkerPhaseEnd, 2)} {
		if ps := s.Discovery.ProcessStartNS; ps == nil || *ps != 1790960581980000000 {
			t.Errorf("process_start_ns %v, want 1790960581980000000", ps)
		}
	}
	toJSON(t, b)
}

func fieldDelta(c *CounterField) any {
	if c == nil {
		return "missing"
	}
	return deref(c.Delta)
}

// Swapping the captures makes every advancing counter go backwards.
func TestSwappedCapturesAreCounterResets(t *testing.T) {
	scrapes := scrapeWindow(t, postText, preText)
	b := VLLMCaseTelemetry(scrapes, testCase)
	if b.State != StateResolved {
		t.Fatalf("case %s %v: the exporter identity did not change", b.State, b.Reasons)
	}
	e := engine0(t, b)
	c := e.Counters["request_success"]
	if c.State != StateUnresolved || c.Delta != nil || len(c.Reasons) != 1 || c.Reasons[0] != ReasonCounterReset {
		t.Fatalf("request_success %s %v delta %v, want unresolved counter_reset", c.State, c.Reasons, deref(c.Delta))
	}
	if c.ByLabel["finished_reason=length"].State != ReasonCounterReset || c.ByLabel["finished_reason=stop"].State != StateResolved {
		t.Errorf("by_label %+v", c.ByLabel)
	}
	if e.Counters["prompt_tokens"].State != StateUnresolved || e.Derived.Rates.PromptTokensPerSecond != nil || e.Derived.Rates.FinishedRequestsPerSecond != nil {
		t.Errorf("prompt tokens %s, rate %v: want unresolved and null", e.Counters["prompt_tokens"].State, deref(e.Derived.Rates.PromptTokensPerSecond))
	}
	if h := e.Histograms["queue_time"]; h.State != StateUnresolved || h.Reasons[0] != ReasonCounterReset {
		t.Errorf("queue_time %s %v", h.State, h.Reasons)
	}
	if got := e.Unresolved[ReasonCounterReset]; !setOf(got)["generation_tokens"] || !setOf(got)["prompt_tokens"] {
		t.Errorf("unresolved counter_reset fields %v", got)
	}
	if s := SummarizeScrapes(scrapes); len(s.Epochs) != 1 {
		t.Errorf("%d epochs, want 1", len(s.Epochs))
	}
	if e.Derived.MFU.State != StateUnresolved {
		t.Errorf("mfu %s: zero MFU counters against an unresolved generation delta are unresolved", e.Derived.MFU.State)
	}
	text := renderVLLMText(t, VLLMTelemetry(scrapes, []string{testCase}, nil))
	if !strings.Contains(text, "vllm engine 0: unresolved fields: counter_reset (") {
		t.Errorf("text lacks the unresolved fields line:\n%s", text)
	}
}

// The text lines of the contract.
func TestRealCapturesText(t *testing.T) {
	text := renderVLLMText(t, VLLMTelemetry(scrapeWindow(t, preText, postText), []string{testCase}, nil))
	want := []string{
		"vLLM telemetry: 2 scrapes ok, 0 failed; 1 engine (engine=\"0\"); engine-aggregate, no per-request attribution\n",
		"case " + testCase + ":\n",
		"  vllm engine 0: waiting max 0 mean 0; running max 0; preemptions 0; kv usage max 0.0% (0 of 107,233 blocks); prefix hits 0 of 16,384 tokens; queue time mean 8.11 ms over 32 requests; 1,260 prompt and 315.08 generated tok/s over 13.00 s (incl. drain)\n",
	}
	if got := strings.Join(want, ""); text != got {
		t.Errorf("text:\n%s\nwant:\n%s", text, got)
	}
}
