package join

// Server identities of telemetry samples: which samples belong to one server target, and
// which targets the join may use (one target, or every rank of one declared group).

import (
	"strings"

	"github.com/inferprobe/inferprobe/artifact"
)

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

// sampleKey is a sample's whole content, for dropping exact duplicates.
type sampleKey struct {
	scope, domain, owner, run, metric, state, source, provenance string
	at, interval                                                 int64
	value, energy, power                                         int64
	hasEnergy, hasPower                                          bool
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
	if s.ValueMillijoules != nil {
		k.energy, k.hasEnergy = *s.ValueMillijoules, true
	}
	if s.ValueMilliwatts != nil {
		k.power, k.hasPower = *s.ValueMilliwatts, true
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

// target is one server identity and its samples.
type target struct {
	key     identityKey
	sample  *artifact.TelemetrySample // first sample
	domain  string
	gpus    map[string]bool             // device_uuid[/gpu_instance_id] of its non-invalid samples
	samples []*artifact.TelemetrySample // in observed order
	runIDs  map[string]bool
	metrics map[string]bool
}

// collectTargets groups samples (sorted by observed time) by identity, targets in order
// of first appearance, and returns the run ids of all samples.
func collectTargets(samples []*artifact.TelemetrySample) (order []*target, runIDs map[string]bool) {
	runIDs = map[string]bool{}
	targets := map[identityKey]*target{}
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
	return order, runIDs
}

// describe is the target's telemetry.server_targets entry.
func (t *target) describe() Target {
	id := &t.sample.Identity
	return Target{Host: id.Host, BootID: id.BootID, PID: id.PID, ProcessStartNS: id.ProcessStartNS,
		DeviceUUID: id.DeviceUUID, GPUInstanceID: id.GPUInstanceID, ReplicaID: id.ReplicaID, Rank: id.Rank,
		GroupID: id.GroupID, WorldSize: id.WorldSize, ClockDomain: t.domain, RunIDs: sortedKeys(t.runIDs),
		Samples: len(t.samples), Metrics: sortedKeys(t.metrics),
		FirstObserved: t.samples[0].ObservedAtNS, LastObserved: t.samples[len(t.samples)-1].ObservedAtNS}
}

// joinMembers picks the targets to join: the one target when no group is declared, or
// every rank of the one declared group (groupMembers), with the group's GroupInfo. A
// target outside a group must have one GPU; several targets need one group that all of
// them declare. A non-empty reason leaves the join unjoined.
func joinMembers(order []*target, in ServerInput) ([]*target, *GroupInfo, string) {
	for _, t := range order {
		if len(t.gpus) > 1 && t.key.group == "" {
			return nil, nil, ReasonMultipleServerIdentities
		}
	}
	groups := map[string]bool{}
	undeclared := 0
	for _, t := range order {
		if t.key.group != "" {
			groups[t.key.group] = true
		} else {
			undeclared++
		}
	}
	switch {
	case len(groups) == 0 && len(order) > 1:
		return nil, nil, ReasonMultipleServerIdentities
	case len(groups) == 0:
		return order, nil, ""
	case len(groups) > 1:
		return nil, nil, ReasonMultipleServerGroups
	case undeclared > 0:
		return nil, nil, ReasonUndeclaredServerIdentity
	}
	return groupMembers(order, in)
}

// groupMembers orders the targets of one declared group by rank. Every member must declare
// the same world_size, every rank 0…world_size−1 must appear exactly once with one GPU,
// and clock flags are refused when members sit on more than one host other than the
// client's (the flags describe one remote host).
func groupMembers(order []*target, in ServerInput) ([]*target, *GroupInfo, string) {
	world := order[0].key.world
	byRank := map[int64]*target{}
	for _, t := range order {
		if t.key.world != world {
			return nil, nil, ReasonInconsistentGroupSize
		}
		if byRank[t.key.rank] != nil || len(t.gpus) > 1 {
			return nil, nil, ReasonGroupMemberChanged
		}
		byRank[t.key.rank] = t
	}
	var members []*target
	for r := int64(0); r < world; r++ {
		if byRank[r] == nil {
			return nil, nil, ReasonGroupMemberMissing
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
			return nil, nil, ReasonClockFlagsAmbiguous
		}
	}
	return members, &GroupInfo{GroupID: strings.TrimPrefix(order[0].key.group, "g:"), WorldSize: world, Members: len(members)}, ""
}
