package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/exporter"
	"github.com/inferprobe/inferprobe/join"
	"github.com/inferprobe/inferprobe/receiver"
	"github.com/inferprobe/inferprobe/scrape/prom"
)

// Options configure a Daemon.
type Options struct {
	// Version is inferprobe's version (artifacts and inferprobe_build_info).
	Version string
	// Logger receives the daemon's log; default slog.Default().
	Logger *slog.Logger
	// OnRunEnd, when set, is called after each probe run has been closed, analysed and
	// published (tests, demo).
	OnRunEnd func(RunResult)
	// Clock times the probes' schedules (run starts, a continuous probe's backoff); default
	// the real clock. A test moves a fake one instead of sleeping.
	Clock clockwork.Clock
}

// RunResult is one finished probe run, or one finished search of a search probe (RunID
// its search id).
type RunResult struct {
	Probe   string
	RunID   string
	Path    string // the artifact; "" when it could not be opened
	Outcome string // exporter.Run* outcome; a search probe's: its status, or exporter.SearchInterrupted / SearchFailed
	Report  *analyze.Report
	// Search is a search probe's result (the infer.search record written to Path, which is
	// then the search directory's search.jsonl); nil for a run.
	Search *artifact.Search
	Err    error
}

// Daemon is a running `inferprobe serve`.
type Daemon struct {
	opts  Options
	log   *slog.Logger
	clock clockwork.Clock
	// exp is the one exporter, for the daemon's whole life: a reload changes it in place,
	// so that every run, whatever reloads happen around it, is published where /metrics
	// reads.
	exp *exporter.Exporter

	mu      sync.Mutex
	cfg     *Config
	loops   map[string]*probeLoop  // by probe name
	scrapes map[string]*scrapeLoop // by target name

	recv      *receiver.Receiver
	feed      *spanFeed // routes the receiver's spans to the runs
	metricsLn net.Listener
	metrics   *http.Server
	otlpLn    net.Listener
	otlp      *http.Server
	serveErr  chan error

	runCtx    context.Context // cancelled only on a hard stop
	runCancel context.CancelFunc
	wg        sync.WaitGroup
	stopping  atomic.Bool

	reloadOK   atomic.Bool
	lastReload atomic.Int64
}

// New prepares a daemon for cfg; Start binds and starts it.
func New(cfg *Config, opts Options) *Daemon {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Clock == nil {
		opts.Clock = clockwork.NewRealClock()
	}
	d := &Daemon{opts: opts, log: opts.Logger, clock: opts.Clock, cfg: cfg, loops: map[string]*probeLoop{}, scrapes: map[string]*scrapeLoop{},
		serveErr: make(chan error, 2)}
	d.feed = &spanFeed{d: d, runs: map[string]artifact.Sink{}}
	d.exp = d.newExporter(cfg)
	return d
}

// Exporter returns the daemon's exporter: one for its whole life (a reload changes its
// histograms' buckets in place).
func (d *Daemon) Exporter() *exporter.Exporter { return d.exp }

func (d *Daemon) newExporter(cfg *Config) *exporter.Exporter {
	e := exporter.New(exporter.Options{Thresholds: cfg.Thresholds(), Version: d.opts.Version})
	e.WatchReceiver(func() exporter.ReceiverCounts {
		if d.recv == nil {
			return exporter.ReceiverCounts{}
		}
		s := d.recv.Stats()
		return exporter.ReceiverCounts{HTTPProtobuf: s.SpansHTTPProtobuf, HTTPJSON: s.SpansHTTPJSON, GRPC: s.SpansGRPC,
			Rejected: s.SpansRejected, Dropped: s.SpansDropped}
	})
	e.WatchReload(d.reloadOK.Load, func() float64 { return float64(d.lastReload.Load()) / 1e9 })
	return e
}

// Start binds /metrics (a failure is returned: nothing runs) and the span receiver (a
// failure is logged and the daemon runs without that listener), then starts every probe and
// scrape loop. ctx bounds only the binding.
func (d *Daemon) Start(ctx context.Context) error {
	cfg := d.cfg
	d.runCtx, d.runCancel = context.WithCancel(context.Background())
	flags := &web.FlagConfig{WebConfigFile: &cfg.WebConfigFile, WebSystemdSocket: new(bool), WebListenAddresses: &[]string{cfg.Listen}}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.Listen, err)
	}
	d.metricsLn = ln
	mux := http.NewServeMux()
	mux.Handle("/metrics", d.exp.Handler())
	mux.HandleFunc("/-/healthy", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "Healthy") })
	mux.HandleFunc("/-/ready", func(w http.ResponseWriter, _ *http.Request) {
		if d.stopping.Load() {
			http.Error(w, "Stopping", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "Ready")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, "<html><head><title>inferprobe</title></head><body><h1>inferprobe serve</h1><p><a href=\"/metrics\">Metrics</a></p></body></html>\n")
	})
	d.metrics = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}

	if cfg.HTTPListen != "" || cfg.GRPCListen != "" {
		d.recv = receiver.New(receiver.Options{Sink: d.feed, Logger: d.log})
		// A configured listener that cannot bind stops the start, like /metrics: a daemon
		// that silently received no spans would leave the span-join alerts blind.
		if err := d.recv.Listen(ctx, "", cfg.GRPCListen); err != nil {
			_ = d.recv.Close()
			_ = ln.Close()
			return fmt.Errorf("OTLP/gRPC receiver: %w", err)
		}
		if cfg.HTTPListen != "" {
			if oln, err := lc.Listen(ctx, "tcp", cfg.HTTPListen); err != nil {
				_ = d.recv.Close()
				_ = ln.Close()
				return fmt.Errorf("OTLP/HTTP receiver: listen %s: %w", cfg.HTTPListen, err)
			} else {
				d.otlpLn = oln
				d.otlp = &http.Server{Handler: d.recv, ReadHeaderTimeout: receiver.DefaultReadTimeout, ReadTimeout: receiver.DefaultReadTimeout}
				oflags := &web.FlagConfig{WebConfigFile: &cfg.WebConfigFile, WebSystemdSocket: new(bool), WebListenAddresses: &[]string{cfg.HTTPListen}}
				go func() {
					if err := web.Serve(oln, d.otlp, oflags, d.log); err != nil && !errors.Is(err, http.ErrServerClosed) {
						d.log.Warn("OTLP/HTTP receiver stopped", "err", err)
					}
				}()
			}
		}
	}
	// /metrics is served only now: its receiver collector reads d.recv, set above.
	go func() {
		if err := web.Serve(ln, d.metrics, flags, d.log); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.serveErr <- fmt.Errorf("/metrics server: %w", err)
		}
	}()
	d.reloadOK.Store(true)
	d.lastReload.Store(time.Now().UnixNano())
	d.mu.Lock()
	d.apply(cfg, nil)
	d.mu.Unlock()
	d.log.Info("inferprobe serve started", "metrics", d.MetricsAddr(), "otlp_http", d.OTLPHTTPAddr(), "otlp_grpc", d.OTLPGRPCAddr(),
		"probes", len(cfg.Probes), "artifacts", cfg.ArtifactDir)
	return nil
}

// Errors delivers a fatal error of the /metrics server.
func (d *Daemon) Errors() <-chan error { return d.serveErr }

// MetricsAddr is the bound /metrics address.
func (d *Daemon) MetricsAddr() string {
	if d.metricsLn == nil {
		return ""
	}
	return d.metricsLn.Addr().String()
}

// OTLPHTTPAddr is the bound OTLP/HTTP address ("" when none).
func (d *Daemon) OTLPHTTPAddr() string {
	if d.otlpLn == nil {
		return ""
	}
	return d.otlpLn.Addr().String()
}

// OTLPGRPCAddr is the bound OTLP/gRPC address ("" when none).
func (d *Daemon) OTLPGRPCAddr() string {
	if d.recv == nil {
		return ""
	}
	return d.recv.GRPCAddr()
}

// Config returns the configuration in force.
func (d *Daemon) Config() *Config {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cfg
}

// Reload reads the configuration file again. A file that does not load keeps the running
// configuration (the error says why, and inferprobe_config_last_reload_successful becomes 0).
// Once Shutdown has begun, Reload changes nothing and returns an error.
// Otherwise probes whose workload or target changed, and probes that disappeared, stop
// gracefully (their running run drains and closes as interrupted, and is counted like any
// other); new and changed probes start; a probe whose schedule, span drain or SLO alone
// changed goes on running and takes them from its next run; the others go on untouched.
// Listener and web-config changes need a restart (logged). When the SLO thresholds change,
// the histograms whose buckets must hold them are rebuilt empty (rate() reads a reset);
// every counter and gauge goes on.
func (d *Daemon) Reload() error {
	d.mu.Lock()
	path := d.cfg.Path
	d.mu.Unlock()
	if path == "" {
		return errors.New("reload: the configuration was not read from a file")
	}
	if d.stopping.Load() {
		return errReloadStopping
	}
	cfg, err := Load(path)
	if err != nil {
		d.reloadOK.Store(false)
		d.log.Error("reload failed; keeping the running configuration", "err", err)
		return err
	}
	d.reloadOK.Store(true)
	d.lastReload.Store(time.Now().UnixNano())
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopping.Load() {
		// Shutdown has stopped the loops (under d.mu): none may start again.
		return errReloadStopping
	}
	old := d.cfg
	if cfg.Listen != old.Listen || cfg.HTTPListen != old.HTTPListen || cfg.GRPCListen != old.GRPCListen || cfg.WebConfigFile != old.WebConfigFile {
		d.log.Warn("listen addresses and web_config_file take effect after a restart")
		cfg.Listen, cfg.HTTPListen, cfg.GRPCListen, cfg.WebConfigFile = old.Listen, old.HTTPListen, old.GRPCListen, old.WebConfigFile
	}
	d.cfg = cfg
	d.apply(cfg, old)
	d.log.Info("configuration reloaded", "probes", len(cfg.Probes), "targets", len(cfg.Targets))
	return nil
}

var errReloadStopping = errors.New("reload: the daemon is stopping")

// apply starts, updates and stops loops so that cfg runs (old: the previous config, nil at
// start). d.mu is held.
func (d *Daemon) apply(cfg, old *Config) {
	if old != nil && !reflect.DeepEqual(cfg.Thresholds(), old.Thresholds()) {
		if err := d.exp.SetThresholds(cfg.Thresholds()); err != nil {
			d.log.Error("histograms could not take the new SLO thresholds; they keep their buckets", "err", err)
		}
	}
	d.applyProbes(cfg)
	d.applyScrapes(cfg)
}

// applyProbes stops the loops of probes whose workload or target changed and of those that
// went (forgetting the gauges of labels no probe has any more), hands the loops of probes
// whose other settings changed their new definition, moves the rest to cfg and starts the
// new and changed probes. d.mu is held.
func (d *Daemon) applyProbes(cfg *Config) {
	want := map[string]*Probe{}
	labels := map[exporter.Labels]bool{}
	for _, p := range cfg.Probes {
		want[p.Name] = p
		labels[p.labels()] = true
	}
	for name, l := range d.loops {
		p, cur := want[name], l.probe()
		switch {
		case p == nil || p.key != cur.key:
			l.stop()
			delete(d.loops, name)
			if !labels[cur.labels()] {
				// Its gauges go once its running run, if any, has been published.
				d.exp.ForgetProbe(cur.labels())
			}
		case p.settings != cur.settings:
			l.update(p, cfg)
			d.publishProbe(p)
		default:
			l.cfg.Store(cfg)
		}
	}
	for _, p := range cfg.Probes {
		if d.loops[p.Name] == nil {
			d.publishProbe(p)
			l := newProbeLoop(d, p, cfg)
			d.loops[p.Name] = l
			d.wg.Add(1)
			go l.run()
		}
	}
}

// publishProbe publishes a probe's interval, SLO objective and per-case series.
func (d *Daemon) publishProbe(p *Probe) {
	interval := p.Every
	if p.Continuous {
		interval = p.runLength()
	}
	var objective *float64
	slo := ""
	if p.SLO != nil {
		slo, objective = p.SLO.Policy.Name, &p.SLO.Objective
	}
	if p.Search != nil {
		// A search probe's runs are the search's probes: they publish only its capacity series.
		d.exp.SetProbeConfig(p.labels(), interval.Seconds(), "", nil)
		d.exp.InitSearches(p.labels())
		return
	}
	d.exp.SetProbeConfig(p.labels(), interval.Seconds(), slo, objective)
	var ids []string
	if cases, err := p.Workload.Cases(); err == nil {
		for _, c := range cases {
			ids = append(ids, c.ID)
		}
	}
	d.exp.InitCases(p.labels(), slo, ids)
}

// applyScrapes stops the scrapes of targets that changed or went and starts the new and
// changed ones. d.mu is held.
func (d *Daemon) applyScrapes(cfg *Config) {
	exp := d.exp
	wantT := map[string]*Target{}
	for _, t := range cfg.Targets {
		if t.MetricsURL != "" {
			wantT[t.Name] = t
		}
	}
	for name, s := range d.scrapes {
		if t := wantT[name]; t == nil || t.MetricsURL != s.t.MetricsURL || t.ScrapeInterval != s.t.ScrapeInterval || t.apiKey != s.t.apiKey {
			s.stop()
			delete(d.scrapes, name)
			exp.ForgetTarget(name)
		}
	}
	for name, t := range wantT {
		if d.scrapes[name] != nil {
			continue
		}
		sc, err := t.scraper()
		if err != nil {
			d.log.Error("target metrics cannot be scraped", "target", name, "err", err)
			continue
		}
		s := &scrapeLoop{t: t, s: sc, exp: exp, quit: make(chan struct{}), done: make(chan struct{})}
		d.scrapes[name] = s
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			s.run()
		}()
	}
}

// Shutdown stops gracefully: no probe run starts any more, each running run stops
// dispatching and drains within its drain deadline, its artifact is closed (completed or
// interrupted), the receiver delivers what it has queued, and the servers close. When ctx
// ends first, running requests are cancelled (recorded as such) and ctx's error is returned
// once everything has closed.
func (d *Daemon) Shutdown(ctx context.Context) error {
	d.stopping.Store(true)
	if d.runCancel == nil {
		return nil // never started
	}
	d.mu.Lock()
	for _, l := range d.loops {
		l.stop()
	}
	for _, s := range d.scrapes {
		s.stop()
	}
	d.mu.Unlock()
	done := make(chan struct{})
	go func() { d.wg.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
		d.runCancel()
		<-done
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if d.recv != nil {
		if d.otlp != nil {
			_ = d.otlp.Shutdown(sctx)
		}
		if rerr := d.recv.Shutdown(sctx); rerr != nil && err == nil {
			err = fmt.Errorf("span receiver: %w", rerr)
		}
	}
	if d.metrics != nil {
		_ = d.metrics.Shutdown(sctx)
	}
	d.runCancel()
	return err
}

// spanFeed is the daemon's run.SpanFeed and the sink of its one receiver: each delivered span
// goes to the run the join's Router says it belongs to; the rest count as unrouted.
type spanFeed struct {
	d      *Daemon
	router join.Router

	mu   sync.RWMutex // held (read) while a span is delivered, so detach waits for it
	runs map[string]artifact.Sink
}

// Addrs are the bound receiver addresses.
func (f *spanFeed) Addrs() (string, string) { return f.d.OTLPHTTPAddr(), f.d.OTLPGRPCAddr() }

// Attach routes run runID's spans into spans until detach.
func (f *spanFeed) Attach(runID string, spans artifact.Sink) (artifact.Sink, func()) {
	rt := f.router.Add(runID)
	f.mu.Lock()
	f.runs[runID] = spans
	f.mu.Unlock()
	return rt, func() {
		rt.Remove()
		f.mu.Lock()
		delete(f.runs, runID)
		f.mu.Unlock()
	}
}

// Capabilities is the receiver's capability record for a run's artifact.
func (f *spanFeed) Capabilities(ctx artifact.Context) artifact.Capabilities {
	return f.d.recv.Capabilities(ctx)
}

// Write routes one delivered span (the receiver's sink).
func (f *spanFeed) Write(rec artifact.Record) error {
	span, ok := rec.(*artifact.Span)
	if !ok {
		return nil
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	var sink artifact.Sink
	if runID, ok := f.router.Route(span); ok {
		sink = f.runs[runID]
	}
	if sink == nil {
		f.d.exp.SpanUnrouted()
		return nil
	}
	if err := sink.Write(span); err != nil {
		f.d.log.Warn("a span could not be written to its run's artifact", "run_id", span.RunID, "err", err)
	}
	return nil
}

// WantsSpans reports whether a run is attached (receiver.SpanFilter): with none, no span can
// route anywhere, and the receiver accepts valid exports without decoding them.
func (f *spanFeed) WantsSpans() bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return len(f.runs) > 0
}

// SkipSpans counts n spans the receiver accepted while no run was attached as unrouted, as
// Write counts each span no run takes.
func (f *spanFeed) SkipSpans(n int) { f.d.exp.SpansUnrouted(n) }

// Close does nothing: the receiver never closes its sink.
func (f *spanFeed) Close() error { return nil }

// scrapeLoop scrapes one target's vLLM /metrics for inferprobe_scrape_up / _duration_seconds.
type scrapeLoop struct {
	t    *Target
	s    *prom.Scraper
	exp  *exporter.Exporter
	once sync.Once
	quit chan struct{}
	done chan struct{}
}

func (s *scrapeLoop) stop() { s.once.Do(func() { close(s.quit) }) }

func (s *scrapeLoop) run() {
	defer close(s.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-s.quit
		cancel()
	}()
	t := time.NewTicker(s.t.ScrapeInterval)
	defer t.Stop()
	for {
		rec := s.s.Scrape(ctx, artifact.ScrapeMarkerManual, "", "")
		if ctx.Err() != nil {
			return
		}
		var d time.Duration
		if rec.DurationMS != nil {
			d = time.Duration(*rec.DurationMS * float64(time.Millisecond))
		}
		s.exp.ScrapeResult(s.t.Name, rec.Status == "ok", d)
		select {
		case <-t.C:
		case <-s.quit:
			return
		}
	}
}
