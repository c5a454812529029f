package tables

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/loadgen"
)

// SummaryOf is the text report of in (analyze.AnalyzeInput and analyze.RenderText, as
// `inferprobe analyze` prints it: open-loop schedules recomputed from the infer.workload
// record, a truncated last line as the first warning) and the SLO policy it judged by
// (name, digest, source and the policy document as indented JSON); "" without a policy.
func SummaryOf(ctx context.Context, path string, in *analyze.Input) (text, slo string, err error) {
	var opts analyze.Options
	if in.Artifact.Workload != nil {
		opts.Scheduler = loadgen.WorkloadScheduler(in.Artifact.Workload)
	}
	rep, err := analyze.AnalyzeInput(ctx, in, opts)
	if err != nil {
		return "", "", err
	}
	if t := in.Artifact.Truncated; t != nil {
		rep.Warnings = append([]string{fmt.Sprintf("%s: %s", path, t)}, rep.Warnings...)
	}
	var b strings.Builder
	if err := analyze.RenderText(&b, rep); err != nil {
		return "", "", err
	}
	if rep.SLO != nil {
		doc, err := json.MarshalIndent(rep.SLO.Policy, "", "  ")
		if err != nil {
			return b.String(), "", err
		}
		slo = fmt.Sprintf("%s (digest %s, from %s):\n%s\n", rep.SLO.Name, rep.SLO.Digest, rep.SLO.Source, doc)
	}
	return b.String(), slo, nil
}

// SummaryFile is the Summary of the closed artifact at path (for Sink.SetSummary after a
// run, e.g. profile --tables: the artifact writer closes before the sinks after it): its text
// report and SLO policy (SummaryOf). Errors: reading (analyze.ReadInput) or analysing it.
func SummaryFile(ctx context.Context, path string) (Summary, error) {
	in, err := analyze.ReadInput(ctx, path)
	if err != nil {
		return Summary{}, err
	}
	text, slo, err := SummaryOf(ctx, path, in)
	return Summary{Text: text, SLO: slo}, err
}
