package join

// Server telemetry join (stormlog.md §2.5 infer.telemetry_sample and
// infer.clock_alignment, §2.6 server_join / server_targets / memory.*, §5
// items 87–97; seed "Optional server telemetry"): read collector files,
// place each sample on the client clock, and say for every case window what
// the server's counters recorded inside it.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/inferprobe/inferprobe/artifact"
)

// ErrInvalidTelemetry marks a --server-telemetry file that is missing,
// unreadable, unparsable or breaks the schema, and a malformed clock
// alignment (flags or infer.clock_alignment records): invalid input, exit 5
// (stormlog.md §6). Test with errors.Is.
var ErrInvalidTelemetry = errors.New("invalid server telemetry")

// Limits of ReadTelemetry: a line over MaxTelemetryLineBytes or a file with
// more than MaxTelemetrySamples records is invalid input.
const (
	MaxTelemetryLineBytes = 64 << 10
	MaxTelemetrySamples   = 10_000_000
)

// Unjoined reasons of server_join.reason (stormlog.md §2.6). ReasonRouteUndeclared is an
// inferprobe name: telemetry was supplied without --direct-server.
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

// Coverage statuses and reasons of memory.server_coverage (stormlog.md §2.6).
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

// ReadTelemetryFile reads a collector file (JSONL of infer.telemetry_sample v1); see
// ReadTelemetry. Every error wraps ErrInvalidTelemetry and names the file.
func ReadTelemetryFile(path string) ([]artifact.TelemetrySample, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidTelemetry, err)
	}
	defer f.Close()
	out, err := ReadTelemetry(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// ReadTelemetry reads JSONL of infer.telemetry_sample v1 records. Blank lines are skipped;
// any other kind, a line over MaxTelemetryLineBytes, a truncated last line, a float where
// the schema wants an integer, or a sample that fails ValidateSample is an error wrapping
// ErrInvalidTelemetry. A file without samples is invalid too.
func ReadTelemetry(r io.Reader) ([]artifact.TelemetrySample, error) {
	var out []artifact.TelemetrySample
	st, err := artifact.Reader{MaxLineBytes: MaxTelemetryLineBytes}.Read(r, func(rec artifact.Line) error {
		s, ok := rec.Value.(*artifact.TelemetrySample)
		if !ok {
			return fmt.Errorf("line %d: %s is not an infer.telemetry_sample v1 record", rec.Line, rec.Kind)
		}
		if err := strictSampleJSON(rec.Raw); err != nil {
			return fmt.Errorf("line %d: %w", rec.Line, err)
		}
		if err := ValidateSample(s); err != nil {
			return fmt.Errorf("line %d: %w", rec.Line, err)
		}
		if len(out) >= MaxTelemetrySamples {
			return fmt.Errorf("more than %d samples", MaxTelemetrySamples)
		}
		out = append(out, *s)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidTelemetry, err)
	}
	if st.Truncated != nil {
		return nil, fmt.Errorf("%w: line %d is cut short (%d bytes, no trailing newline); a telemetry file must end with a complete line", ErrInvalidTelemetry, st.Truncated.Line, st.Truncated.Bytes)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no infer.telemetry_sample records", ErrInvalidTelemetry)
	}
	return out, nil
}

// Keys of infer.telemetry_sample v1: every top-level key is required and no other is
// allowed (additionalProperties false); identity needs the first eight of its keys and
// allows group_id and world_size.
var (
	sampleKeys = []string{"event_type", "schema_version", "scope", "clock_domain", "counter_owner", "run_id", "identity",
		"observed_at_ns", "metric", "value_bytes", "state", "source", "interval_ms", "detail", "provenance"}
	identityKeys = []string{"host", "pid", "process_start_ns", "device_uuid", "gpu_instance_id", "replica_id", "rank", "boot_id",
		"group_id", "world_size"}
)

// strictSampleJSON checks the key sets the schema fixes (the typed decode has already
// checked every value's type, and encoding/json would read a missing key as zero).
func strictSampleJSON(raw []byte) error {
	if err := keySet(raw, sampleKeys, len(sampleKeys), ""); err != nil {
		return err
	}
	var top struct {
		Identity json.RawMessage `json:"identity"`
	}
	if err := json.Unmarshal(raw, &top); err != nil {
		return err
	}
	return keySet(top.Identity, identityKeys, 8, "identity.")
}

// keySet checks that the object in raw has the first nRequired of keys and no key outside
// keys.
func keySet(raw []byte, keys []string, nRequired int, prefix string) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("%sobject expected: %w", prefix, err)
	}
	for i, k := range keys {
		if _, ok := m[k]; !ok && i < nRequired {
			return fmt.Errorf("missing field %s%s", prefix, k)
		}
	}
	if len(m) > len(keys) || len(m) > nRequired {
		for k := range m {
			if !slices.Contains(keys, k) {
				return fmt.Errorf("unknown field %s%s", prefix, k)
			}
		}
	}
	return nil
}

// ValidateSample checks what the schema and the loader require of one sample
// (inference_telemetry_v1.schema.json, seed "A record that passes the schema can still
// fail to load"): enums, the metric's scope and counter owner, a value exactly when the
// state is valid, non-negative bytes, positive times, pid and interval, the GPU identity a
// GPU metric needs, the group rules (rank < world_size), and a clock_domain that is
// exactly {host}/{boot_id}/unix_epoch_ns ({host}/unix_epoch_ns without a boot id).
func ValidateSample(s *artifact.TelemetrySample) error {
	scope, owner, ok := artifact.MetricScope(s.Metric)
	if !ok {
		return fmt.Errorf("unknown metric %q", s.Metric)
	}
	if s.Scope != scope || s.CounterOwner != owner {
		return fmt.Errorf("metric %s needs scope %s and counter_owner %s, got %q and %q", s.Metric, scope, owner, s.Scope, s.CounterOwner)
	}
	switch s.State {
	case artifact.SampleValid:
		if s.ValueBytes == nil {
			return errors.New("a valid sample needs value_bytes")
		}
		if *s.ValueBytes < 0 {
			return fmt.Errorf("value_bytes %d is negative", *s.ValueBytes)
		}
	case artifact.SampleMissing, artifact.SampleStale, artifact.SampleInvalid:
		if s.ValueBytes != nil {
			return fmt.Errorf("a %s sample must have a null value_bytes", s.State)
		}
	default:
		return fmt.Errorf("unknown state %q", s.State)
	}
	switch s.Provenance {
	case artifact.ProvenanceObserved, artifact.ProvenanceReported, artifact.ProvenanceEstimated:
	default:
		return fmt.Errorf("unknown provenance %q", s.Provenance)
	}
	if s.RunID == "" || s.Source == "" {
		return errors.New("run_id and source must be non-empty")
	}
	if s.ObservedAtNS < 1 || s.IntervalMS < 1 {
		return errors.New("observed_at_ns and interval_ms must be at least 1")
	}
	id := &s.Identity
	if id.Host == "" || id.PID < 1 || id.ProcessStartNS < 1 {
		return errors.New("identity needs host, pid ≥ 1 and process_start_ns ≥ 1")
	}
	for i, p := range [...]*string{id.DeviceUUID, id.GPUInstanceID, id.ReplicaID, id.BootID, id.GroupID} {
		if p != nil && *p == "" {
			return fmt.Errorf("identity.%s must be null or non-empty", [...]string{"device_uuid", "gpu_instance_id", "replica_id", "boot_id", "group_id"}[i])
		}
	}
	if id.Rank != nil && *id.Rank < 0 {
		return errors.New("identity.rank must be ≥ 0")
	}
	if s.Metric != artifact.MetricProcessRSSBytes && id.DeviceUUID == nil {
		return fmt.Errorf("metric %s needs identity.device_uuid", s.Metric)
	}
	if (id.GPUInstanceID != nil || s.Scope == artifact.ScopeGPUInstance) && (id.DeviceUUID == nil || id.GPUInstanceID == nil) {
		return errors.New("a GPU instance needs device_uuid and gpu_instance_id")
	}
	if id.GroupID != nil {
		if id.Rank == nil || id.WorldSize == nil {
			return errors.New("a group member needs rank and world_size")
		}
		if *id.WorldSize < 1 || *id.Rank >= *id.WorldSize {
			return fmt.Errorf("rank %d must be below world_size %d", *id.Rank, *id.WorldSize)
		}
	} else if id.WorldSize != nil {
		return errors.New("world_size needs group_id")
	}
	if want := artifact.ClockDomain(id.Host, id.BootID); s.ClockDomain != want {
		return fmt.Errorf("clock_domain %q must be %q", s.ClockDomain, want)
	}
	return nil
}

// ClockFlags are analyze's --clock-offset-ns and --clock-uncertainty-ns (nil when not
// given): server timestamp + offset = client timestamp, uncertainty ≥ 0, both in ns.
type ClockFlags struct {
	OffsetNS      *int64
	UncertaintyNS *int64
}

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

// ServerJoin is telemetry.server_join (stormlog.md §2.6).
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

// Target is one entry of telemetry.server_targets: a server identity and what its samples
// cover (times on the server clock, Unix ns).
type Target struct {
	Host           string   `json:"host"`
	BootID         *string  `json:"boot_id"`
	PID            int64    `json:"pid"`
	ProcessStartNS int64    `json:"process_start_ns"`
	DeviceUUID     *string  `json:"device_uuid"`
	GPUInstanceID  *string  `json:"gpu_instance_id"`
	ReplicaID      *string  `json:"replica_id"`
	Rank           *int64   `json:"rank"`
	GroupID        *string  `json:"group_id"`
	WorldSize      *int64   `json:"world_size"`
	ClockDomain    string   `json:"clock_domain"`
	RunIDs         []string `json:"run_ids"`
	Samples        int      `json:"samples"`
	Metrics        []string `json:"metrics"`
	FirstObserved  int64    `json:"first_observed_at_ns"`
	LastObserved   int64    `json:"last_observed_at_ns"`
}

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
}

// CaseMem is a case's server part of the memory block: observations by metric (empty for
// a group), coverage, and the group's members (nil without a group).
type CaseMem struct {
	Observations map[string]*Observation
	Coverage     Coverage
	Members      []Member
}

// ServerResult is the join's outcome: the server_join block, the server_targets list and
// each case's server memory (by case id; every case of ServerInput.Cases is present).
type ServerResult struct {
	Join    ServerJoin
	Targets []Target
	Cases   map[string]*CaseMem
}

// NotConfigured is the result without telemetry (§5 item 87): status not_configured and
// every case not_joined.
func NotConfigured(cases []CaseWindow) *ServerResult {
	res := &ServerResult{Join: ServerJoin{Status: "not_configured"}, Cases: map[string]*CaseMem{}}
	for _, c := range cases {
		res.Cases[c.CaseID] = &CaseMem{Observations: map[string]*Observation{},
			Coverage: Coverage{Status: CoverageNotJoined, Reason: ptr("no server telemetry was supplied")}}
	}
	return res
}

// ValidateAlignment checks an infer.clock_alignment record or the flags' equivalent by
// the contract's rules: uncertainty ≥ 0, distinct from/to domains in the clock-domain
// format, and a non-empty half-open window when both ends are set. A float or boolean
// offset never decodes (artifact reader). Errors wrap ErrInvalidTelemetry.
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

func ptr[T any](v T) *T { return &v }

// sampleKey is a sample's whole content, for dropping exact duplicates.
type sampleKey struct {
	scope, domain, owner, run, metric, state, source, provenance string
	at, interval                                                 int64
	value                                                        int64
	detail                                                       string
	hasValue, hasDetail                                          bool
	id                                                           identityKey
	gpu, instance                                                string
	hasGPU, hasInstance                                          bool
}

func keyOfSample(s *artifact.TelemetrySample) sampleKey {
	k := sampleKey{scope: s.Scope, domain: s.ClockDomain, owner: s.CounterOwner, run: s.RunID, metric: s.Metric,
		state: s.State, source: s.Source, provenance: s.Provenance, at: s.ObservedAtNS, interval: s.IntervalMS, id: keyOf(s)}
	if s.ValueBytes != nil {
		k.value, k.hasValue = *s.ValueBytes, true
	}
	if s.Detail != nil {
		k.detail, k.hasDetail = *s.Detail, true
	}
	if s.Identity.DeviceUUID != nil {
		k.gpu, k.hasGPU = *s.Identity.DeviceUUID, true
	}
	if s.Identity.GPUInstanceID != nil {
		k.instance, k.hasInstance = *s.Identity.GPUInstanceID, true
	}
	return k
}

// identityKey identifies a server target. The GPU is left out: RSS samples may carry no
// device, and a second GPU is caught separately.
type identityKey struct {
	host, boot                 string
	pid, start                 int64
	replica, group             string
	rank, world                int64
	hasRank, hasWorld, hasBoot bool
}

type target struct {
	key     identityKey
	sample  *artifact.TelemetrySample // first sample
	domain  string
	gpus    map[string]bool
	samples []*artifact.TelemetrySample // in observed order
	runIDs  map[string]bool
	metrics map[string]bool
}

func keyOf(s *artifact.TelemetrySample) identityKey {
	id := &s.Identity
	k := identityKey{host: id.Host, pid: id.PID, start: id.ProcessStartNS}
	if id.BootID != nil {
		k.boot, k.hasBoot = *id.BootID, true
	}
	if id.ReplicaID != nil {
		k.replica = "r:" + *id.ReplicaID
	}
	if id.GroupID != nil {
		k.group = "g:" + *id.GroupID
	}
	if id.Rank != nil {
		k.rank, k.hasRank = *id.Rank, true
	}
	if id.WorldSize != nil {
		k.world, k.hasWorld = *id.WorldSize, true
	}
	return k
}

// JoinServer joins server telemetry to the case windows. It returns an error (wrapping
// ErrInvalidTelemetry) only for a malformed clock alignment — flags or artifact records —
// or an invalid sample; every other problem is an unjoined reason in the result, and the
// client report stays intact. Without samples it returns NotConfigured.
func JoinServer(in ServerInput) (*ServerResult, error) {
	if len(in.Samples) == 0 {
		return NotConfigured(in.Cases), nil
	}
	if in.Clock.UncertaintyNS != nil && *in.Clock.UncertaintyNS < 0 {
		return nil, fmt.Errorf("%w: --clock-uncertainty-ns %d is negative", ErrInvalidTelemetry, *in.Clock.UncertaintyNS)
	}
	for i := range in.Alignments {
		if err := ValidateAlignment(&in.Alignments[i]); err != nil {
			return nil, err
		}
	}
	// Deduplicate exact copies (the same file given twice, §5 item 94).
	seen := make(map[sampleKey]bool, len(in.Samples))
	samples := make([]*artifact.TelemetrySample, 0, len(in.Samples))
	for i := range in.Samples {
		s := &in.Samples[i]
		if err := ValidateSample(s); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidTelemetry, err)
		}
		k := keyOfSample(s)
		if seen[k] {
			continue
		}
		seen[k] = true
		samples = append(samples, s)
	}
	sort.SliceStable(samples, func(i, j int) bool { return samples[i].ObservedAtNS < samples[j].ObservedAtNS })

	res := &ServerResult{Cases: map[string]*CaseMem{}}
	j := &res.Join
	j.ClockAlignments, j.OverriddenClockAlignments, j.IgnoredClockAlignments = []AppliedAlignment{}, []string{}, []string{}
	if in.ArtifactRunID != "" {
		j.ArtifactRunID = ptr(in.ArtifactRunID)
	}
	runIDs := map[string]bool{}
	targets := map[identityKey]*target{}
	var order []*target
	for _, s := range samples {
		runIDs[s.RunID] = true
		k := keyOf(s)
		t := targets[k]
		if t == nil {
			t = &target{key: k, sample: s, domain: s.ClockDomain, gpus: map[string]bool{}, runIDs: map[string]bool{}, metrics: map[string]bool{}}
			targets[k] = t
			order = append(order, t)
		}
		t.samples = append(t.samples, s)
		t.runIDs[s.RunID] = true
		t.metrics[s.Metric] = true
		// An invalid sample marks where the identity stopped holding (a changed GPU UUID
		// among them): its GPU is not a second identity.
		if s.Identity.DeviceUUID != nil && s.State != artifact.SampleInvalid {
			gpu := *s.Identity.DeviceUUID
			if s.Identity.GPUInstanceID != nil {
				gpu += "/" + *s.Identity.GPUInstanceID
			}
			t.gpus[gpu] = true
		}
	}
	j.TelemetryRunIDs = sortedKeys(runIDs)
	for _, t := range order {
		res.Targets = append(res.Targets, t.describe())
	}

	unjoined := func(reason string) (*ServerResult, error) {
		j.Status, j.Reason = "unjoined", ptr(reason)
		for _, c := range in.Cases {
			res.Cases[c.CaseID] = &CaseMem{Observations: map[string]*Observation{},
				Coverage: Coverage{Status: CoverageNotJoined, Reason: ptr(reason)}}
		}
		return res, nil
	}
	if !in.DirectServer {
		return unjoined(ReasonRouteUndeclared)
	}
	j.RouteEvidence = ptr("operator_declared_direct")
	for id := range runIDs {
		if id != in.ArtifactRunID {
			return unjoined(ReasonRunIDMismatch)
		}
	}
	for _, t := range order {
		if len(t.gpus) > 1 && t.key.group == "" {
			return unjoined(ReasonMultipleServerIdentities)
		}
	}
	// Groups.
	groups := map[string]bool{}
	undeclared := 0
	for _, t := range order {
		if t.key.group != "" {
			groups[t.key.group] = true
		} else {
			undeclared++
		}
	}
	var members []*target
	if len(groups) == 0 {
		if len(order) > 1 {
			return unjoined(ReasonMultipleServerIdentities)
		}
		members = order
	} else {
		if len(groups) > 1 {
			return unjoined(ReasonMultipleServerGroups)
		}
		if undeclared > 0 {
			return unjoined(ReasonUndeclaredServerIdentity)
		}
		world := order[0].key.world
		byRank := map[int64]*target{}
		for _, t := range order {
			if t.key.world != world {
				return unjoined(ReasonInconsistentGroupSize)
			}
			if byRank[t.key.rank] != nil || len(t.gpus) > 1 {
				return unjoined(ReasonGroupMemberChanged)
			}
			byRank[t.key.rank] = t
		}
		for r := int64(0); r < world; r++ {
			if byRank[r] == nil {
				return unjoined(ReasonGroupMemberMissing)
			}
			members = append(members, byRank[r])
		}
		if in.Clock.OffsetNS != nil || in.Clock.UncertaintyNS != nil {
			remote := map[string]bool{}
			for _, t := range members {
				if t.domain != in.ClientClockDomain {
					remote[t.domain] = true
				}
			}
			if len(remote) > 1 {
				return unjoined(ReasonClockFlagsAmbiguous)
			}
		}
		j.Group = &GroupInfo{GroupID: strings.TrimPrefix(order[0].key.group, "g:"), WorldSize: world, Members: len(members)}
	}

	// Clock evidence and per-sample placement, per member.
	placements := make([]*placement, len(members))
	evidence := map[string]bool{}
	for i, t := range members {
		mi := in
		if j.Group != nil && in.Clock.OffsetNS != nil && t.domain == in.ClientClockDomain && t.sample.Identity.BootID != nil {
			// The flags describe the group's one remote host; a member on the client's host
			// and boot shares its clock.
			mi.Clock = ClockFlags{}
		}
		p, reason := align(t, mi, res)
		if reason != "" {
			return unjoined(reason)
		}
		placements[i] = p
		evidence[p.evidence] = true
	}
	if len(evidence) == 1 {
		for e := range evidence {
			j.ClockAlignmentEvidence = ptr(e)
		}
	} else {
		j.ClockAlignmentEvidence = ptr(strings.Join(sortedKeys(evidence), "+"))
	}
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
	j.Status = "joined"
	j.CaseCoverage = map[string]int{CoverageObserved: 0, CoveragePartial: 0, CoverageEmpty: 0}
	for _, c := range in.Cases {
		cm := &CaseMem{Observations: map[string]*Observation{}}
		if j.Group == nil {
			cm.Observations, cm.Coverage = placements[0].cover(c)
		} else {
			observed := 0
			var reason *string
			for i, t := range members {
				obs, cov := placements[i].cover(c)
				cm.Members = append(cm.Members, Member{Rank: t.key.rank, PID: t.sample.Identity.PID, Host: t.sample.Identity.Host,
					DeviceUUID: t.sample.Identity.DeviceUUID, Observations: obs, Coverage: cov})
				if cov.Status == CoverageObserved {
					observed++
				}
				if cov.Status != CoverageObserved && reason == nil {
					reason = cov.Reason
				}
			}
			switch {
			case observed == len(members):
				cm.Coverage = Coverage{Status: CoverageObserved}
			case observed == 0:
				// Observed when every member is, empty when none is, partial otherwise (seed
				// "Optional server telemetry").
				cm.Coverage = Coverage{Status: CoverageEmpty, Reason: reason}
			default:
				cm.Coverage = Coverage{Status: CoveragePartial, Reason: reason}
			}
		}
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

func (t *target) describe() Target {
	id := &t.sample.Identity
	out := Target{Host: id.Host, BootID: id.BootID, PID: id.PID, ProcessStartNS: id.ProcessStartNS,
		DeviceUUID: id.DeviceUUID, GPUInstanceID: id.GPUInstanceID, ReplicaID: id.ReplicaID, Rank: id.Rank,
		GroupID: id.GroupID, WorldSize: id.WorldSize, ClockDomain: t.domain, RunIDs: sortedKeys(t.runIDs),
		Samples: len(t.samples), Metrics: sortedKeys(t.metrics),
		FirstObserved: t.samples[0].ObservedAtNS, LastObserved: t.samples[len(t.samples)-1].ObservedAtNS}
	return out
}

func sortedKeys[K interface{ ~string }](m map[K]bool) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
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

type placement struct {
	evidence     string
	samples      []placed
	invalidation *Invalidation
	// lastConfirmed is the client time of the last poll that confirmed the identity before
	// the first invalid sample; trustAll when there is no invalid sample.
	lastConfirmed *int64
	trustAll      bool
	maxU          int64
}

type candidate struct {
	a       artifact.ClockAlignment
	source  string
	applied int // index into res.Join.ClockAlignments
}

// align finds the clock evidence of one target and places its samples; a non-empty reason
// means the target cannot be joined.
func align(t *target, in ServerInput, res *ServerResult) (*placement, string) {
	j := &res.Join
	client := in.ClientClockDomain
	server := t.domain
	hasBoot := t.sample.Identity.BootID != nil
	off, unc := in.Clock.OffsetNS, in.Clock.UncertaintyNS
	var cands []candidate
	p := &placement{}
	add := func(a artifact.ClockAlignment, source string) {
		j.ClockAlignments = append(j.ClockAlignments, AppliedAlignment{Source: source, EventID: a.EventID,
			FromClockDomain: a.FromClockDomain, ToClockDomain: a.ToClockDomain, OffsetNS: a.OffsetNS,
			UncertaintyNS: a.UncertaintyNS, ValidFromNS: a.ValidFromNS, ValidToNS: a.ValidToNS})
		cands = append(cands, candidate{a: a, source: source, applied: len(j.ClockAlignments) - 1})
	}
	operator := func(from string) artifact.ClockAlignment {
		return artifact.ClockAlignment{EventID: "cli:clock-offset", FromClockDomain: from, ToClockDomain: client,
			OffsetNS: *off, UncertaintyNS: *unc}
	}
	switch {
	case server == client && hasBoot && client != "":
		// One host and boot: one clock.
		if off != nil && *off != 0 {
			return nil, ReasonClockOffsetOnSharedClock
		}
		if off != nil && unc == nil {
			return nil, ReasonClockUncertaintyRequired
		}
		var u int64
		if unc != nil {
			u = *unc
		}
		p.evidence = "same_host"
		add(artifact.ClockAlignment{EventID: "same_host", FromClockDomain: server, ToClockDomain: client, UncertaintyNS: u}, "same_host")
	case server == client:
		// Same hostname, no boot id: never a shared clock.
		switch {
		case off == nil && unc == nil:
			return nil, ReasonClockDomainUnverified
		case unc == nil:
			return nil, ReasonClockUncertaintyRequired
		case off == nil:
			return nil, ReasonClockOffsetRequired
		}
		p.evidence = "operator_supplied"
		add(operator(server+"#server"), "operator")
	default:
		var pair, foreign []artifact.ClockAlignment
		for _, a := range in.Alignments {
			if a.FromClockDomain != server || a.ToClockDomain != client {
				continue
			}
			if a.Context.RunID != in.ArtifactRunID {
				foreign = append(foreign, a)
				continue
			}
			pair = append(pair, a)
		}
		for _, a := range foreign {
			j.IgnoredClockAlignments = append(j.IgnoredClockAlignments, a.EventID)
		}
		switch {
		case off != nil && unc == nil:
			return nil, ReasonClockUncertaintyRequired
		case off == nil && unc != nil:
			return nil, ReasonClockOffsetRequired
		case off != nil:
			for _, a := range pair {
				j.OverriddenClockAlignments = append(j.OverriddenClockAlignments, a.EventID)
			}
			p.evidence = "operator_supplied"
			add(operator(server), "operator")
		case len(pair) > 0:
			p.evidence = "artifact_record"
			for _, a := range pair {
				add(a, "artifact")
			}
		case len(foreign) > 0:
			return nil, ReasonClockAlignmentOtherRun
		default:
			return nil, ReasonClockAlignmentRequired
		}
	}
	// Per-sample placement: the one candidate whose half-open window covers the server time.
	aligned, uncovered, ambiguous := 0, 0, 0
	for _, s := range t.samples {
		ps := placed{s: s}
		n, hit := 0, -1
		for ci := range cands {
			a := &cands[ci].a
			if (a.ValidFromNS == nil || s.ObservedAtNS >= *a.ValidFromNS) && (a.ValidToNS == nil || s.ObservedAtNS < *a.ValidToNS) {
				n++
				if hit < 0 {
					hit = ci
				}
			}
		}
		switch {
		case n == 1:
			c := &cands[hit]
			ps.ok, ps.at, ps.unc = true, s.ObservedAtNS+c.a.OffsetNS, c.a.UncertaintyNS
			j.ClockAlignments[c.applied].AlignedSamples++
			aligned++
			if ps.unc > p.maxU {
				p.maxU = ps.unc
			}
		case n == 0:
			ps.why = CoverAlignmentUncovered
			ps.est = s.ObservedAtNS + nearest(cands, s.ObservedAtNS).OffsetNS
			uncovered++
		default:
			ps.why = CoverAlignmentAmbiguous
			ps.est = s.ObservedAtNS + cands[hit].a.OffsetNS
			ambiguous++
		}
		p.samples = append(p.samples, ps)
	}
	j.UnalignedSamples.Uncovered += uncovered
	j.UnalignedSamples.Ambiguous += ambiguous
	if aligned == 0 {
		if ambiguous > 0 {
			return nil, ReasonClockAlignmentAmbiguous
		}
		return nil, ReasonClockAlignmentUncovered
	}
	// Invalidation: the first invalid sample; the last earlier poll confirmed the identity.
	p.trustAll = true
	for i, ps := range p.samples {
		if ps.s.State != artifact.SampleInvalid {
			continue
		}
		p.trustAll = false
		inv := &Invalidation{ObservedAtNS: ps.s.ObservedAtNS, Detail: ps.s.Detail}
		for k := i - 1; k >= 0; k-- {
			q := p.samples[k]
			if q.ok {
				inv.LastConfirmedAtNS = ptr(q.s.ObservedAtNS)
				p.lastConfirmed = ptr(q.at)
				break
			}
		}
		p.invalidation = inv
		p.samples = p.samples[:i] // samples from the invalid one on never count
		break
	}
	// Order by (estimated) client time so each case reads only its own range.
	p.samples = append([]placed(nil), p.samples...)
	sort.SliceStable(p.samples, func(a, b int) bool { return p.samples[a].clientTime() < p.samples[b].clientTime() })
	return p, ""
}

// clientTime is the sample's client time: placed, or estimated when unplaced.
func (ps *placed) clientTime() int64 {
	if ps.ok {
		return ps.at
	}
	return ps.est
}

// inRange returns the samples whose client time lies in [lo, hi].
func (p *placement) inRange(lo, hi int64) []placed {
	i := sort.Search(len(p.samples), func(k int) bool { return p.samples[k].clientTime() >= lo })
	j := sort.Search(len(p.samples), func(k int) bool { return p.samples[k].clientTime() > hi })
	if j < i {
		j = i
	}
	return p.samples[i:j]
}

// nearest returns the candidate whose window lies closest to t (for estimating where an
// uncovered sample likely fell).
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

// cover computes one case's observations and coverage for one target.
func (p *placement) cover(c CaseWindow) (map[string]*Observation, Coverage) {
	obs := map[string]*Observation{}
	if !c.Known {
		return obs, Coverage{Status: CoverageEmpty, Reason: ptr(CoverNoCollectorCoverage)}
	}
	a, b := c.StartNS, c.EndNS
	// U: the largest uncertainty of the samples that likely fell in this case; without
	// any, the largest applied.
	near := p.inRange(a-p.maxU, b+p.maxU)
	u, found := int64(0), false
	for _, ps := range near {
		if ps.ok && ps.at >= a-ps.unc && ps.at <= b+ps.unc {
			if !found || ps.unc > u {
				u, found = ps.unc, true
			}
		}
	}
	if !found {
		u = p.maxU
	}
	if b-a < 2*u {
		return obs, Coverage{Status: CoverageEmpty, Reason: ptr(CoverWindowShorterThanUncertainty)}
	}
	win := &[2]int64{a + u, b - u}
	if !p.trustAll && (p.lastConfirmed == nil || b+u > *p.lastConfirmed) {
		return obs, Coverage{Status: CoverageEmpty, Reason: ptr(CoverIdentityInvalidated), CountedWindowNS: win}
	}
	var first, last *placed
	unplaced := ""
	n := 0
	for i := range near {
		ps := &near[i]
		if !ps.ok {
			if ps.est >= win[0] && ps.est <= win[1] && unplaced == "" {
				unplaced = ps.why
			}
			continue
		}
		if ps.at-ps.unc < a || ps.at+ps.unc > b || ps.at < win[0] || ps.at > win[1] {
			continue
		}
		n++
		if first == nil {
			first = ps
		}
		last = ps
		o := obs[ps.s.Metric]
		if o == nil {
			o = &Observation{ObservationScope: ps.s.Scope, CounterOwner: ps.s.CounterOwner, Sources: []string{}, Provenance: []string{}, IntervalsMS: []int64{}}
			obs[ps.s.Metric] = o
		}
		o.Sources = addSorted(o.Sources, ps.s.Source)
		o.Provenance = addSorted(o.Provenance, ps.s.Provenance)
		o.IntervalsMS = addSortedInt(o.IntervalsMS, ps.s.IntervalMS)
		switch ps.s.State {
		case artifact.SampleValid:
			o.ValidSamples++
			if o.MaximumRecordedBytes == nil || *ps.s.ValueBytes > *o.MaximumRecordedBytes {
				o.MaximumRecordedBytes = ptr(*ps.s.ValueBytes)
			}
		case artifact.SampleMissing:
			o.MissingSamples++
		case artifact.SampleStale:
			o.StaleSamples++
		case artifact.SampleInvalid:
			o.InvalidSamples++
		}
	}
	if n == 0 {
		reason := CoverNoCollectorCoverage
		if unplaced != "" {
			reason = unplaced
		}
		return obs, Coverage{Status: CoverageEmpty, Reason: ptr(reason), CountedWindowNS: win}
	}
	switch {
	case unplaced != "":
		return obs, Coverage{Status: CoveragePartial, Reason: ptr(unplaced), CountedWindowNS: win}
	case first.at-win[0] > first.s.IntervalMS*1_000_000:
		return obs, Coverage{Status: CoveragePartial, Reason: ptr(CoverStartedAfterWindowStart), CountedWindowNS: win}
	case win[1]-last.at > last.s.IntervalMS*1_000_000:
		return obs, Coverage{Status: CoveragePartial, Reason: ptr(CoverStoppedBeforeWindowEnd), CountedWindowNS: win}
	}
	return obs, Coverage{Status: CoverageObserved, CountedWindowNS: win}
}

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
