package analyze

import (
	"errors"
	"strings"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/join"
)

const serverDomain = "h/boot1/unix_epoch_ns"

func headerRec(run string) rec {
	return rec{"event_type": "infer.artifact", "schema_version": 2, "event_id": "artifact", "artifact_kind": "inference_jsonl",
		"created_at_ns": start, "metadata": rec{"boot_id": "boot1"},
		"context": rec{"run_id": run, "session_id": "s1", "producer_id": "inferprobe.profile", "source": "inferprobe.profile",
			"host": "h", "pid": 1, "clock_domain": serverDomain, "clock_kind": "wall", "collection_mode": "active", "provenance": "observed"}}
}

// serverRSS polls the server's RSS every 100 ms from start−0.5 s to start+2.5 s; the value
// is 1000 + the poll index.
func serverRSS(run string) []artifact.TelemetrySample {
	var out []artifact.TelemetrySample
	for i := int64(0); i <= 30; i++ {
		out = append(out, artifact.TelemetrySample{
			Scope: artifact.ScopeServerProcess, ClockDomain: serverDomain, CounterOwner: artifact.OwnerOperatingSystemProcess,
			RunID:        run,
			Identity:     artifact.TelemetryIdentity{Host: "h", PID: 7, ProcessStartNS: 1, BootID: ps("boot1")},
			ObservedAtNS: start - second/2 + i*second/10, Metric: artifact.MetricProcessRSSBytes, ValueBytes: p64(1000 + i),
			State: artifact.SampleValid, Source: "psutil", IntervalMS: 100, Provenance: artifact.ProvenanceObserved,
		})
	}
	return out
}

func serverRecords(extra ...rec) []rec {
	recs := append([]rec{headerRec("run-1"), sessionRec("completed"), windowRec(),
		{"event_type": "infer.system_sample", "schema_version": 1, "session_id": "s1", "timestamp_ns": start + second/2,
			"sampler": "psutil", "process_rss_bytes": 4242, "device_used_bytes": nil, "observation_scope": "client_local"}},
		tenRequests()...)
	return append(recs, extra...)
}

// No telemetry leaves the join not configured and keeps the
// client-local peak.
func TestReportServerTelemetryNotConfigured(t *testing.T) {
	r, _, txt := analyzeRecs(t, Options{}, serverRecords()...)
	sj := r.Telemetry["server_join"].(map[string]any)
	if sj["status"] != "not_configured" {
		t.Fatalf("server_join %v", sj)
	}
	m := r.Cases["c1"].Memory
	if m.ServerCoverage.Status != "not_joined" || m.PeakProcessRSSBytes == nil || *m.PeakProcessRSSBytes != 4242 {
		t.Fatalf("memory %+v", m)
	}
	if strings.Contains(txt, "server coverage") || strings.Contains(txt, "Server telemetry") {
		t.Fatalf("text mentions server telemetry:\n%s", txt)
	}
}

func TestReportServerTelemetryJoined(t *testing.T) {
	st := &ServerTelemetry{Samples: serverRSS("run-1"), DirectServer: true}
	r, js, txt := analyzeRecs(t, Options{ServerTelemetry: st}, serverRecords()...)
	sj := r.Telemetry["server_join"].(join.ServerJoin)
	if sj.Status != "joined" || *sj.ClockAlignmentEvidence != "same_host" || sj.CaseCoverage["observed"] != 1 {
		t.Fatalf("server_join %+v", sj)
	}
	m := r.Cases["c1"].Memory
	// Measured span start → drained = [start, start+2 s]: polls 5..25 count.
	if m.ServerCoverage.Status != "observed" || *m.ServerCoverage.CountedWindowNs != [2]int64{start, start + 2*second} {
		t.Fatalf("coverage %+v", m.ServerCoverage)
	}
	o := m.ServerObservations[artifact.MetricProcessRSSBytes].(*join.Observation)
	if *o.MaximumRecordedBytes != 1025 || o.ValidSamples != 21 {
		t.Fatalf("observation %+v", o)
	}
	if *m.PeakProcessRSSBytes != 4242 || m.ObservationScope != "client_local" {
		t.Fatalf("client-local peak changed: %+v", m)
	}
	for _, want := range []string{`"maximum_recorded_bytes": 1025`, `"server_targets": [`, `"route_evidence": "operator_declared_direct"`} {
		if !strings.Contains(js, want) {
			t.Errorf("JSON lacks %s", want)
		}
	}
	if !strings.Contains(txt, "Server telemetry: joined (clock evidence same_host; cases observed 1, partial 0, empty 0)") ||
		!strings.Contains(txt, "  server coverage: observed") {
		t.Fatalf("text:\n%s", txt)
	}
}

// The client report stays intact.
func TestReportServerTelemetryRunMismatch(t *testing.T) {
	st := &ServerTelemetry{Samples: serverRSS("run-2"), DirectServer: true}
	r, _, txt := analyzeRecs(t, Options{ServerTelemetry: st}, serverRecords()...)
	sj := r.Telemetry["server_join"].(join.ServerJoin)
	if sj.Status != "unjoined" || *sj.Reason != join.ReasonRunIDMismatch || *sj.ArtifactRunID != "run-1" || sj.TelemetryRunIDs[0] != "run-2" {
		t.Fatalf("server_join %+v", sj)
	}
	if r.Summary.SuccessfulRequests != 10 || r.Cases["c1"].Memory.ServerCoverage.Status != "not_joined" {
		t.Fatalf("report %+v", r.Summary)
	}
	if !strings.Contains(txt, "Server telemetry: unjoined (run_id_mismatch)") {
		t.Fatalf("text:\n%s", txt)
	}
}

// A malformed infer.clock_alignment record is invalid input.
func TestReportServerTelemetryMalformedAlignment(t *testing.T) {
	bad := rec{"event_type": "infer.clock_alignment", "schema_version": 2, "event_id": "x", "metadata": rec{},
		"context":           rec{"run_id": "run-1", "clock_domain": "o/b/unix_epoch_ns"},
		"from_clock_domain": "o/b/unix_epoch_ns", "to_clock_domain": serverDomain, "offset_ns": 0, "uncertainty_ns": -1,
		"valid_from_ns": nil, "valid_to_ns": nil}
	st := &ServerTelemetry{Samples: serverRSS("run-1"), DirectServer: true}
	_, err := Analyze(writeArtifact(t, serverRecords(bad)...), Options{ServerTelemetry: st})
	if !errors.Is(err, join.ErrInvalidTelemetry) {
		t.Fatalf("err = %v", err)
	}
}
