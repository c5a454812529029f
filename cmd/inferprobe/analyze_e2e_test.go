package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/sim"
)

// simCounters returns the sim's vllm:request_success_total summed over every label set
// (finished_reason, engine) and vllm:generation_tokens_total, from its /metrics.
func simCounters(t *testing.T, srv *sim.Server) (success, generation float64) {
	t.Helper()
	resp, err := http.Get(srv.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	sum := func(name string) float64 {
		mf := mfs[name]
		if mf == nil {
			t.Fatalf("/metrics has no %s", name)
		}
		total := 0.0
		for _, m := range mf.GetMetric() {
			total += m.GetCounter().GetValue()
		}
		return total
	}
	return sum("vllm:request_success_total"), sum("vllm:generation_tokens_total")
}

// e2eReport is the part of the analysis JSON the end-to-end test checks.
type e2eReport struct {
	AnalysisVersion int `json:"analysis_version"`
	Summary         struct {
		TotalRequests      int            `json:"total_requests"`
		SuccessfulRequests int            `json:"successful_requests"`
		FailedRequests     int            `json:"failed_requests"`
		FailuresByStatus   map[string]int `json:"failures_by_status"`
		CaseCount          int            `json:"case_count"`
		SessionStatus      string         `json:"session_status"`
	} `json:"summary"`
	Cases map[string]struct {
		SuccessfulRequests int `json:"successful_requests"`
		Population         struct {
			Offered     int    `json:"offered"`
			Scheduled   *int64 `json:"scheduled"`
			Sent        int    `json:"sent"`
			Successful  int    `json:"successful"`
			CohortValid bool   `json:"cohort_valid"`
		} `json:"population"`
		Intervals struct {
			Rate *struct {
				Kind    string   `json:"kind"`
				Seconds *float64 `json:"seconds"`
			} `json:"rate"`
			RateReason *string `json:"rate_reason"`
		} `json:"intervals"`
		Throughput struct {
			RequestsPerSecond     *float64 `json:"requests_per_second"`
			OutputTokensPerSecond *float64 `json:"output_tokens_per_second"`
		} `json:"throughput"`
		Tokens struct {
			OutputTokens int64 `json:"output_tokens"`
		} `json:"tokens"`
		Streaming struct {
			Responses int `json:"responses"`
		} `json:"streaming"`
		Latency struct {
			Metrics map[string]struct {
				Successful map[string]struct {
					N int `json:"n"`
				} `json:"successful"`
			} `json:"metrics"`
		} `json:"latency"`
	} `json:"cases"`
}

func analyzeJSON(t *testing.T, path string) e2eReport {
	t.Helper()
	code, stdout, stderr := runCLI(t, "analyze", path, "--format", "json")
	if code != exitOK {
		t.Fatalf("analyze exit %d: %s", code, stderr)
	}
	var rep e2eReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestAnalyzeEndToEnd profiles the simulated engine in-process (closed loop, then Poisson),
// analyses the artifact, and checks the report's counts against the artifact itself and
// against the sim's own /metrics counters.
func TestAnalyzeEndToEnd(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		open bool
	}{
		{"closed", []string{"--concurrency", "4", "--requests", "30"}, false},
		{"poisson", []string{"--arrival", "poisson", "--rate", "150", "--requests", "40", "--max-in-flight", "16"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := sim.DefaultConfig()
			cfg.Seed = 9
			srv, err := sim.Start(context.Background(), cfg, "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			success0, gen0 := simCounters(t, srv)
			path := filepath.Join(t.TempDir(), "run.jsonl")
			args := append([]string{"profile", "--endpoint", srv.URL() + "/v1/chat/completions", "--model", cfg.Model,
				"--input-tokens", "48", "--output-tokens", "24", "--seed", "4", "--timeout", "20", "--quiet", "--output", path}, tc.args...)
			if code, stdout, stderr := runCLI(t, args...); code != exitOK {
				t.Fatalf("profile exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
			}
			success1, gen1 := simCounters(t, srv)
			rep := analyzeJSON(t, path)

			// what the artifact holds
			a, err := artifact.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var measured, ok int
			var outTokens int64
			byStatus := map[string]int{}
			caseID := ""
			for _, r := range a.Requests {
				if r.Phase != artifact.PhaseMeasured {
					continue
				}
				caseID = r.CaseID
				measured++
				byStatus[r.Status]++
				if r.Status == artifact.RequestOK {
					ok++
					if r.OutputTokens != nil {
						outTokens += *r.OutputTokens
					}
				}
			}
			wantN := 30
			if tc.open {
				wantN = 40
			}
			if measured != wantN || ok == 0 {
				t.Fatalf("artifact: %d measured requests, %d ok", measured, ok)
			}

			// report vs artifact
			if rep.AnalysisVersion != 5 || rep.Summary.TotalRequests != measured || rep.Summary.SuccessfulRequests != ok ||
				rep.Summary.FailedRequests != measured-ok || rep.Summary.CaseCount != 1 || rep.Summary.SessionStatus != "completed" {
				t.Fatalf("summary %+v; artifact %d measured, %d ok, statuses %v", rep.Summary, measured, ok, byStatus)
			}
			for s, n := range byStatus {
				if s != "ok" && rep.Summary.FailuresByStatus[s] != n {
					t.Errorf("failures_by_status[%s] = %d, artifact %d", s, rep.Summary.FailuresByStatus[s], n)
				}
			}
			c, found := rep.Cases[caseID]
			if !found {
				t.Fatalf("no case %s in %v", caseID, rep.Cases)
			}
			if c.SuccessfulRequests != ok || c.Population.Offered != measured || c.Population.Successful != ok ||
				c.Population.Sent != measured-byStatus["dropped"] || !c.Population.CohortValid || c.Tokens.OutputTokens != outTokens ||
				c.Streaming.Responses != ok || c.Latency.Metrics["client.e2e"].Successful["p50"].N != ok {
				t.Fatalf("case %+v; artifact %d measured, %d ok, %d output tokens", c, measured, ok, outTokens)
			}

			// report vs the server's own counters: every successful request finished in the
			// engine, and the tokens it generated are the output tokens the report counts.
			if got := success1 - success0; got != float64(rep.Summary.SuccessfulRequests) {
				t.Errorf("sim request_success_total +%v, report %d successful", got, rep.Summary.SuccessfulRequests)
			}
			if got := gen1 - gen0; got != float64(c.Tokens.OutputTokens) {
				t.Errorf("sim generation_tokens_total +%v, report %d output tokens", got, c.Tokens.OutputTokens)
			}

			// the rate interval and throughput
			var window *artifact.PhaseWindow
			for i := range a.PhaseWindows {
				if a.PhaseWindows[i].Phase == artifact.PhaseMeasured {
					window = &a.PhaseWindows[i]
				}
			}
			if window == nil || c.Intervals.Rate == nil || c.Intervals.Rate.Seconds == nil {
				t.Fatalf("window %+v rate %+v", window, c.Intervals.Rate)
			}
			wantKind, wantSeconds := "measured_span", float64(*window.DrainedAtNS-*window.StartedAtNS)/1e9
			if tc.open {
				wantKind, wantSeconds = "scheduled_window", float64(*window.ScheduledEndpointOffsetNS)/1e9
				if c.Population.Scheduled == nil || *c.Population.Scheduled != *window.ScheduledArrivals || *window.ScheduledArrivals != 40 {
					t.Errorf("scheduled %v, window %v", c.Population.Scheduled, *window.ScheduledArrivals)
				}
			}
			if c.Intervals.Rate.Kind != wantKind || math.Abs(*c.Intervals.Rate.Seconds-wantSeconds) > 1e-9 {
				t.Errorf("rate interval %s %v s, want %s %v s", c.Intervals.Rate.Kind, *c.Intervals.Rate.Seconds, wantKind, wantSeconds)
			}
			if r := c.Throughput.RequestsPerSecond; r == nil || math.Abs(*r-float64(ok)/wantSeconds) > 1e-9*(*r) {
				t.Errorf("requests/s %v, want %v", r, float64(ok)/wantSeconds)
			}
			if r := c.Throughput.OutputTokensPerSecond; r == nil || math.Abs(*r-float64(outTokens)/wantSeconds) > 1e-9*(*r) {
				t.Errorf("output tokens/s %v, want %v", r, float64(outTokens)/wantSeconds)
			}

			if tc.open {
				checkRecomputedEndpoint(t, path, wantSeconds)
			}
		})
	}
}

// checkRecomputedEndpoint removes scheduled_endpoint_offset_ns from the Poisson artifact's
// phase window: the analyze command recomputes it from the recorded workload
// (loadgen.WorkloadScheduler), so the rate interval is unchanged; without the scheduler it
// would be undeclared.
func checkRecomputedEndpoint(t *testing.T, path string, wantSeconds float64) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 16<<20)
	stripped := 0
	for sc.Scan() {
		line := sc.Bytes()
		if bytes.Contains(line, []byte(`"event_type":"infer.phase_window"`)) {
			dec := json.NewDecoder(bytes.NewReader(line))
			dec.UseNumber() // keep nanosecond integers exact
			var m map[string]any
			if err := dec.Decode(&m); err != nil {
				t.Fatal(err)
			}
			if m["phase"] == "measured" {
				m["scheduled_endpoint_offset_ns"] = nil
				stripped++
			}
			if line, err = json.Marshal(m); err != nil {
				t.Fatal(err)
			}
		}
		out.Write(line)
		out.WriteByte('\n')
	}
	if stripped != 1 {
		t.Fatalf("stripped %d windows", stripped)
	}
	edited := filepath.Join(t.TempDir(), "no-endpoint.jsonl")
	if err := os.WriteFile(edited, out.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	rep := analyzeJSON(t, edited)
	for _, c := range rep.Cases {
		if c.Intervals.Rate == nil || c.Intervals.Rate.Kind != "scheduled_window" || math.Abs(*c.Intervals.Rate.Seconds-wantSeconds) > 1e-9 {
			t.Errorf("recomputed rate interval %+v (reason %v), want scheduled_window of %v s", c.Intervals.Rate, c.Intervals.RateReason, wantSeconds)
		}
	}
	// the same artifact analysed without a scheduler has no endpoint
	rep2, err := analyzeArtifactReportContext(context.Background(), edited, noScheduler())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rep2.Cases {
		if c.Intervals.Rate != nil || c.Intervals.RateReason == nil || !strings.Contains(*c.Intervals.RateReason, "endpoint") {
			t.Errorf("without a scheduler: rate %+v reason %v", c.Intervals.Rate, c.Intervals.RateReason)
		}
	}
}

// noScheduler is Options whose scheduler can recompute nothing.
func noScheduler() analyze.Options {
	return analyze.Options{Scheduler: func(string) (int64, *int64, bool) { return 0, nil, false }}
}
