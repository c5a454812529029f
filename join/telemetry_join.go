package join

// The server telemetry join: read collector files (telemetry_read.go), group the samples
// by server identity (telemetry_targets.go), place each sample on the client clock
// (telemetry_clock.go), and say for every case window what the server's counters recorded
// inside it (telemetry_coverage.go). Problems with the evidence never fail the client
// report: they leave the join unjoined with a reason.

import (
	"fmt"
	"sort"
	"strings"

	"github.com/inferprobe/inferprobe/artifact"
)

// Unjoined reasons of server_join.reason. ReasonRouteUndeclared is an inferprobe name:
// telemetry was supplied without --direct-server.
const (
	ReasonRunIDMismatch            = "run_id_mismatch"
	ReasonMultipleServerIdentities = "multiple_server_identities"
	ReasonClockAlignmentRequired   = "clock_alignment_required"
	ReasonClockUncertaintyRequired = "clock_uncertainty_required"
	ReasonClockOffsetRequired      = "clock_offset_required"
	ReasonClockOffsetOnSharedClock = "clock_offset_on_shared_clock"
	ReasonClockDomainUnverified    = "clock_domain_unverified"
	ReasonClockAlignmentUncovered  = "clock_alignment_uncovered"
	ReasonClockAlignmentAmbiguous  = "clock_alignment_ambiguous"
	ReasonClockAlignmentOtherRun   = "clock_alignment_from_another_run"
	ReasonGroupMemberMissing       = "group_member_missing"
	ReasonGroupMemberChanged       = "group_member_changed"
	ReasonUndeclaredServerIdentity = "undeclared_server_identity"
	ReasonMultipleServerGroups     = "multiple_server_groups"
	ReasonInconsistentGroupSize    = "inconsistent_group_size"
	ReasonClockFlagsAmbiguous      = "clock_flags_ambiguous"
	ReasonRouteUndeclared          = "direct_server_not_declared"
	ReasonNoTelemetrySamples       = "no_telemetry_samples"
)

// ServerInput is everything the server join reads. ArtifactRunID and ClientClockDomain
// come from the client artifact's infer.artifact context (ClientDomain derives the
// latter); Alignments are its infer.clock_alignment records; Samples the concatenated
// --server-telemetry files (exact duplicates are counted once); Cases the case windows on
// the client clock.
type ServerInput struct {
	ArtifactRunID     string
	ClientClockDomain string
	Alignments        []artifact.ClockAlignment
	Samples           []artifact.TelemetrySample
	DirectServer      bool
	Clock             ClockFlags
	Cases             []CaseWindow
}

// CaseWindow is one case's window on the client clock, [StartNS, EndNS] in Unix ns (the
// measured span: phase start → drained). Known is false when the case has no window.
type CaseWindow struct {
	CaseID         string
	StartNS, EndNS int64
	Known          bool
}

// ServerJoin is the report's telemetry.server_join block: status
// joined|unjoined|not_configured, the unjoined reason, the route and clock evidence, the
// alignments applied (offset and uncertainty in ns), overridden and ignored alignment
// event ids, the first invalidation, cases by coverage status, the group, and the run ids
// of both sides.
type ServerJoin struct {
	Status                    string             `json:"status"`
	Reason                    *string            `json:"reason"`
	RouteEvidence             *string            `json:"route_evidence"`
	ClockAlignmentEvidence    *string            `json:"clock_alignment_evidence"`
	ClockAlignments           []AppliedAlignment `json:"clock_alignments"`
	UnalignedSamples          UnalignedSamples   `json:"unaligned_samples"`
	ClockOffsetNS             *int64             `json:"clock_offset_ns,omitempty"`
	ClockUncertaintyNS        *int64             `json:"clock_uncertainty_ns"`
	OverriddenClockAlignments []string           `json:"overridden_clock_alignments"`
	IgnoredClockAlignments    []string           `json:"ignored_clock_alignments"`
	Invalidation              *Invalidation      `json:"invalidation"`
	CaseCoverage              map[string]int     `json:"case_coverage"`
	Group                     *GroupInfo         `json:"group"`
	ArtifactRunID             *string            `json:"artifact_run_id"`
	TelemetryRunIDs           []string           `json:"telemetry_run_ids"`
}

// Invalidation is the first invalid sample of a target: when (server clock, Unix ns),
// its detail, and the last earlier poll that confirmed the identity (null when the first
// poll was invalid: nothing is trusted).
type Invalidation struct {
	ObservedAtNS      int64   `json:"observed_at_ns"`
	Detail            *string `json:"detail"`
	LastConfirmedAtNS *int64  `json:"last_confirmed_at_ns"`
}

// GroupInfo is server_join.group for a declared group.
type GroupInfo struct {
	GroupID   string `json:"group_id"`
	WorldSize int64  `json:"world_size"`
	Members   int    `json:"members"`
}

// ServerResult is the join's outcome: the server_join block, the server_targets list and
// each case's server memory (by case id; every case of ServerInput.Cases is present).
type ServerResult struct {
	Join    ServerJoin
	Targets []Target
	Cases   map[string]*CaseMem
}

// NotConfigured is the result without telemetry: status not_configured and every case
// not_joined.
func NotConfigured(cases []CaseWindow) *ServerResult {
	res := &ServerResult{Join: ServerJoin{Status: "not_configured"}, Cases: map[string]*CaseMem{}}
	for _, c := range cases {
		res.Cases[c.CaseID] = &CaseMem{Observations: map[string]*Observation{},
			Coverage: Coverage{Status: CoverageNotJoined, Reason: ptr("no server telemetry was supplied")},
			Energy:   energyNotJoined("no server telemetry was supplied")}
	}
	return res
}

// JoinServer joins server telemetry to the case windows. It returns an error (wrapping
// ErrInvalidTelemetry) only for a malformed clock alignment — flags or artifact records —
// or an invalid sample; every other problem is an unjoined reason in the result, and the
// client report stays intact. Without samples it returns NotConfigured.
func JoinServer(in ServerInput) (*ServerResult, error) {
	if len(in.Samples) == 0 {
		return NotConfigured(in.Cases), nil
	}
	if err := validateClockInput(in); err != nil {
		return nil, err
	}
	samples, err := distinctSamples(in.Samples)
	if err != nil {
		return nil, err
	}
	res := newServerResult(in.ArtifactRunID)
	j := &res.Join
	order, runIDs := collectTargets(samples)
	j.TelemetryRunIDs = sortedKeys(runIDs)
	for _, t := range order {
		res.Targets = append(res.Targets, t.describe())
	}
	if !in.DirectServer {
		return res.unjoined(ReasonRouteUndeclared, in.Cases), nil
	}
	j.RouteEvidence = ptr("operator_declared_direct")
	for id := range runIDs {
		if id != in.ArtifactRunID {
			return res.unjoined(ReasonRunIDMismatch, in.Cases), nil
		}
	}
	members, group, reason := joinMembers(order, in)
	if reason != "" {
		return res.unjoined(reason, in.Cases), nil
	}
	j.Group = group
	placements, reason := placeMembers(members, in, res)
	if reason != "" {
		return res.unjoined(reason, in.Cases), nil
	}
	j.summarizeClock()
	j.Status = "joined"
	j.CaseCoverage = map[string]int{CoverageObserved: 0, CoveragePartial: 0, CoverageEmpty: 0}
	for _, c := range in.Cases {
		cm := caseMem(c, members, placements, j.Group != nil)
		j.CaseCoverage[cm.Coverage.Status]++
		res.Cases[c.CaseID] = cm
	}
	for _, p := range placements {
		if p.invalidation != nil && j.Invalidation == nil {
			j.Invalidation = p.invalidation
		}
	}
	return res, nil
}

// validateClockInput checks the clock flags (uncertainty ≥ 0) and every alignment record
// (ValidateAlignment); errors wrap ErrInvalidTelemetry.
func validateClockInput(in ServerInput) error {
	if in.Clock.UncertaintyNS != nil && *in.Clock.UncertaintyNS < 0 {
		return fmt.Errorf("%w: --clock-uncertainty-ns %d is negative", ErrInvalidTelemetry, *in.Clock.UncertaintyNS)
	}
	for i := range in.Alignments {
		if err := ValidateAlignment(&in.Alignments[i]); err != nil {
			return err
		}
	}
	return nil
}

// distinctSamples validates every sample (errors wrap ErrInvalidTelemetry) and returns
// them without exact copies (the same file given twice counts once), stably sorted by
// observed_at_ns. The pointers point into samples.
func distinctSamples(samples []artifact.TelemetrySample) ([]*artifact.TelemetrySample, error) {
	seen := make(map[sampleKey]bool, len(samples))
	out := make([]*artifact.TelemetrySample, 0, len(samples))
	for i := range samples {
		s := &samples[i]
		if err := ValidateSample(s); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidTelemetry, err)
		}
		k := keyOfSample(s)
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, s)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].ObservedAtNS < out[j].ObservedAtNS })
	return out, nil
}

// newServerResult is an empty result: no cases, empty alignment lists, and the artifact's
// run id (null when "").
func newServerResult(artifactRunID string) *ServerResult {
	res := &ServerResult{Cases: map[string]*CaseMem{}}
	j := &res.Join
	j.ClockAlignments, j.OverriddenClockAlignments, j.IgnoredClockAlignments = []AppliedAlignment{}, []string{}, []string{}
	if artifactRunID != "" {
		j.ArtifactRunID = ptr(artifactRunID)
	}
	return res
}

// unjoined marks res unjoined with reason and every case not_joined with the same reason;
// what the join recorded before (targets, evidence, alignments) stays.
func (res *ServerResult) unjoined(reason string, cases []CaseWindow) *ServerResult {
	res.Join.Status, res.Join.Reason = "unjoined", ptr(reason)
	for _, c := range cases {
		res.Cases[c.CaseID] = &CaseMem{Observations: map[string]*Observation{},
			Coverage: Coverage{Status: CoverageNotJoined, Reason: ptr(reason)}, Energy: energyNotJoined(reason)}
	}
	return res
}

// placeMembers aligns each member (align) and sets server_join.clock_alignment_evidence:
// the distinct evidences, sorted and joined by "+". In a group with clock flags, a member
// on the client's host and boot shares the client's clock: the flags describe the group's
// one remote host and are not applied to it. A non-empty reason leaves the join unjoined.
func placeMembers(members []*target, in ServerInput, res *ServerResult) ([]*placement, string) {
	j := &res.Join
	placements := make([]*placement, len(members))
	evidence := map[string]bool{}
	for i, t := range members {
		mi := in
		if j.Group != nil && in.Clock.OffsetNS != nil && t.domain == in.ClientClockDomain && t.sample.Identity.BootID != nil {
			mi.Clock = ClockFlags{}
		}
		p, reason := align(t, mi, res)
		if reason != "" {
			return nil, reason
		}
		placements[i] = p
		evidence[p.evidence] = true
	}
	j.ClockAlignmentEvidence = ptr(strings.Join(sortedKeys(evidence), "+"))
	return placements, ""
}

// summarizeClock sets clock_uncertainty_ns to the largest uncertainty of an alignment
// that placed a sample (null when none did), and clock_offset_ns only when a single
// alignment was applied and it placed every sample.
func (j *ServerJoin) summarizeClock() {
	var maxU *int64
	offsets := map[int64]bool{}
	for _, a := range j.ClockAlignments {
		if a.AlignedSamples == 0 {
			continue
		}
		offsets[a.OffsetNS] = true
		if maxU == nil || a.UncertaintyNS > *maxU {
			maxU = ptr(a.UncertaintyNS)
		}
	}
	j.ClockUncertaintyNS = maxU
	if len(offsets) == 1 && j.UnalignedSamples == (UnalignedSamples{}) && len(j.ClockAlignments) == 1 {
		j.ClockOffsetNS = ptr(j.ClockAlignments[0].OffsetNS)
	}
}

// sortedKeys returns the keys of m in ascending order.
func sortedKeys[K interface{ ~string }](m map[K]bool) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func ptr[T any](v T) *T { return &v }
