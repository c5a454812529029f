package prom

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/sim"
)

// End-to-end tests against the simulated vLLM engine (package sim), which
// serves vLLM V1's /metrics.

func fastSim(t *testing.T, mutate func(*sim.Config)) *sim.Server {
	t.Helper()
	cfg := sim.DefaultConfig()
	cfg.DecodeStepBase = time.Millisecond
	cfg.DecodeStepPerSeq = 20 * time.Microsecond
	cfg.PrefillTokensPerSec = 200000
	if mutate != nil {
		mutate(&cfg)
	}
	s, err := sim.Start(context.Background(), cfg, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// chat sends n non-streaming requests, 4 at a time, and returns the
// completion tokens the server reported in total.
func chat(t *testing.T, base string, n, maxTokens int) int {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	total, errs := 0, []string{}
	sem := make(chan struct{}, 4)
	client := &http.Client{Timeout: 30 * time.Second}
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			body, _ := json.Marshal(map[string]any{
				"model":      "inferprobe-sim",
				"messages":   []map[string]any{{"role": "user", "content": fmt.Sprintf("request %d: tell me about telemetry", i)}},
				"max_tokens": maxTokens,
			})
			resp, err := client.Post(base+"/v1/chat/completions", "application/json", bytes.NewReader(body))
			if err != nil {
				mu.Lock()
				errs = append(errs, err.Error())
				mu.Unlock()
				return
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			var out struct {
				Usage struct {
					CompletionTokens int `json:"completion_tokens"`
				} `json:"usage"`
			}
			if resp.StatusCode != 200 || json.Unmarshal(raw, &out) != nil {
				mu.Lock()
				errs = append(errs, fmt.Sprintf("HTTP %d %s", resp.StatusCode, raw))
				mu.Unlock()
				return
			}
			mu.Lock()
			total += out.Usage.CompletionTokens
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d requests failed: %v", len(errs), errs[0])
	}
	return total
}

func TestSimRequestSuccessDeltaEqualsRequests(t *testing.T) {
	const n = 24
	srv := fastSim(t, nil)
	s := newScraper(t, Config{URL: srv.URL() + "/metrics", Endpoint: srv.URL() + "/v1"})
	sink := &memSink{}
	p := NewPhaseSampler(s, sink, func(m string) { t.Errorf("warning: %s", m) })
	ctx := context.Background()
	p.PhaseStart(ctx, "c1", artifact.PhaseMeasured)
	generated := chat(t, srv.URL(), n, 16)
	p.PhaseEnd(ctx, "c1", artifact.PhaseMeasured)

	recs := sink.snapshot()
	b := analyze.VLLMCaseTelemetry(recs, "c1")
	if b.State != analyze.StateResolved {
		t.Fatalf("case %s %v", b.State, b.Reasons)
	}
	e := engine0(t, b)
	if d := e.Counters["request_success"].Delta; d == nil || *d != n {
		t.Errorf("request_success delta %v, want %d", deref(d), n)
	}
	if d := e.Counters["generation_tokens"].Delta; d == nil || *d != float64(generated) {
		t.Errorf("generation_tokens delta %v, want the %d completion tokens reported", deref(d), generated)
	}
	for _, f := range []string{"e2e_latency", "queue_time", "time_to_first_token", "request_prompt_tokens"} {
		if h := e.Histograms[f]; h == nil || h.State != analyze.StateResolved || h.Count != n {
			t.Errorf("%s %+v, want count %d", f, h, n)
		}
	}
	if h := e.Histograms["request_generation_tokens"]; h.Sum != float64(generated) {
		t.Errorf("request_generation_tokens sum %v, want %d", h.Sum, generated)
	}
	if e.Derived.KVCache.NumGPUBlocks == nil || *e.Derived.KVCache.NumGPUBlocks != 8192 || *e.Derived.KVCache.BlockSize != 16 {
		t.Errorf("kv cache %+v", e.Derived.KVCache)
	}
	if r := e.Derived.Rates.FinishedRequestsPerSecond; r == nil || *r != n/b.Window.Seconds {
		t.Errorf("finished rate %v over %v s", deref(r), b.Window.Seconds)
	}
	d := recs[0].Discovery
	if len(d.Absent) != 0 || len(d.Unknown) != 0 || strings.Join(d.ModelNames, ",") != "inferprobe-sim" {
		t.Errorf("discovery absent %v unknown %v models %v", d.Absent, d.Unknown, d.ModelNames)
	}
}

func TestSimRestartIsAnEngineRestart(t *testing.T) {
	srv := fastSim(t, func(c *sim.Config) { c.Faults.RestartAt = 300 * time.Millisecond })
	s := newScraper(t, Config{URL: srv.URL() + "/metrics"})
	start := s.Scrape(context.Background(), artifact.ScrapeMarkerPhaseStart, "c1", artifact.PhaseMeasured)
	if start.Status != artifact.ScrapeOK {
		t.Fatal(*start.Error)
	}
	var end artifact.MetricsScrape
	waitFor(t, "the simulated restart", func() bool {
		end = s.Scrape(context.Background(), artifact.ScrapeMarkerPhaseEnd, "c1", artifact.PhaseMeasured)
		return end.OK() && *end.Discovery.ProcessStartNS != *start.Discovery.ProcessStartNS
	})
	if end.ObservedAtNS <= start.ObservedAtNS {
		t.Fatalf("end observed at %d, start at %d", end.ObservedAtNS, start.ObservedAtNS)
	}
	scrapes := []artifact.MetricsScrape{start, end}
	b := analyze.VLLMCaseTelemetry(scrapes, "c1")
	if b.State != analyze.StateUnresolved || b.Reasons[0] != analyze.ReasonEngineRestart {
		t.Fatalf("case %s %v, want engine_restart", b.State, b.Reasons)
	}
	if c := engine0(t, b).Counters["request_success"]; c.Delta != nil || c.Reasons[0] != analyze.ReasonEngineRestart {
		t.Errorf("request_success %+v", c)
	}
	blk := analyze.VLLMTelemetry(scrapes, []string{"c1"}, nil)
	if len(blk.Engine.Epochs) != 2 || !strings.Contains(renderText(t, blk), "vllm: unresolved (engine_restart)") {
		t.Errorf("epochs %d text:\n%s", len(blk.Engine.Epochs), renderText(t, blk))
	}
}

func TestSimTwoEnginesTwoBlocks(t *testing.T) {
	const n = 8
	srv := fastSim(t, func(c *sim.Config) { c.Engines = 2 })
	s := newScraper(t, Config{URL: srv.URL() + "/metrics"})
	start := s.Scrape(context.Background(), artifact.ScrapeMarkerPhaseStart, "c1", artifact.PhaseMeasured)
	chat(t, srv.URL(), n, 8)
	end := s.Scrape(context.Background(), artifact.ScrapeMarkerPhaseEnd, "c1", artifact.PhaseMeasured)
	b := analyze.VLLMCaseTelemetry([]artifact.MetricsScrape{start, end}, "c1")
	if b.State != analyze.StateResolved || len(b.Engines) != 2 || b.Engines["0"] == nil || b.Engines["1"] == nil {
		t.Fatalf("state %s engines %v", b.State, keysOf(b.Engines))
	}
	total := 0.0
	for _, id := range []string{"0", "1"} {
		d := b.Engines[id].Counters["request_success"].Delta
		if d == nil || *d == 0 {
			t.Errorf("engine %s request_success %v", id, deref(d))
			continue
		}
		total += *d
	}
	if total != n {
		t.Errorf("engines' request_success deltas add to %v, want %d (each reported on its own)", total, n)
	}
	text := renderText(t, analyze.VLLMTelemetry([]artifact.MetricsScrape{start, end}, []string{"c1"}, nil))
	if !strings.Contains(text, "2 engines (engine=\"0\", \"1\");") || !strings.Contains(text, "  vllm engine 0: ") || !strings.Contains(text, "  vllm engine 1: ") {
		t.Errorf("text:\n%s", text)
	}
}

func TestSimMetricsFaults(t *testing.T) {
	srv := fastSim(t, func(c *sim.Config) { c.Faults.Metrics503 = 1 })
	r := newScraper(t, Config{URL: srv.URL() + "/metrics"}).Scrape(context.Background(), artifact.ScrapeMarkerPhaseStart, "c1", artifact.PhaseMeasured)
	if r.Status != artifact.ScrapeError || *r.Error != "HTTP 503" || *r.HTTPStatus != 503 || r.Scrape != nil {
		t.Errorf("503 fault: %+v", r)
	}
	srv = fastSim(t, func(c *sim.Config) { c.Faults.MetricsHTML = 1 })
	r = newScraper(t, Config{URL: srv.URL() + "/metrics"}).Scrape(context.Background(), artifact.ScrapeMarkerPhaseStart, "c1", artifact.PhaseMeasured)
	if r.Status != artifact.ScrapeError || !strings.HasPrefix(*r.Error, "unparseable response") || *r.HTTPStatus != 200 || r.Scrape != nil {
		t.Errorf("HTML fault: %+v %q", r, deref2(r.Error))
	}
}
