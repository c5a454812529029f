package analyze

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
)

const (
	eng0      = `engine="0"`
	modelLbl  = `model_name="/home/.cache/huggingface/hub/models--Qwen--Qwen2.5-0.5B-Instruct/snapshots/7ae557604adf67be50417f59c2c2f167def9a775"`
	labels0   = `{` + eng0 + `,` + modelLbl + `}`
	procStart = "process_start_time_seconds 1.79096058198e+09"
)

// A histogram whose sum shrinks, or whose +Inf bucket drops, while its count
// grows is a reset.
func TestHistogramGoingBackwardsIsAReset(t *testing.T) {
	shrunk := setValue(t, postText, `vllm:request_queue_time_seconds_sum`+regexpQuote(labels0), "0.1")
	e := engine0(t, VLLMCaseTelemetry(scrapeWindow(t, preText, shrunk), testCase))
	if h := e.Histograms["queue_time"]; h.State != StateUnresolved || h.Reasons[0] != ReasonCounterReset {
		t.Errorf("sum shrinking: %s %v", h.State, h.Reasons)
	}
	if h := e.Histograms["prefill_time"]; h.State != StateResolved {
		t.Errorf("prefill_time %s: only queue_time changed", h.State)
	}
	dropped := setValue(t, postText, `vllm:request_prefill_time_seconds_bucket\{`+eng0+`,le="\+Inf",`+regexpQuote(modelLbl)+`\}`, "5.0")
	e = engine0(t, VLLMCaseTelemetry(scrapeWindow(t, preText, dropped), testCase))
	if h := e.Histograms["prefill_time"]; h.State != StateUnresolved || h.ByLabel["_"].State != ReasonCounterReset {
		t.Errorf("+Inf bucket dropping: %s %+v", h.State, h.ByLabel["_"])
	}
}

// A changed _created stamp marks that family recreated, and only it; the
// histogram vllm:iteration_tokens_total is stamped under its full name.
func TestChangedCreatedStampIsRecreated(t *testing.T) {
	post := setValue(t, postText, `vllm:generation_tokens_created`+regexpQuote(labels0), "1.8e+09")
	post = setValue(t, post, `vllm:iteration_tokens_total_created`+regexpQuote(labels0), "1.8e+09")
	e := engine0(t, VLLMCaseTelemetry(scrapeWindow(t, preText, post), testCase))
	if c := e.Counters["generation_tokens"]; c.State != StateUnresolved || c.ByLabel["_"].State != ReasonCounterRecreated {
		t.Errorf("generation_tokens %s %+v, want counter_recreated", c.State, c.ByLabel["_"])
	}
	if h := e.Histograms["iteration_tokens"]; h.ByLabel["_"].State != ReasonCounterRecreated {
		t.Errorf("iteration_tokens %+v, want counter_recreated", h.ByLabel["_"])
	}
	if c := e.Counters["prompt_tokens"]; c.State != StateResolved {
		t.Errorf("prompt_tokens %s: its stamp did not change", c.State)
	}
	if _, ok := e.Gauges["generation_tokens_created"]; ok {
		t.Error("a _created stamp is reported as a gauge")
	}
	for field := range e.Gauges {
		if strings.HasSuffix(field, "_created") {
			t.Errorf("stamp %s reported as a gauge", field)
		}
	}
}

// One bucket boundary changed leaves that family unresolved, and only it.
func TestChangedBucketBoundary(t *testing.T) {
	post := mustReplace(t, postText, `vllm:request_queue_time_seconds_bucket{engine="0",le="0.3"`, `vllm:request_queue_time_seconds_bucket{engine="0",le="0.35"`)
	e := engine0(t, VLLMCaseTelemetry(scrapeWindow(t, preText, post), testCase))
	if h := e.Histograms["queue_time"]; h.State != StateUnresolved || h.Reasons[0] != ReasonBoundariesChanged {
		t.Errorf("queue_time %s %v", h.State, h.Reasons)
	}
	if h := e.Histograms["prefill_time"]; h.State != StateResolved {
		t.Errorf("prefill_time %s", h.State)
	}
}

// An engine label appearing in the end scrape changes the engine set; the
// new engine's series are missing at the start.
func TestEngineSetChanged(t *testing.T) {
	post := postText + "vllm:num_requests_running{engine=\"1\",model_name=\"m\"} 0.0\n"
	b := VLLMCaseTelemetry(scrapeWindow(t, preText, post), testCase)
	if b.State != StateUnresolved || len(b.Reasons) != 1 || b.Reasons[0] != ReasonEngineSetChanged {
		t.Fatalf("case %s %v, want engine_set_changed", b.State, b.Reasons)
	}
	if e := engine0(t, b); e.Counters["request_success"].State != StateResolved {
		t.Errorf("engine 0's counters are comparable: %s", e.Counters["request_success"].State)
	}
	if b.Engines["1"] == nil {
		t.Fatal("no block for engine 1")
	}
	text := renderVLLMText(t, VLLMTelemetry(scrapeWindow(t, preText, post), []string{testCase}, nil))
	if !strings.Contains(text, "  vllm: unresolved (engine_set_changed)\n") {
		t.Errorf("text:\n%s", text)
	}
}

// A restart between the scrapes, and another exporter answering an interval
// scrape.
func TestEngineRestartAndForeignScrapes(t *testing.T) {
	restarted := mustReplace(t, postText, procStart, "process_start_time_seconds 1.79096099e+09")
	scrapes := scrapeWindow(t, preText, restarted)
	b := VLLMCaseTelemetry(scrapes, testCase)
	if b.State != StateUnresolved || b.Reasons[0] != ReasonEngineRestart {
		t.Fatalf("case %s %v, want engine_restart", b.State, b.Reasons)
	}
	e := engine0(t, b)
	if c := e.Counters["request_success"]; c.Delta != nil || c.ByLabel["finished_reason=length"].State != ReasonEngineRestart {
		t.Errorf("request_success %+v", c)
	}
	if h := e.Histograms["queue_time"]; h.ByLabel["_"].State != ReasonEngineRestart {
		t.Errorf("queue_time %+v", h.ByLabel["_"])
	}
	if b.Window.ForeignScrapes != 1 || b.Window.Scrapes != 1 {
		t.Errorf("window %+v: the end scrape came from another exporter", b.Window)
	}
	blk := VLLMTelemetry(scrapes, []string{testCase}, nil)
	if len(blk.Engine.Epochs) != 2 {
		t.Errorf("%d epochs, want 2", len(blk.Engine.Epochs))
	}
	text := renderVLLMText(t, blk)
	for _, want := range []string{"vLLM telemetry: the server restarted 1 time during the run\n", "  vllm: unresolved (engine_restart)\n",
		"preemptions unresolved (engine_restart); ", "; queue time unresolved (engine_restart); token rates unresolved (engine_restart)\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}

	// A/B/A: an interval scrape answered by another exporter, whose queue
	// depth must not leak into the gauges.
	foreign := mustReplace(t, preText, procStart, "process_start_time_seconds 1.5e+09")
	foreign = setValue(t, foreign, `vllm:num_requests_waiting`+regexpQuote(labels0), "99.0")
	mid := scrapeOf(t, foreign, artifact.ScrapeMarkerInterval, 5e9)
	scrapes = []artifact.MetricsScrape{scrapes[0], mid, scrapeOf(t, postText, artifact.ScrapeMarkerPhaseEnd, 14e9)}
	b = VLLMCaseTelemetry(scrapes, testCase)
	if b.Reasons[0] != ReasonEngineRestart || b.Window.ForeignScrapes != 1 || b.Window.Scrapes != 2 {
		t.Errorf("reasons %v window %+v", b.Reasons, b.Window)
	}
	if st := engine0(t, b).Gauges["queue_depth"].Stats["_"]; *st.Max != 0 || st.Samples != 2 {
		t.Errorf("queue_depth %+v: the foreign scrape's 99 leaked in", st)
	}
	if n := len(SummarizeScrapes(scrapes).Epochs); n != 3 {
		t.Errorf("%d epochs, want 3", n)
	}
}

// Without process_start_time_seconds a restart cannot be ruled out.
func TestExporterIdentityUnknown(t *testing.T) {
	pre := dropLines(t, preText, `process_start_time_seconds `)
	post := dropLines(t, postText, `process_start_time_seconds `)
	b := VLLMCaseTelemetry(scrapeWindow(t, pre, post), testCase)
	if b.State != StateUnresolved || len(b.Reasons) != 1 || b.Reasons[0] != ReasonIdentityUnknown {
		t.Fatalf("case %s %v", b.State, b.Reasons)
	}
	if c := engine0(t, b).Counters["prompt_tokens"]; c.ByLabel["_"].State != ReasonIdentityUnknown || c.Delta != nil {
		t.Errorf("prompt_tokens %+v", c.ByLabel["_"])
	}
	if b.Window.Scrapes != 2 {
		t.Errorf("window %+v: two unknown identities are one exporter for the gauges", b.Window)
	}
}

// A missing _sum, a missing counter and a gauge present in one scrape only.
func TestSeriesMissing(t *testing.T) {
	pre := dropLines(t, preText, `vllm:request_queue_time_seconds_sum`)
	post := dropLines(t, postText, `vllm:num_preemptions_total\{`)
	b := VLLMCaseTelemetry(scrapeWindow(t, pre, post), testCase)
	e := engine0(t, b)
	h := e.Histograms["queue_time"]
	if h.State != StateUnresolved || h.ByLabel["_"].State != ReasonSeriesMissing || len(h.ByLabel["_"].Missing) != 1 || h.ByLabel["_"].Missing[0] != "start_sum" {
		t.Errorf("queue_time %s %+v", h.State, h.ByLabel["_"])
	}
	raw := string(toJSON(t, h))
	if strings.Contains(raw, `"sum"`) || strings.Contains(raw, `"count"`) {
		t.Errorf("an unresolved histogram carries sum/count keys: %s", raw)
	}
	if !strings.Contains(raw, `"missing":["start_sum"]`) {
		t.Errorf("json %s", raw)
	}
	c := e.Counters["preemptions"]
	if c.State != StateUnresolved || c.ByLabel["_"].State != ReasonSeriesMissing || c.ByLabel["_"].End != nil || c.Delta != nil {
		t.Errorf("preemptions %+v: a missing series is never read as 0", c)
	}

	// A gauge absent from the end scrape is summarised over the scrapes that have it.
	post = dropLines(t, postText, `vllm:num_requests_running\{`)
	mid := setValue(t, preText, `vllm:num_requests_running`+regexpQuote(labels0), "8.0")
	scrapes := []artifact.MetricsScrape{scrapeOf(t, preText, artifact.ScrapeMarkerPhaseStart, 1e9), scrapeOf(t, mid, artifact.ScrapeMarkerInterval, 2e9), scrapeOf(t, post, artifact.ScrapeMarkerPhaseEnd, 3e9)}
	st := engine0(t, VLLMCaseTelemetry(scrapes, testCase)).Gauges["running_requests"].Stats["_"]
	if st.Samples != 2 || *st.Max != 8 || *st.Min != 0 || *st.Mean != 4 || *st.Last != 8 {
		t.Errorf("running_requests %+v, want 2 samples 0 and 8", st)
	}
}

// Boundary scrapes that failed or never happened.
func TestMissingBoundaryScrapes(t *testing.T) {
	b := VLLMCaseTelemetry([]artifact.MetricsScrape{failedScrape(artifact.ScrapeMarkerPhaseStart, 1e9), scrapeOf(t, preText, artifact.ScrapeMarkerInterval, 2e9)}, testCase)
	want := []string{"scrape_failed:phase_start", "scrape_missing:phase_end"}
	if b.State != StateUnresolved || strings.Join(b.Reasons, " ") != strings.Join(want, " ") || b.Window != nil || len(b.Engines) != 0 {
		t.Fatalf("block %+v", b)
	}
	raw := string(toJSON(t, b))
	if !strings.Contains(raw, `"window":null`) || !strings.Contains(raw, `"engines":{}`) {
		t.Errorf("json %s", raw)
	}
	if b := VLLMCaseTelemetry(nil, testCase); strings.Join(b.Reasons, " ") != "scrape_missing:phase_start scrape_missing:phase_end" {
		t.Errorf("no scrapes: %v", b.Reasons)
	}
	// Other cases' and phases' scrapes do not count.
	warm := scrapeWindow(t, preText, postText)
	for i := range warm {
		warm[i].Phase = strPtr("warmup")
	}
	if b := VLLMCaseTelemetry(warm, testCase); b.State != StateUnresolved {
		t.Error("warmup scrapes made a measured window")
	}
	if b := VLLMPhaseTelemetry(warm, testCase, "warmup"); b.State != StateResolved {
		t.Errorf("warmup phase %v", b.Reasons)
	}
	// A failed interval scrape inside the window is counted, nothing else.
	scrapes := scrapeWindow(t, preText, postText)
	scrapes = append(scrapes, failedScrape(artifact.ScrapeMarkerInterval, 5e9))
	if b := VLLMCaseTelemetry(scrapes, testCase); b.State != StateResolved || b.Window.FailedScrapes != 1 {
		t.Errorf("state %s window %+v", b.State, b.Window)
	}
}

// Label sets are differenced against themselves whatever their order; a set
// missing from one scrape leaves the total unresolved.
func TestHistogramLabelSets(t *testing.T) {
	hist := func(order []string, counts map[string]string) string {
		var b strings.Builder
		b.WriteString("# TYPE vllm:x_seconds histogram\n")
		for _, r := range order {
			n := counts[r]
			for _, le := range []string{"0.1", "1.0", "+Inf"} {
				b.WriteString(`vllm:x_seconds_bucket{engine="0",le="` + le + `",reason="` + r + `"} ` + n + "\n")
			}
			b.WriteString(`vllm:x_seconds_count{engine="0",reason="` + r + `"} ` + n + "\n")
			b.WriteString(`vllm:x_seconds_sum{engine="0",reason="` + r + `"} ` + n + "\n")
		}
		return b.String() + "process_start_time_seconds 1.0\n"
	}
	pre := hist([]string{"a", "b"}, map[string]string{"a": "1", "b": "10"})
	post := hist([]string{"b", "a"}, map[string]string{"a": "3", "b": "15"})
	h := engine0(t, VLLMCaseTelemetry(scrapeWindow(t, pre, post), testCase)).Histograms["vllm:x_seconds"]
	if h.State != StateResolved || h.ByLabel["reason=a"].Count != 2 || h.ByLabel["reason=b"].Count != 5 || h.Count != 7 || h.Sum != 7 {
		t.Fatalf("x_seconds %+v", h)
	}
	if len(h.Buckets) != 3 || h.Buckets[2].LE != "+Inf" || h.Buckets[2].Delta != 7 {
		t.Errorf("summed buckets %v", h.Buckets)
	}
	post = hist([]string{"b"}, map[string]string{"b": "15"})
	h = engine0(t, VLLMCaseTelemetry(scrapeWindow(t, pre, post), testCase)).Histograms["vllm:x_seconds"]
	if h.State != StateUnresolved || h.ByLabel["reason=a"].State != ReasonSeriesMissing || h.ByLabel["reason=b"].State != StateResolved {
		t.Errorf("x_seconds %+v", h)
	}
}

// NaN samples: a gauge is summarised without them, a counter's delta is
// null, and the report stays strict JSON.
func TestNonFiniteSamples(t *testing.T) {
	pre := setValue(t, preText, `vllm:kv_cache_usage_perc`+regexpQuote(labels0), "NaN")
	post := setValue(t, postText, `vllm:kv_cache_usage_perc`+regexpQuote(labels0), "NaN")
	post = setValue(t, post, `vllm:generation_tokens_total`+regexpQuote(labels0), "NaN")
	post = setValue(t, post, `vllm:num_requests_running`+regexpQuote(labels0), "+Inf")
	scrapes := scrapeWindow(t, pre, post)
	blk := VLLMTelemetry(scrapes, []string{testCase}, nil)
	e := engine0(t, blk.Cases[testCase])
	g := e.Gauges["kv_cache_usage"]
	if st := g.Stats["_"]; g.State != StateUnresolved || st.State != ReasonNonFinite || st.Max != nil || st.NonFinite != 2 || st.Samples != 0 {
		t.Errorf("kv_cache_usage %s %+v", g.State, st)
	}
	if st := e.Gauges["running_requests"].Stats["_"]; st.State != StateResolved || st.Samples != 1 || st.NonFinite != 1 || *st.Max != 0 {
		t.Errorf("running_requests %+v: the +Inf sample is left out", st)
	}
	c := e.Counters["generation_tokens"]
	if c.Delta != nil || c.ByLabel["_"].State != ReasonNonFinite || !isNaN(c.ByLabel["_"].End) {
		t.Errorf("generation_tokens %+v", c.ByLabel["_"])
	}
	raw := toJSON(t, blk)
	if !bytes.Contains(raw, []byte(`"end":"NaN"`)) {
		t.Error(`the NaN counter end is not written as "NaN"`)
	}
	var generic any
	if err := json.Unmarshal(raw, &generic); err != nil {
		t.Fatalf("report is not strict JSON: %v", err)
	}
	if e.Derived.KVCache.State != ReasonNonFinite || e.Derived.KVCache.MaxBlocksInUse != nil {
		t.Errorf("kv_cache %+v", e.Derived.KVCache)
	}
	// The scrape records themselves stay strict JSON too.
	for _, s := range scrapes {
		toJSON(t, s)
	}
}

func isNaN(f interface{ MarshalJSON() ([]byte, error) }) bool {
	b, _ := f.MarshalJSON()
	return string(b) == `"NaN"`
}

// A retired name maps to its successor's field and is reported as retired;
// unknown series are listed and kept, optional subsystems are
// optional_present.
func TestRetiredUnknownAndOptionalSeries(t *testing.T) {
	rename := func(text string) string {
		text = strings.ReplaceAll(text, "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
		text = strings.ReplaceAll(text, "vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total")
		text = strings.ReplaceAll(text, "vllm:prefix_cache_queries_created", "vllm:gpu_prefix_cache_queries_created")
		return text + "# TYPE vllm:brand_new_total counter\nvllm:brand_new_total{engine=\"0\"} 1.0\n" +
			"# TYPE vllm:kv_offload_bytes_total counter\nvllm:kv_offload_bytes_total{engine=\"0\"} 0.0\n"
	}
	pre, post := rename(preText), mustReplace(t, rename(postText), "vllm:brand_new_total{engine=\"0\"} 1.0", "vllm:brand_new_total{engine=\"0\"} 4.0")
	scrapes := scrapeWindow(t, pre, post)
	d := scrapes[0].Discovery
	if strings.Join(d.DeprecatedPresent, ",") != "vllm:gpu_cache_usage_perc,vllm:gpu_prefix_cache_queries_total" {
		t.Errorf("deprecated_present %v", d.DeprecatedPresent)
	}
	if strings.Join(d.Unknown, ",") != "vllm:brand_new_total" || strings.Join(d.OptionalPresent, ",") != "vllm:kv_offload_bytes_total" {
		t.Errorf("unknown %v optional_present %v", d.Unknown, d.OptionalPresent)
	}
	if !setOf(d.Absent)["vllm:kv_cache_usage_perc"] {
		t.Errorf("absent %v lacks the successor", d.Absent)
	}
	blk := VLLMTelemetry(scrapes, []string{testCase}, nil)
	e := engine0(t, blk.Cases[testCase])
	g := e.Gauges["kv_cache_usage"]
	if g == nil || g.Native != "vllm:gpu_cache_usage_perc" || g.DeprecatedAliasOf == nil || *g.DeprecatedAliasOf != "vllm:kv_cache_usage_perc" {
		t.Fatalf("kv_cache_usage %+v", g)
	}
	if q := e.Counters["prefix_cache_queries"]; q == nil || *q.Delta != 16384 || q.Native != "vllm:gpu_prefix_cache_queries_total" || q.State != StateResolved {
		t.Errorf("prefix_cache_queries %+v", q)
	}
	if e.Derived.PrefixCache.HitRatio == nil || e.Derived.KVCache.MaxUsageFraction == nil {
		t.Errorf("derived figures do not use the retired names: %+v %+v", e.Derived.PrefixCache, e.Derived.KVCache)
	}
	if c := e.Counters["vllm:brand_new_total"]; c == nil || *c.Delta != 3 || c.Unit != nil {
		t.Errorf("unknown counter %+v", c)
	}
	if c := e.Counters["vllm:kv_offload_bytes_total"]; c == nil || *c.Delta != 0 {
		t.Errorf("optional counter %+v", c)
	}
	if strings.Join(blk.Engine.UnknownSeries, ",") != "vllm:brand_new_total" || strings.Join(blk.Engine.OptionalPresent, ",") != "vllm:kv_offload_bytes_total" {
		t.Errorf("summary %+v", blk.Engine)
	}
	text := renderVLLMText(t, blk)
	for _, want := range []string{
		"vLLM telemetry: retired series: vllm:gpu_cache_usage_perc (now vllm:kv_cache_usage_perc), vllm:gpu_prefix_cache_queries_total (now vllm:prefix_cache_queries_total)\n",
		"vLLM telemetry: unknown series: vllm:brand_new_total\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}

	// With both the retired name and its successor exposed, each keeps its own key.
	both := preText + "# TYPE vllm:gpu_cache_usage_perc gauge\nvllm:gpu_cache_usage_perc{engine=\"0\"} 0.5\n"
	e = engine0(t, VLLMCaseTelemetry(scrapeWindow(t, both, both), testCase))
	if e.Gauges["kv_cache_usage"].Native != "vllm:kv_cache_usage_perc" || e.Gauges["vllm:gpu_cache_usage_perc"] == nil {
		t.Errorf("gauges %v", keysOf(e.Gauges))
	}
}

// Two engines are two blocks, never combined.
func TestTwoEnginesAreNeverSummed(t *testing.T) {
	// The second engine's sample belongs to the generation_tokens family
	// already declared; append it right after that family's line instead.
	add := func(text, n1 string) string {
		line := `vllm:generation_tokens_total{engine="1",` + modelLbl + `} ` + n1 + "\n"
		i := strings.Index(text, "# HELP vllm:generation_tokens_created")
		return text[:i] + line + text[i:]
	}
	b := VLLMCaseTelemetry(scrapeWindow(t, add(preText, "100.0"), add(postText, "150.0")), testCase)
	if b.State != StateResolved || len(b.Engines) != 2 {
		t.Fatalf("state %s engines %v", b.State, keysOf(b.Engines))
	}
	if d := *b.Engines["0"].Counters["generation_tokens"].Delta; d != 4096 {
		t.Errorf("engine 0 generation delta %v, want 4096", d)
	}
	if d := *b.Engines["1"].Counters["generation_tokens"].Delta; d != 50 {
		t.Errorf("engine 1 generation delta %v, want 50", d)
	}
	if r := b.Engines["1"].Derived.Rates.GenerationTokensPerSecond; r == nil || *r != 50.0/13 {
		t.Errorf("engine 1 rate %v", deref(r))
	}
}

// The MFU state table.
func TestMFUStates(t *testing.T) {
	flops := `vllm:estimated_flops_per_gpu_total` + regexpQuote(labels0)
	advancing := setValue(t, postText, flops, "1e+15")
	if m := engine0(t, VLLMCaseTelemetry(scrapeWindow(t, preText, advancing), testCase)).Derived.MFU; m.State != StateResolved || *m.EstimatedFlopsPerGPU != 1e15 || *m.EstimatedReadBytesPerGPU != 0 {
		t.Errorf("advancing counters: %+v", m)
	}
	if m := engine0(t, VLLMCaseTelemetry(scrapeWindow(t, preText, preText), testCase)).Derived.MFU; m.State != StateResolved || m.Detail == nil || *m.EstimatedFlopsPerGPU != 0 {
		t.Errorf("no tokens, no flops: %+v", m)
	}
	reset := setValue(t, preText, flops, "5.0")
	m := engine0(t, VLLMCaseTelemetry(scrapeWindow(t, reset, postText), testCase)).Derived.MFU
	if m.State != StateUnresolved || m.Counters["estimated_flops_per_gpu"] != StateUnresolved || m.Counters["estimated_read_bytes_per_gpu"] != StateResolved {
		t.Errorf("one counter reset: %+v", m)
	}
	noGen := dropLines(t, postText, `vllm:generation_tokens_total\{`)
	m = engine0(t, VLLMCaseTelemetry(scrapeWindow(t, preText, noGen), testCase)).Derived.MFU
	if m.State != StateUnresolved || m.EstimatedFlopsPerGPU == nil || *m.EstimatedFlopsPerGPU != 0 {
		t.Errorf("zero counters without a generation delta: %+v", m)
	}
	none := dropLines(t, dropLines(t, dropLines(t, preText, `vllm:estimated_flops`), `vllm:estimated_read`), `vllm:estimated_write`)
	if m := engine0(t, VLLMCaseTelemetry(scrapeWindow(t, none, none), testCase)).Derived.MFU; m.State != ReasonSeriesMissing {
		t.Errorf("no MFU series: %+v", m)
	}
}

// Series without an engine label (vLLM V0) are reported under engine "_".
func TestSeriesWithoutEngineLabel(t *testing.T) {
	old := mustRead("vllm/datadog-integrations-core_vllm-0.4.3_v0_opt-125m.prom")
	b := VLLMCaseTelemetry(scrapeWindow(t, old, old), testCase)
	e := b.Engines[noEngine]
	if e == nil || len(b.Engines) != 1 {
		t.Fatalf("engines %v", keysOf(b.Engines))
	}
	if g := e.Gauges["kv_cache_usage"]; g == nil || g.Native != "vllm:gpu_cache_usage_perc" {
		t.Errorf("kv_cache_usage %+v", g)
	}
	if h := e.Histograms["inter_token_latency"]; h == nil || h.Native != "vllm:time_per_output_token_seconds" || h.State != StateResolved || h.Count != 0 {
		t.Errorf("inter_token_latency %+v", h)
	}
	if b.State != StateResolved {
		t.Errorf("state %s %v", b.State, b.Reasons)
	}
}

// regexpQuote escapes a literal for setValue's pattern.
func regexpQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `.`, `\.`, `+`, `\+`, `*`, `\*`, `?`, `\?`, `(`, `\(`, `)`, `\)`, `[`, `\[`, `]`, `\]`, `{`, `\{`, `}`, `\}`, `|`, `\|`, `^`, `\^`, `$`, `\$`)
	return r.Replace(s)
}
