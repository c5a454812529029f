package run

import (
	"context"
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
