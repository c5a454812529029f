package analyze

import (
	"fmt"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/join"
)

// ServerTelemetry is analyze's server-telemetry input (analyze --server-telemetry FILE...
// --direct-server --clock-offset-ns N --clock-uncertainty-ns U): the samples of every file
// (join.ReadTelemetryFile, concatenated; exact duplicates count once), whether the operator
// declared the route direct, and the clock flags.
type ServerTelemetry struct {
	Samples      []artifact.TelemetrySample
	DirectServer bool
	Clock        join.ClockFlags
}

// ServerMember is one rank of memory.server_members (groups only); see join.Member.
type ServerMember = join.Member

// applyServerTelemetry joins opts.ServerTelemetry to the case windows (each case's measured
// span — phase start → drained — or, without one, the span of its successful requests) and
// fills telemetry.server_join, telemetry.server_targets and each case's
// memory.server_observations / server_coverage / server_members. Without telemetry the
// report keeps its not_configured defaults. A malformed clock alignment (flags or
// infer.clock_alignment records) is an error wrapping join.ErrInvalidTelemetry.
func applyServerTelemetry(rep *Report, in *Input, st *ServerTelemetry) error {
	if st == nil || len(st.Samples) == 0 {
		return nil
	}
	a := in.Artifact
	ji := join.ServerInput{
		ClientClockDomain: join.ClientDomain(a.Header),
		Alignments:        a.ClockAlignments,
		Samples:           st.Samples,
		DirectServer:      st.DirectServer,
		Clock:             st.Clock,
	}
	if a.Header != nil {
		ji.ArtifactRunID = a.Header.Context.RunID
	}
	for id, c := range rep.Cases {
		w := join.CaseWindow{CaseID: id}
		if ms := c.Intervals.MeasuredSpan; ms != nil {
			w.StartNS, w.EndNS, w.Known = ms.StartedAtNs, ms.EndedAtNs, true
		} else {
			w.StartNS, w.EndNS, w.Known = startEndSpan(in.Cases[id], true)
		}
		ji.Cases = append(ji.Cases, w)
	}
	res, err := join.JoinServer(ji)
	if err != nil {
		return fmt.Errorf("server telemetry: %w", err)
	}
	rep.Telemetry["server_join"] = res.Join
	targets := res.Targets
	if targets == nil {
		targets = []join.Target{}
	}
	rep.Telemetry["server_targets"] = targets
	for id, c := range rep.Cases {
		cm := res.Cases[id]
		if cm == nil {
			continue
		}
		obs := map[string]any{}
		for k, v := range cm.Observations {
			obs[k] = v
		}
		c.Memory.ServerObservations = obs
		c.Memory.ServerCoverage = ServerCoverage{Status: cm.Coverage.Status, Reason: cm.Coverage.Reason, CountedWindowNs: cm.Coverage.CountedWindowNS}
		c.Memory.ServerMembers = cm.Members
		c.setEnergy(cm.Energy)
	}
	return nil
}
