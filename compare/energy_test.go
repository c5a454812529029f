package compare

import (
	"context"
	"math"
	"testing"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/internal/synth"
	"github.com/inferprobe/inferprobe/join"
	"github.com/inferprobe/inferprobe/run"
)

// energySamples is a GPU energy counter read every 100 ms over [from, to] (Unix ns) at a
// constant watts, on a server host whose clock the operator declares equal to the client's.
func energySamples(from, to int64, watts float64) []artifact.TelemetrySample {
	var out []artifact.TelemetrySample
	for at := from; at <= to; at += 100_000_000 {
		out = append(out, artifact.TelemetrySample{
			Scope: artifact.ScopeGPUDevice, ClockDomain: "gpu-host/unix_epoch_ns", CounterOwner: artifact.OwnerGPUDevice,
			RunID:            synth.RunID,
			Identity:         artifact.TelemetryIdentity{Host: "gpu-host", PID: 9, ProcessStartNS: 1, DeviceUUID: artifact.Ptr("GPU-1")},
			ObservedAtNS:     at,
			Metric:           artifact.MetricDeviceEnergyMillijoules,
			ValueMillijoules: artifact.Ptr(int64(watts * float64(at-from) / 1e6)),
			State:            artifact.SampleValid, Source: "nvml.total_energy_consumption", IntervalMS: 100, Provenance: artifact.ProvenanceObserved,
		})
	}
	return out
}

// Energy per output token is compared side by side: the same run drawing 400 W and then
// 500 W costs 25% more joules per output token.
func TestCompareEnergy(t *testing.T) {
	path := writeSynth(t, t.TempDir(), "run.jsonl", synth.Run{Requests: 400, Cases: 1, Seed: 2})
	rep, err := run.Analyze(context.Background(), path, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	span := rep.Cases[rep.CaseOrder[0]].Intervals.MeasuredSpan
	if span == nil {
		t.Fatal("no measured span")
	}
	zero := int64(0)
	telemetry := func(watts float64) analyze.Options {
		return analyze.Options{ServerTelemetry: &analyze.ServerTelemetry{DirectServer: true,
			Samples: energySamples(span.StartedAtNs-500_000_000, span.EndedAtNs+500_000_000, watts),
			Clock:   join.ClockFlags{OffsetNS: &zero, UncertaintyNS: &zero}}}
	}
	res, err := Run(context.Background(), Options{Base: []string{path}, Candidate: []string{path},
		BaseAnalysis: telemetry(400), CandidateAnalysis: telemetry(500)})
	if err != nil {
		t.Fatal(err)
	}
	e := res.Cases[0].Rates.JoulesPerOutputToken
	if e.Base == nil || e.Candidate == nil || math.Abs(*e.Relative-0.25) > 1e-6 {
		t.Fatalf("energy %v %v %v", e.Base, e.Candidate, e.Relative)
	}
}
