package run

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/loadgen"
)

// Analyze reads the artifact at path and analyses it as `inferprobe analyze` does: Poisson
// and duration schedules are recomputed from its infer.workload record
// (loadgen.WorkloadScheduler) unless opts sets a Scheduler, and a truncated last line becomes
// the report's first warning. Errors are analyze.ReadInput's and analyze.AnalyzeInput's.
func Analyze(ctx context.Context, path string, opts analyze.Options) (*analyze.Report, error) {
	in, err := analyze.ReadInput(ctx, path)
	if err != nil {
		return nil, err
	}
	return analyzeInput(ctx, path, in, opts)
}

// ErrReadBack is wrapped by Result.ReportErr when the run's closed artifact could not be read
// back and analysed: a read or validation error, or a file that no longer holds the run's
// session (another run replaced it). The run's record is then not trustworthy.
var ErrReadBack = errors.New("the artifact could not be read back")

// readBack reads the closed artifact at path back and analyses it as Analyze does, checking
// that its first infer.session is the run's (sessionID). Every error wraps ErrReadBack.
func readBack(ctx context.Context, path, sessionID string) (*analyze.Report, error) {
	defer paceReport()()
	in, err := analyze.ReadInput(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrReadBack, err)
	}
	if s := in.Artifact.Sessions; len(s) == 0 || s[0].SessionID != sessionID {
		found := "no infer.session record"
		if len(s) > 0 {
			found = "session " + s[0].SessionID
		}
		return nil, fmt.Errorf("%w: %s holds %s, not this run's session %s (did another run replace it?)", ErrReadBack, path, found, sessionID)
	}
	rep, err := analyzeInput(ctx, path, in, analyze.Options{})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrReadBack, err)
	}
	return rep, nil
}

// analyzeInput is Analyze's analysis of the artifact read from path.
func analyzeInput(ctx context.Context, path string, in *analyze.Input, opts analyze.Options) (*analyze.Report, error) {
	if opts.Scheduler == nil && in.Artifact.Workload != nil {
		opts.Scheduler = loadgen.WorkloadScheduler(in.Artifact.Workload)
	}
	rep, err := analyze.AnalyzeInput(ctx, in, opts)
	if err != nil {
		return nil, err
	}
	if t := in.Artifact.Truncated; t != nil {
		rep.Warnings = append([]string{fmt.Sprintf("%s: %s", path, t)}, rep.Warnings...)
	}
	return rep, nil
}

// Judge is the judgement of a run that ended with status at ended, from its report (nil when
// the artifact could not be analysed): per case, the span-join coverage and the SLO
// evaluation's counts and bounds, in case-id order; and whether the schedule was kept.
func Judge(status string, ended time.Time, rep *analyze.Report) *artifact.RunJudgement {
	j := &artifact.RunJudgement{Outcome: status, EndedAtNS: ended.UnixNano()}
	if rep == nil {
		return j
	}
	j.Analysed = true
	j.ScheduleMet = artifact.Ptr(rep.ScheduleKept)
	j.ClientLimited = artifact.Ptr(rep.ClientLimited)
	ids := make([]string, 0, len(rep.Cases))
	for id, c := range rep.Cases {
		if c != nil {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		c := rep.Cases[id]
		cj := artifact.CaseJudgement{CaseID: id, SpanJoinCoverage: c.Population.ServerEvidenceCoverage}
		if ev := c.SLO; ev != nil {
			cj.SLO = &artifact.SLOJudgement{
				Name: ev.SLOName, Met: ev.Met, Missed: ev.Missed, Unknown: ev.Unknown,
				AttainmentLower: ev.AttainmentLower, AttainmentUpper: ev.AttainmentUpper,
				GoodputLowerRPS: ev.GoodputLowerRPS, GoodputUpperRPS: ev.GoodputUpperRPS,
			}
		}
		j.Cases = append(j.Cases, cj)
	}
	return j
}
