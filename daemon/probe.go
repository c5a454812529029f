package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/exporter"
	"github.com/inferprobe/inferprobe/run"
)

// runLength is the expected length of one run (continuous probes start the next at its
// end): the measured window, else the time the requests take at their rate, else a minute.
func (p *Probe) runLength() time.Duration {
	cfg := p.Workload
	cases, _ := cfg.Cases()
	per := cfg.Duration
	if per == 0 {
		per = time.Minute
		if len(cfg.Rates) > 0 && cfg.Requests > 0 {
			per = time.Duration(float64(cfg.Requests) / cfg.Rates[0] * float64(time.Second))
		}
	}
	return max(time.Duration(len(cases))*per, time.Second)
}

// Backoff of a continuous probe whose run could not start or had no successful request
// (target down, artifacts not writable): the next run waits, doubling from the first to
// the last delay, instead of starting at once in a tight loop.
const (
	continuousBackoffMin = time.Second
	continuousBackoffMax = time.Minute
)

// probeLoop runs one probe on its schedule until stopped.
type probeLoop struct {
	d *Daemon
	p *Probe
	// cfg is the configuration in force (artifact directory and retention): a reload that
	// leaves the probe unchanged replaces it.
	cfg  atomic.Pointer[Config]
	exp  *exporter.Exporter
	once sync.Once
	wake chan struct{} // closed by stop
	done chan struct{}

	mu       sync.Mutex
	pipeline *run.Pipeline
	stopped  bool
}

func (l *probeLoop) labels() exporter.Labels {
	return exporter.Labels{Target: l.p.Target.Name, Model: l.p.Target.Model, Probe: l.p.Name}
}

// stop makes the loop start no more runs and stops the running one gracefully.
func (l *probeLoop) stop() {
	l.once.Do(func() {
		close(l.wake)
		l.mu.Lock()
		l.stopped = true
		if l.pipeline != nil {
			l.pipeline.Stop()
		}
		l.mu.Unlock()
	})
}

// sleep waits d, or until the loop is stopped (false).
func (l *probeLoop) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-l.wake:
		return false
	}
}

func (l *probeLoop) run() {
	defer l.d.wg.Done()
	defer close(l.done)
	next := time.Now()
	var backoff time.Duration
	for {
		wait := backoff
		if !l.p.Continuous {
			wait = time.Until(next)
		}
		if !l.sleep(max(wait, 0)) {
			return
		}
		select {
		case <-l.wake:
			return
		default:
		}
		healthy := l.runOne()
		if l.p.Continuous {
			if healthy {
				backoff = 0
			} else {
				backoff = min(max(2*backoff, continuousBackoffMin), continuousBackoffMax)
				l.d.log.Warn("a continuous probe run failed or had no successful request; the next run waits", "probe", l.p.Name, "wait", backoff)
			}
			continue
		}
		next = next.Add(l.p.Every)
		if now := time.Now(); !next.After(now) {
			skipped := 0
			for !next.After(now) {
				next = next.Add(l.p.Every)
				skipped++
			}
			l.d.log.Warn("a probe run lasted longer than its interval; runs were skipped", "probe", l.p.Name, "skipped", skipped)
		}
	}
}

// runOne runs the probe once: one artifact, written like `inferprobe profile` writes it. It
// reports whether the run started and had a successful request.
func (l *probeLoop) runOne() bool {
	d, p := l.d, l.p
	cfg := l.cfg.Load()
	res, ok := l.execute(cfg)
	if res.Err != nil {
		d.log.Warn("probe run ended with an error", "probe", p.Name, "run_id", res.RunID, "outcome", res.Outcome, "err", res.Err)
	} else {
		d.log.Info("probe run finished", "probe", p.Name, "run_id", res.RunID, "outcome", res.Outcome, "artifact", res.Path)
	}
	if err := retain(filepath.Join(cfg.ArtifactDir, p.Name), cfg.Keep, cfg.MaxAge, time.Now()); err != nil {
		d.log.Warn("artifact retention", "probe", p.Name, "err", err)
	}
	if d.opts.OnRunEnd != nil {
		d.opts.OnRunEnd(res)
	}
	return res.Outcome != exporter.RunFailed && ok
}

// execute runs the probe once under the artifact settings of dcfg, through the run pipeline
// (one artifact, written as `inferprobe profile` writes it, the exporter's run as a sink and
// the daemon's receiver feeding the run its routed spans); it returns the run and whether a
// measured request succeeded.
func (l *probeLoop) execute(dcfg *Config) (RunResult, bool) {
	d, p := l.d, l.p
	cfg := *p.Workload
	cfg.RunID = uuid.NewString()
	if p.RunSeed {
		cfg.UseRunSeed()
	}
	started := time.Now()
	spec := run.Spec{
		Workload: &cfg, Tokenizer: p.Tokenizer, TokenizerName: p.TokName, Version: d.opts.Version,
		Output:          filepath.Join(dcfg.ArtifactDir, p.Name, started.UTC().Format("20060102T150405.000Z")+"-"+cfg.RunID[:8]+".jsonl"),
		Sinks:           []artifact.Sink{l.exp.StartRun(l.labels())},
		Warn:            func(msg string) { d.log.Warn(msg, "probe", p.Name, "run_id", cfg.RunID) },
		AnalysisTimeout: 5 * time.Minute,
	}
	if p.SLO != nil {
		spec.SLO = &run.SLO{Policy: p.SLO.Policy, Source: p.SLO.Source}
	}
	if p.Target.MetricsURL != "" {
		mc := p.Target.scrapeConfig()
		spec.Metrics = &mc
	}
	if d.recv != nil {
		spec.Spans, spec.SpansDrain = d.feed, p.SpansDrain
	}
	pl := run.New(spec)
	l.mu.Lock()
	if l.stopped {
		pl.Stop()
	}
	l.pipeline = pl
	l.mu.Unlock()
	res := pl.Execute(d.runCtx)
	l.mu.Lock()
	l.pipeline = nil
	l.mu.Unlock()
	out := RunResult{Probe: p.Name, RunID: cfg.RunID, Path: res.Path, Outcome: res.Status, Report: res.Report, Err: res.Err}
	if res.ReportErr != nil && res.Path != "" {
		d.log.Warn("the probe run's artifact could not be analysed", "probe", p.Name, "artifact", res.Path, "err", res.ReportErr)
	}
	return out, res.Succeeded()
}

// retain removes a probe's oldest artifacts beyond keep (0: no limit) and those last
// modified more than maxAge before now (0: no limit). Artifacts are the *.jsonl files of dir,
// named so that their names sort by start time.
func retain(dir string, keep int, maxAge time.Duration, now time.Time) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".jsonl") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	var errs []error
	for i, n := range names {
		remove := keep > 0 && i < len(names)-keep
		if !remove && maxAge > 0 {
			if fi, err := os.Stat(filepath.Join(dir, n)); err == nil && now.Sub(fi.ModTime()) > maxAge {
				remove = true
			}
		}
		if remove {
			if err := os.Remove(filepath.Join(dir, n)); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("removing %s: %w", n, err))
			}
		}
	}
	return errors.Join(errs...)
}
