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
