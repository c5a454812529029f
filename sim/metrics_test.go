package sim

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

const capturePath = "testdata/q05_c08_metrics_post.txt"

func labelNames(m *dto.Metric) []string {
	var out []string
	for _, l := range m.GetLabel() {
		out = append(out, l.GetName())
	}
	sort.Strings(out)
	return out
}

func bucketBounds(m *dto.Metric) []float64 {
	var out []float64
	for _, b := range m.GetHistogram().GetBucket() {
		out = append(out, b.GetUpperBound())
	}
	return out
}

// TestMetricsMatchVLLMCapture compares the exposition with a real vLLM 0.30 /metrics
// capture: every vllm: and process_ family there exists here with the same type, label
// names, help and bucket boundaries, including the *_created gauges.
func TestMetricsMatchVLLMCapture(t *testing.T) {
	f, err := os.Open(capturePath)
	if err != nil {
		t.Fatalf("capture: %v", err)
	}
	defer f.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	want, err := p.TextToMetricFamilies(f)
	if err != nil {
		t.Fatalf("parse capture: %v", err)
	}
	cfg := fastConfig()
	cfg.MaxModelLen = 2048 // the capture's Qwen2.5-0.5B context: token buckets up to 2000
	cfg.NumGPUBlocks = 256
	s := startSim(t, cfg)
	got := scrape(t, s.URL())
	checked := 0
	for name, wf := range want {
		if !strings.HasPrefix(name, "vllm:") && !strings.HasPrefix(name, "process_") {
			continue
		}
		gf, ok := got[name]
		if !ok {
			t.Errorf("family %s missing", name)
			continue
		}
		checked++
		if gf.GetType() != wf.GetType() {
			t.Errorf("%s: type %v, capture %v", name, gf.GetType(), wf.GetType())
		}
		if name == "vllm:cache_config_info" {
			for _, l := range []string{"block_size", "num_gpu_blocks", "enable_prefix_caching", "engine"} {
				if !slices.Contains(labelNames(gf.GetMetric()[0]), l) {
					t.Errorf("cache_config_info lacks label %s", l)
				}
			}
			continue
		}
		if len(gf.GetMetric()) != len(wf.GetMetric()) {
			t.Errorf("%s: %d series, capture %d", name, len(gf.GetMetric()), len(wf.GetMetric()))
		}
		if !slices.Equal(labelNames(gf.GetMetric()[0]), labelNames(wf.GetMetric()[0])) {
			t.Errorf("%s: labels %v, capture %v", name, labelNames(gf.GetMetric()[0]), labelNames(wf.GetMetric()[0]))
		}
		if wf.GetType() == dto.MetricType_HISTOGRAM && !slices.Equal(bucketBounds(gf.GetMetric()[0]), bucketBounds(wf.GetMetric()[0])) {
			t.Errorf("%s: buckets %v, capture %v", name, bucketBounds(gf.GetMetric()[0]), bucketBounds(wf.GetMetric()[0]))
		}
		if gf.GetHelp() != wf.GetHelp() {
			t.Errorf("%s: help %q, capture %q", name, gf.GetHelp(), wf.GetHelp())
		}
	}
	if checked < 74 {
		t.Fatalf("only %d families compared", checked)
	}
	// Every counter and histogram has its _created gauge, stamped at start.
	start := float64(s.startNs.Load()) / 1e9
	for _, name := range []string{"vllm:prompt_tokens_created", "vllm:request_success_created", "vllm:time_to_first_token_seconds_created", "vllm:iteration_tokens_total_created"} {
		v := mustSample(t, got, name, engine0)
		if v < start-1 || v > start+5 {
			t.Errorf("%s = %v, start %v", name, v, start)
		}
	}
}

// TestProcessCollector: each sim's /metrics has the process series vLLM's prometheus_client
// exports, read from the OS (this test process): several sims in one process each have them,
// exactly vLLM's set, and process_start_time_seconds once, the simulated engine's start.
func TestProcessCollector(t *testing.T) {
	a, b := startSim(t, fastConfig()), startSim(t, fastConfig())
	for _, s := range []*Server{a, b} {
		got := scrape(t, s.URL())
		var names []string
		for name := range got {
			if strings.HasPrefix(name, "process_") {
				names = append(names, name)
			}
		}
		sort.Strings(names)
		want := []string{"process_cpu_seconds_total", "process_max_fds", "process_open_fds",
			"process_resident_memory_bytes", "process_start_time_seconds", "process_virtual_memory_bytes"}
		if !slices.Equal(names, want) {
			t.Errorf("process families %v, want %v", names, want)
		}
		if _, ok := got["process_cpu_seconds_created"]; ok {
			t.Error("process_cpu_seconds_total has a _created gauge, which vLLM's page does not")
		}
		if rss := mustSample(t, got, "process_resident_memory_bytes", nil); rss < 1<<20 {
			t.Errorf("process_resident_memory_bytes %v", rss)
		}
		if fds := mustSample(t, got, "process_open_fds", nil); fds < 3 {
			t.Errorf("process_open_fds %v", fds)
		}
		if st, want := mustSample(t, got, "process_start_time_seconds", nil), float64(s.startNs.Load())/1e9; st != want {
			t.Errorf("process_start_time_seconds %v, the simulated start %v", st, want)
		}
	}
}

// TestCountersMoveByTheWorkDone sends a mixed batch and checks every counter delta against
// the sums of what the responses reported.
func TestCountersMoveByTheWorkDone(t *testing.T) {
	cfg := fastConfig()
	cfg.StopProbability = 0.5
	gtPath := withGroundTruth(t, &cfg)
	s := startSim(t, cfg)
	// Warm up, so the deltas do not start at zero.
	resp := post(t, s.URL(), chatBody("warm up", 3, false, nil), nil)
	resp.Body.Close()
	pre := scrape(t, s.URL())

	const n = 12
	var mu sync.Mutex
	var promptSum, genSum int
	reasons := map[string]int{}
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			prompt := fmt.Sprintf("unique%d ", i) + words(2+5*i) // no shared prefix blocks
			stream := i%2 == 0
			resp := post(t, s.URL(), chatBody(prompt, 5+i, stream, nil), map[string]string{"X-Request-Id": fmt.Sprintf("cnt-%d", i)})
			defer resp.Body.Close()
			var p, g int
			var fin string
			if stream {
				evs, err := readSSE(t, resp.Body)
				if err != nil {
					t.Error(err)
					return
				}
				r := summarise(t, evs)
				p, g, fin = num(t, r.usage, "prompt_tokens"), num(t, r.usage, "completion_tokens"), r.finish
			} else {
				var out struct {
					Choices []struct {
						FinishReason string `json:"finish_reason"`
					}
					Usage struct {
						Prompt     int `json:"prompt_tokens"`
						Completion int `json:"completion_tokens"`
					}
				}
				if err := decodeJSON(resp, &out); err != nil {
					t.Error(err)
					return
				}
				p, g, fin = out.Usage.Prompt, out.Usage.Completion, out.Choices[0].FinishReason
			}
			if p != 3+5*i {
				t.Errorf("request %d: prompt_tokens %d, want %d", i, p, 3+5*i)
			}
			mu.Lock()
			promptSum += p
			genSum += g
			reasons[fin]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	post := scrape(t, s.URL())
	delta := func(name string, labels map[string]string) float64 {
		return mustSample(t, post, name, labels) - mustSample(t, pre, name, labels)
	}
	lbl := func(k, v string) map[string]string {
		m := map[string]string{k: v}
		for a, b := range engine0 {
			m[a] = b
		}
		return m
	}
	if reasons["stop"] == 0 || reasons["length"] == 0 {
		t.Fatalf("want both finish reasons with stop-prob 0.5, got %v", reasons)
	}
	for _, r := range []string{"stop", "length"} {
		if d := delta("vllm:request_success_total", lbl("finished_reason", r)); d != float64(reasons[r]) {
			t.Errorf("request_success_total{%s} +%v, want %d", r, d, reasons[r])
		}
	}
	for _, r := range []string{"abort", "error", "repetition"} {
		if d := delta("vllm:request_success_total", lbl("finished_reason", r)); d != 0 {
			t.Errorf("request_success_total{%s} +%v", r, d)
		}
	}
	checks := []struct {
		name string
		want float64
	}{
		{"vllm:prompt_tokens_total", float64(promptSum)},
		{"vllm:generation_tokens_total", float64(genSum)},
		{"vllm:prefix_cache_queries_total", float64(promptSum)},
		{"vllm:prompt_tokens_cached_total", 0},
		{"vllm:num_preemptions_total", 0},
		{"vllm:time_to_first_token_seconds", n},
		{"vllm:e2e_request_latency_seconds", n},
		{"vllm:request_queue_time_seconds", n},
		{"vllm:request_prefill_time_seconds", n},
		{"vllm:request_decode_time_seconds", n},
		{"vllm:request_inference_time_seconds", n},
		{"vllm:request_time_per_output_token_seconds", n},
		{"vllm:request_prompt_tokens", n},
		{"vllm:request_generation_tokens", n},
		{"vllm:request_params_max_tokens", n},
		{"vllm:request_num_preemptions", n},
		{"vllm:inter_token_latency_seconds", float64(genSum - n)},
	}
	for _, c := range checks {
		if d := delta(c.name, engine0); d != c.want {
			t.Errorf("%s +%v, want %v", c.name, d, c.want)
		}
	}
	if d := delta("vllm:prompt_tokens_by_source_total", lbl("source", "local_compute")); d != float64(promptSum) {
		t.Errorf("prompt_tokens_by_source{local_compute} +%v, want %d", d, promptSum)
	}
	sumDelta := func(name string) float64 {
		return histSum(t, post, name, engine0) - histSum(t, pre, name, engine0)
	}
	if d := sumDelta("vllm:request_prompt_tokens"); d != float64(promptSum) {
		t.Errorf("request_prompt_tokens sum +%v, want %d", d, promptSum)
	}
	if d := sumDelta("vllm:request_generation_tokens"); d != float64(genSum) {
		t.Errorf("request_generation_tokens sum +%v, want %d", d, genSum)
	}
	// iteration_tokens_total sums prompt tokens (at their first token) and generated tokens.
	if d := sumDelta("vllm:iteration_tokens_total"); d != float64(promptSum+genSum) {
		t.Errorf("iteration_tokens_total sum +%v, want %d", d, promptSum+genSum)
	}
	// ITL sum = decode time sum, as in the capture's known deltas.
	if a, b := sumDelta("vllm:inter_token_latency_seconds"), sumDelta("vllm:request_decode_time_seconds"); !near(a, b, 1e-6) {
		t.Errorf("ITL sum %v != decode time sum %v", a, b)
	}
	// Histogram sums equal the ground truth's durations.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var e2e, queue float64
	recs := readGroundTruth(t, gtPath)
	if len(recs) != n+1 {
		t.Fatalf("%d ground-truth lines, want %d", len(recs), n+1)
	}
	for _, g := range recs[0:] {
		if g.RequestID[:4] != "cnt-" {
			continue
		}
		e2e += float64(*g.FinishedNs-*g.ArrivalNs) / 1e9
		queue += float64(*g.ScheduledNs-*g.ArrivalNs) / 1e9
	}
	if d := sumDelta("vllm:e2e_request_latency_seconds"); !near(d, e2e, 1e-6) {
		t.Errorf("e2e sum +%v, ground truth %v", d, e2e)
	}
	if d := sumDelta("vllm:request_queue_time_seconds"); !near(d, queue, 1e-6) {
		t.Errorf("queue sum +%v, ground truth %v", d, queue)
	}
}

func near(a, b, eps float64) bool { return a-b < eps && b-a < eps }

func TestEnginesLabels(t *testing.T) {
	cfg := fastConfig()
	cfg.Engines = 3
	s := startSim(t, cfg)
	for i := 0; i < 6; i++ {
		resp := post(t, s.URL(), chatBody("a b", 2, false, nil), nil)
		resp.Body.Close()
	}
	mfs := scrape(t, s.URL())
	for e := 0; e < 3; e++ {
		l := map[string]string{"engine": itoa(e), "model_name": "inferprobe-sim", "finished_reason": "length"}
		if v := mustSample(t, mfs, "vllm:request_success_total", l); v != 2 {
			t.Errorf("engine %d: %v successes, want 2 (round-robin)", e, v)
		}
		if v := mustSample(t, mfs, "vllm:cache_config_info", map[string]string{"engine": itoa(e)}); v != 1 {
			t.Errorf("cache_config_info engine %d = %v", e, v)
		}
	}
	if _, ok := sample(mfs, "vllm:num_requests_running", map[string]string{"engine": "3"}); ok {
		t.Errorf("engine 3 exists")
	}
}

// TestPrefixCacheHits sends one long prompt twice: the second prefill skips the cached
// blocks, the counters say so, and the ground truth shows the shorter prefill.
func TestPrefixCacheHits(t *testing.T) {
	cfg := fastConfig()
	cfg.PrefillTokensPerSec = 20000 // 200 tokens ≈ 10 ms of prefill
	gtPath := withGroundTruth(t, &cfg)
	s := startSim(t, cfg)
	prompt := words(200)
	for i := 0; i < 2; i++ {
		resp := post(t, s.URL(), chatBody(prompt, 2, false, nil), map[string]string{"X-Request-Id": fmt.Sprintf("pc-%d", i)})
		resp.Body.Close()
	}
	mfs := scrape(t, s.URL())
	// 200 words = 12 full blocks of 16 (192 tokens); the second request hits all 12.
	if v := mustSample(t, mfs, "vllm:prefix_cache_hits_total", engine0); v != 192 {
		t.Errorf("prefix_cache_hits_total %v, want 192", v)
	}
	if v := mustSample(t, mfs, "vllm:prefix_cache_queries_total", engine0); v != 400 {
		t.Errorf("prefix_cache_queries_total %v, want 400", v)
	}
	if v := mustSample(t, mfs, "vllm:prompt_tokens_cached_total", engine0); v != 192 {
		t.Errorf("prompt_tokens_cached_total %v", v)
	}
	if v := mustSample(t, mfs, "vllm:prompt_tokens_by_source_total", map[string]string{"source": "local_cache_hit"}); v != 192 {
		t.Errorf("local_cache_hit %v", v)
	}
	if v := histSum(t, mfs, "vllm:request_prefill_kv_computed_tokens", engine0); v != 200+8 {
		t.Errorf("prefill_kv_computed sum %v, want 208", v)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	g := gtByID(t, readGroundTruth(t, gtPath))
	a, b := g["pc-0"], g["pc-1"]
	if *a.CachedTokens != 0 || *b.CachedTokens != 192 {
		t.Errorf("cached tokens %d, %d", *a.CachedTokens, *b.CachedTokens)
	}
	pa := *a.FirstTokenNs - *a.ScheduledNs
	pb := *b.FirstTokenNs - *b.ScheduledNs
	if pb >= pa {
		t.Errorf("prefill with cache hit %v not shorter than without %v", time.Duration(pb), time.Duration(pa))
	}
}

// TestPreemptionUnderKVPressure runs more decode demand than the KV cache holds.
func TestPreemptionUnderKVPressure(t *testing.T) {
	cfg := fastConfig()
	cfg.NumGPUBlocks = 24
	cfg.BlockSize = 4
	cfg.MaxModelLen = 96
	cfg.EnablePrefixCaching = false
	gtPath := withGroundTruth(t, &cfg)
	s := startSim(t, cfg)
	const n = 6
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp := post(t, s.URL(), chatBody(words(8), 40, true, nil), map[string]string{"X-Request-Id": fmt.Sprintf("pre-%d", i)})
			defer resp.Body.Close()
			evs, err := readSSE(t, resp.Body)
			if err != nil {
				t.Error(err)
				return
			}
			r := summarise(t, evs)
			if r.finish != "length" || num(t, r.usage, "completion_tokens") != 40 || len(strings.Fields(r.content)) != 40 {
				t.Errorf("request %d: finish %q usage %v", i, r.finish, r.usage)
			}
		}()
	}
	wg.Wait()
	mfs := scrape(t, s.URL())
	pre := mustSample(t, mfs, "vllm:num_preemptions_total", engine0)
	if pre == 0 {
		t.Fatalf("no preemption: 6 × 48 tokens need 72 blocks of 4, the cache has 24")
	}
	if v := histSum(t, mfs, "vllm:request_num_preemptions", engine0); v != pre {
		t.Errorf("per-request preemptions sum %v != num_preemptions_total %v", v, pre)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, g := range readGroundTruth(t, gtPath) {
		total += *g.Preemptions
	}
	if float64(total) != pre {
		t.Errorf("ground truth preemptions %d, metric %v", total, pre)
	}
}

// TestQueueingUnderOverload offers more concurrent requests than the batch cap: requests
// wait (num_requests_waiting > 0 while running) and TTFT grows with queue position.
func TestQueueingUnderOverload(t *testing.T) {
	cfg := fastConfig()
	cfg.MaxNumSeqs = 2
	cfg.DecodeStepBase = 2 * time.Millisecond
	gtPath := withGroundTruth(t, &cfg)
	s := startSim(t, cfg)
	const n = 8
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp := post(t, s.URL(), chatBody("queue me", 10, true, map[string]any{"ignore_eos": true}), map[string]string{"X-Request-Id": fmt.Sprintf("q-%d", i)})
			defer resp.Body.Close()
			if _, err := readSSE(t, resp.Body); err != nil {
				t.Error(err)
			}
		}()
	}
	maxWaiting, maxRunning := 0.0, 0.0
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		mfs := scrape(t, s.URL())
		maxWaiting = max(maxWaiting, mustSample(t, mfs, "vllm:num_requests_waiting", engine0))
		maxRunning = max(maxRunning, mustSample(t, mfs, "vllm:num_requests_running", engine0))
		if maxWaiting > 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	wg.Wait()
	if maxWaiting == 0 || maxRunning > 2 {
		t.Errorf("max waiting %v, max running %v (cap 2)", maxWaiting, maxRunning)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	recs := readGroundTruth(t, gtPath)
	if len(recs) != n {
		t.Fatalf("%d ground-truth lines", len(recs))
	}
	sort.Slice(recs, func(i, j int) bool { return *recs[i].ScheduledNs < *recs[j].ScheduledNs })
	var finishes []int64
	for _, g := range recs {
		finishes = append(finishes, *g.FinishedNs)
	}
	slices.Sort(finishes)
	// With a batch cap of 2, the k-th request scheduled (from 0) waited until k-1 others
	// had finished.
	for k := 2; k < n; k++ {
		if *recs[k].ScheduledNs < finishes[k-2] {
			t.Errorf("request %d scheduled at %d, before the %d-th finish at %d", k, *recs[k].ScheduledNs, k-1, finishes[k-2])
		}
	}
	ttft := func(g GroundTruth) int64 { return *g.FirstTokenNs - *g.ArrivalNs }
	queue := func(g GroundTruth) int64 { return *g.ScheduledNs - *g.ArrivalNs }
	first, last := recs[0], recs[n-1]
	// The last one waits behind at least two pairs of 10-token requests (≥ 20 steps of 2 ms).
	if ttft(last) <= ttft(first) || queue(last) < int64(40*time.Millisecond) {
		t.Errorf("TTFT first %v last %v, queue last %v", time.Duration(ttft(first)), time.Duration(ttft(last)), time.Duration(queue(last)))
	}
}
