package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/exporter"
	"github.com/inferprobe/inferprobe/run"
	"github.com/inferprobe/inferprobe/tables"
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
	// p is the probe's definition: a reload that changes only its schedule, span drain or
	// SLO replaces it (update); each run takes the one in force when it starts.
	p atomic.Pointer[Probe]
	// cfg is the configuration in force (artifact directory and retention): a reload that
	// leaves the probe running replaces it.
	cfg     atomic.Pointer[Config]
	once    sync.Once
	wake    chan struct{} // closed by stop
	changed chan struct{} // (1 buffered) update wakes a waiting loop to reschedule
	done    chan struct{}

	mu       sync.Mutex
	pipeline *run.Pipeline
	cancel   context.CancelFunc // a search probe's running search
	stopped  bool
}

func newProbeLoop(d *Daemon, p *Probe, cfg *Config) *probeLoop {
	l := &probeLoop{d: d, wake: make(chan struct{}), changed: make(chan struct{}, 1), done: make(chan struct{})}
	l.p.Store(p)
	l.cfg.Store(cfg)
	return l
}

func (l *probeLoop) probe() *Probe { return l.p.Load() }

func (l *probeLoop) labels() exporter.Labels { return l.probe().labels() }

// update hands the loop a new definition of its probe (same key: same workload and target)
// and the configuration in force; the running run goes on, and a loop waiting for its next
// start reschedules by the new schedule.
func (l *probeLoop) update(p *Probe, cfg *Config) {
	l.p.Store(p)
	l.cfg.Store(cfg)
	select {
	case l.changed <- struct{}{}:
	default:
	}
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
		if l.cancel != nil {
			l.cancel() // a search stops at once: a stopped probe run would be judged
		}
		l.mu.Unlock()
	})
}

// Why a loop's wait ended.
const (
	wokeDue     = iota // the wait is over
	wokeStopped        // stop
	wokeChanged        // update: reschedule
)

// sleep waits d on the daemon's clock, or until the loop is stopped or updated.
func (l *probeLoop) sleep(d time.Duration) int {
	t := l.d.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-l.wake:
		return wokeStopped
	case <-t.Chan():
		return wokeDue
	case <-l.changed:
		return wokeChanged
	}
}

func (l *probeLoop) run() {
	defer l.d.wg.Done()
	defer close(l.done)
	var last time.Time // the scheduled start of the last run; zero before the first
	var backoff time.Duration
	for {
		start, ok := l.waitNext(last, backoff)
		if !ok {
			return
		}
		last = start
		healthy := l.runOne()
		if p := l.probe(); healthy || !p.Continuous {
			backoff = 0
		} else {
			backoff = min(max(2*backoff, continuousBackoffMin), continuousBackoffMax)
			l.d.log.Warn("a continuous probe run failed or had no successful request; the next run waits", "probe", p.Name, "wait", backoff)
		}
	}
}

// waitNext waits until the next run is due and returns its scheduled start, or false once
// the loop is stopped. The first run starts at once; a continuous probe's next run starts
// after backoff; a scheduled one at the first last + k·every (k ≥ 1) after now, skipping
// (and logging) the starts that the previous run overran. An update during the wait
// reschedules by the new schedule, from last: a start already past then begins at once.
func (l *probeLoop) waitNext(last time.Time, backoff time.Duration) (time.Time, bool) {
	clock := l.d.clock
	rescheduled := false
	for {
		p, now := l.probe(), clock.Now()
		start := now
		var wait time.Duration
		switch {
		case last.IsZero():
		case p.Continuous:
			wait = backoff
		default:
			start = last.Add(p.Every)
			if !start.After(now) && !rescheduled {
				skipped := 0
				for !start.After(now) {
					start = start.Add(p.Every)
					skipped++
				}
				l.d.log.Warn("a probe run lasted longer than its interval; runs were skipped", "probe", p.Name, "skipped", skipped)
			}
			wait = start.Sub(now)
		}
		switch l.sleep(max(wait, 0)) {
		case wokeStopped:
			return time.Time{}, false
		case wokeChanged:
			rescheduled = true
			continue
		}
		select {
		case <-l.wake:
			return time.Time{}, false
		default:
		}
		if p.Continuous || last.IsZero() || start.Before(now) {
			start = clock.Now()
		}
		return start, true
	}
}

// runOne runs the probe once: one artifact, written like `inferprobe profile` writes it. It
// reports whether the run started and had a successful request.
func (l *probeLoop) runOne() bool {
	d, p := l.d, l.probe()
	cfg := l.cfg.Load()
	execute := l.execute
	if p.Search != nil {
		execute = l.searchOnce
	}
	res, ok := execute(p, cfg)
	if res.Err != nil {
		d.log.Warn("probe run ended with an error", "probe", p.Name, "run_id", res.RunID, "outcome", res.Outcome, "artifact", res.Path, "err", res.Err)
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

// execute runs probe p once under the artifact settings of dcfg, through the run pipeline
// (one artifact, written as `inferprobe profile` writes it, the exporter's run as a sink and
// the daemon's receiver feeding the run its routed spans); it returns the run and whether a
// measured request succeeded.
func (l *probeLoop) execute(p *Probe, dcfg *Config) (RunResult, bool) {
	d := l.d
	cfg := *p.Workload
	cfg.RunID = uuid.NewString()
	if p.RunSeed {
		cfg.UseRunSeed()
	}
	started := time.Now()
	spec := run.Spec{
		Workload: &cfg, Tokenizer: p.Tokenizer, TokenizerName: p.TokName, Version: d.opts.Version,
		Output:          filepath.Join(dcfg.ArtifactDir, p.Name, started.UTC().Format("20060102T150405.000Z")+"-"+cfg.RunID[:8]+".jsonl"),
		Sinks:           []artifact.Sink{d.exp.StartRun(p.labels())},
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
	if p.Tables {
		ts, out := tables.New(TablesDir(spec.Output)), spec.Output
		// The artifact writer is closed before the sinks after it: the summary analyses
		// the finished artifact.
		ts.SetSummary(func() (tables.Summary, error) { return tables.SummaryFile(d.runCtx, out) })
		spec.Sinks = append(spec.Sinks, ts)
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

// TablesDir is the directory of a run artifact's tables (a probe with tables: true): the
// artifact's path without ".jsonl", plus ".tables".
func TablesDir(artifactPath string) string {
	return strings.TrimSuffix(artifactPath, ".jsonl") + ".tables"
}

// retain removes a probe's oldest artifacts beyond keep (0: no limit) and those last
// modified more than maxAge before now (0: no limit). Artifacts are the *.jsonl files of dir
// (each with its tables directory, TablesDir) and, for a search probe, its search
// directories (removed whole), named so that their names sort by start time.
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
		if (e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".jsonl")) || (e.IsDir() && searchDirRe.MatchString(e.Name())) {
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
		if !remove {
			continue
		}
		paths := []string{n}
		if strings.HasSuffix(n, ".jsonl") {
			paths = append(paths, TablesDir(n))
		}
		for _, q := range paths {
			if err := os.RemoveAll(filepath.Join(dir, q)); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("removing %s: %w", q, err))
			}
		}
	}
	return errors.Join(errs...)
}

// searchDirRe matches the name of a search probe's search directory: its UTC start and the
// first 8 hex digits of its search id.
var searchDirRe = regexp.MustCompile(`^\d{8}T\d{6}\.\d{3}Z-[0-9a-f]{8}$`)
