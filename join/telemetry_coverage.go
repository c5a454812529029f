package join

// Coverage of case windows by server telemetry: for each case window on the client clock,
// which placed samples count, what they recorded, and whether the collector covered the
// whole window.

import (
	"sort"

	"github.com/inferprobe/inferprobe/artifact"
)

// Coverage statuses and reasons of memory.server_coverage.
const (
	CoverageObserved  = "observed"
	CoveragePartial   = "partial"
	CoverageEmpty     = "empty"
	CoverageNotJoined = "not_joined"

	CoverWindowShorterThanUncertainty = "window_shorter_than_uncertainty"
	CoverIdentityInvalidated          = "identity_invalidated"
	CoverNoCollectorCoverage          = "no_collector_coverage"
	CoverAlignmentUncovered           = "clock_alignment_uncovered"
	CoverAlignmentAmbiguous           = "clock_alignment_ambiguous"
	CoverStartedAfterWindowStart      = "collector_started_after_window_start"
	CoverStoppedBeforeWindowEnd       = "collector_stopped_before_window_end"
)

// Observation is one metric of memory.server_observations, over the samples inside the
// case's counted window only: the largest valid value (bytes, null without one), the
// counts by state, and the sorted distinct sources, provenances and intervals (ms).
type Observation struct {
	ObservationScope     string   `json:"observation_scope"`
	CounterOwner         string   `json:"counter_owner"`
	Sources              []string `json:"sources"`
	Provenance           []string `json:"provenance"`
	MaximumRecordedBytes *int64   `json:"maximum_recorded_bytes"`
	ValidSamples         int      `json:"valid_samples"`
	MissingSamples       int      `json:"missing_samples"`
	StaleSamples         int      `json:"stale_samples"`
	InvalidSamples       int      `json:"invalid_samples"`
	IntervalsMS          []int64  `json:"intervals_ms"`
}

// Coverage is memory.server_coverage: status observed|partial|empty|not_joined, the reason
// of a non-observed case, and the client-clock span [a, b] (Unix ns) in which samples
// count (null when none).
type Coverage struct {
	Status          string    `json:"status"`
	Reason          *string   `json:"reason"`
	CountedWindowNS *[2]int64 `json:"counted_window_ns"`
}

// Member is one rank of a group in memory.server_members.
type Member struct {
	Rank         int64                   `json:"rank"`
	PID          int64                   `json:"pid"`
	Host         string                  `json:"host"`
	DeviceUUID   *string                 `json:"device_uuid"`
	Observations map[string]*Observation `json:"server_observations"`
	Coverage     Coverage                `json:"server_coverage"`
	Energy       Energy                  `json:"energy"`
}

// CaseMem is a case's server part of the memory block: observations by metric (empty for
// a group), coverage, and the group's members (nil without a group); and the case's GPU
// energy (the group's GPUs' energies added; see Energy).
type CaseMem struct {
	Observations map[string]*Observation
	Coverage     Coverage
	Members      []Member
	Energy       Energy
}

// cover computes one case's observations and coverage for one target. The case window
// [a, b] is shrunk by the case's uncertainty u to the counted window [a+u, b−u]; a sample
// counts when its placed time ± its uncertainty lies inside [a, b] and the placed time
// inside the counted window. A window shorter than 2u, or one reaching (by u) past the
// last poll that confirmed the identity, is empty.
func (p *placement) cover(c CaseWindow) (map[string]*Observation, Coverage) {
	obs := map[string]*Observation{}
	if !c.Known {
		return obs, Coverage{Status: CoverageEmpty, Reason: ptr(CoverNoCollectorCoverage)}
	}
	a, b := c.StartNS, c.EndNS
	near := p.inRange(a-p.maxU, b+p.maxU)
	u := caseUncertainty(near, a, b, p.maxU)
	if b-a < 2*u {
		return obs, Coverage{Status: CoverageEmpty, Reason: ptr(CoverWindowShorterThanUncertainty)}
	}
	win := &[2]int64{a + u, b - u}
	if !p.trustAll && (p.lastConfirmed == nil || b+u > *p.lastConfirmed) {
		return obs, Coverage{Status: CoverageEmpty, Reason: ptr(CoverIdentityInvalidated), CountedWindowNS: win}
	}
	t := tallyWindow(obs, near, a, b, *win)
	return obs, t.coverage(win)
}

// caseUncertainty is the uncertainty u of a case window [a, b]: the largest uncertainty of
// the placed samples that likely fell in it (placed time within [a−unc, b+unc] for the
// sample's own unc); without any, fallback (the largest uncertainty applied).
func caseUncertainty(near []placed, a, b, fallback int64) int64 {
	u, found := int64(0), false
	for _, ps := range near {
		if ps.ok && ps.at >= a-ps.unc && ps.at <= b+ps.unc {
			if !found || ps.unc > u {
				u, found = ps.unc, true
			}
		}
	}
	if !found {
		return fallback
	}
	return u
}

// windowTally is what a case window's samples showed: how many counted, the first and last
// counted (by client time), and the reason of the first unplaced sample whose estimated
// time lies in the counted window ("" for none).
type windowTally struct {
	n           int
	first, last *placed
	unplaced    string
}

// tallyWindow adds the samples of near that count for the case window [a, b] with counted
// window win to obs (one Observation per metric) and tallies them.
func tallyWindow(obs map[string]*Observation, near []placed, a, b int64, win [2]int64) windowTally {
	var t windowTally
	for i := range near {
		ps := &near[i]
		if !ps.ok {
			if ps.est >= win[0] && ps.est <= win[1] && t.unplaced == "" {
				t.unplaced = ps.why
			}
			continue
		}
		if ps.at-ps.unc < a || ps.at+ps.unc > b || ps.at < win[0] || ps.at > win[1] {
			continue
		}
		t.n++
		if t.first == nil {
			t.first = ps
		}
		t.last = ps
		if artifact.ValueField(ps.s.Metric) != "value_bytes" {
			continue // energy and power: the energy block's (caseEnergy), not a memory maximum
		}
		o := obs[ps.s.Metric]
		if o == nil {
			o = &Observation{ObservationScope: ps.s.Scope, CounterOwner: ps.s.CounterOwner, Sources: []string{}, Provenance: []string{}, IntervalsMS: []int64{}}
			obs[ps.s.Metric] = o
		}
		o.add(ps.s)
	}
	return t
}

// add counts one sample in o: its source, provenance and interval, its state, and a valid
// value towards the maximum.
func (o *Observation) add(s *artifact.TelemetrySample) {
	o.Sources = addSorted(o.Sources, s.Source)
	o.Provenance = addSorted(o.Provenance, s.Provenance)
	o.IntervalsMS = addSortedInt(o.IntervalsMS, s.IntervalMS)
	switch s.State {
	case artifact.SampleValid:
		o.ValidSamples++
		if o.MaximumRecordedBytes == nil || *s.ValueBytes > *o.MaximumRecordedBytes {
			o.MaximumRecordedBytes = ptr(*s.ValueBytes)
		}
	case artifact.SampleMissing:
		o.MissingSamples++
	case artifact.SampleStale:
		o.StaleSamples++
	case artifact.SampleInvalid:
		o.InvalidSamples++
	}
}

// coverage judges a tallied counted window win: empty without a counted sample (the
// unplaced sample's reason, else no_collector_coverage); partial when an unplaced sample
// fell inside, when the first counted sample came more than its interval after the window
// start, or the last more than its interval before the window end; observed otherwise.
func (t windowTally) coverage(win *[2]int64) Coverage {
	if t.n == 0 {
		reason := CoverNoCollectorCoverage
		if t.unplaced != "" {
			reason = t.unplaced
		}
		return Coverage{Status: CoverageEmpty, Reason: ptr(reason), CountedWindowNS: win}
	}
	switch {
	case t.unplaced != "":
		return Coverage{Status: CoveragePartial, Reason: ptr(t.unplaced), CountedWindowNS: win}
	case t.first.at-win[0] > t.first.s.IntervalMS*1_000_000:
		return Coverage{Status: CoveragePartial, Reason: ptr(CoverStartedAfterWindowStart), CountedWindowNS: win}
	case win[1]-t.last.at > t.last.s.IntervalMS*1_000_000:
		return Coverage{Status: CoveragePartial, Reason: ptr(CoverStoppedBeforeWindowEnd), CountedWindowNS: win}
	}
	return Coverage{Status: CoverageObserved, CountedWindowNS: win}
}

// caseMem is one case's server memory: the single target's observations and coverage, or
// for a group (grouped true) one Member per rank and the combined coverage.
func caseMem(c CaseWindow, members []*target, placements []*placement, grouped bool) *CaseMem {
	cm := &CaseMem{Observations: map[string]*Observation{}}
	if !grouped {
		cm.Observations, cm.Coverage = placements[0].cover(c)
		cm.Energy = placements[0].energy(c, cm.Coverage)
		return cm
	}
	covs := make([]Coverage, len(members))
	energies := make([]Energy, len(members))
	for i, t := range members {
		obs, cov := placements[i].cover(c)
		id := &t.sample.Identity
		energies[i] = placements[i].energy(c, cov)
		cm.Members = append(cm.Members, Member{Rank: t.key.rank, PID: id.PID, Host: id.Host,
			DeviceUUID: id.DeviceUUID, Observations: obs, Coverage: cov, Energy: energies[i]})
		covs[i] = cov
	}
	cm.Coverage = groupCoverage(covs)
	cm.Energy = groupEnergy(members, energies)
	return cm
}

// groupCoverage combines the members' coverages of one case: observed when every member
// is, empty when none is, partial otherwise; the reason is the first non-observed
// member's, and there is no counted window. Values of different members are never
// combined.
func groupCoverage(covs []Coverage) Coverage {
	observed := 0
	var reason *string
	for _, cov := range covs {
		if cov.Status == CoverageObserved {
			observed++
		} else if reason == nil {
			reason = cov.Reason
		}
	}
	switch {
	case observed == len(covs):
		return Coverage{Status: CoverageObserved}
	case observed == 0:
		return Coverage{Status: CoverageEmpty, Reason: reason}
	default:
		return Coverage{Status: CoveragePartial, Reason: reason}
	}
}

// addSorted inserts v into the sorted set l (no duplicates).
func addSorted(l []string, v string) []string {
	i := sort.SearchStrings(l, v)
	if i < len(l) && l[i] == v {
		return l
	}
	l = append(l, "")
	copy(l[i+1:], l[i:])
	l[i] = v
	return l
}

// addSortedInt inserts v into the sorted set l (no duplicates).
func addSortedInt(l []int64, v int64) []int64 {
	i := sort.Search(len(l), func(k int) bool { return l[k] >= v })
	if i < len(l) && l[i] == v {
		return l
	}
	l = append(l, 0)
	copy(l[i+1:], l[i:])
	l[i] = v
	return l
}
