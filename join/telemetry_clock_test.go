package join

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
)

// A server on another host needs clock evidence; the flags' offset 0 and uncertainty 5 join
// it (operator_supplied, event cli:clock-offset) and shrink the counted window by 5 ns at
// each end.
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

// Equal domains with a boot id are one clock (same_host: the uncertainty flag honoured, a
// non-zero offset refused); the same hostname on another boot needs alignment; equal
// bootless domains join only with both flags, the server side named …#server.
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

func record(id, run string, offset, unc int64, from, to *int64) artifact.ClockAlignment {
	return artifact.ClockAlignment{Context: artifact.Context{RunID: run}, EventID: id,
		FromClockDomain: "hostB/bootB/unix_epoch_ns", ToClockDomain: clientDom,
		OffsetNS: offset, UncertaintyNS: unc, ValidFromNS: from, ValidToNS: to}
}

// Each sample is placed by the one record whose half-open validity window holds it (a
// boundary belongs to the next window); uncovered samples are counted; all uncovered or
// overlapping records leave the join unjoined; flags override the records (listed as
// overridden); records of another run are ignored.
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

// A negative uncertainty (record or flag) is invalid input; a float or boolean offset
// never decodes.
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

// window is a candidate with offset off and validity [from, to) (nil: unbounded).
func window(off int64, from, to *int64) candidate {
	return candidate{a: artifact.ClockAlignment{OffsetNS: off, ValidFromNS: from, ValidToNS: to}}
}

// A time on a boundary belongs to the window that starts there; overlapping windows are
// counted, the first reported.
func TestCovering(t *testing.T) {
	p := artifact.Ptr[int64]
	cands := []candidate{window(1, p(100), p(200)), window(2, p(200), p(300))}
	for _, tc := range []struct{ t, n, first int64 }{{199, 1, 0}, {200, 1, 1}, {299, 1, 1}, {300, 0, -1}, {99, 0, -1}} {
		if n, first := covering(cands, tc.t); int64(n) != tc.n || int64(first) != tc.first {
			t.Errorf("covering(%d) = %d, %d; want %d, %d", tc.t, n, first, tc.n, tc.first)
		}
	}
	cands = append(cands, window(3, nil, nil))
	if n, first := covering(cands, 250); n != 2 || first != 1 {
		t.Errorf("overlap: covering(250) = %d, %d; want 2, 1", n, first)
	}
}

// The nearest window: valid_from − t before it, t − valid_to + 1 after it (the end is
// exclusive), ties to the first.
func TestNearest(t *testing.T) {
	p := artifact.Ptr[int64]
	cands := []candidate{window(1, p(100), p(200)), window(2, p(300), p(400))}
	for _, tc := range []struct{ t, off int64 }{
		{50, 1},  // 50 before the first
		{200, 1}, // 1 after the first's end, 100 before the second
		{249, 1}, // 50 after, 51 before
		{250, 2}, // 51 after, 50 before
		{500, 2}, // 101 after the second
	} {
		if got := nearest(cands, tc.t).OffsetNS; got != tc.off {
			t.Errorf("nearest(%d) has offset %d, want %d", tc.t, got, tc.off)
		}
	}
	tie := []candidate{window(1, p(100), p(200)), window(2, p(301), nil)}
	if got := nearest(tie, 250).OffsetNS; got != 1 {
		t.Errorf("tie at 51: offset %d, want the first (1)", got)
	}
}

// The first invalid sample cuts the placement; the last earlier placed poll confirms the
// identity (an unplaced one does not), and without one nothing is trusted.
func TestCutAtInvalidation(t *testing.T) {
	valid, inv, later := rss(0, 1), invalidAt(300), rss(400, 1)
	unplaced := rss(200, 1)
	p := &placement{samples: []placed{
		{s: &valid, ok: true, at: valid.ObservedAtNS + 7},
		{s: &unplaced, why: CoverAlignmentUncovered},
		{s: &inv, ok: true, at: inv.ObservedAtNS + 7},
		{s: &later, ok: true, at: later.ObservedAtNS + 7},
	}}
	p.cutAtInvalidation()
	if p.trustAll || len(p.samples) != 2 || p.lastConfirmed == nil || *p.lastConfirmed != valid.ObservedAtNS+7 {
		t.Fatalf("trustAll %v, %d samples, lastConfirmed %v", p.trustAll, len(p.samples), p.lastConfirmed)
	}
	want := &Invalidation{ObservedAtNS: inv.ObservedAtNS, Detail: inv.Detail, LastConfirmedAtNS: artifact.Ptr(valid.ObservedAtNS)}
	if !reflect.DeepEqual(p.invalidation, want) {
		t.Fatalf("invalidation %+v, want %+v", p.invalidation, want)
	}

	p = &placement{samples: []placed{{s: &unplaced, why: CoverAlignmentUncovered}, {s: &inv, ok: true}}}
	p.cutAtInvalidation()
	if p.trustAll || p.lastConfirmed != nil || p.invalidation.LastConfirmedAtNS != nil || len(p.samples) != 1 {
		t.Fatalf("no confirmed poll: %+v", p)
	}

	p = &placement{samples: []placed{{s: &valid, ok: true}, {s: &later, ok: true}}}
	p.cutAtInvalidation()
	if !p.trustAll || p.invalidation != nil || len(p.samples) != 2 {
		t.Fatalf("no invalid sample: %+v", p)
	}
}
