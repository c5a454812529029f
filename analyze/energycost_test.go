package analyze

import (
	"math"
	"strings"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/join"
)

// serverEnergy is the GPU energy counter of the server of serverRSS, read every 100 ms
// from start−0.5 s to start+2.5 s at a constant watts.
func serverEnergy(run string, watts float64) []artifact.TelemetrySample {
	var out []artifact.TelemetrySample
	for i := int64(0); i <= 30; i++ {
		at := start - second/2 + i*second/10
		out = append(out, artifact.TelemetrySample{
			Scope: artifact.ScopeGPUDevice, ClockDomain: serverDomain, CounterOwner: artifact.OwnerGPUDevice,
			RunID:        run,
			Identity:     artifact.TelemetryIdentity{Host: "h", PID: 7, ProcessStartNS: 1, BootID: ps("boot1"), DeviceUUID: ps("GPU-1")},
			ObservedAtNS: at, Metric: artifact.MetricDeviceEnergyMillijoules,
			ValueMillijoules: p64(1_000_000 + int64(watts*float64(i)*100)),
			State:            artifact.SampleValid, Source: "nvml.total_energy_consumption", IntervalMS: 100, Provenance: artifact.ProvenanceObserved,
		})
	}
	return out
}

// A joined energy counter at 300 W over the case's 2 s measured span is 600 J: the ten
// successful requests' 40 output tokens cost 15 J each, 60 J a request; the text says so.
func TestReportEnergyPerToken(t *testing.T) {
	samples := append(serverRSS("run-1"), serverEnergy("run-1", 300)...)
	st := &ServerTelemetry{Samples: samples, DirectServer: true}
	r, js, txt := analyzeRecs(t, Options{ServerTelemetry: st}, serverRecords()...)
	c := r.Cases["c1"]
	e := c.Energy
	if e.Status != join.EnergyObserved || !close6(e.Joules, 600) || !close6(e.MeanPowerW, 300) || c.Tokens.OutputTokens != 40 ||
		!close6(e.JoulesPerOutputToken, 15) || !close6(e.JoulesPerRequest, 60) {
		t.Fatalf("energy %+v (output tokens %d)", e, c.Tokens.OutputTokens)
	}
	if !strings.Contains(txt, "energy: 600 J over 2.00 s (mean 300 W), 15.0 J/output token, 60.0 J/request") {
		t.Fatalf("text:\n%s", txt)
	}
	if !strings.Contains(js, `"joules_per_output_token": 15`) {
		t.Fatalf("json lacks joules_per_output_token:\n%s", js)
	}
}

// Without server telemetry the energy block says not_joined and the text has no energy line.
func TestReportEnergyNotJoined(t *testing.T) {
	r, _, txt := analyzeRecs(t, Options{}, serverRecords()...)
	if e := r.Cases["c1"].Energy; e.Status != join.EnergyNotJoined || e.Joules != nil || e.JoulesPerOutputToken != nil {
		t.Fatalf("energy %+v", e)
	}
	if strings.Contains(txt, "energy:") {
		t.Fatalf("text:\n%s", txt)
	}
}

func close6(v *float64, want float64) bool {
	return v != nil && math.Abs(*v-want) <= 1e-6*math.Max(1, math.Abs(want))
}

// The cost of a case is the server's dollars per hour over its token throughput: $3.60/h
// at 40 output tokens/s is $25 per million output tokens (120 total tokens/s: $8.33); the
// per-GPU form multiplies out; bad rates are refused.
func TestReportCost(t *testing.T) {
	records := append([]rec{sessionRec("running")}, tenRequests()...)
	records = append(records, windowRec(), workloadRec(rec{"mode": "fixed-rate", "rate_per_second": 10}, 10), sessionRec("completed"))
	gpus := 2
	for _, tc := range []struct {
		rate  CostRate
		basis string
		line  string
	}{
		{CostRate{USDPerHour: f64Ptr(3.6)}, "server", "cost: $3.60/h: $25.0 per million output tokens, $8.33 per million total tokens"},
		{CostRate{USDPerGPUHour: f64Ptr(1.8), GPUs: &gpus}, "per_gpu", "cost: $3.60/h (2 GPUs × $1.80/h): $25.0 per million output tokens"},
	} {
		r, _, txt := analyzeRecs(t, Options{Cost: &tc.rate}, records...)
		c := r.Cases["c1"].Cost
		if c == nil || c.Basis != tc.basis || !close6(c.USDPerHour, 3.6) || !close6(c.USDPerMillionOutputTokens, 25) ||
			!close6(c.USDPerMillionTotalTokens, 3.6/3600/120*1e6) {
			t.Fatalf("cost %+v", c)
		}
		if !strings.Contains(txt, tc.line) {
			t.Fatalf("text lacks %q:\n%s", tc.line, txt)
		}
	}
	r, _, _ := analyzeRecs(t, Options{}, records...)
	if r.Cases["c1"].Cost != nil {
		t.Fatal("cost without a rate")
	}
	zero, neg := 0, -1.0
	for _, bad := range []CostRate{{}, {USDPerHour: &neg}, {USDPerGPUHour: f64Ptr(2)}, {USDPerGPUHour: f64Ptr(2), GPUs: &zero},
		{USDPerHour: f64Ptr(1), USDPerGPUHour: f64Ptr(1), GPUs: &gpus}, {USDPerHour: f64Ptr(math.Inf(1))}} {
		if bad.Validate() == nil {
			t.Errorf("rate %+v accepted", bad)
		}
	}
}
