package join

import (
	"github.com/inferprobe/inferprobe/artifact"
)

// StepClock is how engine steps imported from a profiler trace (times in the server host's
// clock domain) are placed on the client's clock: client time = server time + OffsetNS,
// within ± UncertaintyNS. Source is "same_host" (one host and boot: offset 0) or
// "artifact_record" (the run's one infer.clock_alignment record from the server's domain to
// the client's). OK is false with Reason when the steps cannot be placed.
type StepClock struct {
	OK            bool
	OffsetNS      int64
	UncertaintyNS int64
	Source        string
	Reason        string
}

// PlaceSteps returns the placement of steps recorded in server's clock domain for a client
// artifact in client's domain (ClientDomain) of run runID, with the artifact's alignment
// records. The rule:
//   - server == client (or server empty: a trace imported without a domain is taken as the
//     client host's, as the pipeline's loopback windows are): same_host, offset 0;
//   - otherwise exactly one valid record of this run from server to client whose validity
//     window is unbounded or contains at: artifact_record; none → clock_alignment_required
//     (clock_alignment_from_another_run when only other runs' records exist); several →
//     clock_alignment_ambiguous; an invalid record → its ValidateAlignment error's reason,
//     clock_alignment_required.
func PlaceSteps(server, client, runID string, alignments []artifact.ClockAlignment, at int64) StepClock {
	if server == "" || server == client {
		return StepClock{OK: true, Source: "same_host"}
	}
	pair, foreign := pairAlignments(alignments, server, client, runID)
	var usable []artifact.ClockAlignment
	for i := range pair {
		a := &pair[i]
		if ValidateAlignment(a) != nil {
			continue
		}
		if (a.ValidFromNS == nil || at >= *a.ValidFromNS) && (a.ValidToNS == nil || at < *a.ValidToNS) {
			usable = append(usable, *a)
		}
	}
	switch {
	case len(usable) == 1:
		return StepClock{OK: true, OffsetNS: usable[0].OffsetNS, UncertaintyNS: usable[0].UncertaintyNS, Source: "artifact_record"}
	case len(usable) > 1:
		return StepClock{Reason: ReasonClockAlignmentAmbiguous}
	case len(pair) == 0 && len(foreign) > 0:
		return StepClock{Reason: ReasonClockAlignmentOtherRun}
	}
	return StepClock{Reason: ReasonClockAlignmentRequired}
}
