package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/daemon"
	"github.com/inferprobe/inferprobe/internal/testkit"
	"github.com/inferprobe/inferprobe/sim"
)

// needTool returns the path of a tool the integration tests need: missing, the test is
// skipped — except under CI (CI set), where .ci/run installs it and its absence fails.
func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not on PATH (.ci/run installs Debian's prometheus package)", name)
		}
		t.Skipf("%s is not on PATH: apt-get install -y prometheus", name)
	}
	return p
}

// startServe starts the daemon in-process on cfgText (a YAML configuration) and returns it
// with a channel of its finished runs.
func startServe(t *testing.T, cfgText string) (*daemon.Daemon, <-chan daemon.RunResult) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "inferprobe.yaml")
	if err := os.WriteFile(path, []byte(cfgText), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := daemon.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	runs := make(chan daemon.RunResult, 16)
	d := daemon.New(cfg, daemon.Options{Version: "test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnRunEnd: func(r daemon.RunResult) { runs <- r }})
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = d.Shutdown(ctx)
	})
	return d, runs
}

// promQuery runs an instant query against Prometheus's HTTP API and returns the samples'
// values by their label set printed as JSON.
func promQuery(t *testing.T, base, q string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if body.Status != "success" {
		t.Fatalf("query %s: %s", q, body.Error)
	}
	out := map[string]float64{}
	for _, r := range body.Data.Result {
		k, _ := json.Marshal(r.Metric)
		v, err := strconv.ParseFloat(fmt.Sprint(r.Value[1]), 64)
		if err != nil {
			t.Fatalf("query %s: value %v", q, r.Value[1])
		}
		out[string(k)] = v
	}
	return out
}

// one returns the single value of a query's result.
func one(t *testing.T, base, q string) float64 {
	t.Helper()
	m := promQuery(t, base, q)
	if len(m) != 1 {
		t.Fatalf("query %s: %d series, want 1: %v", q, len(m), m)
	}
	for _, v := range m {
		return v
	}
	return 0
}

func waitFor(t *testing.T, what string, timeout time.Duration, ok func() bool) {
	testkit.WaitFor(t, what, timeout, ok)
}

// TestServeWithPrometheus is the daemon's integration test with real parts: the daemon
// probes the in-process sim (spans over gRPC, /metrics scraped), Debian's Prometheus scrapes
// the daemon with the shipped rule files loaded, and the values Prometheus holds — SLO
// counters, histogram buckets at the SLO thresholds, recording rules, the burn-rate alert —
// are the ones the probe's artifact implies.
func TestServeWithPrometheus(t *testing.T) {
	promBin := needTool(t, "prometheus")
	rules, err := filepath.Glob(filepath.Join("..", "..", "dashboards", "rules", "*.yml"))
	if err != nil || len(rules) == 0 {
		t.Fatalf("no shipped rule files: %v", err)
	}
	grpcAddr := freeAddr(t)
	srv := startSim(t, func(c *sim.Config) {
		c.OTLPProtocol = sim.ProtocolGRPC
		c.OTLPBatchDelay = 200 * time.Millisecond
		c.OTLPTracesEndpoint = grpcAddr
		c.Seed = 11
		c.Faults.Reject503 = 0.25 // failures count as missed: a burn rate far above 14.4
	})
	metricsAddr := freeAddr(t)
	// Prometheus scrapes the daemon every second and evaluates the shipped rules.
	promAddr := freeAddr(t)
	var absRules []string
	for _, r := range rules {
		a, _ := filepath.Abs(r)
		absRules = append(absRules, a)
	}
	rulesJSON, _ := json.Marshal(absRules)
	promCfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: %s
scrape_configs:
  - job_name: inferprobe
    static_configs:
      - targets: [%q]
`, rulesJSON, metricsAddr)
	pdir := t.TempDir()
	if err := os.WriteFile(filepath.Join(pdir, "prometheus.yml"), []byte(promCfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, promBin, "--config.file="+filepath.Join(pdir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(pdir, "data"), "--web.listen-address="+promAddr, "--log.level=warn",
		"--enable-feature=exemplar-storage")
	var plog safeBuffer
	cmd.Stdout, cmd.Stderr = &plog, &plog
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus log:\n%s", plog.String())
		}
	})
	base := "http://" + promAddr
	// The daemon starts its first run at once and Prometheus scrapes a new target only after
	// its discovery's first update (about 5 s): the run lasts about 10 s, so that the
	// counters' 0 before the run's end is stored.
	waitFor(t, "Prometheus to be ready", 60*time.Second, func() bool {
		resp, err := http.Get(base + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	dir := t.TempDir()
	_, runs := startServe(t, fmt.Sprintf(`
listen: %s
receiver:
  http_listen: ""
  grpc_listen: %s
artifacts:
  dir: %s
slos:
  - name: chat
    criteria: ["ttft:50", "e2e:2000"]
    objective: 0.99
targets:
  - name: sim
    base_url: %s/v1
    model: %s
    metrics_url: default
    scrape_interval: 1s
probes:
  - name: steady
    target: sim
    slo: chat
    every: 1h
    spans_drain: 1s
    workload:
      arrival: poisson
      rate: [10]
      requests: 100
      seed: 5
      input-tokens: [64]
      output-tokens: [16]
      prompt-mode: unique
      extra-body: '{"ignore_eos": true}'
`, metricsAddr, grpcAddr, dir, srv.URL(), sim.DefaultConfig().Model))

	waitFor(t, "the first scrape of the daemon", 30*time.Second, func() bool {
		return len(promQuery(t, base, `inferprobe_probe_running{probe="steady"}`)) == 1
	})

	var run daemon.RunResult
	select {
	case run = <-runs:
	case <-time.After(90 * time.Second):
		t.Fatal("no probe run finished")
	}
	if run.Err != nil || run.Outcome != artifact.StatusCompleted || run.Report == nil {
		t.Fatalf("run %+v", run)
	}
	// What the artifact implies (the report is analyze's, from the artifact alone).
	rep, err := analyzeArtifactReportContext(context.Background(), run.Path, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Cases) != 1 {
		t.Fatalf("%d cases", len(rep.Cases))
	}
	var caseID string
	var ev *analyze.Evaluation
	for id, c := range rep.Cases {
		caseID, ev = id, c.SLO
	}
	if ev == nil || ev.Offered != 100 || ev.Missed == 0 || ev.Met == 0 {
		t.Fatalf("evaluation %+v: want 100 offered, some met and some missed", ev)
	}
	a, err := artifact.ReadFile(run.Path)
	if err != nil {
		t.Fatal(err)
	}
	traceOf := map[string]string{} // request_id → trace id of measured requests
	ok, ttftWithin, ttftN := 0, 0, 0
	ttftSum := 0.0
	for _, r := range a.Requests {
		if r.Phase != artifact.PhaseMeasured || r.Status != artifact.RequestOK {
			continue
		}
		if r.TraceID != nil {
			traceOf[r.RequestID] = *r.TraceID
		}
		ok++
		if r.TTFTMS != nil {
			ttftN++
			ttftSum += *r.TTFTMS / 1000
			if *r.TTFTMS <= 50 {
				ttftWithin++
			}
		}
	}

	sel := fmt.Sprintf(`probe="steady",case=%q`, caseID)
	waitFor(t, "Prometheus to scrape the finished run", 60*time.Second, func() bool {
		m := promQuery(t, base, `inferprobe_probe_runs_total{probe="steady",outcome="completed"}`)
		for _, v := range m {
			return v == 1
		}
		return false
	})
	if os.Getenv("SERVE_DEBUG") != "" {
		for _, q := range []string{`count_over_time(inferprobe_slo_requests_total[5m])`, `count_over_time(inferprobe_requests_total{status="ok"}[5m])`, `count_over_time(up[5m])`, `rate(inferprobe_slo_requests_total[5m])`, `inferprobe:slo_error_ratio:rate5m`} {
			t.Logf("%s: %v", q, promQuery(t, base, q))
		}
		resp, _ := http.Get(base + "/api/v1/rules")
		b, _ := io.ReadAll(resp.Body)
		t.Logf("rules: %.3000s", b)
	}
	waitFor(t, "the recording rules to be evaluated after the run", 30*time.Second, func() bool {
		return len(promQuery(t, base, `inferprobe:slo_error_ratio:rate5m{probe="steady"} > 0`)) == 1
	})

	for _, c := range []struct {
		q    string
		want float64
	}{
		{`inferprobe_slo_requests_total{outcome="met",` + sel + `}`, float64(ev.Met)},
		{`inferprobe_slo_requests_total{outcome="missed",` + sel + `}`, float64(ev.Missed)},
		{`inferprobe_slo_requests_total{outcome="unknown",` + sel + `}`, float64(ev.Unknown)},
		{`inferprobe_requests_total{status="ok",` + sel + `}`, float64(ok)},
		{`inferprobe_requests_total{status="rejected",` + sel + `}`, float64(rep.Cases[caseID].Population.Rejected)},
		{`inferprobe_ttft_seconds_count{` + sel + `}`, float64(ttftN)},
		// The SLO threshold is a classic bucket boundary: the bucket counts exactly the
		// requests within it.
		{`inferprobe_ttft_seconds_bucket{le="0.05",probe="steady"}`, float64(ttftWithin)},
		{`inferprobe_slo_attainment_ratio{bound="lower",` + sel + `}`, *ev.AttainmentLower},
		{`inferprobe_slo_attainment_ratio{bound="upper",` + sel + `}`, *ev.AttainmentUpper},
		{`inferprobe_goodput_requests_per_second{bound="lower",` + sel + `}`, *ev.GoodputLowerRPS},
		{`inferprobe_span_join_coverage_ratio{` + sel + `}`, *rep.Cases[caseID].Population.ServerEvidenceCoverage},
		{`inferprobe_slo_objective_ratio{probe="steady",slo="chat"}`, 0.99},
		{`inferprobe_scrape_up{target="sim"}`, 1},
	} {
		if got := one(t, base, c.q); math.Abs(got-c.want) > 1e-9*math.Max(1, math.Abs(c.want)) {
			t.Errorf("%s = %v, want %v (from the artifact)", c.q, got, c.want)
		}
	}
	if got := one(t, base, `inferprobe_ttft_seconds_sum{`+sel+`}`); math.Abs(got-ttftSum) > 1e-9*ttftSum {
		t.Errorf("ttft sum %v, want %v", got, ttftSum)
	}
	// Exemplars reach Prometheus (OpenMetrics scrape, exemplar storage): each names a measured
	// request of the artifact — by its request_id, as a UUID run id makes the X-Request-Id too
	// long to fit beside a trace id — with that request's trace id.
	resp, err := http.Get(base + "/api/v1/query_exemplars?query=" + url.QueryEscape(`inferprobe_ttft_seconds_bucket{probe="steady"}`) +
		fmt.Sprintf("&start=%d&end=%d", time.Now().Add(-10*time.Minute).Unix(), time.Now().Unix()))
	if err != nil {
		t.Fatal(err)
	}
	var ex struct {
		Data []struct {
			Exemplars []struct {
				Labels map[string]string `json:"labels"`
			} `json:"exemplars"`
		} `json:"data"`
	}
	err = json.NewDecoder(resp.Body).Decode(&ex)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	nEx := 0
	for _, series := range ex.Data {
		for _, e := range series.Exemplars {
			nEx++
			if tid, known := traceOf[e.Labels["request_id"]]; !known || tid != e.Labels["trace_id"] {
				t.Errorf("exemplar %v names no measured request of the artifact with that trace id", e.Labels)
			}
		}
	}
	if nEx == 0 {
		t.Error("Prometheus stored no exemplar of inferprobe_ttft_seconds")
	}
	// Recording rule: errors / judged requests over the window, which the run's counters
	// fill from 0 to their final values: missed / (met + missed).
	wantRatio := float64(ev.Missed) / float64(ev.Met+ev.Missed)
	if got := one(t, base, `inferprobe:slo_error_ratio:rate5m{probe="steady"}`); math.Abs(got-wantRatio) > 1e-9 {
		t.Errorf("inferprobe:slo_error_ratio:rate5m = %v, want missed/(met+missed) = %v", got, wantRatio)
	}
	// The burn rate (ratio / 1 % budget) is far above 14.4 on both page windows: the page
	// alert is pending or firing.
	if wantRatio/0.01 > 14.4 {
		waitFor(t, "the page burn-rate alert", 30*time.Second, func() bool {
			resp, err := http.Get(base + "/api/v1/alerts")
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			var body struct {
				Data struct {
					Alerts []struct {
						Labels map[string]string `json:"labels"`
						State  string            `json:"state"`
					} `json:"alerts"`
				} `json:"data"`
			}
			if json.NewDecoder(resp.Body).Decode(&body) != nil {
				return false
			}
			for _, al := range body.Data.Alerts {
				if al.Labels["alertname"] == "InferprobeSLOErrorBudgetBurn" && al.Labels["severity"] == "page" && al.Labels["probe"] == "steady" {
					return true
				}
			}
			return false
		})
	}
}

// safeBuffer is a bytes.Buffer safe for a child process's stdout and stderr together.
type safeBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *safeBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *safeBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
