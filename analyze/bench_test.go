package analyze

import (
	"fmt"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
)

// syntheticArtifact builds an in-memory artifact of n measured requests in one open-loop case
// at 1000 req/s, 2% timeouts, streaming with 16 chunks each.
func syntheticArtifact(n int) *artifact.Artifact {
	a := &artifact.Artifact{Sessions: []artifact.Session{{SessionID: "s1", Status: artifact.StatusCompleted}}}
	gaps := make([]float64, 15)
	for i := range gaps {
		gaps[i] = 4
	}
	yes := true
	for i := 0; i < n; i++ {
		at := start + int64(i)*second/1000
		lat := 50 + float64((i*7919)%1000)/2
		r := artifact.Request{
			SessionID: "s1", RequestID: fmt.Sprintf("c1_measured_0_%d", i), CaseID: "c1", Phase: artifact.PhaseMeasured,
			StartedAtNS: artifact.Ptr(at), EndedAtNS: artifact.Ptr(at + int64(lat*1e6)), IntendedAtNS: artifact.Ptr(at),
			Stream: true, Status: artifact.RequestOK, E2ELatencyMS: artifact.Ptr(lat), TTFTMS: artifact.Ptr(lat / 5),
			FirstChunkLatencyMS: artifact.Ptr(lat / 6), ChunkInterarrivalMS: gaps, PromptTokens: artifact.Ptr(int64(512)),
			OutputTokens: artifact.Ptr(int64(128)), TotalTokens: artifact.Ptr(int64(640)), OutputTokenSource: "server_usage",
			ArrivalMode: "poisson", RequestIndex: artifact.Ptr(int64(i)), DispatchLagMS: artifact.Ptr(0.1),
			HeldForSlot: &yes, InFlightAtDispatch: artifact.Ptr(int64(i % 64)), PromptMode: "unique",
			PromptDigest: artifact.Ptr(fmt.Sprintf("%064d", i)), XRequestID: artifact.Ptr(fmt.Sprintf("inferprobe-run-c1_measured_0_%d", i)),
		}
		if i%50 == 0 {
			r.Status = artifact.RequestTimeout
			r.TTFTMS = nil
			r.E2ELatencyMS = artifact.Ptr(60000.0)
		}
		a.Requests = append(a.Requests, r)
	}
	end := start + int64(n)*second/1000
	a.PhaseWindows = []artifact.PhaseWindow{{SessionID: "s1", CaseID: "c1", Phase: artifact.PhaseMeasured, ArrivalMode: "poisson",
		StartedAtNS: artifact.Ptr(start), WindowEndedAtNS: artifact.Ptr(end), DrainedAtNS: artifact.Ptr(end + 61*second),
		ScheduledArrivals: artifact.Ptr(int64(n)), ScheduledEndpointOffsetNS: artifact.Ptr(end - start)}}
	return a
}

// BenchmarkAnalyze100k analyses 100,000 requests with a two-criterion policy; records/s is
// requests analysed per second.
func BenchmarkAnalyze100k(b *testing.B) {
	a := syntheticArtifact(100_000)
	p, _ := ParseSLOFlags([]string{"ttft:100", "e2e:400"})
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := Analyze(a, Options{Policy: p})
		if err != nil || r.Cases["c1"].Population.Offered != 100_000 {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(100_000*b.N)/b.Elapsed().Seconds(), "records/s")
}

func TestSyntheticArtifactSanity(t *testing.T) {
	a := syntheticArtifact(2000)
	p, _ := ParseSLOFlags([]string{"e2e:400"})
	r, err := Analyze(a, Options{Policy: p})
	if err != nil {
		t.Fatal(err)
	}
	c := r.Cases["c1"]
	if !c.Population.CohortValid || c.Population.TimedOut != 40 || c.Population.Successful != 1960 || !eq(c.Throughput.RequestsPerSecond, 980) {
		t.Errorf("population %+v issues %v throughput %s", c.Population, c.Population.Issues, fstr(c.Throughput.RequestsPerSecond))
	}
	if m := c.Latency.Metrics["client.e2e"].FailurePenalized["p99"]; !m.Penalized || !eq(m.ObservedLowerBoundMs, 60000) {
		t.Errorf("penalized p99 %+v", m)
	}
}
