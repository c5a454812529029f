package daemon

import (
	"context"
	"encoding/json"
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

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/exporter"
	"github.com/inferprobe/inferprobe/loadgen"
	"github.com/inferprobe/inferprobe/loadgen/client"
	"github.com/inferprobe/inferprobe/scrape/collect"
	"github.com/inferprobe/inferprobe/scrape/vllm"
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

	mu      sync.Mutex
	runner  *loadgen.Runner
	stopped bool
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
		if l.runner != nil {
			l.runner.Stop()
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

// fanout writes every record to the artifact, then to the exporter; it registers the trace id
// of each request for span routing and counts requests for the session summary.
type fanout struct {
	w        *artifact.Writer
	run      *exporter.Run
	rt       *route
	requests atomic.Int64
	ok       atomic.Int64 // requests with status ok
}

func (f *fanout) Write(rec any) error {
	err := f.w.Write(rec)
	if r, ok := rec.(*artifact.Request); ok && err == nil {
		f.requests.Add(1)
		if r.Status == artifact.RequestOK {
			f.ok.Add(1)
		}
		if r.TraceID != nil {
			f.rt.traces.Store(*r.TraceID, struct{}{})
		}
	}
	_ = f.run.Write(rec)
	return err
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
	return res.Outcome != exporter.RunFailed && ok > 0
}

// execute runs the probe once under the artifact settings of dcfg; it returns the run and
// its number of successful requests.
func (l *probeLoop) execute(dcfg *Config) (RunResult, int64) {
	d, p, exp := l.d, l.p, l.exp
	labels := l.labels()
	cfg := *p.Workload
	cfg.RunID = uuid.NewString()
	res := RunResult{Probe: p.Name, RunID: cfg.RunID}
	started := time.Now()
	path := filepath.Join(dcfg.ArtifactDir, p.Name, started.UTC().Format("20060102T150405.000Z")+"-"+cfg.RunID[:8]+".jsonl")
	w, err := artifact.NewWriter(path)
	if err != nil {
		exp.StartRun(labels).Finish(exporter.RunFailed, time.Now(), nil)
		res.Outcome, res.Err = exporter.RunFailed, err
		return res, 0
	}
	res.Path = path
	warn := func(msg string) { d.log.Warn(msg, "probe", p.Name, "run_id", cfg.RunID) }
	sessionID := artifact.NewSessionID()
	host := artifact.HostIdentity()
	header := artifact.NewArtifactHeader(cfg.RunID, sessionID, d.opts.Version, started.UnixNano(), host, os.Getpid())

	sc := cfg.SessionConfig(p.TokName)
	sc.SystemSampler = collect.SamplerNone
	var scraper *vllm.Scraper
	var sampler *vllm.PhaseSampler
	if p.Target.MetricsURL != "" {
		if scraper, err = p.Target.scraper(sessionID, cfg.RunID, host.ClockDomain()); err == nil {
			sampler = vllm.NewPhaseSampler(scraper, w, warn)
			sc.VLLMMetrics = &artifact.VLLMMetricsConfig{
				URL: scraper.SourceURL(), IntervalSeconds: scraper.Interval().Seconds(),
				TimeoutSeconds: scraper.Timeout().Seconds(), Authorization: scraper.Authorization(),
			}
		}
	}
	if d.recv != nil {
		sc.VLLMSpans, _ = json.Marshal(map[string]any{
			"http_listen": d.OTLPHTTPAddr(), "grpc_listen": d.OTLPGRPCAddr(), "drain_seconds": p.SpansDrain.Seconds(),
		})
	}
	fail := func(err error) (RunResult, int64) {
		_ = w.Close()
		exp.StartRun(labels).Finish(exporter.RunFailed, time.Now(), nil)
		res.Outcome, res.Err = exporter.RunFailed, err
		return res, 0
	}
	workload, err := cfg.WorkloadRecord(sessionID, p.Tokenizer)
	if err != nil {
		return fail(err)
	}
	head := []any{
		&artifact.Session{SessionID: sessionID, TimestampNS: started.UnixNano(), Status: artifact.StatusRunning, Config: sc},
		header, workload,
	}
	if p.SLO != nil {
		doc, err := json.Marshal(p.SLO.Policy.Document())
		if err != nil {
			return fail(err)
		}
		head = append(head, &artifact.SLORecord{SessionID: sessionID, Source: p.SLO.Source, Digest: p.SLO.Policy.Digest(), SLO: doc})
	}
	for _, rec := range head {
		if err := w.Write(rec); err != nil {
			return fail(err)
		}
	}

	run := exp.StartRun(labels)
	rt := &route{runID: cfg.RunID, sessionID: sessionID, prefix: "inferprobe-" + cfg.RunID + "-", write: w.Write, sink: run}
	sink := &fanout{w: w, run: run, rt: rt}
	d.addRoute(rt)
	hooks := loadgen.Hooks{
		Sent: func(loadgen.Case, string) { run.Sent() },
		Request: func(_ loadgen.Case, _ string, st client.Outcome) {
			if st != client.Dropped {
				run.Ended()
			}
		},
		Warn: warn,
	}
	if sampler != nil {
		hooks.PhaseStart, hooks.PhaseEnd = sampler.PhaseStart, sampler.PhaseEnd
	}
	conns := 0
	for _, c := range cfg.Concurrency {
		conns = max(conns, c)
	}
	if cfg.OpenLoop() {
		conns = cfg.MaxInFlight
	}
	hc := client.New(client.Options{MaxConnsPerHost: conns, Timeout: cfg.Timeout})
	runner := loadgen.NewRunner(&cfg, hc, p.Tokenizer, sink, sessionID, hooks)
	l.mu.Lock()
	if l.stopped {
		runner.Stop()
	}
	l.runner = runner
	l.mu.Unlock()
	runErr := runner.Run(d.runCtx)
	l.mu.Lock()
	l.runner = nil
	l.mu.Unlock()
	hc.CloseIdle()
	stopped := errors.Is(runErr, loadgen.ErrStopped) || d.runCtx.Err() != nil

	var errs []error
	if sampler != nil {
		sampler.Close()
		errs = append(errs, sampler.WriteErr(), w.Write(scraper.Capabilities(header.Context, sampler.Tally())))
	}
	if d.recv != nil {
		// The spans of the run's last requests are still in the server's export batch: a
		// graceful stop waits for them too; only a hard stop cuts the drain.
		if d.runCtx.Err() == nil && p.SpansDrain > 0 {
			t := time.NewTimer(p.SpansDrain)
			select {
			case <-t.C:
			case <-d.runCtx.Done():
				t.Stop()
			}
		}
		d.removeRoute(rt)
		errs = append(errs, w.Write(d.recv.Capabilities(header.Context)))
	} else {
		d.removeRoute(rt)
	}
	status := artifact.StatusCompleted
	var errText *string
	switch {
	case stopped:
		status = artifact.StatusInterrupted
	case runErr != nil:
		status = artifact.StatusIncomplete
		errText = artifact.Ptr(runErr.Error())
	}
	if err := errors.Join(errs...); err != nil && status == artifact.StatusCompleted {
		status, errText = artifact.StatusIncomplete, artifact.Ptr(err.Error())
	}
	ended := time.Now()
	last := artifact.ClosingSession(sessionID, host, started, ended, status, sink.requests.Load(), errText)
	errs = append(errs, w.Write(last), w.Close())
	res.Outcome = status
	if runErr != nil && !stopped {
		res.Err = runErr
	} else if err := errors.Join(errs...); err != nil {
		res.Err = err
	}
	actx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, aerr := loadgen.AnalyzeArtifact(actx, path, analyze.Options{})
	if aerr != nil {
		d.log.Warn("the probe run's artifact could not be analysed", "probe", p.Name, "artifact", path, "err", aerr)
		rep = nil
	}
	res.Report = rep
	run.Finish(status, ended, rep)
	return res, sink.ok.Load()
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
