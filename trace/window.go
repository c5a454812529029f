package trace

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/jonboulle/clockwork"
)

// ProfilerVLLMTorch is the one profiler kind: vLLM's torch profiler behind /start_profile
// and /stop_profile.
const ProfilerVLLMTorch = "vllm-torch"

// Defaults of Options.
const (
	DefaultTimeout = 120 * time.Second      // a control call (vLLM's stop blocks while it writes the trace)
	DefaultSettle  = 5 * time.Second        // no new file this long after the stop: stop waiting
	DefaultPoll    = 200 * time.Millisecond // how often the trace directory is read while waiting
)

// Options configure a Controller. ControlBase, Phase and Sink are required.
type Options struct {
	// ControlBase is the URL /start_profile and /stop_profile are appended to
	// ("http://host:8000"); ControlBase(endpoint) derives it from the endpoint.
	ControlBase string
	// Phase is the phase profiled in every case: "measured" or "warmup".
	Phase string
	// MaxDuration ends a window this long after its start was acknowledged; 0: no limit.
	MaxDuration time.Duration
	// Dir is the server's trace directory as the client sees it; "": no files are looked for.
	Dir string
	// Timeout bounds each control call (0: DefaultTimeout); Settle is how long after the stop
	// (and after the last new file) to wait for trace files (0: DefaultSettle); Poll is how
	// often the directory is read meanwhile (0: DefaultPoll). A pending ".tmp" worker trace
	// is waited for until renamed, for at most 10 Settles after the stop.
	Timeout, Settle, Poll time.Duration
	// SessionID and RunID are stamped on each record.
	SessionID, RunID string
	// Sink receives each window's infer.trace_window record.
	Sink artifact.Sink
	// Warn receives a failed stop ("the profiler may still be running"); nil discards it.
	Warn func(string)
	// Clock times windows and waits; nil: the real clock. HTTP is the client for the control
	// calls; nil: one that never follows redirects (a given one should not follow them either).
	Clock clockwork.Clock
	HTTP  *http.Client
	// AfterRunning, when above 0, delays each window until the server runs that many
	// requests: Running (the server's vllm:num_requests_running, summed over engines) is
	// read every TriggerPoll (0: DefaultTriggerPoll) from the phase start, and the window
	// opens at the first reading ≥ AfterRunning. A phase that ends first records
	// start_outcome not_triggered (nothing sent); a failed reading is retried.
	AfterRunning float64
	Running      func(ctx context.Context) (float64, error)
	TriggerPoll  time.Duration
}

// DefaultTriggerPoll is how often a delayed window reads num_requests_running.
const DefaultTriggerPoll = 100 * time.Millisecond

// Controller opens and closes the trace windows of one run. Its PhaseStart and PhaseEnd are
// the load generator's phase hooks; Close ends a window still open (a cancelled run). All
// methods are safe for concurrent use.
type Controller struct {
	o           Options
	start, stop string

	mu      sync.Mutex
	cur     *window
	wg      sync.WaitGroup // the MaxDuration watchers
	writeMu sync.Mutex
	werr    error
}

// New checks o and returns its Controller. It returns an error for a bad ControlBase, a
// phase other than measured or warmup, a negative duration or a nil Sink.
func New(o Options) (*Controller, error) {
	if o.Phase != "measured" && o.Phase != "warmup" {
		return nil, fmt.Errorf("trace phase %q: want measured or warmup", o.Phase)
	}
	if o.MaxDuration < 0 || o.Timeout < 0 || o.Settle < 0 || o.Poll < 0 {
		return nil, errors.New("trace: durations must not be negative")
	}
	if o.Sink == nil {
		return nil, errors.New("trace: no sink")
	}
	if o.AfterRunning < 0 || (o.AfterRunning > 0 && o.Running == nil) || o.TriggerPoll < 0 {
		return nil, errors.New("trace: a window delayed until num_requests_running needs a positive threshold and a reading of it")
	}
	if o.TriggerPoll == 0 {
		o.TriggerPoll = DefaultTriggerPoll
	}
	start, stop, err := endpoints(o.ControlBase)
	if err != nil {
		return nil, err
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Settle == 0 {
		o.Settle = DefaultSettle
	}
	if o.Poll == 0 {
		o.Poll = DefaultPoll
	}
	if o.Clock == nil {
		o.Clock = clockwork.NewRealClock()
	}
	if o.HTTP == nil {
		o.HTTP = newHTTPClient()
	}
	if o.Warn == nil {
		o.Warn = func(string) {}
	}
	return &Controller{o: o, start: start, stop: stop}, nil
}

// StartURL is the /start_profile URL without credentials or query (the records' control_url).
func (c *Controller) StartURL() string { return redact(c.start) }

// WriteErr is the first error the sink returned for a record, or nil.
func (c *Controller) WriteErr() error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	return c.werr
}

// PhaseStart opens a window when phase is the profiled one: it reads the trace directory,
// sends /start_profile and classifies the reply. A rejected start ends the window at once
// (no stop); an unknown one is stopped at once and waited for. A window still open from
// another phase is first ended as cancelled.
func (c *Controller) PhaseStart(ctx context.Context, caseID, phase string) {
	if phase != c.o.Phase {
		return
	}
	c.Close(ctx)
	w := &window{c: c, rec: artifact.TraceWindow{
		SessionID: c.o.SessionID, RunID: c.o.RunID, CaseID: caseID, Phase: phase,
		Profiler: ProfilerVLLMTorch, ControlURL: c.StartURL(), Trigger: artifact.TriggerPhaseStart,
	}}
	if c.o.AfterRunning > 0 {
		c.delay(ctx, w)
		return
	}
	c.begin(ctx, w)
}

// begin opens w now and, once acknowledged, makes it the open window with its MaxDuration
// watcher.
func (c *Controller) begin(ctx context.Context, w *window) {
	w.open(ctx)
	if w.rec.StartOutcome == artifact.StartUnknown {
		w.end(ctx, artifact.StopStartUnknown)
	}
	if w.rec.StartOutcome != artifact.StartAcknowledged {
		return
	}
	c.mu.Lock()
	c.cur = w
	c.mu.Unlock()
	if c.o.MaxDuration > 0 {
		w.timer = c.o.Clock.NewTimer(c.o.MaxDuration)
		w.quit = make(chan struct{})
		c.wg.Add(1)
		go w.watch(ctx)
	}
}

// PhaseEnd ends the open window of caseID's profiled phase (stop_reason phase_end, or the
// reason it already ended with) and returns once its record is written.
func (c *Controller) PhaseEnd(ctx context.Context, caseID, phase string) {
	if phase != c.o.Phase {
		return
	}
	if w := c.take(caseID); w != nil {
		w.end(ctx, artifact.StopPhaseEnd)
	}
}

// Close ends a window still open as cancelled and returns once every record is written. A
// run calls it after its last phase, whatever happened.
func (c *Controller) Close(ctx context.Context) {
	if w := c.take(""); w != nil {
		w.end(ctx, artifact.StopCancelled)
	}
	c.wg.Wait()
}

// take removes and returns the open window (of caseID when caseID is not "").
func (c *Controller) take(caseID string) *window {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.cur
	if w == nil || (caseID != "" && w.rec.CaseID != caseID) {
		return nil
	}
	c.cur = nil
	return w
}

func (c *Controller) write(rec *artifact.TraceWindow) {
	err := c.o.Sink.Write(rec)
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if err != nil && c.werr == nil {
		c.werr = err
	}
}
