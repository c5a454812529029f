package join

import (
	"reflect"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
)

func invalidAt(atMS int64) artifact.TelemetrySample {
	s := rss(atMS, 0)
	s.ValueBytes, s.State, s.Detail = nil, artifact.SampleInvalid, artifact.Ptr("server process exited")
	return s
}

// An invalid sample (the server process exited, its GPU changed) ends the identity: cases
// before the last confirmed poll are observed, cases reaching past it (by the clock
// uncertainty) are empty identity_invalidated, and an invalid first poll trusts nothing.
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

// A window shorter than twice the uncertainty is empty without a counted window; a
// collector that stopped early or started late leaves the case partial; a window without
// polls is empty no_collector_coverage.
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

// Sources, provenances and intervals come only from samples inside the counted window.
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

// The case uncertainty is the largest of the placed samples whose time ± their own
// uncertainty reaches the window; without one, the fallback.
func TestCaseUncertainty(t *testing.T) {
	near := []placed{
		{ok: true, at: 95, unc: 3},  // 95 < 100−3: outside
		{ok: true, at: 150, unc: 4}, // inside
		{ok: true, at: 204, unc: 5}, // 204 ≤ 200+5: inside
		{ok: true, at: 203, unc: 2}, // 203 > 200+2: outside
		{at: 150, unc: 9},           // unplaced
	}
	if u := caseUncertainty(near, 100, 200, 7); u != 5 {
		t.Errorf("u = %d, want 5", u)
	}
	if u := caseUncertainty(near[:1], 100, 200, 7); u != 7 {
		t.Errorf("no sample in the window: u = %d, want the fallback 7", u)
	}
	if u := caseUncertainty([]placed{{ok: true, at: 150}}, 100, 200, 7); u != 0 {
		t.Errorf("a sample with no uncertainty: u = %d, want 0", u)
	}
}

// A collector counts as covering the counted window's ends when its first and last counted
// polls lie at most one interval inside them.
func TestWindowTallyCoverage(t *testing.T) {
	s := rss(0, 1) // interval 100 ms
	win := &[2]int64{0, 1000 * ms}
	at := func(ns int64) *placed { return &placed{s: &s, ok: true, at: ns} }
	for _, tc := range []struct {
		name        string
		tally       windowTally
		status, why string
	}{
		{"one interval each side", windowTally{n: 2, first: at(100 * ms), last: at(900 * ms)}, CoverageObserved, ""},
		{"started late", windowTally{n: 2, first: at(100*ms + 1), last: at(900 * ms)}, CoveragePartial, CoverStartedAfterWindowStart},
		{"stopped early", windowTally{n: 2, first: at(0), last: at(900*ms - 1)}, CoveragePartial, CoverStoppedBeforeWindowEnd},
		{"unplaced inside", windowTally{n: 2, first: at(0), last: at(1000 * ms), unplaced: CoverAlignmentAmbiguous}, CoveragePartial, CoverAlignmentAmbiguous},
		{"nothing counted", windowTally{}, CoverageEmpty, CoverNoCollectorCoverage},
		{"only unplaced", windowTally{unplaced: CoverAlignmentUncovered}, CoverageEmpty, CoverAlignmentUncovered},
	} {
		got := tc.tally.coverage(win)
		if got.Status != tc.status || reasonOf(got.Reason) != tc.why || got.CountedWindowNS != win {
			t.Errorf("%s: %s/%s window %v, want %s/%s", tc.name, got.Status, reasonOf(got.Reason), got.CountedWindowNS, tc.status, tc.why)
		}
	}
}

// A group's case is observed when every member is, empty when none is, partial otherwise,
// with the first non-observed member's reason.
func TestGroupCoverage(t *testing.T) {
	obs := Coverage{Status: CoverageObserved, CountedWindowNS: &[2]int64{1, 2}}
	part := Coverage{Status: CoveragePartial, Reason: ptr(CoverStoppedBeforeWindowEnd)}
	empty := Coverage{Status: CoverageEmpty, Reason: ptr(CoverNoCollectorCoverage)}
	noReason := Coverage{Status: CoverageEmpty}
	for _, tc := range []struct {
		covs        []Coverage
		status, why string
	}{
		{[]Coverage{obs, obs}, CoverageObserved, ""},
		{[]Coverage{obs, part, empty}, CoveragePartial, CoverStoppedBeforeWindowEnd},
		{[]Coverage{empty, part}, CoverageEmpty, CoverNoCollectorCoverage},
		{[]Coverage{noReason, empty}, CoverageEmpty, CoverNoCollectorCoverage},
	} {
		got := groupCoverage(tc.covs)
		if got.Status != tc.status || reasonOf(got.Reason) != tc.why || got.CountedWindowNS != nil {
			t.Errorf("groupCoverage(%v) = %s/%s, want %s/%s", tc.covs, got.Status, reasonOf(got.Reason), tc.status, tc.why)
		}
	}
}
