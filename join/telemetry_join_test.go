package join

import (
	"reflect"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
)

const (
	ms        = int64(1_000_000)
	runID     = "run-1"
	clientDom = "hostA/bootA/unix_epoch_ns"
	base      = int64(1_700_000_000_000_000_000)
)

// rss is a valid process RSS sample of the default server (hostA, bootA, pid 100) at
// base + atMS milliseconds with value v.
func rss(atMS, v int64) artifact.TelemetrySample {
	return artifact.TelemetrySample{
		Scope: artifact.ScopeServerProcess, ClockDomain: clientDom, CounterOwner: artifact.OwnerOperatingSystemProcess,
		RunID: runID,
		Identity: artifact.TelemetryIdentity{Host: "hostA", PID: 100, ProcessStartNS: 1, BootID: artifact.Ptr("bootA"),
			DeviceUUID: artifact.Ptr("GPU-A")},
		ObservedAtNS: base + atMS*ms, Metric: artifact.MetricProcessRSSBytes, ValueBytes: artifact.Ptr(v),
		State: artifact.SampleValid, Source: "psutil", IntervalMS: 100, Provenance: artifact.ProvenanceObserved,
	}
}

// series polls every 100 ms from fromMS to toMS inclusive, value = 1000 + atMS.
func series(fromMS, toMS int64, edit func(*artifact.TelemetrySample)) []artifact.TelemetrySample {
	var out []artifact.TelemetrySample
	for at := fromMS; at <= toMS; at += 100 {
		s := rss(at, 1000+at)
		if edit != nil {
			edit(&s)
		}
		out = append(out, s)
	}
	return out
}

func onHost(host string, boot *string) func(*artifact.TelemetrySample) {
	return func(s *artifact.TelemetrySample) {
		s.Identity.Host, s.Identity.BootID = host, boot
		s.ClockDomain = artifact.ClockDomain(host, boot)
	}
}

func win(id string, fromMS, toMS int64) CaseWindow {
	return CaseWindow{CaseID: id, StartNS: base + fromMS*ms, EndNS: base + toMS*ms, Known: true}
}

func input(samples []artifact.TelemetrySample, cases ...CaseWindow) ServerInput {
	return ServerInput{ArtifactRunID: runID, ClientClockDomain: clientDom, Samples: samples, DirectServer: true, Cases: cases}
}

func mustJoin(t *testing.T, in ServerInput) *ServerResult {
	t.Helper()
	res, err := JoinServer(in)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func reasonOf(r *string) string {
	if r == nil {
		return ""
	}
	return *r
}

func wantStatus(t *testing.T, res *ServerResult, status, reason string) {
	t.Helper()
	if res.Join.Status != status || reasonOf(res.Join.Reason) != reason {
		t.Fatalf("server_join = %s/%s, want %s/%s", res.Join.Status, reasonOf(res.Join.Reason), status, reason)
	}
}

func wantCoverage(t *testing.T, res *ServerResult, caseID, status, reason string) *CaseMem {
	t.Helper()
	c := res.Cases[caseID]
	if c == nil {
		t.Fatalf("no case %s", caseID)
	}
	if c.Coverage.Status != status || reasonOf(c.Coverage.Reason) != reason {
		t.Fatalf("case %s coverage = %s/%s, want %s/%s", caseID, c.Coverage.Status, reasonOf(c.Coverage.Reason), status, reason)
	}
	return c
}

// Without telemetry the join is not_configured and every case not_joined.
func TestServerJoinNotConfigured(t *testing.T) {
	res := mustJoin(t, input(nil, win("c1", 0, 1000)))
	wantStatus(t, res, "not_configured", "")
	wantCoverage(t, res, "c1", CoverageNotJoined, "no server telemetry was supplied")
}

// Telemetry of another run leaves the join unjoined (run_id_mismatch) and reports both
// run ids.
func TestServerJoinRunIDMismatch(t *testing.T) {
	samples := series(0, 1000, func(s *artifact.TelemetrySample) { s.RunID = "run-2" })
	res := mustJoin(t, input(samples, win("c1", 100, 900)))
	wantStatus(t, res, "unjoined", ReasonRunIDMismatch)
	if reasonOf(res.Join.ArtifactRunID) != runID || !reflect.DeepEqual(res.Join.TelemetryRunIDs, []string{"run-2"}) {
		t.Fatalf("run ids %v %v", res.Join.ArtifactRunID, res.Join.TelemetryRunIDs)
	}
}

// The same telemetry file given twice counts each sample once.
func TestServerJoinSameFileTwice(t *testing.T) {
	once := mustJoin(t, input(series(0, 1000, nil), win("c1", 100, 900)))
	twice := mustJoin(t, input(append(series(0, 1000, nil), series(0, 1000, nil)...), win("c1", 100, 900)))
	wantStatus(t, twice, "joined", "")
	a, b := once.Cases["c1"].Observations[artifact.MetricProcessRSSBytes], twice.Cases["c1"].Observations[artifact.MetricProcessRSSBytes]
	if a.ValidSamples != 9 || !reflect.DeepEqual(a, b) || twice.Targets[0].Samples != 11 {
		t.Fatalf("once %+v twice %+v", a, b)
	}
}

func TestServerJoinNeedsDirectServer(t *testing.T) {
	in := input(series(0, 1000, nil), win("c1", 100, 900))
	in.DirectServer = false
	wantStatus(t, mustJoin(t, in), "unjoined", ReasonRouteUndeclared)
}

// BenchmarkJoinServer joins 100 000 samples (one target, 10 metrics × 10 000 polls) to 100
// case windows.
func BenchmarkJoinServer(b *testing.B) {
	var samples []artifact.TelemetrySample
	for i := int64(0); i < 10_000; i++ {
		for m := int64(0); m < 10; m++ {
			s := rss(i*100, i)
			s.Source = "psutil" + string(rune('a'+m))
			samples = append(samples, s)
		}
	}
	var cases []CaseWindow
	for c := int64(0); c < 100; c++ {
		cases = append(cases, win(string(rune('A'+c%26))+string(rune('a'+c/26)), c*10_000, c*10_000+9_000))
	}
	in := input(samples, cases...)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := JoinServer(in); err != nil {
			b.Fatal(err)
		}
	}
}
