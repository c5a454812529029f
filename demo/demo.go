// Package demo is `inferprobe demo`: the simulated engine, the span receiver and the live
// exporter started in-process, and two small profile runs of the engine through the run
// pipeline — a closed loop and a Poisson case, streaming, with warmup, an SLO of
// TTFT ≤ 100 ms and e2e ≤ 1.5 s, a prefix-cache reset before the Poisson case, the engine's
// spans received over OTLP/gRPC and its /metrics scraped — each published as live
// inferprobe_* series, with the Grafana dashboards and Prometheus rules written beside the
// artifacts.
package demo

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/dashboards"
	"github.com/inferprobe/inferprobe/exporter"
	"github.com/inferprobe/inferprobe/loadgen"
	"github.com/inferprobe/inferprobe/loadgen/prompt"
	"github.com/inferprobe/inferprobe/loadgen/schedule"
	"github.com/inferprobe/inferprobe/run"
	"github.com/inferprobe/inferprobe/scrape/prom"
	"github.com/inferprobe/inferprobe/sim"
)

// Options configure a demo.
type Options struct {
	// Dir holds the artifacts and dashboards; "" makes a new temporary directory.
	Dir string
	// MetricsListen is the address of the live /metrics; when it is busy a free loopback
	// port is used instead (Warn says so).
	MetricsListen string
	// Version is inferprobe's version.
	Version string
	// Warn receives conditions the user should know about.
	Warn func(string)
}

// Demo is a started demo: the engine and /metrics run until Close.
type Demo struct {
	// Dir holds the artifacts; DashboardDir the dashboards (grafana/) and rules (rules/).
	Dir, DashboardDir string
	// EngineURL is the simulated engine's base URL, Model its model and SpansAddr the span
	// receiver's OTLP/gRPC address the engine exports to.
	EngineURL, Model, SpansAddr string
	// MetricsURL serves the live inferprobe_* series.
	MetricsURL string
	// Runs are the runs to carry out, in order.
	Runs []Run

	srv  *sim.Server
	msrv *http.Server
}

// Run is one profile run of the demo.
type Run struct {
	Title string

	spec   run.Spec
	exp    *exporter.Exporter
	labels exporter.Labels
}

// Spec is the run's pipeline spec (without a Warn or Hooks, which the caller sets), its
// exporter run started now: call it once, just before the run.
func (r *Run) Spec() run.Spec {
	s := r.spec
	s.Sinks = []artifact.Sink{r.exp.StartRun(r.labels)}
	return s
}

// Start starts the engine and the live /metrics and writes the dashboards. Errors: the
// directory cannot be made, nothing can listen, the engine does not start.
func Start(ctx context.Context, o Options) (*Demo, error) {
	if o.Warn == nil {
		o.Warn = func(string) {}
	}
	dir := o.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "inferprobe-demo-")
		if err != nil {
			return nil, err
		}
		dir = d
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	// The span receiver's gRPC port is chosen first: the engine exports to it.
	spansAddr, err := sim.FreeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	scfg := sim.DefaultConfig()
	scfg.OTLPTracesEndpoint, scfg.OTLPProtocol, scfg.OTLPBatchDelay = spansAddr, sim.ProtocolGRPC, 200*time.Millisecond
	srv, err := sim.Start(ctx, scfg, "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("start the simulated engine: %w", err)
	}
	d := &Demo{Dir: dir, DashboardDir: filepath.Join(dir, "dashboards"), EngineURL: srv.URL(), Model: scfg.Model, SpansAddr: spansAddr, srv: srv}
	policy, err := analyze.ParseSLOFlags([]string{"ttft:100", "e2e:1500"})
	if err != nil {
		d.Close()
		return nil, err
	}
	policy.Name = "demo"
	thresholds := map[string][]float64{}
	for _, c := range policy.Criteria {
		thresholds[c.Key()] = append(thresholds[c.Key()], c.MaxMs/1000)
	}
	exp := exporter.New(exporter.Options{Thresholds: thresholds, Version: o.Version})
	mln, err := net.Listen("tcp", o.MetricsListen)
	if err != nil {
		o.Warn(fmt.Sprintf("%s is busy (%v); /metrics listens on a free port instead", o.MetricsListen, err))
		if mln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			d.Close()
			return nil, err
		}
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", exp.Handler())
	d.msrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = d.msrv.Serve(mln) }()
	d.MetricsURL = "http://" + mln.Addr().String() + "/metrics"
	if err := dashboards.WriteAll(d.DashboardDir); err != nil {
		d.Close()
		return nil, err
	}
	if d.Runs, err = d.runs(exp, policy, o.Version); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// runs are the demo's two profile runs, each with its exporter run as a sink.
func (d *Demo) runs(exp *exporter.Exporter, policy *analyze.Policy, version string) ([]Run, error) {
	tok, err := prompt.TiktokenCounter("cl100k_base")
	if err != nil {
		return nil, err
	}
	defs := []struct {
		title, file, probe string
		cfg                loadgen.Config
	}{
		{"closed loop, 4 workers", "demo-closed.jsonl", "demo-closed", loadgen.Config{
			Arrival: schedule.Closed, Concurrency: []int{4}, Requests: 40, WarmupRequests: 4,
		}},
		{"Poisson arrivals at 20 req/s", "demo-poisson.jsonl", "demo-poisson", loadgen.Config{
			Arrival: schedule.Poisson, Rates: []float64{20}, Requests: 100, WarmupRequests: 4,
			PromptMode: prompt.Unique, CacheState: loadgen.CacheCold,
		}},
	}
	objective := 0.99
	var out []Run
	for _, r := range defs {
		c := r.cfg
		c.Endpoint = d.EngineURL + "/v1/chat/completions"
		c.Model = d.Model
		c.RunID = fmt.Sprintf("%s-%d", r.probe, time.Now().Unix())
		c.Timeout = 30 * time.Second
		c.Stream, c.StreamUsage = true, true
		c.InputTokens, c.OutputTokens = []int{256}, []int{64}
		c.UseRunSeed() // fresh prompts per demo run, as each probe run of serve draws them
		if c.CacheState == loadgen.CacheCold {
			c.CacheResetURL = d.EngineURL + "/reset_prefix_cache"
		}
		c.Defaults()
		if err := c.Validate(); err != nil {
			return nil, err
		}
		labels := exporter.Labels{Target: "sim", Model: d.Model, Probe: r.probe}
		exp.SetProbeConfig(labels, 0, policy.Name, &objective)
		if cases, err := c.Cases(); err == nil {
			exp.InitCases(labels, policy.Name, []string{cases[0].ID})
		}
		metrics, err := prom.DefaultMetricsURL(c.Endpoint)
		if err != nil {
			return nil, err
		}
		out = append(out, Run{Title: r.title, exp: exp, labels: labels, spec: run.Spec{
			Workload: &c, Tokenizer: tok, TokenizerName: "auto", Output: filepath.Join(d.Dir, r.file), Version: version,
			SLO:      &run.SLO{Policy: policy, Source: analyze.SourceFlags},
			Metrics:  &prom.Config{URL: metrics, Endpoint: c.Endpoint, Timeout: min(c.Timeout, 30*time.Second), Interval: time.Second},
			Receiver: &run.Receiver{GRPCListen: d.SpansAddr}, SpansDrain: time.Second,
		}})
	}
	return out, nil
}

// Close stops /metrics and the engine.
func (d *Demo) Close() {
	if d.msrv != nil {
		_ = d.msrv.Close()
	}
	if d.srv != nil {
		_ = d.srv.Close()
	}
}
