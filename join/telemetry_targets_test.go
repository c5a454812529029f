package join

import (
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
)

// Samples of two identities (another host, pid, process start or GPU) leave the join
// unjoined: multiple_server_identities.
func TestServerJoinMultipleIdentities(t *testing.T) {
	edits := map[string]func(*artifact.TelemetrySample){
		"host":          onHost("hostB", artifact.Ptr("bootA")),
		"pid":           func(s *artifact.TelemetrySample) { s.Identity.PID = 101 },
		"process start": func(s *artifact.TelemetrySample) { s.Identity.ProcessStartNS = 2 },
		"gpu":           func(s *artifact.TelemetrySample) { s.Identity.DeviceUUID = artifact.Ptr("GPU-B") },
	}
	for name, edit := range edits {
		t.Run(name, func(t *testing.T) {
			samples := append(series(0, 500, nil), series(600, 1000, edit)...)
			res := mustJoin(t, input(samples, win("c1", 100, 900)))
			wantStatus(t, res, "unjoined", ReasonMultipleServerIdentities)
			wantCoverage(t, res, "c1", CoverageNotJoined, ReasonMultipleServerIdentities)
		})
	}
}

func TestServerJoinGroups(t *testing.T) {
	member := func(rank int64, pid int64, gpu string, world int64, group string) func(*artifact.TelemetrySample) {
		return func(s *artifact.TelemetrySample) {
			s.Identity.PID, s.Identity.Rank, s.Identity.WorldSize = pid, artifact.Ptr(rank), artifact.Ptr(world)
			s.Identity.GroupID, s.Identity.DeviceUUID = artifact.Ptr(group), artifact.Ptr(gpu)
		}
	}
	r0 := series(0, 1000, member(0, 200, "GPU-0", 2, "tp"))
	r1 := series(0, 500, member(1, 201, "GPU-1", 2, "tp"))
	res := mustJoin(t, input(cat(r0, r1), win("c1", 100, 900)))
	wantStatus(t, res, "joined", "")
	c := wantCoverage(t, res, "c1", CoveragePartial, CoverStoppedBeforeWindowEnd)
	if len(c.Observations) != 0 || len(c.Members) != 2 || c.Members[0].Rank != 0 || c.Members[1].PID != 201 ||
		c.Members[0].Coverage.Status != CoverageObserved || *c.Members[1].Observations[artifact.MetricProcessRSSBytes].MaximumRecordedBytes != 1500 {
		t.Fatalf("members %+v", c.Members)
	}
	if res.Join.Group == nil || res.Join.Group.WorldSize != 2 || res.Join.Group.GroupID != "tp" {
		t.Fatalf("group %+v", res.Join.Group)
	}
	// One member partial, the other empty: none observed, so the case is empty.
	res = mustJoin(t, input(cat(series(0, 500, member(0, 200, "GPU-0", 2, "tp")), series(2000, 2500, member(1, 201, "GPU-1", 2, "tp"))), win("c1", 100, 900)))
	c = wantCoverage(t, res, "c1", CoverageEmpty, CoverStoppedBeforeWindowEnd)
	if c.Members[1].Coverage.Status != CoverageEmpty || *c.Members[1].Coverage.Reason != CoverNoCollectorCoverage {
		t.Fatalf("member 1 %+v", c.Members[1].Coverage)
	}
	for name, tc := range map[string]struct {
		samples []artifact.TelemetrySample
		reason  string
	}{
		"missing":      {r0, ReasonGroupMemberMissing},
		"changed":      {cat(r0, r1, series(600, 700, member(1, 202, "GPU-1", 2, "tp"))), ReasonGroupMemberChanged},
		"undeclared":   {cat(r0, r1, series(0, 100, nil)), ReasonUndeclaredServerIdentity},
		"two groups":   {cat(r0, series(0, 100, member(1, 201, "GPU-1", 2, "pp"))), ReasonMultipleServerGroups},
		"inconsistent": {cat(r0, series(0, 100, member(1, 201, "GPU-1", 3, "tp"))), ReasonInconsistentGroupSize},
	} {
		t.Run(name, func(t *testing.T) {
			wantStatus(t, mustJoin(t, input(tc.samples, win("c1", 100, 900))), "unjoined", tc.reason)
		})
	}
	// Clock flags with members on two other hosts.
	remote := append(series(0, 1000, func(s *artifact.TelemetrySample) {
		member(0, 200, "GPU-0", 2, "tp")(s)
		onHost("h1", artifact.Ptr("b"))(s)
	}),
		series(0, 1000, func(s *artifact.TelemetrySample) {
			member(1, 201, "GPU-1", 2, "tp")(s)
			onHost("h2", artifact.Ptr("b"))(s)
		})...)
	in := input(remote, win("c1", 100, 900))
	in.Clock = ClockFlags{OffsetNS: artifact.Ptr(int64(0)), UncertaintyNS: artifact.Ptr(int64(0))}
	wantStatus(t, mustJoin(t, in), "unjoined", ReasonClockFlagsAmbiguous)

	// One local member and one remote: the flags place the remote one only.
	mixed := cat(series(0, 1000, member(0, 200, "GPU-0", 2, "tp")),
		series(0, 1000, func(s *artifact.TelemetrySample) {
			member(1, 201, "GPU-1", 2, "tp")(s)
			onHost("h2", artifact.Ptr("b"))(s)
		}))
	in = input(mixed, win("c1", 100, 900))
	in.Clock = ClockFlags{OffsetNS: artifact.Ptr(3 * ms), UncertaintyNS: artifact.Ptr(int64(0))}
	res = mustJoin(t, in)
	wantStatus(t, res, "joined", "")
	if len(res.Join.ClockAlignments) != 2 || res.Join.ClockAlignments[0].Source != "same_host" || res.Join.ClockAlignments[1].OffsetNS != 3*ms ||
		reasonOf(res.Join.ClockAlignmentEvidence) != "operator_supplied+same_host" {
		t.Fatalf("alignments %+v evidence %s", res.Join.ClockAlignments, reasonOf(res.Join.ClockAlignmentEvidence))
	}
	wantCoverage(t, res, "c1", CoverageObserved, "")
}

// cat concatenates sample lists into a fresh slice.
func cat(lists ...[]artifact.TelemetrySample) []artifact.TelemetrySample {
	var out []artifact.TelemetrySample
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}
