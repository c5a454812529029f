package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/loadgen"
	"github.com/inferprobe/inferprobe/loadgen/client"
	"github.com/inferprobe/inferprobe/scrape/collect"
)

// Pipeline is one run, prepared by New and carried out once by Execute.
type Pipeline struct {
	spec Spec

	mu      sync.Mutex
	runner  *loadgen.Runner
	stopped bool

	afterClose func(path string) // run.afterClose (tests)
}

// New prepares the run of spec; nothing is opened, bound or sent before Execute.
func New(spec Spec) *Pipeline {
	if spec.Warn == nil {
		spec.Warn = func(string) {}
	}
	return &Pipeline{spec: spec}
}

// Stop ends the run gracefully, from any goroutine, before or during Execute: no request is
// dispatched any more, the running phase drains within its drain deadline, the span drain
// still runs, and the artifact closes as interrupted (loadgen.Runner.Stop).
func (p *Pipeline) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	if p.runner != nil {
		p.runner.Stop()
	}
}

// run is the state of one Execute.
type run struct {
	spec      *Spec
	sessionID string
	host      artifact.Host
	started   time.Time
	header    artifact.ArtifactHeader
	w         *artifact.Writer
	fan       *artifact.Fanout
	requests  countingSink
	tele      *telemetry
	digest    string // the workload digest (the start gate's registration)
	// afterClose, when set (by tests), is called with the artifact's path between its close
	// and its read-back.
	afterClose func(path string)
}

// Execute carries out the run and returns what it produced. When ctx ends the run is
// interrupted: its requests are cancelled and recorded as such, the span drain is skipped,
// and the artifact is closed and analysed all the same.
func (p *Pipeline) Execute(ctx context.Context) *Result {
	spec := &p.spec
	cfg := spec.Workload
	res := &Result{RunID: cfg.RunID}
	for _, w := range Warnings(cfg) {
		spec.Warn(w)
	}
	fi, statErr := os.Stat(spec.Output)
	w, err := artifact.NewWriter(spec.Output) // refused, the file untouched, while another run writes it
	if err != nil {
		return failed(spec, res, &OpenError{Path: spec.Output, Err: err})
	}
	if statErr == nil && fi.Mode().IsRegular() && fi.Size() > 0 {
		spec.Warn(fmt.Sprintf("--output %s exists; it is replaced", spec.Output))
	}
	r := &run{spec: spec, sessionID: artifact.NewSessionID(), host: artifact.HostIdentity(), started: time.Now(), w: w, afterClose: p.afterClose}
	res.Path, res.SessionID = spec.Output, r.sessionID
	r.header = artifact.NewArtifactHeader(cfg.RunID, r.sessionID, spec.Version, r.started.UnixNano(), r.host, os.Getpid())
	tele, err := newTelemetry(spec, r.sessionID, r.host.ClockDomain())
	if err != nil {
		_ = w.Close()
		return failed(spec, res, err)
	}
	r.tele = tele
	// The one fan-out: the artifact first, then the span feed's sink (it learns the run's
	// trace ids), then the caller's sinks.
	r.fan = artifact.NewFanout(append([]artifact.Sink{w, tele.feedRecords}, spec.Sinks...)...)
	r.requests.fan = r.fan
	if err := r.writeHead(); err != nil {
		tele.abort()
		_ = w.Close()
		return failed(spec, res, err)
	}
	runErr := r.produce(ctx, p, res)
	return r.finish(ctx, res, runErr)
}

// failed is the Result of a run that could not start: the sinks get a failed judgement and
// are closed.
func failed(spec *Spec, res *Result, err error) *Result {
	res.Status, res.Err = artifact.RunFailed, err
	res.Judgement = &artifact.RunJudgement{Outcome: artifact.RunFailed, EndedAtNS: time.Now().UnixNano()}
	fan := artifact.NewFanout(spec.Sinks...)
	_ = fan.Write(res.Judgement)
	_ = fan.Close()
	return res
}

// writeHead writes infer.session (running), infer.artifact, infer.workload and infer.slo.
func (r *run) writeHead() error {
	spec, cfg := r.spec, r.spec.Workload
	sc := cfg.SessionConfig(spec.TokenizerName)
	r.tele.sessionConfig(sc)
	sc.SystemSampler = collect.SamplerNone
	if spec.SystemSampler != "" {
		sc.SystemSampler = spec.SystemSampler
	}
	workload, err := cfg.WorkloadRecord(r.sessionID, spec.Tokenizer)
	if err != nil {
		return err
	}
	r.digest = workload.WorkloadDigest
	head := []artifact.Record{
		&artifact.Session{SessionID: r.sessionID, TimestampNS: r.started.UnixNano(), Status: artifact.StatusRunning, Config: sc},
		&r.header, workload,
	}
	if slo := spec.SLO; slo != nil {
		doc, err := json.Marshal(slo.Policy.Document())
		if err != nil {
			return err
		}
		head = append(head, &artifact.SLORecord{SessionID: r.sessionID, Source: slo.Source, Digest: slo.Policy.Digest(), SLO: doc})
	}
	for _, rec := range head {
		if err := r.fan.Write(rec); err != nil {
			return err
		}
	}
	return nil
}

// produce runs the producers: the span intake, the client-local sampler and the load
// generator with the scraper on its phase hooks, under recording pacing (paceRecording). It returns the first error that makes the
// run incomplete (or ctx's error, or loadgen.ErrStopped).
func (r *run) produce(ctx context.Context, p *Pipeline, res *Result) error {
	defer paceRecording()()
	spec, cfg := r.spec, r.spec.Workload
	r.tele.startSpans(ctx, r.fan, r.sessionID, cfg.RunID)
	conns := 0
	for _, c := range cfg.Concurrency {
		conns = max(conns, c)
	}
	if cfg.OpenLoop() {
		conns = cfg.MaxInFlight
	}
	hc := client.New(client.Options{MaxConnsPerHost: conns, Timeout: cfg.Timeout})
	defer hc.CloseIdle()
	hooks := spec.Hooks
	if hooks.Warn == nil {
		hooks.Warn = spec.Warn
	}
	hooks.PhaseStart, hooks.PhaseEnd = nil, nil
	r.tele.hooks(&hooks)
	runner := loadgen.NewRunner(cfg, hc, spec.Tokenizer, &r.requests, r.sessionID, hooks)
	p.mu.Lock()
	if p.stopped {
		runner.Stop()
	}
	p.runner = runner
	p.mu.Unlock()

	var sampler *collect.ClientSampler
	if s := spec.SystemSampler; s != "" && s != collect.SamplerNone {
		var err error
		if sampler, err = collect.NewClientSampler(ctx, s, r.sessionID, spec.SampleEvery, r.fan); err != nil {
			spec.Warn(fmt.Sprintf("client-local sampling is off: %v", err))
			sampler = nil
		} else if sampler != nil {
			sampler.Start(ctx)
		}
	}
	var runErr error
	if gate := spec.StartGate; gate != nil {
		if err := gate(ctx, r.fan, r.header.Context, r.digest); err != nil {
			runErr = fmt.Errorf("sharded start: %w", err)
		}
	}
	if runErr == nil {
		runErr = runner.Run(ctx)
	}
	res.Stats = runner.Stats()
	p.mu.Lock()
	p.runner = nil
	p.mu.Unlock()
	if sampler != nil {
		if err := sampler.Stop(context.WithoutCancel(ctx)); err != nil && runErr == nil {
			runErr = err
		}
	}
	if err := r.tele.finish(ctx, r.fan, r.header.Context); err != nil && runErr == nil {
		runErr = err
	}
	return runErr
}

// finish writes the closing session, closes the artifact, analyses it, hands the sinks the
// judgement and closes them.
func (r *run) finish(ctx context.Context, res *Result, runErr error) *Result {
	status := artifact.StatusCompleted
	var errText *string
	switch {
	case runErr != nil && (ctx.Err() != nil || errors.Is(runErr, loadgen.ErrStopped)):
		status = artifact.StatusInterrupted
		res.Interrupted = true
		runErr = nil
	case runErr != nil:
		status = artifact.StatusIncomplete
		errText = artifact.Ptr(runErr.Error())
	}
	ended := time.Now()
	last := artifact.ClosingSession(r.sessionID, r.host, r.started, ended, status, r.requests.n(), errText)
	if err := r.fan.Write(last); err != nil && runErr == nil {
		runErr = err
	}
	closeErr := r.w.Close() // the writer's first failure, if any write failed
	if closeErr != nil && runErr == nil {
		runErr = closeErr
	}
	res.Status, res.Err = status, runErr
	// The report is computed from the artifact alone, as `inferprobe analyze` would — unless
	// the artifact could not be written (there is then nothing trustworthy to read back).
	if closeErr != nil {
		res.ReportErr = fmt.Errorf("the artifact could not be written: %w", closeErr)
	} else {
		actx := context.WithoutCancel(ctx)
		if d := r.spec.AnalysisTimeout; d > 0 {
			var cancel context.CancelFunc
			actx, cancel = context.WithTimeout(actx, d)
			defer cancel()
		}
		if r.afterClose != nil {
			r.afterClose(res.Path)
		}
		// The run's own analysis judges the policy the artifact records (infer.slo).
		res.Report, res.ReportErr = readBack(actx, res.Path, r.sessionID)
	}
	res.Judgement = Judge(status, ended, res.Report)
	_ = r.fan.Write(res.Judgement)
	if err := r.fan.Close(); err != nil && res.Err == nil {
		res.Err = err
	}
	return res
}

// countingSink counts the infer.request records the artifact accepted (the closing session's
// request count) and hands every record on to the fan-out.
type countingSink struct {
	fan   *artifact.Fanout
	mu    sync.Mutex
	count int64
}

func (s *countingSink) Write(rec artifact.Record) error {
	err := s.fan.Write(rec)
	if _, ok := rec.(*artifact.Request); ok && err == nil {
		s.mu.Lock()
		s.count++
		s.mu.Unlock()
	}
	return err
}

// Close does nothing: the pipeline closes the fan-out.
func (s *countingSink) Close() error { return nil }

func (s *countingSink) n() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count
}
