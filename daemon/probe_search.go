package daemon

import (
	"context"
	"errors"
	"path/filepath"
	"time"

	"github.com/google/uuid"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/capacity"
	"github.com/inferprobe/inferprobe/exporter"
	"github.com/inferprobe/inferprobe/loadgen"
	"github.com/inferprobe/inferprobe/run"
)

// searchOnce runs a search probe's capacity search once under the artifact settings of
// dcfg: its directory DIR/<probe>/<UTC start>-<first 8 hex of the search id>/ holds
// search.jsonl, search.png and each probe's probe-NN.jsonl (ordinary artifacts, their spans
// routed by the daemon's receiver). The search is published once (exporter.SearchFinished):
// a completed one with its status and record, one stopped by the loop's stop as
// interrupted (its partial record is still written), any other error as failed. It reports
// whether the search completed.
func (l *probeLoop) searchOnce(p *Probe, dcfg *Config) (RunResult, bool) {
	d, sp := l.d, p.Search
	id := uuid.NewString()
	started := time.Now()
	dir := filepath.Join(dcfg.ArtifactDir, p.Name, started.UTC().Format("20060102T150405.000Z")+"-"+id[:8])
	w := sp.Workload
	w.RunID = id
	opts := sp.Options
	opts.SearchID = id
	opts.Seed = loadgen.RunSeed(id)
	if w.Seed != nil {
		opts.Seed = *w.Seed
	}
	warn := func(msg string) { d.log.Warn(msg, "probe", p.Name, "search_id", id) }
	spec := run.Spec{Tokenizer: p.Tokenizer, TokenizerName: p.TokName, Version: d.opts.Version, Warn: warn,
		AnalysisTimeout: 5 * time.Minute, SLO: &run.SLO{Policy: p.SLO.Policy, Source: p.SLO.Source}}
	if p.Target.MetricsURL != "" {
		mc := p.Target.scrapeConfig()
		spec.Metrics = &mc
	}
	if d.recv != nil {
		spec.Spans, spec.SpansDrain = d.feed, p.SpansDrain
	}
	pr := &capacity.RunProber{Spec: spec, Workload: w, Over: opts.Over, Dir: dir, Tests: opts.Tests, Warmup: sp.Warmup, MaxLag: sp.MaxLag}
	ctx, cancel := context.WithCancel(d.runCtx)
	defer cancel()
	l.mu.Lock()
	if l.stopped {
		cancel()
	}
	l.cancel = cancel
	l.mu.Unlock()
	res, path, err := capacity.SearchAndWrite(ctx, pr, dir, opts, warn)
	l.mu.Lock()
	l.cancel = nil
	l.mu.Unlock()
	out := RunResult{Probe: p.Name, RunID: id, Path: path, Search: res, Err: err}
	var rec *artifact.Search
	switch {
	case err == nil && res != nil:
		out.Outcome, rec = res.Status, res
	case ctx.Err() != nil || errors.Is(err, context.Canceled):
		out.Outcome = exporter.SearchInterrupted
	default:
		out.Outcome = exporter.SearchFailed
	}
	d.exp.SearchFinished(p.labels(), rec, out.Outcome, time.Now())
	return out, rec != nil
}
