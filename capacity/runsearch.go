package capacity

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/loadgen"
)

// The files of a search directory (RunProber.Dir), beside the probes' probe-NN.jsonl.
const (
	RecordFile = "search.jsonl" // the infer.search record alone
	PlotFile   = "search.png"   // the binding criterion's estimate per probe
)

// Check validates a search before anything is sent: the options (PlanOf's errors) and the
// workload as the first probe will run it (the stage at Min with the plan's first size; the
// workload's own errors, in profile's flag terms). It returns the plan and the first
// probe's run configuration.
func (p *RunProber) Check(o Options) (Plan, *loadgen.Config, error) {
	plan, err := PlanOf(o)
	if err != nil {
		return Plan{}, nil, err
	}
	spec, err := p.stageSpec(Stage{Probe: 1, Stage: 1, Value: o.Min, Requests: plan.First, Seed: o.Seed, Rule: plan.Rule})
	if err != nil {
		return Plan{}, nil, err
	}
	return plan, spec.Workload, nil
}

// SearchAndWrite runs the search (Search) over p and writes its directory dir (a
// RunProber's Dir): the record
// to RecordFile and, when a value was probed, the plot to PlotFile. It returns the result
// (nil only when the options are invalid: nothing was sent), the record's path, and the
// search's error, else the record's write error. A plot that cannot be drawn does not fail
// the search: it is told to warn (when set).
func SearchAndWrite(ctx context.Context, p Prober, dir string, o Options, warn func(string)) (*artifact.Search, string, error) {
	res, err := Search(ctx, p, o)
	if res == nil {
		return nil, "", err
	}
	path := filepath.Join(dir, RecordFile)
	if werr := WriteRecord(path, res); werr != nil && err == nil {
		err = werr
	}
	if len(res.Probes) > 0 {
		if perr := WritePNG(filepath.Join(dir, PlotFile), res); perr != nil && warn != nil {
			warn(fmt.Sprintf("the plot could not be drawn: %v", perr))
		}
	}
	return res, path, err
}
