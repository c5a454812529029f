package join

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
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

// §5 item 87.
func TestServerJoinNotConfigured(t *testing.T) {
	res := mustJoin(t, input(nil, win("c1", 0, 1000)))
	wantStatus(t, res, "not_configured", "")
	wantCoverage(t, res, "c1", CoverageNotJoined, "no server telemetry was supplied")
}

// §5 item 88.
func TestServerJoinRemoteNeedsClockEvidence(t *testing.T) {
	remote := series(0, 1000, onHost("hostB", artifact.Ptr("bootB")))
	res := mustJoin(t, input(remote, win("c1", 200, 800)))
	wantStatus(t, res, "unjoined", ReasonClockAlignmentRequired)
	wantCoverage(t, res, "c1", CoverageNotJoined, ReasonClockAlignmentRequired)
	if len(res.Targets) != 1 || res.Targets[0].Host != "hostB" || res.Targets[0].Samples != 11 {
		t.Fatalf("targets = %+v", res.Targets)
	}

	in := input(remote, win("c1", 200, 800))
	in.Clock = ClockFlags{OffsetNS: artifact.Ptr(int64(0)), UncertaintyNS: artifact.Ptr(int64(5))}
	res = mustJoin(t, in)
	wantStatus(t, res, "joined", "")
	if reasonOf(res.Join.ClockAlignmentEvidence) != "operator_supplied" || len(res.Join.ClockAlignments) != 1 ||
		res.Join.ClockAlignments[0].EventID != "cli:clock-offset" || res.Join.ClockAlignments[0].Source != "operator" ||
		res.Join.ClockAlignments[0].AlignedSamples != 11 || res.Join.ClockAlignments[0].UncertaintyNS != 5 {
		t.Fatalf("join = %+v", res.Join)
	}
	if res.Join.ClockOffsetNS == nil || *res.Join.ClockOffsetNS != 0 || *res.Join.ClockUncertaintyNS != 5 {
		t.Fatalf("offset/uncertainty = %v/%v", res.Join.ClockOffsetNS, res.Join.ClockUncertaintyNS)
	}
	c := wantCoverage(t, res, "c1", CoverageObserved, "")
	if *c.Coverage.CountedWindowNS != [2]int64{base + 200*ms + 5, base + 800*ms - 5} {
		t.Fatalf("counted window %v", *c.Coverage.CountedWindowNS)
	}
	// Samples at 300..700 ms count (200 and 800 lie within the uncertainty of the edges).
	o := c.Observations[artifact.MetricProcessRSSBytes]
	if o == nil || o.ValidSamples != 5 || *o.MaximumRecordedBytes != 1700 {
		t.Fatalf("observation %+v", o)
	}
}

// §5 item 89.
func TestServerJoinClockDomains(t *testing.T) {
	cases := []struct {
		name          string
		edit          func(*artifact.TelemetrySample)
		clientDomain  string
		offset, unc   *int64
		status        string
		reason        string
		evidence      string
		fromDomain    string
		wantUncertain int64
	}{
		{name: "same hostname other boot", edit: onHost("hostA", artifact.Ptr("bootZ")), status: "unjoined", reason: ReasonClockAlignmentRequired},
		{name: "same host and boot", status: "joined", evidence: "same_host", fromDomain: clientDom},
		{name: "same host uncertainty honoured", unc: artifact.Ptr(int64(7)), status: "joined", evidence: "same_host", fromDomain: clientDom, wantUncertain: 7},
		{name: "zero offset on shared clock", offset: artifact.Ptr(int64(0)), unc: artifact.Ptr(int64(3)), status: "joined", evidence: "same_host", fromDomain: clientDom, wantUncertain: 3},
		{name: "nonzero offset on shared clock", offset: artifact.Ptr(int64(10)), unc: artifact.Ptr(int64(3)), status: "unjoined", reason: ReasonClockOffsetOnSharedClock},
		{name: "bootless no flags", edit: onHost("hostA", nil), clientDomain: "hostA/unix_epoch_ns", status: "unjoined", reason: ReasonClockDomainUnverified},
		{name: "bootless offset only", edit: onHost("hostA", nil), clientDomain: "hostA/unix_epoch_ns", offset: artifact.Ptr(int64(0)), status: "unjoined", reason: ReasonClockUncertaintyRequired},
		{name: "bootless both flags", edit: onHost("hostA", nil), clientDomain: "hostA/unix_epoch_ns", offset: artifact.Ptr(int64(0)), unc: artifact.Ptr(int64(2)),
			status: "joined", evidence: "operator_supplied", fromDomain: "hostA/unix_epoch_ns#server", wantUncertain: 2},
		{name: "remote uncertainty alone", edit: onHost("hostB", artifact.Ptr("b")), unc: artifact.Ptr(int64(2)), status: "unjoined", reason: ReasonClockOffsetRequired},
		{name: "remote offset alone", edit: onHost("hostB", artifact.Ptr("b")), offset: artifact.Ptr(int64(2)), status: "unjoined", reason: ReasonClockUncertaintyRequired},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := input(series(0, 1000, tc.edit), win("c1", 100, 900))
			if tc.clientDomain != "" {
				in.ClientClockDomain = tc.clientDomain
			}
			in.Clock = ClockFlags{OffsetNS: tc.offset, UncertaintyNS: tc.unc}
			res := mustJoin(t, in)
			wantStatus(t, res, tc.status, tc.reason)
			if tc.status != "joined" {
				return
			}
			if reasonOf(res.Join.ClockAlignmentEvidence) != tc.evidence || res.Join.ClockAlignments[0].FromClockDomain != tc.fromDomain {
				t.Fatalf("evidence %s from %s", reasonOf(res.Join.ClockAlignmentEvidence), res.Join.ClockAlignments[0].FromClockDomain)
			}
			if *res.Join.ClockUncertaintyNS != tc.wantUncertain {
				t.Fatalf("uncertainty %d", *res.Join.ClockUncertaintyNS)
			}
			wantCoverage(t, res, "c1", CoverageObserved, "")
		})
	}
}

// §5 item 90.
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

// §5 item 91.
func TestServerJoinRunIDMismatch(t *testing.T) {
	samples := series(0, 1000, func(s *artifact.TelemetrySample) { s.RunID = "run-2" })
	res := mustJoin(t, input(samples, win("c1", 100, 900)))
	wantStatus(t, res, "unjoined", ReasonRunIDMismatch)
	if reasonOf(res.Join.ArtifactRunID) != runID || !reflect.DeepEqual(res.Join.TelemetryRunIDs, []string{"run-2"}) {
		t.Fatalf("run ids %v %v", res.Join.ArtifactRunID, res.Join.TelemetryRunIDs)
	}
}

func invalidAt(atMS int64) artifact.TelemetrySample {
	s := rss(atMS, 0)
	s.ValueBytes, s.State, s.Detail = nil, artifact.SampleInvalid, artifact.Ptr("server process exited")
	return s
}

// §5 item 92.
func TestServerJoinInvalidation(t *testing.T) {
	samples := append(series(0, 1500, nil), invalidAt(1600))
	res := mustJoin(t, input(samples, win("early", 100, 900), win("late", 1400, 2000)))
	wantStatus(t, res, "joined", "")
	inv := res.Join.Invalidation
	if inv == nil || inv.ObservedAtNS != base+1600*ms || *inv.LastConfirmedAtNS != base+1500*ms || *inv.Detail != "server process exited" {
		t.Fatalf("invalidation %+v", inv)
	}
	wantCoverage(t, res, "early", CoverageObserved, "")
	wantCoverage(t, res, "late", CoverageEmpty, CoverIdentityInvalidated)
	if res.Join.CaseCoverage[CoverageObserved] != 1 || res.Join.CaseCoverage[CoverageEmpty] != 1 {
		t.Fatalf("case coverage %v", res.Join.CaseCoverage)
	}

	// A case ending 2 ms before the last confirmed poll, with 5 ms uncertainty, is excluded.
	in := input(samples, win("edge", 1000, 1498))
	in.Clock.UncertaintyNS = artifact.Ptr(5 * ms)
	res = mustJoin(t, in)
	wantCoverage(t, res, "edge", CoverageEmpty, CoverIdentityInvalidated)
	// Without uncertainty it counts.
	res = mustJoin(t, input(samples, win("edge", 1000, 1498)))
	wantCoverage(t, res, "edge", CoverageObserved, "")

	// A changed GPU UUID: the invalid sample names the new GPU; earlier polls still count.
	changed := invalidAt(1600)
	changed.Identity.DeviceUUID, changed.Detail = artifact.Ptr("GPU-Z"), artifact.Ptr("GPU UUID changed")
	res = mustJoin(t, input(append(series(0, 1500, nil), changed), win("early", 100, 900), win("late", 1400, 2000)))
	wantStatus(t, res, "joined", "")
	wantCoverage(t, res, "early", CoverageObserved, "")
	wantCoverage(t, res, "late", CoverageEmpty, CoverIdentityInvalidated)

	// An invalid first poll: nothing is trusted.
	res = mustJoin(t, input(append([]artifact.TelemetrySample{invalidAt(-100)}, series(0, 1000, nil)...), win("c1", 100, 900)))
	wantCoverage(t, res, "c1", CoverageEmpty, CoverIdentityInvalidated)
	if res.Join.Invalidation.LastConfirmedAtNS != nil {
		t.Fatal("last confirmed should be null")
	}
}

// §5 item 93.
func TestServerJoinCoverage(t *testing.T) {
	in := input(series(0, 1000, nil), win("short", 100, 108))
	in.Clock.UncertaintyNS = artifact.Ptr(5 * ms)
	res := mustJoin(t, in)
	c := wantCoverage(t, res, "short", CoverageEmpty, CoverWindowShorterThanUncertainty)
	if c.Coverage.CountedWindowNS != nil {
		t.Fatal("counted window should be null")
	}
	res = mustJoin(t, input(series(0, 500, nil), win("c1", 100, 900)))
	wantCoverage(t, res, "c1", CoveragePartial, CoverStoppedBeforeWindowEnd)
	res = mustJoin(t, input(series(500, 1000, nil), win("c1", 100, 900)))
	wantCoverage(t, res, "c1", CoveragePartial, CoverStartedAfterWindowStart)
	res = mustJoin(t, input(series(2000, 3000, nil), win("c1", 100, 900)))
	c = wantCoverage(t, res, "c1", CoverageEmpty, CoverNoCollectorCoverage)
	if *c.Coverage.CountedWindowNS != [2]int64{base + 100*ms, base + 900*ms} || len(c.Observations) != 0 {
		t.Fatalf("%+v", c)
	}
	// Exactly one interval late is still observed.
	res = mustJoin(t, input(series(200, 1000, nil), win("c1", 100, 900)))
	wantCoverage(t, res, "c1", CoverageObserved, "")
}

// §5 item 94.
func TestServerJoinSameFileTwice(t *testing.T) {
	once := mustJoin(t, input(series(0, 1000, nil), win("c1", 100, 900)))
	twice := mustJoin(t, input(append(series(0, 1000, nil), series(0, 1000, nil)...), win("c1", 100, 900)))
	wantStatus(t, twice, "joined", "")
	a, b := once.Cases["c1"].Observations[artifact.MetricProcessRSSBytes], twice.Cases["c1"].Observations[artifact.MetricProcessRSSBytes]
	if a.ValidSamples != 9 || !reflect.DeepEqual(a, b) || twice.Targets[0].Samples != 11 {
		t.Fatalf("once %+v twice %+v", a, b)
	}
}

func record(id, run string, offset, unc int64, from, to *int64) artifact.ClockAlignment {
	return artifact.ClockAlignment{Context: artifact.Context{RunID: run}, EventID: id,
		FromClockDomain: "hostB/bootB/unix_epoch_ns", ToClockDomain: clientDom,
		OffsetNS: offset, UncertaintyNS: unc, ValidFromNS: from, ValidToNS: to}
}

// §5 item 95.
func TestServerJoinPerSampleAlignment(t *testing.T) {
	remote := series(0, 1000, onHost("hostB", artifact.Ptr("bootB")))
	split := artifact.Ptr(base + 500*ms)
	in := input(remote, win("c1", 100, 900))
	in.Alignments = []artifact.ClockAlignment{
		record("a1", runID, 0, 1, artifact.Ptr(base), split),
		record("a2", runID, 2*ms, 3, split, nil),
	}
	res := mustJoin(t, in)
	wantStatus(t, res, "joined", "")
	// Half-open: the sample at exactly 500 ms belongs to a2.
	if n1, n2 := res.Join.ClockAlignments[0].AlignedSamples, res.Join.ClockAlignments[1].AlignedSamples; n1 != 5 || n2 != 6 {
		t.Fatalf("aligned %d/%d", n1, n2)
	}
	if res.Join.ClockOffsetNS != nil || *res.Join.ClockUncertaintyNS != 3 || reasonOf(res.Join.ClockAlignmentEvidence) != "artifact_record" {
		t.Fatalf("join %+v", res.Join)
	}

	// A sample before every window is uncovered and counted.
	in.Alignments[0].ValidFromNS = artifact.Ptr(base + 50*ms)
	res = mustJoin(t, in)
	if res.Join.UnalignedSamples != (UnalignedSamples{Uncovered: 1}) {
		t.Fatalf("unaligned %+v", res.Join.UnalignedSamples)
	}

	// All uncovered.
	in.Alignments = []artifact.ClockAlignment{record("late", runID, 0, 0, artifact.Ptr(base+5000*ms), nil)}
	wantStatus(t, mustJoin(t, in), "unjoined", ReasonClockAlignmentUncovered)

	// Overlapping records.
	in.Alignments = []artifact.ClockAlignment{record("x", runID, 0, 0, nil, nil), record("y", runID, 1, 0, nil, nil)}
	wantStatus(t, mustJoin(t, in), "unjoined", ReasonClockAlignmentAmbiguous)

	// Flags override records for the pair.
	in.Clock = ClockFlags{OffsetNS: artifact.Ptr(int64(0)), UncertaintyNS: artifact.Ptr(int64(0))}
	res = mustJoin(t, in)
	wantStatus(t, res, "joined", "")
	if !reflect.DeepEqual(res.Join.OverriddenClockAlignments, []string{"x", "y"}) || res.Join.ClockAlignments[0].Source != "operator" {
		t.Fatalf("overridden %v", res.Join.OverriddenClockAlignments)
	}

	// Records from another run are ignored; alone they leave the join unjoined.
	in.Clock = ClockFlags{}
	in.Alignments = []artifact.ClockAlignment{record("other", "run-9", 0, 0, nil, nil)}
	wantStatus(t, mustJoin(t, in), "unjoined", ReasonClockAlignmentOtherRun)
	in.Alignments = append(in.Alignments, record("mine", runID, 0, 0, nil, nil))
	res = mustJoin(t, in)
	wantStatus(t, res, "joined", "")
	if !reflect.DeepEqual(res.Join.IgnoredClockAlignments, []string{"other"}) {
		t.Fatalf("ignored %v", res.Join.IgnoredClockAlignments)
	}

	// A sample the alignment does not place, in the case window, makes the case partial.
	in.Alignments = []artifact.ClockAlignment{record("head", runID, 0, 0, nil, artifact.Ptr(base+600*ms))}
	res = mustJoin(t, in)
	wantCoverage(t, res, "c1", CoveragePartial, CoverAlignmentUncovered)
}

// §5 item 96.
func TestServerJoinMalformedAlignment(t *testing.T) {
	in := input(series(0, 1000, onHost("hostB", artifact.Ptr("bootB"))), win("c1", 100, 900))
	in.Alignments = []artifact.ClockAlignment{record("neg", runID, 0, -1, nil, nil)}
	if _, err := JoinServer(in); !errors.Is(err, ErrInvalidTelemetry) || !strings.Contains(err.Error(), "negative uncertainty") {
		t.Fatalf("err = %v", err)
	}
	in.Alignments = nil
	in.Clock = ClockFlags{OffsetNS: artifact.Ptr(int64(0)), UncertaintyNS: artifact.Ptr(int64(-5))}
	if _, err := JoinServer(in); !errors.Is(err, ErrInvalidTelemetry) {
		t.Fatalf("err = %v", err)
	}
	// A float or boolean offset never decodes.
	for _, off := range []string{"1.5", "true"} {
		line := `{"event_type":"infer.clock_alignment","schema_version":2,"offset_ns":` + off + `,"uncertainty_ns":1}` + "\n"
		if _, err := artifact.Read(strings.NewReader(line), func(artifact.Line) error { return nil }); !errors.Is(err, artifact.ErrInvalidArtifact) {
			t.Fatalf("offset %s: err = %v", off, err)
		}
	}
}

// §5 item 97.
func TestServerJoinMetadataOnlyInsideWindow(t *testing.T) {
	samples := series(0, 1000, nil)
	outside := rss(1200, 99999)
	outside.Source, outside.IntervalMS, outside.Provenance = "other", 500, artifact.ProvenanceEstimated
	missing := rss(400, 0)
	missing.ValueBytes, missing.State, missing.Source = nil, artifact.SampleMissing, "psutil-retry"
	samples = append(samples, outside, missing)
	res := mustJoin(t, input(samples, win("c1", 100, 900)))
	o := res.Cases["c1"].Observations[artifact.MetricProcessRSSBytes]
	want := &Observation{ObservationScope: "server_process", CounterOwner: "operating_system_process",
		Sources: []string{"psutil", "psutil-retry"}, Provenance: []string{"observed"}, MaximumRecordedBytes: artifact.Ptr(int64(1900)),
		ValidSamples: 9, MissingSamples: 1, IntervalsMS: []int64{100}}
	if !reflect.DeepEqual(o, want) {
		t.Fatalf("observation\n got %+v\nwant %+v", o, want)
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

func TestServerJoinNeedsDirectServer(t *testing.T) {
	in := input(series(0, 1000, nil), win("c1", 100, 900))
	in.DirectServer = false
	wantStatus(t, mustJoin(t, in), "unjoined", ReasonRouteUndeclared)
}

func writeSamples(t *testing.T, samples []artifact.TelemetrySample) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, s := range samples {
		line, err := artifact.MarshalLine(s)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

func TestReadTelemetry(t *testing.T) {
	good := writeSamples(t, series(0, 200, nil))
	got, err := ReadTelemetry(bytes.NewReader(good))
	if err != nil || len(got) != 3 || *got[2].ValueBytes != 1200 {
		t.Fatalf("got %d samples, err %v", len(got), err)
	}
	first := string(bytes.SplitN(good, []byte("\n"), 2)[0])
	bad := map[string]string{
		"empty":        "",
		"not json":     "{nope\n",
		"float value":  strings.Replace(first, `"value_bytes":1000`, `"value_bytes":1000.0`, 1) + "\n",
		"float time":   strings.Replace(first, `"interval_ms":100`, `"interval_ms":1e2`, 1) + "\n",
		"other kind":   `{"event_type":"infer.session","schema_version":1}` + "\n",
		"valid null":   strings.Replace(first, `"value_bytes":1000`, `"value_bytes":null`, 1) + "\n",
		"wrong scope":  strings.Replace(first, `"scope":"server_process"`, `"scope":"gpu_device"`, 1) + "\n",
		"bad domain":   strings.Replace(first, `hostA/bootA/unix_epoch_ns`, `hostA/unix_epoch_ns`, 1) + "\n",
		"missing key":  strings.Replace(first, `"detail":null,`, ``, 1) + "\n",
		"missing rank": strings.Replace(first, `"rank":null,`, ``, 1) + "\n",
		"unknown key":  strings.Replace(first, `"detail":null,`, `"detail":null,"extra":1,`, 1) + "\n",
		"unknown id":   strings.Replace(first, `"rank":null,`, `"rank":null,"gpu":1,`, 1) + "\n",
		"too long":     `{"event_type":"infer.telemetry_sample","schema_version":1,"source":"` + strings.Repeat("x", MaxTelemetryLineBytes) + `"}` + "\n",
		"truncated":    string(good) + `{"event_type":"infer.tele`,
		"world no grp": strings.Replace(first, `"boot_id":"bootA"`, `"boot_id":"bootA","world_size":2`, 1) + "\n",
	}
	for name, text := range bad {
		t.Run(name, func(t *testing.T) {
			if _, err := ReadTelemetry(strings.NewReader(text)); !errors.Is(err, ErrInvalidTelemetry) {
				t.Fatalf("err = %v", err)
			}
		})
	}
	dir := t.TempDir()
	if _, err := ReadTelemetryFile(filepath.Join(dir, "nope.jsonl")); !errors.Is(err, ErrInvalidTelemetry) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file err = %v", err)
	}
	path := filepath.Join(dir, "server.jsonl")
	if err := os.WriteFile(path, good, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadTelemetryFile(path); err != nil || len(got) != 3 {
		t.Fatalf("file: %d %v", len(got), err)
	}
}

func FuzzReadTelemetry(f *testing.F) {
	var b bytes.Buffer
	for _, s := range series(0, 200, nil) {
		line, _ := artifact.MarshalLine(s)
		b.Write(line)
		b.WriteByte('\n')
	}
	f.Add(b.Bytes())
	f.Add([]byte(`{"event_type":"infer.telemetry_sample","schema_version":1}`))
	f.Add([]byte("\n\n{}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		samples, err := ReadTelemetry(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrInvalidTelemetry) {
				t.Fatalf("error does not wrap ErrInvalidTelemetry: %v", err)
			}
			return
		}
		// Whatever loads must join without panicking.
		in := input(samples, win("c1", 0, 1000))
		in.Clock.UncertaintyNS = artifact.Ptr(int64(1))
		if _, err := JoinServer(in); err != nil {
			t.Fatalf("join of loaded samples failed: %v", err)
		}
	})
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
