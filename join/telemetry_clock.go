package join

// Clock alignment of server telemetry: each sample carries a server-clock time (Unix ns in
// its clock domain); the join places it on the client clock with exactly one alignment
// (client time = server time + offset, within ± uncertainty) or leaves it unplaced.

import (
	"fmt"
	"sort"
	"strings"

	"github.com/inferprobe/inferprobe/artifact"
)

// ClockFlags are analyze's --clock-offset-ns and --clock-uncertainty-ns (nil when not
// given): server timestamp + offset = client timestamp, uncertainty ≥ 0, both in ns.
type ClockFlags struct {
	OffsetNS      *int64
	UncertaintyNS *int64
}

// ClientDomain returns the client artifact's clock domain: the infer.artifact context's,
// with the boot id of its metadata added for artifacts written before domains named the
// boot; "" without a header.
func ClientDomain(h *artifact.ArtifactHeader) string {
	if h == nil {
		return ""
	}
	d := h.Context.ClockDomain
	if h.Metadata.BootID != nil && *h.Metadata.BootID != "" && h.Context.Host != nil &&
		d == artifact.ClockDomain(*h.Context.Host, nil) {
		return artifact.ClockDomain(*h.Context.Host, h.Metadata.BootID)
	}
	return d
}

// ValidateAlignment checks an infer.clock_alignment record or the flags' equivalent:
// uncertainty ≥ 0, distinct from/to domains that end in /unix_epoch_ns, and a non-empty
// half-open window [valid_from_ns, valid_to_ns) when both ends are set. A float or boolean
// offset never decodes (artifact reader). Errors wrap ErrInvalidTelemetry and name the
// record's event id.
func ValidateAlignment(a *artifact.ClockAlignment) error {
	if a.UncertaintyNS < 0 {
		return fmt.Errorf("%w: clock alignment %q: negative uncertainty_ns %d", ErrInvalidTelemetry, a.EventID, a.UncertaintyNS)
	}
	if !strings.HasSuffix(a.FromClockDomain, "/unix_epoch_ns") || !strings.HasSuffix(a.ToClockDomain, "/unix_epoch_ns") {
		return fmt.Errorf("%w: clock alignment %q: domains must end in /unix_epoch_ns", ErrInvalidTelemetry, a.EventID)
	}
	if a.FromClockDomain == a.ToClockDomain {
		return fmt.Errorf("%w: clock alignment %q: from and to domain are both %q", ErrInvalidTelemetry, a.EventID, a.FromClockDomain)
	}
	if a.ValidFromNS != nil && a.ValidToNS != nil && *a.ValidToNS <= *a.ValidFromNS {
		return fmt.Errorf("%w: clock alignment %q: empty validity window [%d, %d)", ErrInvalidTelemetry, a.EventID, *a.ValidFromNS, *a.ValidToNS)
	}
	return nil
}

// AppliedAlignment is one alignment the join used: source operator|artifact|same_host,
// event_id ("cli:clock-offset" for flags, "same_host" for a shared clock), domains, offset
// and uncertainty (ns), validity window (null = unbounded), samples it placed.
type AppliedAlignment struct {
	Source          string `json:"source"`
	EventID         string `json:"event_id"`
	FromClockDomain string `json:"from_clock_domain"`
	ToClockDomain   string `json:"to_clock_domain"`
	OffsetNS        int64  `json:"offset_ns"`
	UncertaintyNS   int64  `json:"uncertainty_ns"`
	ValidFromNS     *int64 `json:"valid_from_ns"`
	ValidToNS       *int64 `json:"valid_to_ns"`
	AlignedSamples  int    `json:"aligned_samples"`
}

// UnalignedSamples counts samples no single alignment placed: no window covered them
// (Uncovered) or several did (Ambiguous). They are left out.
type UnalignedSamples struct {
	Uncovered int `json:"uncovered"`
	Ambiguous int `json:"ambiguous"`
}

// placed is a sample on the client clock.
type placed struct {
	s   *artifact.TelemetrySample
	at  int64 // client time
	unc int64
	ok  bool  // placed by exactly one alignment
	est int64 // estimated client time of an unplaced sample
	why string
}

// placement is one target's samples on the client clock, ordered by client time (placed
// or estimated), cut before its first invalid sample.
type placement struct {
	evidence     string
	samples      []placed
	invalidation *Invalidation
	// lastConfirmed is the client time of the last poll that confirmed the identity before
	// the first invalid sample; trustAll when there is no invalid sample.
	lastConfirmed *int64
	trustAll      bool
	maxU          int64 // largest uncertainty of a placed sample, ns
}

// candidate is one alignment that may place a target's samples.
type candidate struct {
	a       artifact.ClockAlignment
	source  string
	applied int // index into res.Join.ClockAlignments
}

// candidateSet collects a target's candidates, recording each in
// server_join.clock_alignments as it is added.
type candidateSet struct {
	j     *ServerJoin
	cands []candidate
}

func (cs *candidateSet) add(a artifact.ClockAlignment, source string) {
	cs.j.ClockAlignments = append(cs.j.ClockAlignments, AppliedAlignment{Source: source, EventID: a.EventID,
		FromClockDomain: a.FromClockDomain, ToClockDomain: a.ToClockDomain, OffsetNS: a.OffsetNS,
		UncertaintyNS: a.UncertaintyNS, ValidFromNS: a.ValidFromNS, ValidToNS: a.ValidToNS})
	cs.cands = append(cs.cands, candidate{a: a, source: source, applied: len(cs.j.ClockAlignments) - 1})
}

// align finds the clock evidence of one target and places its samples; a non-empty reason
// (a server_join.reason) means the target cannot be joined. Alignments it considered stay
// recorded in res.Join either way.
func align(t *target, in ServerInput, res *ServerResult) (*placement, string) {
	cs := &candidateSet{j: &res.Join}
	evidence, reason := clockEvidence(t, in, cs)
	if reason != "" {
		return nil, reason
	}
	p := &placement{evidence: evidence}
	if reason := p.place(t.samples, cs.cands, &res.Join); reason != "" {
		return nil, reason
	}
	p.cutAtInvalidation()
	// Order by (estimated) client time so each case reads only its own range.
	sort.SliceStable(p.samples, func(a, b int) bool { return p.samples[a].clientTime() < p.samples[b].clientTime() })
	return p, ""
}

// clockEvidence adds the target's candidate alignments to cs and returns the evidence
// (same_host, operator_supplied or artifact_record), or a reason the target has none.
// Equal domains with a boot id are one clock; equal domains without a boot id are never a
// shared clock; other domains need flags or records.
func clockEvidence(t *target, in ServerInput, cs *candidateSet) (evidence, reason string) {
	server, client := t.domain, in.ClientClockDomain
	switch {
	case server == client && t.sample.Identity.BootID != nil && client != "":
		return sharedClock(server, client, in.Clock, cs)
	case server == client:
		return bootlessClock(server, client, in.Clock, cs)
	default:
		return remoteClock(server, in, cs)
	}
}

// operatorAlignment is the alignment the clock flags describe (both must be set).
func operatorAlignment(from, to string, f ClockFlags) artifact.ClockAlignment {
	return artifact.ClockAlignment{EventID: "cli:clock-offset", FromClockDomain: from, ToClockDomain: to,
		OffsetNS: *f.OffsetNS, UncertaintyNS: *f.UncertaintyNS}
}

// sharedClock is one host and boot, one clock: offset 0, the uncertainty flag honoured.
// A non-zero offset flag is refused; an offset flag needs the uncertainty flag.
func sharedClock(server, client string, f ClockFlags, cs *candidateSet) (string, string) {
	if f.OffsetNS != nil && *f.OffsetNS != 0 {
		return "", ReasonClockOffsetOnSharedClock
	}
	if f.OffsetNS != nil && f.UncertaintyNS == nil {
		return "", ReasonClockUncertaintyRequired
	}
	var u int64
	if f.UncertaintyNS != nil {
		u = *f.UncertaintyNS
	}
	cs.add(artifact.ClockAlignment{EventID: "same_host", FromClockDomain: server, ToClockDomain: client, UncertaintyNS: u}, "same_host")
	return "same_host", ""
}

// bootlessClock is the same hostname without a boot id: only both flags join it, and the
// server side is named {domain}#server so the pair's domains differ.
func bootlessClock(server, client string, f ClockFlags, cs *candidateSet) (string, string) {
	switch {
	case f.OffsetNS == nil && f.UncertaintyNS == nil:
		return "", ReasonClockDomainUnverified
	case f.UncertaintyNS == nil:
		return "", ReasonClockUncertaintyRequired
	case f.OffsetNS == nil:
		return "", ReasonClockOffsetRequired
	}
	cs.add(operatorAlignment(server+"#server", client, f), "operator")
	return "operator_supplied", ""
}

// remoteClock is another host or boot: both flags, which override the run's records for
// the pair (listed as overridden), or the run's records for the pair. Records of another
// run are listed as ignored and never used.
func remoteClock(server string, in ServerInput, cs *candidateSet) (string, string) {
	j, f := cs.j, in.Clock
	pair, foreign := pairAlignments(in.Alignments, server, in.ClientClockDomain, in.ArtifactRunID)
	for _, a := range foreign {
		j.IgnoredClockAlignments = append(j.IgnoredClockAlignments, a.EventID)
	}
	switch {
	case f.OffsetNS != nil && f.UncertaintyNS == nil:
		return "", ReasonClockUncertaintyRequired
	case f.OffsetNS == nil && f.UncertaintyNS != nil:
		return "", ReasonClockOffsetRequired
	case f.OffsetNS != nil:
		for _, a := range pair {
			j.OverriddenClockAlignments = append(j.OverriddenClockAlignments, a.EventID)
		}
		cs.add(operatorAlignment(server, in.ClientClockDomain, f), "operator")
		return "operator_supplied", ""
	case len(pair) > 0:
		for _, a := range pair {
			cs.add(a, "artifact")
		}
		return "artifact_record", ""
	case len(foreign) > 0:
		return "", ReasonClockAlignmentOtherRun
	default:
		return "", ReasonClockAlignmentRequired
	}
}

// pairAlignments returns the records from server to client, split into those of run
// runID (pair) and those of other runs (foreign), each in input order.
func pairAlignments(all []artifact.ClockAlignment, server, client, runID string) (pair, foreign []artifact.ClockAlignment) {
	for _, a := range all {
		if a.FromClockDomain != server || a.ToClockDomain != client {
			continue
		}
		if a.Context.RunID != runID {
			foreign = append(foreign, a)
			continue
		}
		pair = append(pair, a)
	}
	return pair, foreign
}

// place puts each sample (in observed order) on the client clock, counts the samples each
// alignment placed and those left unplaced in j, and returns a reason when none was
// placed: clock_alignment_ambiguous if any sample had several alignments, else
// clock_alignment_uncovered.
func (p *placement) place(samples []*artifact.TelemetrySample, cands []candidate, j *ServerJoin) string {
	aligned, uncovered, ambiguous := 0, 0, 0
	for _, s := range samples {
		ps, hit := placeSample(s, cands)
		switch {
		case ps.ok:
			j.ClockAlignments[cands[hit].applied].AlignedSamples++
			aligned++
			p.maxU = max(p.maxU, ps.unc)
		case ps.why == CoverAlignmentUncovered:
			uncovered++
		default:
			ambiguous++
		}
		p.samples = append(p.samples, ps)
	}
	j.UnalignedSamples.Uncovered += uncovered
	j.UnalignedSamples.Ambiguous += ambiguous
	if aligned == 0 {
		if ambiguous > 0 {
			return ReasonClockAlignmentAmbiguous
		}
		return ReasonClockAlignmentUncovered
	}
	return ""
}

// placeSample places s with the one candidate whose window covers its server time, and
// returns that candidate's index (the first covering one, -1 when none). A sample no
// window covers is estimated with the nearest window's offset, one several cover with the
// first covering one's; either stays unplaced, its reason a coverage reason.
func placeSample(s *artifact.TelemetrySample, cands []candidate) (placed, int) {
	ps := placed{s: s}
	n, hit := covering(cands, s.ObservedAtNS)
	switch {
	case n == 1:
		c := &cands[hit]
		ps.ok, ps.at, ps.unc = true, s.ObservedAtNS+c.a.OffsetNS, c.a.UncertaintyNS
	case n == 0:
		ps.why = CoverAlignmentUncovered
		ps.est = s.ObservedAtNS + nearest(cands, s.ObservedAtNS).OffsetNS
	default:
		ps.why = CoverAlignmentAmbiguous
		ps.est = s.ObservedAtNS + cands[hit].a.OffsetNS
	}
	return ps, hit
}

// covering returns how many candidates' half-open windows [valid_from_ns, valid_to_ns)
// hold the server time t (a nil end is unbounded) and the index of the first (-1 for
// none): a time on a boundary belongs to the window that starts there.
func covering(cands []candidate, t int64) (n, first int) {
	first = -1
	for ci := range cands {
		a := &cands[ci].a
		if (a.ValidFromNS == nil || t >= *a.ValidFromNS) && (a.ValidToNS == nil || t < *a.ValidToNS) {
			n++
			if first < 0 {
				first = ci
			}
		}
	}
	return n, first
}

// nearest returns the candidate whose window lies closest to t (for estimating where an
// uncovered sample likely fell): the distance is valid_from_ns − t before a window,
// t − valid_to_ns + 1 after it (the end is exclusive), 0 inside; ties go to the first.
func nearest(cands []candidate, t int64) artifact.ClockAlignment {
	best, bestD := cands[0].a, int64(-1)
	for _, c := range cands {
		var d int64
		switch {
		case c.a.ValidFromNS != nil && t < *c.a.ValidFromNS:
			d = *c.a.ValidFromNS - t
		case c.a.ValidToNS != nil && t >= *c.a.ValidToNS:
			d = t - *c.a.ValidToNS + 1
		}
		if bestD < 0 || d < bestD {
			best, bestD = c.a, d
		}
	}
	return best
}

// cutAtInvalidation applies the first invalid sample (samples in observed order): the
// identity held only until the last earlier placed poll, which becomes lastConfirmed
// (none when no placed poll precedes it: nothing is trusted), and the invalid sample and
// every later one are dropped. Without an invalid sample every sample is trusted.
func (p *placement) cutAtInvalidation() {
	p.trustAll = true
	for i, ps := range p.samples {
		if ps.s.State != artifact.SampleInvalid {
			continue
		}
		p.trustAll = false
		inv := &Invalidation{ObservedAtNS: ps.s.ObservedAtNS, Detail: ps.s.Detail}
		for k := i - 1; k >= 0; k-- {
			if q := p.samples[k]; q.ok {
				inv.LastConfirmedAtNS = ptr(q.s.ObservedAtNS)
				p.lastConfirmed = ptr(q.at)
				break
			}
		}
		p.invalidation = inv
		p.samples = p.samples[:i]
		return
	}
}

// clientTime is the sample's client time: placed, or estimated when unplaced.
func (ps *placed) clientTime() int64 {
	if ps.ok {
		return ps.at
	}
	return ps.est
}

// inRange returns the samples whose client time lies in [lo, hi] (samples sorted by
// client time).
func (p *placement) inRange(lo, hi int64) []placed {
	i := sort.Search(len(p.samples), func(k int) bool { return p.samples[k].clientTime() >= lo })
	j := sort.Search(len(p.samples), func(k int) bool { return p.samples[k].clientTime() > hi })
	if j < i {
		j = i
	}
	return p.samples[i:j]
}
